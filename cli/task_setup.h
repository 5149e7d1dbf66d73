#pragma once

#include <CLI/CLI.hpp>
#include <atomic>
#include <csignal>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "cli/command_support.h"
#include "engine/search.h"
#include "evaluator/candidate_evaluator.h"
#include "evaluator/compile_cache.h"
#include "evaluator/gpu_pipeline.h"
#include "evaluator/nvrtc_compiler.h"
#include "evaluator/recording.h"
#include "population/store.h"

namespace evo::cli {

// How candidates are evaluated: on GPUs (through the compile pipeline and a worker per GPU) or
// by replaying a recording. Shared by `evo run`, `evo sweep` and `evo tune`.
struct EvaluatorOptions {
  std::string gpus = "all";  // as --gpus takes it: "all" or ordinals, "0,1"
  std::string cache_dir = "runs/cache";
  bool no_cache = false;
  int jobs = 0;
  bool allow_spills = false;
  bool flush_l2 = false;
  bool time_on_outliers = false;  // TimingOptions::outlier_inputs
  int64_t deadline_ms = 0;        // 0: from the reference kernel's time on the task
  std::string replay;
  int64_t replay_delay_ms = 0;
  std::string replay_clock;  // where a replay writes its simulated wall time, if anywhere
};

// Whether a command measures on several GPUs at once (`evo run`, `evo tune`: --gpus, default
// every GPU here) or on one (`evo sweep`: --gpu, default 0).
enum class GpuChoice { kOne, kSeveral };

// --gpus or --gpu, --cache-dir, --no-cache, --jobs, --allow-spills, --flush-l2, --deadline-ms
// and, with `with_replay`, --replay, --replay-delay-ms and --replay-clock.
void AddEvaluatorOptions(CLI::App& app, EvaluatorOptions& options, bool with_replay,
                         GpuChoice gpus);

// The GPUs that options.gpus names, all of one model; throws evo::Error saying what is wrong with
// the list (before looking for GPUs, so a malformed one is named as such anywhere), that there is
// no GPU, or which two GPUs differ in model.
std::vector<DeviceInfo> SelectDevices(const std::string& gpus);

// The simulated GPUs of a replay: the ordinals listed, or one (0) for "all".
std::vector<int> ReplayGpus(const std::string& gpus);

// Checks the evaluator's GPUs (SelectDevices, or ReplayGpus for a replay) before a database is
// touched, so that a bad --gpus or a machine without a GPU stores nothing.
void CheckGpus(const EvaluatorOptions& options, bool replay);

// How runs search, set alike by `evo run` (its run) and `evo tune` (each run of the set).
struct SearchSettings {
  int elite = 3;
  int64_t budget = 100;
  uint64_t seed = 0;
  int generation_size = 16;
  int patience = 0;
  std::string time_limit;
  double slow_factor = 3.0;
  bool no_retime = false;
  int retime_rounds = RetimeOptions{}.rounds;
  bool no_compile_ahead = false;
};

// --elite, --budget, --seed, --generation-size, --patience, --time-limit, --slow-factor,
// --no-retime, --retime-rounds and --no-compile-ahead; the help speaks of each run of a set where
// `each_run_of_a_set`. `budget_help` differs most.
void AddSearchSettings(CLI::App& app, SearchSettings& settings, bool each_run_of_a_set,
                       const std::string& budget_help);

// The spec of a new run of `problem`, measured by `identity`, with the settings; its seed is
// drawn when `seed_given` is false.
RunSpec NewRunSpec(const Manifest& manifest, const Problem& problem,
                   const EvaluatorIdentity& identity, const SearchSettings& settings,
                   bool seed_given);

// The engine's stopping figures from the settings (--slow-factor, --time-limit), its compiles
// ahead (--no-compile-ahead) and the elite's re-timing (--no-retime, --retime-rounds), which
// tells what it is about to do on stderr.
SearchOptions StoppingOptions(const SearchSettings& settings);

// An evaluator with everything it borrows.
struct EvaluatorSetup {
  NvrtcCompiler nvrtc;
  std::unique_ptr<CompileCache> cache;
  std::unique_ptr<CachingCompiler> caching;
  std::unique_ptr<CandidateEvaluator> evaluator;
  GpuPipeline* pipeline = nullptr;    // when the evaluator is the GPU's
  ReplayEvaluator* replay = nullptr;  // when it replays a recording
  ArchInfo arch;
};

// The evaluator of one task: the recording's replay when options.replay names one (with a
// simulated GPU for each of options.gpus), else the GPU pipeline on options.gpus (throws
// evo::Error, plainly, where there is no GPU).
std::unique_ptr<EvaluatorSetup> MakeEvaluator(const GlobalOptions& global,
                                              const EvaluatorOptions& options,
                                              const KernelTemplate& kernel_template,
                                              const Problem& problem);

// Set by the first Ctrl-C or SIGTERM while a StopOnSignals is alive.
extern std::atomic<bool> g_stop_requested;

// Ctrl-C and SIGTERM finish the candidate on the GPU, store it and stop; a second one kills.
class StopOnSignals {
 public:
  StopOnSignals();
  ~StopOnSignals();
  StopOnSignals(const StopOnSignals&) = delete;
  StopOnSignals& operator=(const StopOnSignals&) = delete;

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

// Refuses to mix measurements of different GPUs, evaluators or template versions in one run,
// unless `force`.
void CheckResumable(const RunRecord& run, const EvaluatorIdentity& identity, bool force);

// Whether `patience`, given on the command line (nullopt: not given), reopens finished `run`:
// its stored patience stopped it short of its budget, and this one differs.
bool ReopenedByPatience(const RunRecord& run, std::optional<int> patience);

// What a resume of `run` with a patience of `patience` generations (0: none) would meet first:
// the patience already spent by its stored candidates, so that the search stops before it
// evaluates anything. Empty when the resume can search on; else a sentence naming how many
// generations passed without improvement and what lets it go on. Said before a raised budget
// is stored, since that budget would buy nothing.
std::string PatienceSpentText(const RunRecord& run, const std::vector<CandidateRecord>& candidates,
                              const SearchSpace& space, int patience);

}  // namespace evo::cli
