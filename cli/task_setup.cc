#include "cli/task_setup.h"

#include <fmt/format.h>

#include <iostream>
#include <random>

#include "common/error.h"
#include "engine/evolution.h"
#include "evaluator/clocked_replay.h"
#include "evaluator/cuda_driver.h"
#include "evaluator/recording.h"

namespace evo::cli {

void AddEvaluatorOptions(CLI::App& app, EvaluatorOptions& options, bool with_replay,
                         GpuChoice gpus) {
  if (gpus == GpuChoice::kSeveral) {
    app.add_option("--gpus", options.gpus,
                   "the GPUs to measure on, e.g. 0,1, all of one model: a worker each, every "
                   "candidate to whichever is free, one compile pool ahead of them all (default: "
                   "every GPU here; with --replay, that many simulated GPUs answer at once)")
        ->capture_default_str();
  } else {
    options.gpus = "0";
    app.add_option_function<int>(
           "--gpu", [&options](int gpu) { options.gpus = std::to_string(gpu); },
           "the GPU to measure on (default 0)")
        ->transform(NonNegativeNumber());
  }
  app.add_option("--cache-dir", options.cache_dir, "compile cache folder")->capture_default_str();
  app.add_flag("--no-cache", options.no_cache, "neither read nor fill the compile cache");
  app.add_option("--jobs,-j", options.jobs,
                 "concurrent NVRTC compiles (default: one per core, as memory allows)")
      ->transform(PositiveNumber());
  app.add_flag("--allow-spills", options.allow_spills, "let register spills pass gate 1");
  app.add_flag("--flush-l2", options.flush_l2, "flush the L2 cache before every timed launch");
  app.add_flag("--time-on-outliers", options.time_on_outliers, kTimeOnOutliersHelp);
  app.add_option("--deadline-ms", options.deadline_ms, kDeadlineHelp)->transform(PositiveNumber());
  if (with_replay) {
    app.add_option("--replay", options.replay,
                   "answer from a recording made by `evo sweep` instead of a GPU");
    app.add_option("--replay-delay-ms", options.replay_delay_ms,
                   "time a replayed evaluation takes (to give replays a GPU's pace)")
        ->transform(NonNegativeNumber());
    app.add_option("--replay-clock", options.replay_clock,
                   "with --replay: simulate the wall time the search would take on one GPU from "
                   "the recorded compile and GPU times (--jobs compile threads, default 16, as "
                   "on the H100 host) and write, per configuration, when its measurement would "
                   "end into this file (JSON lines)");
  }
}

void AddSearchSettings(CLI::App& app, SearchSettings& settings, bool each_run_of_a_set,
                       const std::string& budget_help) {
  const std::string run = each_run_of_a_set ? "each run" : "the run";
  app.add_option(
         "--elite", settings.elite,
         std::string("size K of ") + (each_run_of_a_set ? "each run's" : "the") + " Top-K elite")
      ->capture_default_str()
      ->transform(WholeNumberBetween(1, 1000));
  app.add_option("--budget", settings.budget, budget_help)
      ->capture_default_str()
      ->transform(PositiveNumber());
  app.add_option("--seed", settings.seed,
                 each_run_of_a_set ? "random seed of every run (default: drawn per run)"
                                   : "random seed (default: drawn, and stored with the run)")
      ->transform(SeedNumber());
  app.add_option("--generation-size", settings.generation_size,
                 fmt::format("candidates per generation after the first (which holds the "
                             "starting points and random ones up to {})",
                             EvolutionOptions{}.first_generation_size))
      ->capture_default_str()
      ->transform(WholeNumberBetween(1, 4096));
  app.add_option("--patience", settings.patience,
                 "stop " + run + " after this many generations without improvement (0: never)")
      ->capture_default_str()
      ->transform(NonNegativeNumber());
  app.add_option("--time-limit", settings.time_limit,
                 "stop " + run + " after this long (90s, 15m, 2h); the run can be resumed");
  app.add_option("--slow-factor", settings.slow_factor,
                 "a measurement this many times the best is `slow`")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 1000.0));
  app.add_flag("--no-retime", settings.no_retime,
               "do not re-time " + std::string(each_run_of_a_set ? "each run's" : "the") +
                   " elite side by side when the search stops (its order then stays the "
                   "score's)");
  app.add_option("--retime-rounds", settings.retime_rounds,
                 "rounds of the elite's side-by-side re-timing, one timing of every member each, "
                 "alternately in order and reversed (an even number cancels a steady drift)")
      ->capture_default_str()
      ->transform(WholeNumberBetween(3, 100));
  app.add_flag("--no-compile-ahead", settings.no_compile_ahead,
               "compile only the generation being measured, not also the likely next one on the "
               "compile threads it leaves idle (the search decides the same either way)");
}

RunSpec NewRunSpec(const Manifest& manifest, const Problem& problem,
                   const EvaluatorIdentity& identity, const SearchSettings& settings,
                   bool seed_given) {
  RunSpec spec;
  spec.template_name = manifest.name;
  spec.template_hash = identity.template_hash;
  spec.problem = problem;
  spec.arch = identity.arch;
  spec.device = identity.device;
  spec.evaluator = identity.evaluator;
  spec.driver_version = identity.driver_version;
  spec.nvrtc_version = identity.nvrtc_version;
  spec.evo_version = EVO_VERSION;
  spec.seed = seed_given ? settings.seed : std::random_device{}();
  spec.budget = settings.budget;
  spec.elite_size = settings.elite;
  spec.generation_size = settings.generation_size;
  spec.patience = settings.patience;
  return spec;
}

SearchOptions StoppingOptions(const SearchSettings& settings) {
  SearchOptions options;
  options.slow_factor = settings.slow_factor;
  options.compile_ahead = !settings.no_compile_ahead;
  options.retime.rounds = settings.no_retime ? 0 : settings.retime_rounds;
  options.retime.announce = [](const std::string& line) { std::cerr << "evo: " << line << "\n"; };
  if (!settings.time_limit.empty()) {
    options.time_limit = ParseDuration(settings.time_limit, "--time-limit");
  }
  return options;
}

std::vector<DeviceInfo> SelectDevices(const std::string& gpus) {
  ParseGpuList(gpus);  // a malformed list is named as such, GPU or not
  const std::vector<DeviceInfo> all = QueryDevices();  // says plainly when there is none
  std::vector<DeviceInfo> devices;
  for (int gpu : SelectGpus(gpus, static_cast<int>(all.size()))) {
    devices.push_back(all[static_cast<size_t>(gpu)]);
  }
  RequireOneGpuModel(devices);
  return devices;
}

std::vector<int> ReplayGpus(const std::string& gpus) {
  return ParseGpuList(gpus).value_or(std::vector<int>{0});
}

void CheckGpus(const EvaluatorOptions& options, bool replay) {
  if (!replay && !options.replay_clock.empty()) {
    throw Error("--replay-clock simulates a replay: add --replay");
  }
  if (replay && options.time_on_outliers) {
    throw Error(
        "--time-on-outliers times on a GPU; a replay repeats the timings its recording holds");
  }
  if (replay) {
    ReplayGpus(options.gpus);
  } else {
    SelectDevices(options.gpus);
  }
}

std::unique_ptr<EvaluatorSetup> MakeEvaluator(const GlobalOptions& global,
                                              const EvaluatorOptions& options,
                                              const KernelTemplate& kernel_template,
                                              const Problem& problem) {
  auto setup = std::make_unique<EvaluatorSetup>();
  if (!options.replay.empty()) {
    auto replay =
        std::make_unique<ReplayEvaluator>(options.replay, kernel_template.manifest, problem,
                                          std::chrono::milliseconds(options.replay_delay_ms),
                                          kernel_template.source_hash, ReplayGpus(options.gpus));
    setup->replay = replay.get();
    if (options.replay_clock.empty()) {
      setup->evaluator = std::move(replay);
    } else {
      constexpr int kRecordingHostCores = 16;
      setup->evaluator = std::make_unique<ClockedReplay>(
          std::move(replay), options.jobs > 0 ? options.jobs : kRecordingHostCores,
          options.replay_clock);
    }
    setup->arch = ArchByName(setup->evaluator->identity().arch);
    return setup;
  }
  const std::vector<DeviceInfo> devices = SelectDevices(options.gpus);
  const DeviceInfo& device = devices.front();
  setup->arch = device.arch_info();
  RequireSupportedArch(kernel_template.manifest, setup->arch);
  Compiler* compiler = &setup->nvrtc;
  GpuPipelineOptions pipeline;
  pipeline.compile_jobs = options.jobs;
  pipeline.allow_spills = options.allow_spills;
  if (options.deadline_ms > 0) pipeline.deadline = std::chrono::milliseconds(options.deadline_ms);
  pipeline.timing.flush_l2 = options.flush_l2;
  if (options.time_on_outliers) {
    RequireOutlierRows(kernel_template.manifest);
    pipeline.timing.outlier_inputs = true;
  }
  pipeline.worker.template_folders.assign(global.template_folders.begin(),
                                          global.template_folders.end());
  if (!options.no_cache) {
    setup->cache = std::make_unique<CompileCache>(options.cache_dir);
    setup->caching = std::make_unique<CachingCompiler>(setup->nvrtc, *setup->cache);
    compiler = setup->caching.get();
    pipeline.worker.cache_dir = options.cache_dir;
  }
  auto gpu = std::make_unique<GpuPipeline>(kernel_template, problem, devices, *compiler, pipeline);
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
  const bool same_evaluator = run.spec.evaluator == identity.evaluator ||
                              ReplaysOneRecording(run.spec.evaluator, identity.evaluator);
  if (!same_evaluator) {
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

bool ReopenedByPatience(const RunRecord& run, std::optional<int> patience) {
  return patience && *patience != run.spec.patience &&
         run.stop_reason == ToString(StopReason::kPatience) &&
         run.finished_candidates < run.spec.budget;
}

std::string PatienceSpentText(const RunRecord& run, const std::vector<CandidateRecord>& candidates,
                              const SearchSpace& space, int patience) {
  if (patience <= 0) return "";
  const int stale = GenerationsWithoutImprovement(candidates, &space);
  if (stale < patience) return "";
  return fmt::format(
      "run {} has gone {} generations without improvement, which its --patience of {} does not "
      "allow: resumed, it would stop before evaluating anything. Pass --patience 0 (no patience) "
      "or a --patience over {} to search on",
      run.id, stale, patience, stale);
}

}  // namespace evo::cli
