// Compiles ahead (Search's compile_ahead, CandidateEvaluator::Speculate) and the replay clock
// that measures what they save (evaluator/pipeline_clock, evaluator/clocked_replay).
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "evaluator/gpu_pipeline.h"
#include "evaluator/pipeline_clock.h"
#include "population/store.h"
#include "tests/fake_gpu_run.h"
#include "tests/test_support.h"

namespace evo {
namespace {

Genome G(int64_t i) { return {{"I", i}}; }

TEST_CASE("the pipeline clock: compile threads in order, the GPU after each compile", "[clock]") {
  PipelineClock clock(2);
  clock.Prefetch({{G(1), 1.0}, {G(2), 2.0}, {G(3), 1.0}});
  // Thread 0 compiles 1 (0..1) then 3 (1..2); thread 1 compiles 2 (0..2).
  CHECK_FALSE(clock.Ready(G(1)));
  CHECK(clock.Measure(G(1), 1.0, 0.5) == Approx(1.5));
  CHECK_FALSE(clock.Ready(G(2)));
  CHECK(clock.Measure(G(2), 2.0, 0.5) == Approx(2.5));
  CHECK(clock.Ready(G(3)));
  CHECK(clock.Measure(G(3), 1.0, 0.5) == Approx(3.0));
  CHECK(clock.Remeasure(0.25) == Approx(3.25));
  // A configuration nothing asked for is compiled when the GPU wants it; a failed compile
  // spends no GPU time.
  CHECK(clock.Measure(G(4), 1.0, 0.0) == Approx(4.25));
  for (int64_t i = 1; i <= 4; ++i) CHECK_FALSE(clock.Speculated(G(i)));
  CHECK_THROWS_AS(PipelineClock(0), Error);
}

TEST_CASE(
    "the pipeline clock: guesses compile after what is asked for, and those not started "
    "by the next generation are dropped",
    "[clock]") {
  PipelineClock clock(1);
  clock.Prefetch({{G(1), 1.0}});
  clock.Speculate({{G(2), 1.0}, {G(3), 1.0}, {G(1), 5.0}});
  // The one thread: 1 (0..1), then the guesses 2 (1..2) and 3 (2..3).
  CHECK(clock.Measure(G(1), 1.0, 0.5) == Approx(1.5));
  // The next generation is planned at 1.5: guess 2 has started, guess 3 has not and is dropped.
  clock.Prefetch({{G(3), 1.0}, {G(2), 1.0}});
  // 3 is queued again after 2 (which ends at 2): 2..3.
  CHECK_FALSE(clock.Ready(G(2)));
  CHECK(clock.Measure(G(2), 1.0, 0.5) == Approx(2.5));
  CHECK(clock.Speculated(G(2)));
  CHECK(clock.Measure(G(3), 1.0, 0.5) == Approx(3.5));
  CHECK_FALSE(clock.Speculated(G(3)));
  CHECK_FALSE(clock.Speculated(G(1)));
}

// NVRTC's stand-in for the pipeline: every compile is logged, and one whose source holds
// `held` waits until Release, so that a test knows which compiles have started.
class HoldingCompiler final : public Compiler {
 public:
  HoldingCompiler(const Manifest& manifest, std::string held)
      : instant_(manifest), held_(std::move(held)) {}
  CompileResult Compile(const CompileRequest& request) override {
    {
      std::unique_lock lock(mutex_);
      sources_.push_back(request.source);
      if (request.source.find(held_) != std::string::npos) {
        holding_ = true;
        changed_.notify_all();
        changed_.wait(lock, [this] { return released_; });
      }
    }
    return instant_.Compile(request);
  }
  std::string Version() const override { return "holding"; }
  std::vector<std::string> Options(const CompileRequest&) const override { return {}; }
  // Returns once the held compile has started (false after 10 s without).
  bool WaitUntilHolding() {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, std::chrono::seconds(10), [this] { return holding_; });
  }
  void Release() {
    std::lock_guard lock(mutex_);
    released_ = true;
    changed_.notify_all();
  }
  // How many compiles had a source that defines this knob value ("#define BLOCK_N 64\n").
  int Compiled(const std::string& define) const {
    std::lock_guard lock(mutex_);
    int count = 0;
    for (const std::string& source : sources_) count += source.find(define) != std::string::npos;
    return count;
  }
  size_t total() const {
    std::lock_guard lock(mutex_);
    return sources_.size();
  }

 private:
  test::InstantCompiler instant_;
  std::string held_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  bool holding_ = false;
  bool released_ = false;
  std::vector<std::string> sources_;
};

TEST_CASE(
    "the GPU pipeline compiles guesses on idle threads, reuses them, and drops those "
    "not started when the next generation is asked for",
    "[gpus][clock]") {
  test::TempDir dir;
  const TemplateLibrary library = TemplateLibrary::Load({});
  const KernelTemplate& kernel_template = library.Find("sdpa_fp16");
  const Problem problem = DefaultProblem(kernel_template.manifest);
  const auto define = [](int64_t block_n) {
    return "#define BLOCK_N " + std::to_string(block_n) + "\n";
  };
  // The one compile thread stops at the guess of 128 until released.
  HoldingCompiler compiler(kernel_template.manifest, define(128));
  GpuPipelineOptions options;
  options.compile_jobs = 1;
  options.deadline = std::chrono::milliseconds(2000);
  options.driver_version = "fake";
  options.supervisor.stderr_path = dir.path() / "workers.err";
  options.worker_command = [](int device) {
    return std::vector<std::string>{test::FakeWorker(), "--gates", "--device",
                                    std::to_string(device)};
  };
  GpuPipeline pipeline(kernel_template, problem, {test::FakeDevice(0)}, compiler, options);
  // Whatever fails below, the held compile ends before the pipeline joins its thread.
  struct ReleaseAtEnd {
    HoldingCompiler& compiler;
    ~ReleaseAtEnd() { compiler.Release(); }
  } release_at_end{compiler};

  // Configurations told apart by BLOCK_N; the defaults otherwise.
  const auto config = [&](int64_t block_n) {
    Genome genome = DefaultGenome(kernel_template.manifest);
    genome["BLOCK_N"] = block_n;
    return genome;
  };
  const auto compiled = [&](int64_t block_n) { return compiler.Compiled(define(block_n)); };
  pipeline.Prefetch({config(32)});
  pipeline.Speculate({config(64), config(128), config(16)});
  CHECK(pipeline.Evaluate(0, config(32)).gpu.has_value());
  // The thread went on to the guesses: 64 is compiled, 128 started, 16 waits behind it.
  REQUIRE(compiler.WaitUntilHolding());
  CHECK(pipeline.ReadyToMeasure(config(64)));
  CHECK_FALSE(pipeline.ReadyToMeasure(config(16)));
  // The next generation asks for 64 and 256: 64 is not compiled again, and 16, not started, is
  // dropped, so 256 is the next compile.
  pipeline.Prefetch({config(64), config(256)});
  compiler.Release();
  CHECK(pipeline.Evaluate(0, config(64)).gpu.has_value());
  CHECK(pipeline.Evaluate(0, config(256)).gpu.has_value());
  CHECK(compiled(32) == 1);
  CHECK(compiled(64) == 1);
  CHECK(compiled(128) == 1);
  CHECK(compiled(256) == 1);
  CHECK(compiled(16) == 0);
  CHECK(compiler.total() == 4);
}

// Everything a search decided, to compare two runs.
std::string Decisions(PopulationStore& store, int64_t run_id) {
  std::ostringstream text;
  for (const CandidateRecord& c : store.Candidates(run_id)) {
    text << c.id << " g" << c.generation << " " << nlohmann::json(c.proposal.genome).dump() << " "
         << c.proposal.operator_name << " " << ToString(c.outcome.status) << "\n";
  }
  text << "elite";
  for (const CandidateRecord& c : store.Elite(run_id)) text << " " << c.id;
  return text.str();
}

TEST_CASE("compiling ahead changes nothing a search on fake GPUs decides",
          "[search][gpus][clock]") {
  SearchOptions ahead;
  ahead.retime.rounds = 0;
  SearchOptions not_ahead = ahead;
  not_ahead.compile_ahead = false;
  test::FakeGpuRun with(std::vector<std::vector<std::string>>(2), 5, 40);
  with.Run(ahead);
  test::FakeGpuRun without(std::vector<std::vector<std::string>>(2), 5, 40);
  without.Run(not_ahead);
  CHECK(Decisions(with.store(), with.run_id()) == Decisions(without.store(), without.run_id()));
  // Without compiles ahead a generation's candidates are all that is compiled: the 40 measured,
  // and those a new best cut short (compiled with their generation, never measured); with them,
  // guesses too.
  CHECK(without.compiler().compiles() >= 40);
  CHECK(with.compiler().compiles() > without.compiler().compiles());
  SearchOptions whole_generations = not_ahead;
  whole_generations.replan = false;
  test::FakeGpuRun whole(std::vector<std::vector<std::string>>(2), 5, 40);
  whole.Run(whole_generations);
  CHECK(whole.compiler().compiles() == 40);
}

std::vector<std::string> ClockedReplayRun(const std::filesystem::path& db,
                                          const std::filesystem::path& log, bool ahead) {
  std::vector<std::string> args = {"run",
                                   "--replay",
                                   test::H100Recording().string(),
                                   "--db",
                                   db.string(),
                                   "--budget",
                                   "64",
                                   "--seed",
                                   "3",
                                   "--no-starting-points",
                                   "--generation-size",
                                   "4",
                                   "--replay-clock",
                                   log.string()};
  if (!ahead) args.push_back("--no-compile-ahead");
  return args;
}

std::vector<nlohmann::json> ReadLines(const std::filesystem::path& path) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

TEST_CASE(
    "evo run --replay-clock: the same search, its simulated time shortened by compiling "
    "ahead",
    "[cli][clock]") {
  test::TempDir dir;
  std::map<bool, std::vector<nlohmann::json>> logs;
  std::map<bool, std::string> decisions;
  for (const bool ahead : {false, true}) {
    const auto db = dir.path() / (ahead ? "ahead.db" : "not.db");
    const auto log = dir.path() / (ahead ? "ahead.log" : "not.log");
    const auto run = test::RunEvo(ClockedReplayRun(db, log, ahead), dir.path());
    INFO(run.err);
    REQUIRE(run.exit_code == 0);
    CHECK(run.err.find("compile threads would take is simulated") != std::string::npos);
    logs[ahead] = ReadLines(log);
    PopulationStore store(db, PopulationStore::Access::kReadOnly);
    decisions[ahead] = Decisions(store, 1);
  }
  CHECK(decisions[true] == decisions[false]);
  for (const bool ahead : {false, true}) {
    const std::vector<nlohmann::json>& log = logs[ahead];
    REQUIRE(log.size() == 64);
    double last = 0;
    int speculated = 0;
    for (const nlohmann::json& line : log) {
      CHECK(line["seconds"].get<double>() >= last);
      last = line["seconds"].get<double>();
      speculated += line["speculated"].get<bool>();
    }
    CHECK((speculated > 0) == ahead);
  }
  const double with = logs[true].back()["seconds"].get<double>();
  const double without = logs[false].back()["seconds"].get<double>();
  INFO(with << " s against " << without << " s");
  CHECK(with < without);
}

TEST_CASE("evo run --replay-clock is refused without a replay and with several GPUs",
          "[cli][clock]") {
  test::TempDir dir;
  const auto log = dir.path() / "clock.log";
  const auto no_replay = test::RunEvo(
      {"run", "--db", (dir.path() / "a.db").string(), "--replay-clock", log.string()}, dir.path());
  CHECK(no_replay.exit_code != 0);
  CHECK(no_replay.err.find("--replay-clock simulates a replay: add --replay") != std::string::npos);
  const auto several = test::RunEvo(
      {"run", "--replay", test::H100Recording().string(), "--db", (dir.path() / "b.db").string(),
       "--gpus", "0,1", "--replay-clock", log.string()},
      dir.path());
  CHECK(several.exit_code != 0);
  CHECK(several.err.find("the replay clock simulates one GPU, not several") != std::string::npos);
}

}  // namespace
}  // namespace evo
