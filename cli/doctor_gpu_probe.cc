#include "cli/doctor_gpu_probe.h"

#include <cstdint>
#include <vector>

#include "common/error.h"
#include "evaluator/cuda_objects.h"

namespace evo::cli {
namespace {

constexpr unsigned kThreads = 128;  // one warpgroup, which a wgmma fence needs

constexpr const char* kProbeSource = R"cuda(
extern "C" __global__ void evo_doctor_probe(unsigned int* out) {
#ifdef EVO_PROBE_ARCH_SPECIFIC
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
  out[threadIdx.x] = threadIdx.x * 3u + 1u;
}
)cuda";

std::string FirstErrorLine(const std::string& log) {
  const size_t error = log.find("error");
  const size_t start = error == std::string::npos ? 0 : log.rfind('\n', error);
  const size_t from = start == std::string::npos ? 0 : start + 1;
  return log.substr(from, log.find('\n', from) - from);
}

}  // namespace

std::string CompileProbe(Compiler& compiler, const std::string& target) {
  CompileRequest request{kProbeSource, "evo_doctor_probe.cu", target, {}, {}};
  if (target.ends_with("a")) request.extra_options.push_back("-DEVO_PROBE_ARCH_SPECIFIC");
  const CompileResult result = compiler.Compile(request);
  if (!result.ok) {
    throw Error("NVRTC did not compile a probe kernel for " + target + ": " +
                FirstErrorLine(result.log));
  }
  return result.cubin;
}

void RunProbe(int ordinal, const std::string& cubin) {
  const Context context(ordinal);
  const Module module(cubin);
  const CUfunction function = module.Function("evo_doctor_probe");
  DeviceBuffer out(kThreads * sizeof(uint32_t));
  const std::vector<uint32_t> poison(kThreads, 0xffffffffu);
  out.Upload(poison.data(), poison.size() * sizeof(uint32_t));
  const Stream stream;
  CUdeviceptr pointer = out.get();
  std::vector<void*> arguments = {&pointer};
  LaunchShape shape;
  shape.block[0] = kThreads;
  Launch(function, shape, stream, arguments);
  stream.Synchronize();
  std::vector<uint32_t> written(kThreads);
  out.Download(written.data(), written.size() * sizeof(uint32_t));
  for (unsigned i = 0; i < kThreads; ++i) {
    if (written[i] != i * 3u + 1u) {
      throw Error("the probe kernel ran but thread " + std::to_string(i) + " wrote " +
                  std::to_string(written[i]) + ", not " + std::to_string(i * 3u + 1u));
    }
  }
}

}  // namespace evo::cli
