#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "engine/search.h"
#include "evaluator/cuda_driver.h"
#include "evaluator/gpu_pipeline.h"
#include "evaluator/recording.h"
#include "population/store.h"
#include "tests/fake_gpu_run.h"
#include "tests/test_support.h"

namespace evo {
namespace {

using test::FakeDevice;
using test::FakeGpuRun;
using test::FakeWorker;
using test::InstantCompiler;

// What a search decided about its candidates, to compare two runs.
std::string Decisions(PopulationStore& store, int64_t run_id) {
  std::ostringstream text;
  for (const CandidateRecord& c : store.Candidates(run_id)) {
    text << c.id << " g" << c.generation << " " << nlohmann::json(c.proposal.genome).dump() << " "
         << c.proposal.operator_name << " " << ToString(c.outcome.status) << " "
         << c.outcome.reason;
    if (const TimingFigures* t = c.outcome.timing()) text << " " << t->median_us;
    if (c.confirmation) text << " confirmed " << c.confirmation->median_us;
    text << "\n";
  }
  text << "elite";
  for (const CandidateRecord& c : store.Elite(run_id)) text << " " << c.id;
  return text.str();
}

TEST_CASE(
    "fake GPUs, one crashing and one hanging: the budget exact, nothing measured twice, "
    "the elite the candidates imply",
    "[search][gpus]") {
  FakeGpuRun run({{}, {"--crash-every", "3"}, {"--hang-every", "4"}}, 3, 40);
  // The search's requests alone are counted below: no re-timing after it.
  SearchOptions options;
  options.retime.rounds = 0;
  const SearchSummary summary = run.Run(options);
  CHECK(summary.reason == StopReason::kBudget);
  CHECK(summary.evaluated_now == 40);

  const std::vector<CandidateRecord> candidates = run.store().Candidates(run.run_id());
  REQUIRE(candidates.size() == 40);
  std::set<Genome> genomes;
  std::map<std::pair<int, Status>, int> by_gpu;
  for (const CandidateRecord& c : candidates) {
    CHECK(c.state == CandidateState::kFinished);
    genomes.insert(c.proposal.genome);
    REQUIRE(c.measured_on.has_value() == c.outcome.gpu.has_value());
    if (!c.measured_on) continue;
    CHECK(c.measured_on->name == "Fake GPU");
    CHECK(c.measured_on->uuid == "GPU-fake-" + std::to_string(c.measured_on->ordinal));
    ++by_gpu[{c.measured_on->ordinal, c.outcome.status}];
    if (c.outcome.status == Status::kRuntimeError) {
      CHECK_THAT(c.outcome.reason, Catch::Contains("crashed"));
      CHECK(c.measured_on->ordinal == 1);
    }
    if (c.outcome.status == Status::kTimeout) CHECK(c.measured_on->ordinal == 2);
  }
  CHECK(genomes.size() == 40);
  // Every GPU measured, the crashing one's and the hanging one's candidates cost only themselves.
  CHECK(by_gpu[{0, Status::kMeasured}] + by_gpu[{0, Status::kSlow}] > 0);
  CHECK(by_gpu[{1, Status::kRuntimeError}] > 0);
  CHECK(by_gpu[{1, Status::kMeasured}] + by_gpu[{1, Status::kSlow}] > 0);
  CHECK(by_gpu[{2, Status::kTimeout}] > 0);
  CHECK(by_gpu[{2, Status::kMeasured}] + by_gpu[{2, Status::kSlow}] > 0);
  CHECK(run.pipeline().worker_respawns() >=
        static_cast<uint64_t>(by_gpu[{1, Status::kRuntimeError}] + by_gpu[{2, Status::kTimeout}]));

  // Each candidate went to one GPU once, and once more to the same GPU where it was confirmed.
  const std::map<Genome, std::vector<int>> requests = run.Requests();
  for (const CandidateRecord& c : candidates) {
    INFO(nlohmann::json(c.proposal.genome).dump() << " " << c.outcome.reason);
    const auto sent = requests.find(c.proposal.genome);
    if (!c.measured_on) {
      CHECK(sent == requests.end());
      continue;
    }
    REQUIRE(sent != requests.end());
    const bool confirmed =
        c.confirmation.has_value() || c.outcome.reason.rfind("the confirming measurement", 0) == 0;
    CHECK(sent->second.size() == (confirmed ? 2u : 1u));
    for (int device : sent->second) CHECK(device == c.measured_on->ordinal);
  }

  const std::vector<CandidateRecord> elite = run.store().Elite(run.run_id());
  const std::vector<CandidateRecord> expected = SelectElite(candidates, 3);
  REQUIRE(elite.size() == 3);
  REQUIRE(expected.size() == 3);
  for (size_t i = 0; i < elite.size(); ++i) CHECK(elite[i].id == expected[i].id);
}

TEST_CASE("one fake GPU and three make the same search: candidates, outcomes and elite",
          "[search][gpus]") {
  // Misbehaviour that follows the configuration, as a kernel's does, whatever GPU runs it.
  const std::vector<std::string> flags = {"--crash-when", "STAGES=4,NUM_WARPS=8",
                                          "--crash-when", "BLOCK_N=128,FAST_EXP=1,PERSISTENT=1",
                                          "--hang-when",  "BLOCK_M=16,PERSISTENT=1"};
  FakeGpuRun one({flags}, 5, 48);
  FakeGpuRun three({flags, flags, flags}, 5, 48);
  CHECK(one.Run().reason == StopReason::kBudget);
  CHECK(three.Run().reason == StopReason::kBudget);
  const std::string decisions = Decisions(one.store(), one.run_id());
  CHECK(Decisions(three.store(), three.run_id()) == decisions);
  // The misbehaviour was there to be survived, and the three GPUs shared the work.
  CHECK(decisions.find(" runtime_error ") != std::string::npos);
  std::set<int> gpus;
  for (const CandidateRecord& c : three.store().Candidates(three.run_id())) {
    if (c.measured_on) gpus.insert(c.measured_on->ordinal);
  }
  CHECK(gpus.size() == 3);
}

TEST_CASE("GPUs of different models are refused for one run, naming them", "[gpus]") {
  CHECK_NOTHROW(RequireOneGpuModel({FakeDevice(0), FakeDevice(1)}));
  CHECK_THROWS_WITH(RequireOneGpuModel({FakeDevice(0), FakeDevice(1), FakeDevice(2, "Other GPU")}),
                    Catch::Contains("GPU 0 (Fake GPU) and GPU 2 (Other GPU) are different models"));
  const TemplateLibrary library = TemplateLibrary::Load({});
  const KernelTemplate& kernel_template = library.Find("sdpa_fp16");
  InstantCompiler compiler(kernel_template.manifest);
  GpuPipelineOptions options;
  options.driver_version = "fake";
  options.deadline = std::chrono::milliseconds(400);
  options.worker_command = [](int device) {
    return std::vector<std::string>{FakeWorker(), "--gates", "--device", std::to_string(device)};
  };
  CHECK_THROWS_WITH(GpuPipeline(kernel_template, DefaultProblem(kernel_template.manifest),
                                {FakeDevice(0), FakeDevice(1, "Other GPU")}, compiler, options),
                    Catch::Contains("are different models"));
}

TEST_CASE("a GPU whose worker cannot start is named when the pipeline starts", "[gpus]") {
  const TemplateLibrary library = TemplateLibrary::Load({});
  const KernelTemplate& kernel_template = library.Find("sdpa_fp16");
  InstantCompiler compiler(kernel_template.manifest);
  GpuPipelineOptions options;
  options.driver_version = "fake";
  options.deadline = std::chrono::milliseconds(400);
  options.worker_command = [](int device) {
    std::vector<std::string> argv = {FakeWorker(), "--gates", "--device", std::to_string(device)};
    if (device == 1) argv.insert(argv.end(), {"--health-error", "no CUDA device"});
    return argv;
  };
  CHECK_THROWS_WITH(GpuPipeline(kernel_template, DefaultProblem(kernel_template.manifest),
                                {FakeDevice(0), FakeDevice(1)}, compiler, options),
                    Catch::StartsWith("GPU 1: ") && Catch::Contains("no CUDA device"));
}

// On the GPU machine: the real workers, the real compiles.
std::vector<std::string> GpuRun(const std::filesystem::path& dir, const std::string& gpus,
                                int budget) {
  return {"run",
          "--gpus",
          gpus,
          "--budget",
          std::to_string(budget),
          "--generation-size",
          "4",
          "--seed",
          "3",
          "--db",
          (dir / "evo.db").string(),
          "--cache-dir",
          (dir / "cache").string()};
}

TEST_CASE("evo run --gpus 0 on a GPU stores the GPU's name and UUID with what it measured",
          "[gpu][gpus]") {
  if (!test::HaveGpuDriver()) {
    WARN("skipped: no GPU driver (libcuda.so.1) on this machine");
    return;
  }
  const std::vector<DeviceInfo> devices = QueryDevices();
  test::TempDir dir;
  const int count = static_cast<int>(devices.size());
  const auto absent = test::RunEvo(GpuRun(dir.path(), std::to_string(count), 4), dir.path());
  CHECK(absent.exit_code == 2);
  CHECK_THAT(absent.err, Catch::Contains("there is no GPU " + std::to_string(count) + " (found " +
                                         std::to_string(count) + ")"));
  CHECK_FALSE(std::filesystem::exists(dir.path() / "evo.db"));

  const auto run = test::RunEvo(GpuRun(dir.path(), "0", 8), dir.path());
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  CHECK_THAT(run.err, Catch::Contains(", GPU 0, "));
  PopulationStore store(dir.path() / "evo.db", PopulationStore::Access::kReadOnly);
  const std::vector<CandidateRecord> candidates = store.Candidates(1);
  REQUIRE(candidates.size() == 8);
  int on_gpu = 0;
  for (const CandidateRecord& c : candidates) {
    CHECK(c.state == CandidateState::kFinished);
    CHECK(c.measured_on.has_value() == c.outcome.gpu.has_value());
    if (!c.measured_on) continue;
    ++on_gpu;
    CHECK(c.measured_on->ordinal == 0);
    CHECK(c.measured_on->name == devices[0].name);
    CHECK(c.measured_on->uuid == devices[0].uuid);
    CHECK(c.measured_on->uuid.rfind("GPU-", 0) == 0);
  }
  CHECK(on_gpu > 0);
  const std::vector<CandidateRecord> by_score = store.EliteByScore(1);
  const std::vector<CandidateRecord> expected = SelectElite(candidates, 3);
  REQUIRE(by_score.size() == expected.size());
  for (size_t i = 0; i < by_score.size(); ++i) CHECK(by_score[i].id == expected[i].id);

  // The elite was re-timed side by side on GPU 0, each timing the gate's, with its SM clock,
  // and its order follows the medians.
  const std::vector<CandidateRecord> elite = store.Elite(1);
  REQUIRE(elite.size() == expected.size());
  const std::vector<Retiming> retimings = store.Retimings(1);
  if (elite.size() < 2) {
    CHECK_THAT(run.err, Catch::Contains("nothing to re-time side by side"));
    CHECK(retimings.empty());
    return;
  }
  CHECK_THAT(run.err, Catch::Contains("side by side on GPU 0: 4 rounds"));
  CHECK_THAT(run.err, Catch::Contains("evo: re-timing 1 stored ("));
  REQUIRE(retimings.size() == 1);
  CHECK(retimings[0].gpu->uuid == devices[0].uuid);
  // The elite, its close contenders and the candidates with the fewest SM cycles.
  CHECK(retimings[0].timings.size() == 4 * store.Contenders(1).size());
  CHECK(retimings[0].timings.size() >= 4 * elite.size());
  for (const RetimingTiming& t : retimings[0].timings) {
    CHECK(t.timing.median_us > 0);
    CHECK(t.timing.sm_clock_mhz > 0);
    CHECK(t.timing.mean_sm_clock_mhz > 0);
  }
  for (size_t i = 0; i < elite.size(); ++i) {
    REQUIRE(elite[i].side_by_side);
    if (i > 0) CHECK(elite[i - 1].side_by_side->median_us <= elite[i].side_by_side->median_us);
  }
  WARN(run.err.substr(run.err.rfind("evo: re-timing")));

  // Resumed, the run has nothing to search and its elite's members were re-timed: no timing.
  std::vector<std::string> resume = GpuRun(dir.path(), "0", 8);
  resume.insert(resume.end(), {"--resume", "1"});
  const auto again = test::RunEvo(resume, dir.path());
  CHECK(again.exit_code == 0);
  CHECK_THAT(again.err, Catch::Contains("the elite's order comes from re-timing 1 of the same "
                                        "members"));
}

TEST_CASE("evo run on two GPUs of the host spreads one search over both", "[gpu][gpus]") {
  if (!test::HaveGpuDriver()) {
    WARN("skipped: no GPU driver (libcuda.so.1) on this machine");
    return;
  }
  const std::vector<DeviceInfo> devices = QueryDevices();
  if (devices.size() < 2) {
    WARN("skipped: this machine has " << devices.size()
                                      << " GPU; the run over several GPUs needs two or more");
    return;
  }
  test::TempDir dir;
  const auto run = test::RunEvo(GpuRun(dir.path(), "0,1", 16), dir.path());
  INFO(run.err);
  if (devices[0].name != devices[1].name) {
    CHECK(run.exit_code == 2);
    CHECK_THAT(run.err, Catch::Contains("are different models"));
    return;
  }
  REQUIRE(run.exit_code == 0);
  CHECK_THAT(run.err, Catch::Contains("2 GPUs (0, 1)"));
  CHECK_THAT(run.err, Catch::Contains("candidates measured on GPU 0: "));
  WARN(run.err.substr(run.err.rfind("evo: run 1 stopped")));
  PopulationStore store(dir.path() / "evo.db", PopulationStore::Access::kReadOnly);
  const std::vector<CandidateRecord> candidates = store.Candidates(1);
  REQUIRE(candidates.size() == 16);
  std::set<Genome> genomes;
  std::map<int, int> per_gpu;
  for (const CandidateRecord& c : candidates) {
    CHECK(c.state == CandidateState::kFinished);
    genomes.insert(c.proposal.genome);
    if (c.measured_on) {
      ++per_gpu[c.measured_on->ordinal];
      CHECK(c.measured_on->uuid == devices[static_cast<size_t>(c.measured_on->ordinal)].uuid);
    }
  }
  CHECK(genomes.size() == 16);
  CHECK(per_gpu.size() == 2);
  const std::vector<CandidateRecord> elite = store.EliteByScore(1);
  const std::vector<CandidateRecord> expected = SelectElite(candidates, 3);
  REQUIRE(elite.size() == expected.size());
  for (size_t i = 0; i < elite.size(); ++i) CHECK(elite[i].id == expected[i].id);
  // Re-timed on one GPU only, the first.
  if (elite.size() > 1) CHECK_THAT(run.err, Catch::Contains("side by side on GPU 0:"));
}

}  // namespace
}  // namespace evo
