#include "evaluator/nvrtc_compiler.h"

#include <nvrtc.h>

#include <chrono>
#include <utility>
#include <vector>

#include "common/error.h"
#include "evaluator/cuda_driver.h"

namespace evo {
namespace {

void Check(nvrtcResult result, const char* what) {
  if (result != NVRTC_SUCCESS) {
    throw Error(std::string("NVRTC ") + what + " failed: " + nvrtcGetErrorString(result));
  }
}

// Owns one nvrtcProgram.
class NvrtcProgram {
 public:
  NvrtcProgram(const std::string& source, const std::string& name,
               const std::vector<std::pair<std::string, std::string>>& headers) {
    std::vector<const char*> contents;
    std::vector<const char*> include_names;
    for (const auto& [include_name, content] : headers) {
      include_names.push_back(include_name.c_str());
      contents.push_back(content.c_str());
    }
    Check(
        nvrtcCreateProgram(&program_, source.c_str(), name.c_str(),
                           static_cast<int>(headers.size()), contents.data(), include_names.data()),
        "nvrtcCreateProgram");
  }
  NvrtcProgram(const NvrtcProgram&) = delete;
  NvrtcProgram& operator=(const NvrtcProgram&) = delete;
  ~NvrtcProgram() { nvrtcDestroyProgram(&program_); }

  nvrtcProgram get() const { return program_; }

  std::string Log() const {
    size_t size = 0;
    Check(nvrtcGetProgramLogSize(program_, &size), "nvrtcGetProgramLogSize");
    std::string log(size, '\0');
    Check(nvrtcGetProgramLog(program_, log.data()), "nvrtcGetProgramLog");
    while (!log.empty() && log.back() == '\0') log.pop_back();
    return log;
  }

  std::string Cubin() const {
    size_t size = 0;
    Check(nvrtcGetCUBINSize(program_, &size), "nvrtcGetCUBINSize");
    std::string cubin(size, '\0');
    Check(nvrtcGetCUBIN(program_, cubin.data()), "nvrtcGetCUBIN");
    return cubin;
  }

 private:
  nvrtcProgram program_ = nullptr;
};

}  // namespace

NvrtcCompiler::NvrtcCompiler() { DisableCudaComputeCache(); }

std::vector<std::string> NvrtcCompiler::Options(const CompileRequest& request) const {
  std::vector<std::string> options = {"--gpu-architecture=" + request.arch, "--std=c++17",
                                      "--ptxas-options=-v", "--generate-line-info"};
  options.insert(options.end(), request.extra_options.begin(), request.extra_options.end());
  return options;
}

CompileResult NvrtcCompiler::Compile(const CompileRequest& request) {
  const auto start = std::chrono::steady_clock::now();
  NvrtcProgram program(request.source, request.program_name, request.headers);
  const std::vector<std::string> options = Options(request);
  std::vector<const char*> option_pointers;
  for (const std::string& option : options) option_pointers.push_back(option.c_str());
  const nvrtcResult result = nvrtcCompileProgram(
      program.get(), static_cast<int>(option_pointers.size()), option_pointers.data());
  if (result != NVRTC_SUCCESS && result != NVRTC_ERROR_COMPILATION) {
    throw Error(std::string("NVRTC could not compile ") + request.program_name + " for " +
                request.arch + ": " + nvrtcGetErrorString(result) + "\n" + program.Log());
  }
  CompileResult compiled;
  compiled.ok = result == NVRTC_SUCCESS;
  compiled.log = program.Log();
  compiled.kernels = ParsePtxasReport(compiled.log);
  if (compiled.ok) {
    compiled.cubin = program.Cubin();
    if (compiled.kernels.empty() && compiled.log.find("ptxas") == std::string::npos) {
      throw Error("NVRTC compiled " + request.program_name +
                  " but printed no ptxas report, so its resources are unknown");
    }
  }
  compiled.compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  compiled.elapsed_ms = compiled.compile_ms;
  return compiled;
}

std::string NvrtcCompiler::Version() const {
  int major = 0;
  int minor = 0;
  Check(nvrtcVersion(&major, &minor), "nvrtcVersion");
  return "nvrtc " + std::to_string(major) + "." + std::to_string(minor);
}

std::vector<std::string> NvrtcCompiler::SupportedArchs() {
  int count = 0;
  Check(nvrtcGetNumSupportedArchs(&count), "nvrtcGetNumSupportedArchs");
  std::vector<int> archs(static_cast<size_t>(count));
  Check(nvrtcGetSupportedArchs(archs.data()), "nvrtcGetSupportedArchs");
  std::vector<std::string> names;
  for (int arch : archs) names.push_back("sm_" + std::to_string(arch));
  return names;
}

}  // namespace evo
