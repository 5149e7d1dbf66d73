#include "tests/fake_gpu_run.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "evaluator/recording.h"

namespace evo::test {

std::string FakeWorker() {
  return (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "evo_fake_worker")
      .string();
}

InstantCompiler::InstantCompiler(const Manifest& manifest) {
  for (const KernelSpec& kernel : manifest.kernels) entries_.push_back(kernel.entry);
}

CompileResult InstantCompiler::Compile(const CompileRequest& request) {
  ++compiles_;
  CompileResult result;
  result.ok = true;
  result.cubin = "cubin of " + std::to_string(std::hash<std::string>{}(request.source));
  for (const std::string& entry : entries_) {
    KernelResources kernel;
    kernel.function = entry;
    kernel.arch = request.arch;
    kernel.registers = 64;
    result.kernels.push_back(kernel);
  }
  return result;
}

DeviceInfo FakeDevice(int ordinal, std::string name) {
  DeviceInfo device;
  device.ordinal = ordinal;
  device.name = std::move(name);
  device.uuid = "GPU-fake-" + std::to_string(ordinal);
  device.cc_major = 9;
  device.cc_minor = 0;
  device.sm_count = 132;
  device.max_smem_per_block_optin = 232448;
  device.max_smem_per_sm = 233472;
  device.regs_per_block = 65536;
  device.max_threads_per_block = 1024;
  return device;
}

FakeGpuRun::FakeGpuRun(std::vector<std::vector<std::string>> worker_flags, uint64_t seed,
                       int64_t budget, int elite_size)
    : library_(TemplateLibrary::Load({})),
      kernel_template_(library_.Find("sdpa_fp16")),
      problem_(DefaultProblem(kernel_template_.manifest)),
      searched_(ReplayEvaluator(H100Recording(), kernel_template_.manifest, problem_)
                    .RecordedSpace(kernel_template_.manifest)),
      space_(searched_, problem_, ArchByName("sm_90")),
      compiler_(kernel_template_.manifest),
      log_(dir_.path() / "requests.log"),
      store_(dir_.path() / "evo.db", PopulationStore::Access::kReadWrite) {
  Restart(std::move(worker_flags));
  RunSpec spec;
  spec.template_name = "sdpa_fp16";
  spec.template_hash = kernel_template_.source_hash;
  spec.problem = problem_;
  spec.arch = "sm_90";
  spec.device = pipeline_->identity().device;
  spec.evaluator = "gpu";
  spec.seed = seed;
  spec.budget = budget;
  spec.elite_size = elite_size;
  spec.generation_size = 8;
  run_id_ = store_.CreateRun(spec);
}

void FakeGpuRun::Restart(std::vector<std::vector<std::string>> worker_flags) {
  pipeline_.reset();
  std::vector<DeviceInfo> devices;
  for (size_t i = 0; i < worker_flags.size(); ++i) {
    devices.push_back(FakeDevice(static_cast<int>(i)));
  }
  GpuPipelineOptions options;
  options.compile_jobs = 2;
  options.deadline = std::chrono::milliseconds(400);
  options.driver_version = "fake";
  options.supervisor.restart_delay = std::chrono::milliseconds(10);
  options.supervisor.stderr_path = dir_.path() / "workers.err";
  options.worker_command = [this, worker_flags](int device) {
    std::vector<std::string> argv = {FakeWorker(), "--gates", "--device", std::to_string(device),
                                     "--sleep-ms", "3",       "--log",    log_.string()};
    const auto& own = worker_flags.at(static_cast<size_t>(device));
    argv.insert(argv.end(), own.begin(), own.end());
    return argv;
  };
  pipeline_ =
      std::make_unique<GpuPipeline>(kernel_template_, problem_, devices, compiler_, options);
}

SearchSummary FakeGpuRun::Run(SearchOptions options) {
  std::atomic<bool> stop{false};
  return Run(std::move(options), stop);
}

SearchSummary FakeGpuRun::Run(SearchOptions options, const std::atomic<bool>& stop) {
  Search search(store_, run_id_, space_, *pipeline_, std::move(options));
  return search.Run(nullptr, stop);
}

std::vector<std::pair<int, Genome>> FakeGpuRun::RequestLog() const {
  std::vector<std::pair<int, Genome>> requests;
  std::ifstream in(log_);
  std::string line;
  while (std::getline(in, line)) {
    const size_t space = line.find(' ');
    requests.emplace_back(std::stoi(line.substr(0, space)),
                          nlohmann::json::parse(line.substr(space + 1)).get<Genome>());
  }
  return requests;
}

std::map<Genome, std::vector<int>> FakeGpuRun::Requests() const {
  std::map<Genome, std::vector<int>> requests;
  for (const auto& [device, genome] : RequestLog()) requests[genome].push_back(device);
  return requests;
}

}  // namespace evo::test
