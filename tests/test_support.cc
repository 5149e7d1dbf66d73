#include "tests/test_support.h"

#include <dlfcn.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>

#include "common/files.h"
#include "kernel_templates/template_library.h"
#include "population/store.h"

namespace evo::test {
namespace {

std::string ShellQuote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

}  // namespace

Genome GenomeFromSettings(const Manifest& manifest, const std::string& settings) {
  Genome genome = DefaultGenome(manifest);
  for (size_t start = 0; start < settings.size();) {
    const size_t space = std::min(settings.find(' ', start), settings.size());
    ApplyKnobSetting(manifest, settings.substr(start, space - start), genome);
    start = space + 1;
  }
  return genome;
}

Problem AttentionProblem(const Manifest& manifest, int64_t b, int64_t h, int64_t s_q, int64_t s_kv,
                         int64_t d, int64_t causal) {
  // The rest at their defaults, those that follow H (H_kv) following it.
  const Problem problem = CompleteProblem(
      manifest, {{"B", b}, {"H", h}, {"S_q", s_q}, {"S_kv", s_kv}, {"D", d}, {"CAUSAL", causal}});
  CheckProblem(manifest, problem);
  return problem;
}

std::filesystem::path EvoBinary() {
  return std::filesystem::read_symlink("/proc/self/exe").parent_path() / "evo";
}

std::filesystem::path SourceDir() {
  const std::filesystem::path compiled_in = EVO_SOURCE_DIR;
  if (std::filesystem::exists(compiled_in / "kernel_templates")) return compiled_in;
  return std::filesystem::read_symlink("/proc/self/exe").parent_path().parent_path();
}

int64_t StoreOneCandidate(const std::filesystem::path& db, const KernelTemplate& kernel_template,
                          const Problem& problem, const std::string& settings,
                          std::optional<Status> status) {
  PopulationStore store(db, PopulationStore::Access::kReadWrite);
  RunSpec spec;
  spec.template_name = kernel_template.manifest.name;
  spec.template_hash = kernel_template.source_hash;
  spec.problem = problem;
  spec.arch = "sm_90";
  spec.device = "NVIDIA H100 80GB HBM3";
  spec.evaluator = "gpu";
  spec.budget = 1;
  const int64_t run = store.CreateRun(spec);
  Proposal proposal;
  proposal.genome = GenomeFromSettings(kernel_template.manifest, settings);
  proposal.operator_name = "default";
  const int64_t id = store.AddPending(run, 0, {{"config", proposal}}).at(0);
  if (status) {
    CandidateOutcome outcome;
    outcome.status = *status;
    if (*status != Status::kMeasured) outcome.reason = "stored so by the test";
    store.Finish(id, outcome, std::nullopt);
  }
  return id;
}

TempDir::TempDir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "evo-test-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::permissions(path_, std::filesystem::perms::owner_all,
                               std::filesystem::perm_options::add, ignored);
  std::filesystem::remove_all(path_, ignored);
}

void WriteFile(const std::filesystem::path& path, const std::string& content) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  out << content;
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

CommandResult RunEvo(const std::vector<std::string>& args,
                     const std::filesystem::path& working_dir) {
  return RunProgram(EvoBinary(), args, working_dir);
}

CommandResult RunProgram(const std::filesystem::path& program, const std::vector<std::string>& args,
                         const std::filesystem::path& working_dir) {
  TempDir capture;
  std::string command =
      "cd " + ShellQuote(working_dir.string()) + " && " + ShellQuote(program.string());
  for (const std::string& arg : args) command += " " + ShellQuote(arg);
  command += " >" + ShellQuote((capture.path() / "out").string()) + " 2>" +
             ShellQuote((capture.path() / "err").string()) + " </dev/null";
  const int status = std::system(command.c_str());
  CommandResult result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.out = TryReadFile(capture.path() / "out").value_or("");
  result.err = TryReadFile(capture.path() / "err").value_or("");
  return result;
}

bool HaveProgram(const std::string& name) {
  return RunProgram("/bin/sh", {"-c", "command -v " + ShellQuote(name)}, "/").exit_code == 0;
}

bool HaveGpuDriver() {
  void* library = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) return false;
  ::dlclose(library);
  return true;
}

void WriteTinyTemplate(const std::filesystem::path& folder, const std::string& name,
                       const std::string& source) {
  WriteFile(folder / "manifest.json", R"json({
  "name": ")json" + name + R"json(",
  "version": 1,
  "description": "a tiny template for tests",
  "min_sm": 80,
  "knobs": [{"name": "TILE", "values": [1, 2, 4], "default": 1}],
  "problem": [{"name": "N", "min": 1, "default": 256}],
  "constraints": [{"name": "tile_below_four", "expr": "TILE < 4", "doc": "4 is in the domain to test this"}],
  "kernel": {"source": "tiny.cu", "entry": "tiny", "grid": ["ceil_div(N, 128 * TILE)", "1", "1"],
             "block": ["128", "1", "1"], "dynamic_smem": "0",
             "args": [{"name": "x", "kind": "output", "dtype": "f32", "shape": ["N"]},
                      {"name": "n", "kind": "scalar", "dtype": "i32", "value": "N"}]},
  "reference": {"source": "tiny.cu", "entry": "tiny_reference", "grid": ["ceil_div(N, 128)", "1", "1"],
             "block": ["128", "1", "1"], "dynamic_smem": "0",
             "args": [{"name": "x", "kind": "output", "dtype": "f32", "shape": ["N"]},
                      {"name": "n", "kind": "scalar", "dtype": "i32", "value": "N"}]},
  "correctness": {"seeds": 1, "atol": 1e-6, "rtol": 0, "problems": [{"N": "N + 1"}]}
})json");
  WriteFile(folder / "tiny.cu", source);
}

std::filesystem::path H100Recording() {
  return SourceDir() / "tests" / "data" / "sdpa_fp16_h100_2x8x512x64.jsonl";
}

std::filesystem::path H100RecordingAs(const std::filesystem::path& dir, int64_t s, int64_t causal) {
  const std::string text = ReadFile(H100Recording());
  const size_t end_of_header = text.find('\n');
  nlohmann::json header = nlohmann::json::parse(text.substr(0, end_of_header));
  header["problem"]["S_q"] = s;
  header["problem"]["S_kv"] = s;
  header["problem"]["CAUSAL"] = causal;
  header["template_hash"] = TemplateLibrary::Load({}).Find("sdpa_fp16").source_hash;
  const std::filesystem::path path =
      dir / ("sdpa_fp16_" + std::to_string(s) + (causal != 0 ? "_causal" : "") + ".jsonl");
  WriteFile(path, header.dump() + text.substr(end_of_header));
  return path;
}

}  // namespace evo::test
