#include "cli/task_setup.h"

#include "common/error.h"
#include "evaluator/cuda_driver.h"

namespace evo::cli {

void AddEvaluatorOptions(CLI::App& app, EvaluatorOptions& options, bool with_replay) {
  app.add_option("--gpu", options.gpu, "the GPU to measure on")->capture_default_str();
  app.add_option("--cache-dir", options.cache_dir, "compile cache folder")->capture_default_str();
  app.add_flag("--no-cache", options.no_cache, "neither read nor fill the compile cache");
  app.add_option("--jobs,-j", options.jobs,
                 "concurrent NVRTC compiles (default: one per core, as memory allows)")
      ->check(CLI::PositiveNumber);
  app.add_flag("--allow-spills", options.allow_spills, "let register spills pass gate 1");
  app.add_flag("--flush-l2", options.flush_l2, "flush the L2 cache before every timed launch");
  app.add_option("--deadline-ms", options.deadline_ms, kDeadlineHelp)->check(CLI::PositiveNumber);
  if (with_replay) {
    app.add_option("--replay", options.replay,
                   "answer from a recording made by `evo sweep` instead of a GPU");
    app.add_option("--replay-delay-ms", options.replay_delay_ms,
                   "time a replayed evaluation takes (to give replays a GPU's pace)")
        ->check(CLI::NonNegativeNumber);
  }
}

std::unique_ptr<EvaluatorSetup> MakeEvaluator(const GlobalOptions& global,
                                              const EvaluatorOptions& options,
                                              const KernelTemplate& kernel_template,
                                              const Problem& problem) {
  auto setup = std::make_unique<EvaluatorSetup>();
  if (!options.replay.empty()) {
    auto replay = std::make_unique<ReplayEvaluator>(
        options.replay, kernel_template.manifest, problem,
        std::chrono::milliseconds(options.replay_delay_ms), kernel_template.source_hash);
    setup->replay = replay.get();
    setup->evaluator = std::move(replay);
    setup->arch = ArchByName(setup->evaluator->identity().arch);
    return setup;
  }
  const std::vector<DeviceInfo> devices = QueryDevices();  // says plainly when there is none
  if (options.gpu < 0 || options.gpu >= static_cast<int>(devices.size())) {
    throw Error("there is no GPU " + std::to_string(options.gpu) + " (found " +
                std::to_string(devices.size()) + ")");
  }
  const DeviceInfo& device = devices[static_cast<size_t>(options.gpu)];
  setup->arch = device.arch_info();
  RequireSupportedArch(kernel_template.manifest, setup->arch);
  Compiler* compiler = &setup->nvrtc;
  GpuPipelineOptions pipeline;
  pipeline.compile_jobs = options.jobs;
  pipeline.allow_spills = options.allow_spills;
  if (options.deadline_ms > 0) pipeline.deadline = std::chrono::milliseconds(options.deadline_ms);
  pipeline.timing.flush_l2 = options.flush_l2;
  pipeline.worker.template_folders.assign(global.template_folders.begin(),
                                          global.template_folders.end());
  if (!options.no_cache) {
    setup->cache = std::make_unique<CompileCache>(options.cache_dir);
    setup->caching = std::make_unique<CachingCompiler>(setup->nvrtc, *setup->cache);
    compiler = setup->caching.get();
    pipeline.worker.cache_dir = options.cache_dir;
  }
  auto gpu = std::make_unique<GpuPipeline>(kernel_template, problem, device, *compiler, pipeline);
  setup->pipeline = gpu.get();
  setup->evaluator = std::move(gpu);
  return setup;
}

std::atomic<bool> g_stop_requested{false};

namespace {
extern "C" void RequestStop(int) { g_stop_requested.store(true); }
}  // namespace

StopOnSignals::StopOnSignals() {
  g_stop_requested.store(false);
  struct sigaction action {};
  action.sa_handler = RequestStop;
  action.sa_flags = SA_RESETHAND;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &old_int_);
  sigaction(SIGTERM, &action, &old_term_);
}

StopOnSignals::~StopOnSignals() {
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
}

void CheckResumable(const RunRecord& run, const EvaluatorIdentity& identity, bool force) {
  std::string conflict;
  if (run.spec.evaluator != identity.evaluator) {
    conflict = "was evaluated by " + run.spec.evaluator + ", this is " + identity.evaluator;
  } else if (run.spec.device != identity.device || run.spec.arch != identity.arch) {
    conflict = "was measured on " + run.spec.device + " (" + run.spec.arch + "), this is " +
               identity.device + " (" + identity.arch + ")";
  } else if (run.spec.template_hash != identity.template_hash) {
    conflict = "searched template version " + run.spec.template_hash.substr(0, 12) +
               ", this is version " + identity.template_hash.substr(0, 12);
  }
  if (!conflict.empty() && !force) {
    throw Error("run " + std::to_string(run.id) + " " + conflict +
                "; its figures would not compare. Pass --force to continue it anyway, or --new "
                "for a fresh run");
  }
}

}  // namespace evo::cli
