#include "population/store.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <limits>
#include <regex>
#include <thread>

#include "common/error.h"
#include "common/files.h"
#include "tests/test_support.h"

namespace evo {
namespace {

namespace fs = std::filesystem;
using Access = PopulationStore::Access;

RunSpec MakeSpec() {
  RunSpec spec;
  spec.template_name = "sdpa_fp16";
  spec.template_hash = "3f2a9c";
  spec.problem = {{"B", 2}, {"H", 16}, {"S_q", 4096}, {"S_kv", 4096}, {"D", 128}, {"CAUSAL", 1}};
  spec.arch = "sm_90";
  spec.device = "NVIDIA H100 80GB HBM3";
  spec.evaluator = "gpu";
  spec.driver_version = "13.0";
  spec.nvrtc_version = "13.0.48";
  spec.evo_version = "0.1.0";
  spec.seed = std::numeric_limits<uint64_t>::max() - 6;  // needs all 64 bits
  spec.budget = 200;
  spec.elite_size = 3;
  spec.generation_size = 12;
  spec.patience = 4;
  spec.fixed = {{"PERSISTENT", 0}, {"STAGES", 3}};
  return spec;
}

Proposal MakeProposal(int64_t block_n, std::optional<int64_t> parent1 = std::nullopt,
                      std::optional<int64_t> parent2 = std::nullopt) {
  Proposal proposal;
  proposal.genome = {{"BLOCK_M", 128}, {"BLOCK_N", block_n}, {"STAGES", 2}};
  proposal.operator_name = parent1 ? "mutate BLOCK_N 64->" + std::to_string(block_n) : "random";
  proposal.parent1 = parent1;
  proposal.parent2 = parent2;
  return proposal;
}

TimingFigures MakeTiming(double median_us) {
  TimingFigures timing;
  timing.median_us = median_us;
  timing.p10_us = median_us * 0.97 + 1.0 / 3.0;
  timing.p90_us = median_us * 1.03 + 0.1 + 0.2;
  timing.min_us = median_us * 0.9;
  timing.repetitions = 37;
  timing.launches_per_repetition = 4;
  timing.settled = true;
  timing.l2_flushed = true;
  timing.tflops = 612.0 / 7.0;
  timing.recheck_passed = true;
  return timing;
}

// Every figure set, with values that only an exact round trip keeps.
CandidateOutcome MakeOutcome(Status status, double median_us = 100.0 / 3.0) {
  CandidateOutcome outcome;
  outcome.status = status;
  outcome.reason = status == Status::kMeasured ? "" : std::string("because ") + "reasons";
  if (status == Status::kInvalid) return outcome;
  KernelResources resources;
  resources.function = "sdpa_fwd";
  resources.arch = "sm_90";
  resources.registers = 168;
  resources.barriers = 1;
  resources.smem_static = 16384;
  resources.cmem0 = 412;
  resources.stack_frame = 8;
  resources.spill_stores = 12;
  resources.spill_loads = 20;
  resources.cumulative_stack = 24;
  outcome.resources = resources;
  outcome.threads_per_block = 256;
  outcome.dynamic_smem = 98304;
  outcome.compile_ms = 812.0 / 3.0;
  outcome.compile_cached = true;
  if (status == Status::kCompileError || status == Status::kResourceReject) return outcome;
  GpuVerdict gpu;
  gpu.status = status == Status::kSlow ? Status::kMeasured : status;
  gpu.correctness.passed = status != Status::kIncorrect;
  gpu.correctness.checks = 6;
  gpu.correctness.worst.max_abs_error =
      status == Status::kIncorrect ? std::numeric_limits<double>::infinity() : 0.1 + 0.2;
  gpu.correctness.worst.mean_abs_error = 1e-5 / 3.0;
  gpu.correctness.worst.fraction_over_tolerance = status == Status::kIncorrect ? 0.25 : 0;
  gpu.correctness.worst.elements = 1 << 20;
  gpu.correctness.worst.over_tolerance = status == Status::kIncorrect ? 262144 : 0;
  gpu.correctness.worst.non_finite = status == Status::kIncorrect ? 7 : 0;
  gpu.correctness.worst.max_abs_reference = 4.0 / 3.0;
  if (status == Status::kIncorrect) gpu.correctness.failure = "problem 2, seed 1, output O";
  if (status == Status::kMeasured || status == Status::kSlow) gpu.timing = MakeTiming(median_us);
  outcome.gpu = gpu;
  outcome.gpu_ms = 1234.5 / 7.0;
  return outcome;
}

std::vector<int64_t> Ids(const std::vector<CandidateRecord>& candidates) {
  std::vector<int64_t> ids;
  for (const CandidateRecord& candidate : candidates) ids.push_back(candidate.id);
  return ids;
}

std::vector<std::string> DirectoryListing(const fs::path& folder) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(folder)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// A refused file in WAL mode may gain the empty -wal and -shm files that every SQLite reader
// creates; nothing may be written to them, nor to a rollback journal.
void CheckNothingLogged(const fs::path& path) {
  const fs::path wal = path.string() + "-wal";
  CHECK((!fs::exists(wal) || fs::file_size(wal) == 0));
  CHECK(!fs::exists(path.string() + "-journal"));
}

int64_t PragmaInt(const fs::path& path, const std::string& pragma) {
  sqlite::Database db(path, sqlite::Database::Mode::kReadOnly);
  auto statement = db.Prepare("PRAGMA " + pragma);
  REQUIRE(statement.Step());
  return statement.ColumnInt(0);
}

// name|type|notnull|default|pk of every column, to compare a migrated file with a fresh one.
std::string TableInfo(const fs::path& path, const std::string& table) {
  sqlite::Database db(path, sqlite::Database::Mode::kReadOnly);
  auto statement = db.Prepare("PRAGMA table_info(" + table + ")");
  std::string info;
  while (statement.Step()) {
    info += statement.ColumnText(1) + "|" + statement.ColumnText(2) + "|" +
            statement.ColumnText(3) + "|" + statement.ColumnText(4) + "|" +
            statement.ColumnText(5) + "\n";
  }
  return info;
}

bool IsTimestamp(const std::string& text) {
  static const std::regex kIso(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)");
  return std::regex_match(text, kIso);
}

void CheckSameOutcome(const CandidateOutcome& stored, const CandidateOutcome& original) {
  CHECK(CandidateOutcomeToJson(stored) == CandidateOutcomeToJson(original));
  CHECK(stored.status == original.status);
  CHECK(stored.compile_ms == original.compile_ms);
  if (original.timing()) {
    REQUIRE(stored.timing());
    CHECK(stored.timing()->p10_us == original.timing()->p10_us);
    CHECK(stored.timing()->tflops == original.timing()->tflops);
  }
}

TEST_CASE("store: a run and its candidates round-trip with every figure", "[store]") {
  test::TempDir dir;
  const fs::path path = dir.path() / "nested" / "folder" / "population.db";
  const RunSpec spec = MakeSpec();
  const CandidateOutcome measured = MakeOutcome(Status::kMeasured);
  const TimingFigures confirmation = MakeTiming(101.0 / 3.0);
  const CandidateOutcome incorrect = MakeOutcome(Status::kIncorrect);
  int64_t run_id = 0;
  std::vector<int64_t> ids;
  {
    PopulationStore store(path, Access::kReadWrite);
    CHECK(store.opened_schema_version() == 0);
    run_id = store.CreateRun(spec);
    ids = store.AddPending(run_id, 0, {{"cfg-a", MakeProposal(64)}, {"cfg-b", MakeProposal(128)}});
    REQUIRE(ids.size() == 2);
    const std::vector<int64_t> children = store.AddPending(
        run_id, 1,
        {{"cfg-c", MakeProposal(32, ids[0])}, {"cfg-d", MakeProposal(16, ids[0], ids[1])}});
    ids.insert(ids.end(), children.begin(), children.end());
    store.Finish(ids[0], measured, confirmation);
    store.Finish(ids[1], incorrect, std::nullopt);
    store.Finish(ids[2], MakeOutcome(Status::kInvalid), std::nullopt);
  }
  PopulationStore store(path, Access::kReadWrite);
  CHECK(store.opened_schema_version() == PopulationStore::kSchemaVersion);
  CHECK(store.path() == path);

  const std::optional<RunRecord> run = store.FindRun(run_id);
  REQUIRE(run);
  CHECK(run->id == run_id);
  CHECK(run->spec.template_name == spec.template_name);
  CHECK(run->spec.template_hash == spec.template_hash);
  CHECK(run->spec.problem == spec.problem);
  CHECK(run->spec.arch == spec.arch);
  CHECK(run->spec.device == spec.device);
  CHECK(run->spec.evaluator == spec.evaluator);
  CHECK(run->spec.driver_version == spec.driver_version);
  CHECK(run->spec.nvrtc_version == spec.nvrtc_version);
  CHECK(run->spec.evo_version == spec.evo_version);
  CHECK(run->spec.seed == spec.seed);
  CHECK(run->spec.budget == spec.budget);
  CHECK(run->spec.elite_size == spec.elite_size);
  CHECK(run->spec.generation_size == spec.generation_size);
  CHECK(run->spec.patience == spec.patience);
  CHECK(run->spec.fixed == spec.fixed);
  CHECK(run->state == RunState::kRunning);
  CHECK(run->stop_reason.empty());
  CHECK(IsTimestamp(run->created_at));
  CHECK(IsTimestamp(run->updated_at));
  CHECK(run->updated_at >= run->created_at);
  // The invalid candidate never reached the gates, so the budget does not count it.
  CHECK(run->finished_candidates == 2);
  CHECK(run->pending_candidates == 1);
  CHECK(!store.FindRun(run_id + 1));
  REQUIRE(store.Runs().size() == 1);

  const std::vector<CandidateRecord> candidates = store.Candidates(run_id);
  REQUIRE(Ids(candidates) == ids);
  const CandidateRecord& first = candidates[0];
  CHECK(first.run_id == run_id);
  CHECK(first.config_id == "cfg-a");
  CHECK(first.generation == 0);
  CHECK(first.proposal.genome == MakeProposal(64).genome);
  CHECK(first.proposal.operator_name == "random");
  CHECK(!first.proposal.parent1);
  CHECK(first.state == CandidateState::kFinished);
  CheckSameOutcome(first.outcome, measured);
  REQUIRE(first.confirmation);
  CHECK(TimingFiguresToJson(*first.confirmation) == TimingFiguresToJson(confirmation));
  CHECK(first.score_us() == confirmation.median_us);
  CHECK(IsTimestamp(first.created_at));
  CHECK(IsTimestamp(first.finished_at));

  CheckSameOutcome(candidates[1].outcome, incorrect);
  CHECK(candidates[1].outcome.gpu->correctness.worst.max_abs_error ==
        std::numeric_limits<double>::infinity());
  CHECK(!candidates[1].confirmation);
  CHECK(candidates[2].outcome.status == Status::kInvalid);

  const CandidateRecord& pending = candidates[3];
  CHECK(pending.state == CandidateState::kPending);
  CHECK(pending.generation == 1);
  CHECK(pending.proposal.parent1 == ids[0]);
  CHECK(pending.proposal.parent2 == ids[1]);
  CHECK(pending.proposal.operator_name == "mutate BLOCK_N 64->16");
  CHECK(pending.finished_at.empty());
  CHECK(candidates[2].proposal.parent1 == ids[0]);
  CHECK(!candidates[2].proposal.parent2);

  const std::optional<CandidateRecord> found = store.FindCandidate(ids[0]);
  REQUIRE(found);
  CHECK(found->config_id == "cfg-a");
  CHECK(!store.FindCandidate(ids.back() + 100));
  CHECK(Ids(store.Elite(run_id)) == std::vector<int64_t>{ids[0]});

  // The figures have columns of their own, so SQL can ask for them.
  sqlite::Database raw(path, sqlite::Database::Mode::kReadOnly);
  auto row = raw.Prepare(
      "SELECT status, reason, registers, spill_stores, spill_loads, smem_static, dynamic_smem, "
      "threads, compile_ms, max_abs_error, median_us, p10_us, p90_us, tflops, confirm_median_us, "
      "confirm_p10_us, confirm_p90_us, state FROM candidates WHERE id = ?");
  row.Bind(1, ids[0]);
  REQUIRE(row.Step());
  CHECK(row.ColumnText(0) == "measured");
  CHECK(row.ColumnText(1).empty());
  CHECK(row.ColumnInt(2) == 168);
  CHECK(row.ColumnInt(3) == 12);
  CHECK(row.ColumnInt(4) == 20);
  CHECK(row.ColumnInt(5) == 16384);
  CHECK(row.ColumnInt(6) == 98304);
  CHECK(row.ColumnInt(7) == 256);
  CHECK(row.ColumnDouble(8) == measured.compile_ms);
  CHECK(row.ColumnDouble(9) == 0.1 + 0.2);
  CHECK(row.ColumnDouble(10) == measured.timing()->median_us);
  CHECK(row.ColumnDouble(11) == measured.timing()->p10_us);
  CHECK(row.ColumnDouble(12) == measured.timing()->p90_us);
  CHECK(row.ColumnDouble(13) == measured.timing()->tflops);
  CHECK(row.ColumnDouble(14) == confirmation.median_us);
  CHECK(row.ColumnDouble(15) == confirmation.p10_us);
  CHECK(row.ColumnDouble(16) == confirmation.p90_us);
  CHECK(row.ColumnText(17) == "finished");
  row.Reset();
  row.Bind(1, ids[3]);
  REQUIRE(row.Step());
  CHECK(row.ColumnIsNull(0));
  CHECK(row.ColumnIsNull(2));
  CHECK(row.ColumnIsNull(10));
  CHECK(row.ColumnText(17) == "pending");
  row.Reset();
  row.Bind(1, ids[1]);
  REQUIRE(row.Step());
  CHECK(row.ColumnText(0) == "incorrect");
  CHECK(row.ColumnIsNull(10));  // never timed
  CHECK(row.ColumnIsNull(14));  // never confirmed

  auto seed = raw.Prepare("SELECT seed FROM runs");
  REQUIRE(seed.Step());
  CHECK(seed.ColumnText(0) == "18446744073709551609");

  CHECK(PragmaInt(path, "application_id") == PopulationStore::kApplicationId);
  CHECK(PragmaInt(path, "user_version") == PopulationStore::kSchemaVersion);
  auto journal = raw.Prepare("PRAGMA journal_mode");
  REQUIRE(journal.Step());
  CHECK(journal.ColumnText(0) == "wal");
}

TEST_CASE("store: run state, budget and patience change; unknown runs are refused", "[store]") {
  test::TempDir dir;
  PopulationStore store(dir.path() / "p.db", Access::kReadWrite);
  const int64_t run_id = store.CreateRun(MakeSpec());
  const std::string created = store.FindRun(run_id)->updated_at;
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  store.SetRunState(run_id, RunState::kPaused, "time limit");
  store.SetRunBudget(run_id, 500);
  store.SetRunPatience(run_id, 9);
  const RunRecord run = *store.FindRun(run_id);
  CHECK(run.state == RunState::kPaused);
  CHECK(run.stop_reason == "time limit");
  CHECK(run.spec.budget == 500);
  CHECK(run.spec.patience == 9);
  CHECK(run.updated_at > created);
  CHECK(run.created_at == created);
  store.SetRunState(run_id, RunState::kFinished, "budget spent");
  CHECK(store.FindRun(run_id)->state == RunState::kFinished);

  CHECK_THROWS_AS(store.SetRunState(run_id + 1, RunState::kPaused, ""), Error);
  CHECK_THROWS_AS(store.SetRunBudget(run_id + 1, 1), Error);
  CHECK_THROWS_AS(store.SetRunPatience(run_id + 1, 1), Error);
  CHECK_THROWS_WITH(store.AddPending(run_id + 1, 0, {{"x", MakeProposal(64)}}),
                    Catch::Contains("has no run"));

  for (RunState state : {RunState::kRunning, RunState::kPaused, RunState::kFinished}) {
    CHECK(RunStateFromString(ToString(state)) == state);
  }
  CHECK(!RunStateFromString("sleeping"));
}

TEST_CASE("store: a candidate goes from pending to finished once", "[store]") {
  test::TempDir dir;
  PopulationStore store(dir.path() / "p.db", Access::kReadWrite);
  const int64_t run_id = store.CreateRun(MakeSpec());
  const int64_t id = store.AddPending(run_id, 0, {{"cfg-a", MakeProposal(64)}})[0];
  CHECK(store.FindCandidate(id)->state == CandidateState::kPending);
  CHECK(store.FindRun(run_id)->pending_candidates == 1);
  const std::string before = store.FindRun(run_id)->updated_at;
  std::this_thread::sleep_for(std::chrono::milliseconds(5));

  store.Finish(id, MakeOutcome(Status::kSlow), std::nullopt);
  const CandidateRecord finished = *store.FindCandidate(id);
  CHECK(finished.state == CandidateState::kFinished);
  CHECK(finished.outcome.status == Status::kSlow);
  CHECK(!finished.score_us());
  const RunRecord run = *store.FindRun(run_id);
  CHECK(run.pending_candidates == 0);
  CHECK(run.finished_candidates == 1);
  CHECK(run.updated_at > before);

  CHECK_THROWS_WITH(store.Finish(id, MakeOutcome(Status::kMeasured), MakeTiming(1)),
                    Catch::Contains("is already finished"));
  CHECK(store.FindCandidate(id)->outcome.status == Status::kSlow);
  CHECK(store.Elite(run_id).empty());
  CHECK_THROWS_WITH(store.Finish(id + 1, MakeOutcome(Status::kMeasured), MakeTiming(1)),
                    Catch::Contains("has no candidate " + std::to_string(id + 1)));
}

TEST_CASE("store: dropping a run's pending candidates keeps every finished one and other runs",
          "[store]") {
  test::TempDir dir;
  PopulationStore store(dir.path() / "p.db", Access::kReadWrite);
  const int64_t run_id = store.CreateRun(MakeSpec());
  const int64_t other_run = store.CreateRun(MakeSpec());
  const std::vector<int64_t> ids = store.AddPending(
      run_id, 0,
      {{"cfg-a", MakeProposal(64)}, {"cfg-b", MakeProposal(128)}, {"cfg-c", MakeProposal(32)}});
  store.AddPending(other_run, 0, {{"cfg-a", MakeProposal(64)}});
  store.Finish(ids[0], MakeOutcome(Status::kMeasured, 5), MakeTiming(5));
  const std::vector<CandidateRecord> elite = store.Elite(run_id);
  const std::string before = store.FindRun(run_id)->updated_at;
  std::this_thread::sleep_for(std::chrono::milliseconds(5));

  CHECK(store.DropPending(run_id) == 2);
  CHECK(Ids(store.Candidates(run_id)) == std::vector<int64_t>{ids[0]});
  CHECK(store.FindCandidate(ids[0])->state == CandidateState::kFinished);
  CHECK(!store.FindCandidate(ids[1]));
  CHECK(Ids(store.Elite(run_id)) == Ids(elite));
  const RunRecord run = *store.FindRun(run_id);
  CHECK(run.pending_candidates == 0);
  CHECK(run.finished_candidates == 1);
  CHECK(run.updated_at > before);
  CHECK(store.FindRun(other_run)->pending_candidates == 1);

  // A dropped configuration may be proposed again; nothing is left to drop.
  CHECK(store.AddPending(run_id, 1, {{"cfg-b", MakeProposal(128)}}).size() == 1);
  CHECK(store.DropPending(run_id) == 1);
  CHECK(store.DropPending(run_id) == 0);
  CHECK_THROWS_WITH(store.DropPending(other_run + 1), Catch::Contains("no run"));
}

TEST_CASE("store: a configuration appears once per run", "[store]") {
  test::TempDir dir;
  PopulationStore store(dir.path() / "p.db", Access::kReadWrite);
  const int64_t run_id = store.CreateRun(MakeSpec());
  const int64_t other_run = store.CreateRun(MakeSpec());
  const int64_t id = store.AddPending(run_id, 0, {{"cfg-a", MakeProposal(64)}})[0];

  CHECK_THROWS_WITH(
      store.AddPending(run_id, 1, {{"cfg-b", MakeProposal(128)}, {"cfg-a", MakeProposal(64)}}),
      Catch::Contains("configuration cfg-a is already candidate " + std::to_string(id)));
  // One transaction: the proposal before the duplicate is not kept either.
  CHECK(store.Candidates(run_id).size() == 1);
  CHECK_THROWS_WITH(
      store.AddPending(run_id, 1, {{"cfg-c", MakeProposal(32)}, {"cfg-c", MakeProposal(32)}}),
      Catch::Contains("configuration cfg-c is proposed twice in generation 1 of run 1"));
  CHECK(store.Candidates(run_id).size() == 1);

  // Another run may measure the same configuration.
  CHECK(store.AddPending(other_run, 0, {{"cfg-a", MakeProposal(64)}}).size() == 1);
  CHECK(store.Candidates(other_run).size() == 1);
}

TEST_CASE("SelectElite: confirmed measured candidates, lowest score first, ties by id", "[store]") {
  auto candidate = [](int64_t id, Status status, std::optional<double> confirmed) {
    CandidateRecord record;
    record.id = id;
    record.state = CandidateState::kFinished;
    record.outcome = MakeOutcome(status, 1.0);  // unconfirmed timing never counts
    if (confirmed) record.confirmation = MakeTiming(*confirmed);
    return record;
  };
  CandidateRecord pending = candidate(1, Status::kMeasured, 0.5);
  pending.state = CandidateState::kPending;
  const std::vector<CandidateRecord> all = {
      pending,
      candidate(2, Status::kMeasured, 10),
      candidate(3, Status::kMeasured, std::nullopt),
      candidate(4, Status::kSlow, 0.5),
      candidate(5, Status::kMeasured, 8),
      candidate(6, Status::kMeasured, 10),
      candidate(7, Status::kIncorrect, std::nullopt),
  };
  CHECK(Ids(SelectElite(all, 3)) == std::vector<int64_t>{5, 2, 6});
  CHECK(Ids(SelectElite(all, 2)) == std::vector<int64_t>{5, 2});
  CHECK(Ids(SelectElite(all, 10)) == std::vector<int64_t>{5, 2, 6});
  CHECK(SelectElite(all, 0).empty());
  const std::vector<CandidateRecord> reversed(all.rbegin(), all.rend());
  CHECK(Ids(SelectElite(reversed, 3)) == std::vector<int64_t>{5, 2, 6});
}

TEST_CASE("the score is the slower of the first and the confirming median", "[store]") {
  auto candidate = [](int64_t id, double first, double confirmed) {
    CandidateRecord record;
    record.id = id;
    record.state = CandidateState::kFinished;
    record.outcome = MakeOutcome(Status::kMeasured, first);
    record.confirmation = MakeTiming(confirmed);
    return record;
  };
  // The H100 case: a lucky confirmation (1559 after 1694) must not beat a kernel measured twice
  // near 1580.
  const CandidateRecord lucky_second = candidate(1, 1694.37, 1558.86);
  const CandidateRecord steady = candidate(2, 1592.53, 1576.34);
  const CandidateRecord lucky_first = candidate(3, 1500.0, 1601.0);
  CHECK(lucky_second.score_us() == 1694.37);
  CHECK(lucky_second.scoring_timing() == lucky_second.outcome.timing());
  CHECK(steady.score_us() == 1592.53);
  CHECK(lucky_first.score_us() == 1601.0);
  CHECK(lucky_first.scoring_timing() == &*lucky_first.confirmation);
  CHECK(Ids(SelectElite({lucky_second, steady, lucky_first}, 3)) == std::vector<int64_t>{2, 3, 1});
}

TEST_CASE("store: the elite equals SelectElite of the stored candidates", "[store]") {
  test::TempDir dir;
  const fs::path path = dir.path() / "p.db";
  PopulationStore store(path, Access::kReadWrite);
  const int64_t run_id = store.CreateRun(MakeSpec());  // elite of 3
  const int64_t other_run = store.CreateRun(MakeSpec());

  struct Plan {
    Status status;
    std::optional<double> confirmed_us;
  };
  // Index i becomes the i-th candidate: ties, unconfirmed and rejected ones among them.
  const std::vector<Plan> plans = {
      {Status::kMeasured, 10.0},
      {Status::kMeasured, std::nullopt},
      {Status::kSlow, 0.5},
      {Status::kMeasured, 8.0},
      {Status::kMeasured, 10.0},
      {Status::kIncorrect, std::nullopt},
      {Status::kMeasured, 9.0},
      {Status::kMeasured, 12.0},
      {Status::kInvalid, std::nullopt},
      {Status::kMeasured, 7.5},
      {Status::kTimeout, std::nullopt},
      {Status::kCompileError, std::nullopt},
  };
  std::vector<std::pair<std::string, Proposal>> proposals;
  for (size_t i = 0; i < plans.size(); ++i) {
    proposals.emplace_back("cfg-" + std::to_string(i), MakeProposal(static_cast<int64_t>(i)));
  }
  const std::vector<int64_t> ids = store.AddPending(run_id, 0, proposals);
  const int64_t stranger = store.AddPending(other_run, 0, {{"cfg-0", MakeProposal(0)}})[0];
  store.Finish(stranger, MakeOutcome(Status::kMeasured), MakeTiming(0.1));

  const std::vector<size_t> order = {4, 0, 7, 1, 9, 2, 6, 3, 8, 5, 11, 10};
  for (size_t step = 0; step < order.size(); ++step) {
    const size_t i = order[step];
    const Plan& plan = plans[i];
    const std::optional<TimingFigures> confirmation =
        plan.confirmed_us ? std::optional<TimingFigures>(MakeTiming(*plan.confirmed_us))
                          : std::nullopt;
    store.Finish(ids[i], MakeOutcome(plan.status, 1.0), confirmation);
    INFO("after finishing candidate " << i);
    CHECK(Ids(store.Elite(run_id)) == Ids(SelectElite(store.Candidates(run_id), 3)));
    if (step == 1) {
      // Equal scores: the lower id ranks first, whichever finished first.
      CHECK(Ids(store.Elite(run_id)) == std::vector<int64_t>{ids[0], ids[4]});
    }
  }
  CHECK(Ids(store.Elite(run_id)) == std::vector<int64_t>{ids[9], ids[3], ids[6]});
  CHECK(Ids(store.Elite(other_run)) == std::vector<int64_t>{stranger});

  sqlite::Database raw(path, sqlite::Database::Mode::kReadOnly);
  auto ranks = raw.Prepare("SELECT rank, candidate_id FROM elite WHERE run_id = ? ORDER BY rank");
  ranks.Bind(1, run_id);
  for (int64_t rank = 1; rank <= 3; ++rank) {
    REQUIRE(ranks.Step());
    CHECK(ranks.ColumnInt(0) == rank);
  }
  CHECK(!ranks.Step());

  PopulationStore reopened(path, Access::kReadOnly);
  CHECK(Ids(reopened.Elite(run_id)) == Ids(SelectElite(reopened.Candidates(run_id), 3)));
}

// A file as evo's schema 1 left it: one run, a measured candidate with its figures, one pending,
// one invalid, and the elite of that time (by measured median, before confirmations existed).
void WriteVersion1File(const fs::path& path, const CandidateOutcome& measured) {
  sqlite::Database db(path, sqlite::Database::Mode::kReadWriteCreate);
  db.Execute(SchemaVersion1Sql());
  db.Execute(
      "INSERT INTO runs (template_name, template_hash, problem, arch, device, evaluator, "
      "driver_version, nvrtc_version, evo_version, seed, budget, elite_size, state, stop_reason, "
      "created_at, updated_at) VALUES ('sdpa_fp16', 'abc', '{\"B\":1,\"D\":64}', 'sm_90', 'H100', "
      "'gpu', '13.0', '13.0.48', '0.0.9', '18446744073709551615', 50, 2, 'paused', 'interrupted', "
      "'2025-01-02T03:04:05.678Z', '2025-01-02T04:00:00.000Z')");
  db.Prepare(
        "INSERT INTO candidates (run_id, config_id, genome, generation, operator, state, status, "
        "reason, registers, median_us, outcome_json, created_at, finished_at) VALUES (1, 'cfg-m', "
        "'{\"BLOCK_N\":64}', 0, 'default', 'finished', 'measured', '', 168, ?, ?, "
        "'2025-01-02T03:05:00.000Z', '2025-01-02T03:06:00.000Z')")
      .Bind(1, measured.timing()->median_us)
      .Bind(2, CandidateOutcomeToJson(measured).dump())
      .Step();
  db.Execute(
      "INSERT INTO candidates (run_id, config_id, genome, generation, operator, parent1, state, "
      "created_at) VALUES (1, 'cfg-p', '{\"BLOCK_N\":128}', 1, 'mutate BLOCK_N 64->128', 1, "
      "'pending', '2025-01-02T03:07:00.000Z')");
  db.Prepare(
        "INSERT INTO candidates (run_id, config_id, genome, generation, operator, state, status, "
        "reason, outcome_json, created_at, finished_at) VALUES (1, 'cfg-i', '{\"BLOCK_N\":7}', 1, "
        "'random', 'finished', 'invalid', 'because', ?, '2025-01-02T03:08:00.000Z', "
        "'2025-01-02T03:08:00.001Z')")
      .Bind(1, CandidateOutcomeToJson(MakeOutcome(Status::kInvalid)).dump())
      .Step();
  db.Execute("INSERT INTO elite (run_id, rank, candidate_id) VALUES (1, 1, 1)");
}

TEST_CASE("store: a schema 1 file is read as it is and migrated when written", "[store]") {
  test::TempDir dir;
  const fs::path path = dir.path() / "old.db";
  const CandidateOutcome measured = MakeOutcome(Status::kMeasured);
  WriteVersion1File(path, measured);
  REQUIRE(PragmaInt(path, "user_version") == 1);
  const std::string v1_bytes = ReadFile(path);

  auto check_kept = [&](PopulationStore& store) {
    const std::vector<RunRecord> runs = store.Runs();
    REQUIRE(runs.size() == 1);
    const RunRecord& run = runs[0];
    CHECK(run.spec.template_name == "sdpa_fp16");
    CHECK(run.spec.problem == Problem{{"B", 1}, {"D", 64}});
    CHECK(run.spec.seed == std::numeric_limits<uint64_t>::max());
    CHECK(run.spec.budget == 50);
    CHECK(run.spec.elite_size == 2);
    CHECK(run.spec.generation_size == 16);
    CHECK(run.spec.patience == 0);
    CHECK(run.state == RunState::kPaused);
    CHECK(run.stop_reason == "interrupted");
    CHECK(run.created_at == "2025-01-02T03:04:05.678Z");
    CHECK(run.finished_candidates == 1);
    CHECK(run.pending_candidates == 1);
    const std::vector<CandidateRecord> candidates = store.Candidates(run.id);
    REQUIRE(candidates.size() == 3);
    CHECK(candidates[0].config_id == "cfg-m");
    CheckSameOutcome(candidates[0].outcome, measured);
    CHECK(!candidates[0].confirmation);
    CHECK(candidates[1].state == CandidateState::kPending);
    CHECK(candidates[1].proposal.parent1 == candidates[0].id);
    CHECK(candidates[1].proposal.genome == Genome{{"BLOCK_N", 128}});
    CHECK(candidates[2].outcome.status == Status::kInvalid);
    CHECK(candidates[2].finished_at == "2025-01-02T03:08:00.001Z");
  };

  {
    // Reading does not migrate: `evo show` leaves an old file as it found it.
    PopulationStore reader(path, Access::kReadOnly);
    CHECK(reader.opened_schema_version() == 1);
    check_kept(reader);
    CHECK(Ids(reader.Elite(1)) == std::vector<int64_t>{1});  // as schema 1 stored it
  }
  CHECK(ReadFile(path) == v1_bytes);
  CHECK(PragmaInt(path, "user_version") == 1);

  {
    PopulationStore store(path, Access::kReadWrite);
    CHECK(store.opened_schema_version() == 1);
    check_kept(store);
    // Schema 1 confirmed nothing, so under today's rule its run has no elite until it resumes.
    CHECK(store.Elite(1).empty());
  }
  CHECK(PragmaInt(path, "user_version") == PopulationStore::kSchemaVersion);
  CHECK(PragmaInt(path, "application_id") == PopulationStore::kApplicationId);

  const fs::path fresh = dir.path() / "fresh.db";
  { PopulationStore created(fresh, Access::kReadWrite); }
  for (const char* table : {"runs", "candidates", "elite"}) {
    INFO("table " << table);
    CHECK(TableInfo(path, table) == TableInfo(fresh, table));
  }

  PopulationStore store(path, Access::kReadWrite);
  CHECK(store.opened_schema_version() == PopulationStore::kSchemaVersion);
  check_kept(store);
  // The migrated run resumes: its pending candidate finishes, confirmed, into the elite.
  store.Finish(2, MakeOutcome(Status::kMeasured), MakeTiming(5.0));
  CHECK(Ids(store.Elite(1)) == std::vector<int64_t>{2});
  CHECK(store.FindCandidate(2)->confirmation->median_us == 5.0);
}

// Every row of `table`, each value quoted by SQLite (reals exactly), over the columns the table
// has in `columns_of` (a file of an older schema, whose columns a migration keeps first).
std::string TableRows(const fs::path& path, const std::string& table, const fs::path& columns_of) {
  std::vector<std::string> columns;
  {
    sqlite::Database db(columns_of, sqlite::Database::Mode::kReadOnly);
    auto info = db.Prepare("PRAGMA table_info(" + table + ")");
    while (info.Step()) columns.push_back(info.ColumnText(1));
  }
  std::string select;
  for (const std::string& column : columns) {
    select += (select.empty() ? "" : " || '|' || ") + std::string("quote(") + column + ")";
  }
  sqlite::Database db(path, sqlite::Database::Mode::kReadOnly);
  auto rows = db.Prepare("SELECT " + select + " FROM " + table + " ORDER BY rowid");
  std::string text;
  while (rows.Step()) text += rows.ColumnText(0) + "\n";
  return text;
}

TEST_CASE("store: the GPU that measured a candidate is stored with it", "[store][gpus]") {
  test::TempDir dir;
  const fs::path path = dir.path() / "evo.db";
  PopulationStore store(path, Access::kReadWrite);
  const int64_t run_id = store.CreateRun(MakeSpec());
  const std::vector<int64_t> ids = store.AddPending(
      run_id, 0,
      {{"cfg-a", MakeProposal(64)}, {"cfg-b", MakeProposal(128)}, {"cfg-c", MakeProposal(32)}});
  const GpuIdentity second{1, "NVIDIA H100 80GB HBM3", "GPU-8c2a1f3e-0000-1111-2222-333344445555"};
  store.Finish(ids[0], MakeOutcome(Status::kMeasured), MakeTiming(30.0), second);
  store.Finish(ids[1], MakeOutcome(Status::kCompileError), std::nullopt, std::nullopt);
  store.Finish(ids[2], MakeOutcome(Status::kTimeout), std::nullopt,
               GpuIdentity{0, "NVIDIA H100 80GB HBM3", ""});

  const CandidateRecord measured = *store.FindCandidate(ids[0]);
  REQUIRE(measured.measured_on.has_value());
  CHECK(*measured.measured_on == second);
  CHECK(!store.FindCandidate(ids[1])->measured_on);
  CHECK(store.FindCandidate(ids[2])->measured_on->ordinal == 0);
  CHECK(store.FindCandidate(ids[2])->measured_on->uuid.empty());
  CHECK(store.Elite(run_id).front().measured_on == second);

  // Columns of their own, for queries.
  sqlite::Database raw(path, sqlite::Database::Mode::kReadOnly);
  auto row = raw.Prepare("SELECT gpu, gpu_name, gpu_uuid FROM candidates ORDER BY id");
  REQUIRE(row.Step());
  CHECK(row.ColumnInt(0) == 1);
  CHECK(row.ColumnText(1) == "NVIDIA H100 80GB HBM3");
  CHECK(row.ColumnText(2) == second.uuid);
  REQUIRE(row.Step());
  CHECK(row.ColumnIsNull(0));
  CHECK(row.ColumnIsNull(1));
}

// A file as evo's schema 2 left it: a run with a measured and confirmed candidate in its elite,
// a slow one and a pending one.
void WriteVersion2File(const fs::path& path) {
  sqlite::Database db(path, sqlite::Database::Mode::kReadWriteCreate);
  db.Execute(SchemaVersion2Sql());
  db.Execute(
      "INSERT INTO runs (template_name, template_hash, problem, arch, device, evaluator, "
      "driver_version, nvrtc_version, evo_version, seed, budget, elite_size, state, stop_reason, "
      "created_at, updated_at, generation_size, patience) VALUES ('sdpa_fp16', 'abc', "
      "'{\"B\":1,\"D\":64}', 'sm_90', 'NVIDIA H100 80GB HBM3', 'gpu', '13.0', '13.0.48', '0.1.0', "
      "'7', 30, 3, 'running', '', '2026-01-02T03:04:05.678Z', '2026-01-02T04:00:00.000Z', 8, 2)");
  const CandidateOutcome measured = MakeOutcome(Status::kMeasured, 41.0 / 3.0);
  db.Prepare(
        "INSERT INTO candidates (run_id, config_id, genome, generation, operator, state, status, "
        "reason, registers, median_us, outcome_json, created_at, finished_at, confirm_median_us, "
        "confirmation_json) VALUES (1, 'cfg-m', '{\"BLOCK_N\":64}', 0, 'default', 'finished', "
        "'measured', '', 168, ?, ?, '2026-01-02T03:05:00.000Z', '2026-01-02T03:06:00.000Z', ?, ?)")
      .Bind(1, measured.timing()->median_us)
      .Bind(2, CandidateOutcomeToJson(measured).dump())
      .Bind(3, 43.0 / 3.0)
      .Bind(4, TimingFiguresToJson(MakeTiming(43.0 / 3.0)).dump())
      .Step();
  db.Prepare(
        "INSERT INTO candidates (run_id, config_id, genome, generation, operator, state, status, "
        "reason, outcome_json, created_at, finished_at) VALUES (1, 'cfg-s', '{\"BLOCK_N\":16}', 0, "
        "'random', 'finished', 'slow', 'over 3x', ?, '2026-01-02T03:07:00.000Z', "
        "'2026-01-02T03:07:30.000Z')")
      .Bind(1, CandidateOutcomeToJson(MakeOutcome(Status::kSlow, 200.0)).dump())
      .Step();
  db.Execute(
      "INSERT INTO candidates (run_id, config_id, genome, generation, operator, state, "
      "created_at) VALUES (1, 'cfg-p', '{\"BLOCK_N\":128}', 1, 'random', 'pending', "
      "'2026-01-02T03:08:00.000Z')");
  db.Execute("INSERT INTO elite (run_id, rank, candidate_id) VALUES (1, 1, 1)");
}

TEST_CASE("store: a schema 2 file is read as it is and migrated with every value kept",
          "[store][gpus]") {
  test::TempDir dir;
  const fs::path path = dir.path() / "v2.db";
  WriteVersion2File(path);
  const fs::path original = dir.path() / "v2-original.db";
  fs::copy_file(path, original);
  const std::string v2_bytes = ReadFile(path);

  {
    PopulationStore reader(path, Access::kReadOnly);
    CHECK(reader.opened_schema_version() == 2);
    const std::vector<CandidateRecord> candidates = reader.Candidates(1);
    REQUIRE(candidates.size() == 3);
    for (const CandidateRecord& c : candidates) CHECK(!c.measured_on);
    CHECK(candidates[0].confirmation->median_us == 43.0 / 3.0);
    CHECK(Ids(reader.Elite(1)) == std::vector<int64_t>{1});
  }
  CHECK(ReadFile(path) == v2_bytes);

  {
    PopulationStore store(path, Access::kReadWrite);
    CHECK(store.opened_schema_version() == 2);
    // Nothing was recomputed: schema 2's elite already follows today's rule.
    CHECK(Ids(store.Elite(1)) == std::vector<int64_t>{1});
  }
  CHECK(PragmaInt(path, "user_version") == PopulationStore::kSchemaVersion);
  for (const char* table : {"runs", "candidates", "elite"}) {
    INFO("table " << table);
    CHECK(TableRows(path, table, original) == TableRows(original, table, original));
    CHECK(!TableRows(path, table, original).empty());
  }
  const fs::path fresh = dir.path() / "fresh.db";
  { PopulationStore created(fresh, Access::kReadWrite); }
  for (const char* table : {"runs", "candidates", "elite"}) {
    INFO("table " << table);
    CHECK(TableInfo(path, table) == TableInfo(fresh, table));
  }

  // The migrated run resumes, its next candidate measured on a GPU that is stored.
  PopulationStore store(path, Access::kReadWrite);
  store.Finish(3, MakeOutcome(Status::kMeasured, 5.0), MakeTiming(5.0),
               GpuIdentity{1, "NVIDIA H100 80GB HBM3", "GPU-1"});
  CHECK(store.FindCandidate(3)->measured_on->ordinal == 1);
  CHECK(!store.FindCandidate(1)->measured_on);
  CHECK(Ids(store.Elite(1)) == std::vector<int64_t>{3, 1});
}

// A file as evo's schema 3 left it: a run whose elite holds two confirmed candidates measured
// on GPU 1, and a pending candidate.
void WriteVersion3File(const fs::path& path) {
  sqlite::Database db(path, sqlite::Database::Mode::kReadWriteCreate);
  db.Execute(SchemaVersion3Sql());
  db.Execute(
      "INSERT INTO runs (template_name, template_hash, problem, arch, device, evaluator, "
      "driver_version, nvrtc_version, evo_version, seed, budget, elite_size, state, stop_reason, "
      "created_at, updated_at, generation_size, patience) VALUES ('sdpa_fp16', 'abc', "
      "'{\"B\":1,\"D\":64}', 'sm_90', 'NVIDIA H100 80GB HBM3', 'gpu', '13.0', '13.0.48', '0.1.0', "
      "'7', 30, 3, 'finished', 'budget reached', '2026-03-02T03:04:05.678Z', "
      "'2026-03-02T04:00:00.000Z', 8, 2)");
  for (int i = 1; i <= 2; ++i) {
    const double median = 10.0 * i + 1.0 / 3.0;
    const CandidateOutcome measured = MakeOutcome(Status::kMeasured, median);
    db.Prepare(
          "INSERT INTO candidates (run_id, config_id, genome, generation, operator, state, "
          "status, reason, registers, median_us, outcome_json, created_at, finished_at, "
          "confirm_median_us, confirmation_json, gpu, gpu_name, gpu_uuid) VALUES (1, ?, ?, 0, "
          "'default', 'finished', 'measured', '', 168, ?, ?, '2026-03-02T03:05:00.000Z', "
          "'2026-03-02T03:06:00.000Z', ?, ?, 1, 'NVIDIA H100 80GB HBM3', 'GPU-1')")
        .Bind(1, "cfg-" + std::to_string(i))
        .Bind(2, "{\"BLOCK_N\":" + std::to_string(32 * i) + "}")
        .Bind(3, median)
        .Bind(4, CandidateOutcomeToJson(measured).dump())
        .Bind(5, median + 0.5)
        .Bind(6, TimingFiguresToJson(MakeTiming(median + 0.5)).dump())
        .Step();
  }
  db.Execute(
      "INSERT INTO candidates (run_id, config_id, genome, generation, operator, state, "
      "created_at) VALUES (1, 'cfg-p', '{\"BLOCK_N\":128}', 1, 'random', 'pending', "
      "'2026-03-02T03:08:00.000Z')");
  db.Execute("INSERT INTO elite (run_id, rank, candidate_id) VALUES (1, 1, 1), (1, 2, 2)");
}

// A re-timing of `run_id` in which candidate i of `ids` measured medians[i] every time.
Retiming MakeRetiming(int64_t run_id, const std::vector<int64_t>& ids,
                      const std::vector<double>& medians, int rounds = 4) {
  Retiming retiming;
  retiming.run_id = run_id;
  retiming.rounds = rounds;
  retiming.gpu = GpuIdentity{1, "NVIDIA H100 80GB HBM3", "GPU-1"};
  retiming.started_at = "2026-03-02T05:00:00.000Z";
  retiming.finished_at = "2026-03-02T05:01:00.000Z";
  for (int round = 0; round < rounds; ++round) {
    for (const int64_t id : RoundOrder(ids, round)) {
      const size_t index = static_cast<size_t>(std::find(ids.begin(), ids.end(), id) - ids.begin());
      TimingFigures timing = MakeTiming(medians[index] + (round % 2 == 0 ? 0.25 : -0.25));
      timing.sm_clock_mhz = 1755.0 + round;
      retiming.timings.push_back({id, round, timing});
    }
  }
  return retiming;
}

TEST_CASE("store: a schema 3 file is read as it is and migrated with every value kept",
          "[store][retime]") {
  test::TempDir dir;
  const fs::path path = dir.path() / "v3.db";
  WriteVersion3File(path);
  const fs::path original = dir.path() / "v3-original.db";
  fs::copy_file(path, original);
  const std::string v3_bytes = ReadFile(path);

  {
    // An older evo's file is read without migrating: no re-timings, the elite by score.
    PopulationStore reader(path, Access::kReadOnly);
    CHECK(reader.opened_schema_version() == 3);
    CHECK(Ids(reader.Elite(1)) == std::vector<int64_t>{1, 2});
    CHECK(reader.Retimings(1).empty());
    CHECK(!reader.LatestRetiming(1));
    CHECK(!reader.Elite(1).front().side_by_side);
    CHECK(reader.Candidates(1).at(0).measured_on->uuid == "GPU-1");
  }
  CHECK(ReadFile(path) == v3_bytes);

  {
    PopulationStore store(path, Access::kReadWrite);
    CHECK(store.opened_schema_version() == 3);
    CHECK(Ids(store.Elite(1)) == std::vector<int64_t>{1, 2});
    CHECK(store.Retimings(1).empty());
  }
  CHECK(PragmaInt(path, "user_version") == PopulationStore::kSchemaVersion);
  for (const char* table : {"runs", "candidates", "elite"}) {
    INFO("table " << table);
    CHECK(TableRows(path, table, original) == TableRows(original, table, original));
    CHECK(!TableRows(path, table, original).empty());
  }
  const fs::path fresh = dir.path() / "fresh.db";
  { PopulationStore created(fresh, Access::kReadWrite); }
  for (const char* table : {"runs", "candidates", "elite", "retimings", "retiming_timings"}) {
    INFO("table " << table);
    CHECK(TableInfo(path, table) == TableInfo(fresh, table));
    CHECK(!TableInfo(path, table).empty());
  }

  // The migrated run's elite is re-timed: its second is faster side by side, and leads.
  PopulationStore store(path, Access::kReadWrite);
  const int64_t id = store.AddRetiming(MakeRetiming(1, {1, 2}, {30.0, 20.0}));
  CHECK(Ids(store.Elite(1)) == std::vector<int64_t>{2, 1});
  CHECK(Ids(store.EliteByScore(1)) == std::vector<int64_t>{1, 2});
  CHECK(store.Elite(1).front().side_by_side->retiming_id == id);
  PopulationStore reader(path, Access::kReadOnly);
  CHECK(Ids(reader.Elite(1)) == std::vector<int64_t>{2, 1});
}

TEST_CASE("store: a schema 4 file is read as it is and migrated; its runs fixed no knob",
          "[store]") {
  test::TempDir dir;
  const fs::path path = dir.path() / "v4.db";
  WriteVersion3File(path);
  {
    sqlite::Database db(path, sqlite::Database::Mode::kReadWrite);
    db.Execute(MigrateVersion3To4Sql());
  }
  REQUIRE(PragmaInt(path, "user_version") == 4);
  const fs::path original = dir.path() / "v4-original.db";
  fs::copy_file(path, original);
  const std::string v4_bytes = ReadFile(path);

  {
    PopulationStore reader(path, Access::kReadOnly);
    CHECK(reader.opened_schema_version() == 4);
    CHECK(reader.FindRun(1)->spec.fixed.empty());
    CHECK(reader.FindRun(1)->spec.generation_size == 8);
  }
  CHECK(ReadFile(path) == v4_bytes);

  {
    PopulationStore store(path, Access::kReadWrite);
    CHECK(store.opened_schema_version() == 4);
    CHECK(store.FindRun(1)->spec.fixed.empty());
    CHECK(Ids(store.Elite(1)) == std::vector<int64_t>{1, 2});
  }
  CHECK(PragmaInt(path, "user_version") == PopulationStore::kSchemaVersion);
  for (const char* table : {"runs", "candidates", "elite", "retimings"}) {
    INFO("table " << table);
    CHECK(TableRows(path, table, original) == TableRows(original, table, original));
  }
  const fs::path fresh = dir.path() / "fresh.db";
  { PopulationStore created(fresh, Access::kReadWrite); }
  for (const char* table : {"runs", "candidates", "elite", "retimings", "retiming_timings"}) {
    INFO("table " << table);
    CHECK(TableInfo(path, table) == TableInfo(fresh, table));
  }

  // A run stored after the migration keeps its fixed knobs beside the old run's none.
  PopulationStore store(path, Access::kReadWrite);
  const int64_t run_id = store.CreateRun(MakeSpec());
  CHECK(store.FindRun(run_id)->spec.fixed == MakeSpec().fixed);
  CHECK(store.FindRun(1)->spec.fixed.empty());
  sqlite::Database raw(path, sqlite::Database::Mode::kReadOnly);
  auto row = raw.Prepare("SELECT fixed_knobs FROM runs ORDER BY id");
  REQUIRE(row.Step());
  CHECK(row.ColumnText(0) == "{}");
  REQUIRE(row.Step());
  CHECK(row.ColumnText(0) == "{\"PERSISTENT\":0,\"STAGES\":3}");
}

TEST_CASE("store: a run whose fixed knobs are not a JSON object of integers is named", "[store]") {
  test::TempDir dir;
  const fs::path path = dir.path() / "evo.db";
  { PopulationStore(path, Access::kReadWrite).CreateRun(MakeSpec()); }
  {
    sqlite::Database db(path, sqlite::Database::Mode::kReadWrite);
    db.Execute("UPDATE runs SET fixed_knobs = '[1, 2]'");
  }
  PopulationStore store(path, Access::kReadOnly);
  CHECK_THROWS_WITH(store.FindRun(1), Catch::Contains("run 1 has malformed fixed knobs"));
}

TEST_CASE(
    "store: a re-timing keeps every timing and orders the elite while it holds the same members",
    "[store][retime]") {
  test::TempDir dir;
  PopulationStore store(dir.path() / "evo.db", Access::kReadWrite);
  const int64_t run_id = store.CreateRun(MakeSpec());
  const std::vector<int64_t> ids = store.AddPending(run_id, 0,
                                                    {{"cfg-a", MakeProposal(16)},
                                                     {"cfg-b", MakeProposal(32)},
                                                     {"cfg-c", MakeProposal(64)},
                                                     {"cfg-d", MakeProposal(128)}});
  for (int i = 0; i < 3; ++i) {
    store.Finish(ids[i], MakeOutcome(Status::kMeasured, 30.0 + i), MakeTiming(30.0 + i));
  }
  REQUIRE(Ids(store.Elite(run_id)) == std::vector<int64_t>{ids[0], ids[1], ids[2]});

  // Side by side, the last is the fastest and the first two tie: the tie keeps the score order.
  const Retiming made = MakeRetiming(run_id, {ids[0], ids[1], ids[2]}, {25.0, 25.0, 24.0});
  const int64_t retiming_id = store.AddRetiming(made);
  const std::vector<CandidateRecord> elite = store.Elite(run_id);
  CHECK(Ids(elite) == std::vector<int64_t>{ids[2], ids[0], ids[1]});
  for (const CandidateRecord& c : elite) {
    REQUIRE(c.side_by_side);
    CHECK(c.side_by_side->retiming_id == retiming_id);
    CHECK(c.side_by_side->timings == 4);
    CHECK(c.side_by_side->gpu->ordinal == 1);
  }
  CHECK(elite[0].side_by_side->median_us == 24.0);
  CHECK(elite[1].side_by_side->median_us == 25.0);
  // The search decides on the score's order, untouched.
  for (const CandidateRecord& c : store.EliteByScore(run_id)) CHECK(!c.side_by_side);
  CHECK(Ids(store.EliteByScore(run_id)) == std::vector<int64_t>{ids[0], ids[1], ids[2]});

  // Every timing, in the order taken, exactly.
  const std::vector<Retiming> stored = store.Retimings(run_id);
  REQUIRE(stored.size() == 1);
  CHECK(stored[0].id == retiming_id);
  CHECK(stored[0].rounds == 4);
  CHECK(*stored[0].gpu == *made.gpu);
  CHECK(stored[0].started_at == made.started_at);
  CHECK(stored[0].finished_at == made.finished_at);
  REQUIRE(stored[0].timings.size() == made.timings.size());
  for (size_t i = 0; i < made.timings.size(); ++i) {
    CHECK(stored[0].timings[i].candidate_id == made.timings[i].candidate_id);
    CHECK(stored[0].timings[i].round == made.timings[i].round);
    CHECK(TimingFiguresToJson(stored[0].timings[i].timing) ==
          TimingFiguresToJson(made.timings[i].timing));
  }

  // Not a finished candidate of this run: refused, nothing stored.
  const int64_t other_run = store.CreateRun(MakeSpec());
  CHECK_THROWS_WITH(store.AddRetiming(MakeRetiming(other_run, {ids[0], ids[1]}, {1.0, 2.0})),
                    Catch::Contains("is not a finished candidate of run"));
  CHECK_THROWS_WITH(store.AddRetiming(MakeRetiming(run_id, {ids[0], ids[3]}, {1.0, 2.0})),
                    Catch::Contains("candidate " + std::to_string(ids[3]) + " is not a finished"));
  CHECK(store.Retimings(run_id).size() == 1);
  CHECK(store.Retimings(other_run).empty());

  // A new member changes the membership: the order is the score's until the next re-timing.
  store.Finish(ids[3], MakeOutcome(Status::kMeasured, 20.0), MakeTiming(20.0));
  const std::vector<CandidateRecord> changed = store.Elite(run_id);
  CHECK(Ids(changed) == std::vector<int64_t>{ids[3], ids[0], ids[1]});
  for (const CandidateRecord& c : changed) CHECK(!c.side_by_side);
  CHECK(store.LatestRetiming(run_id)->id == retiming_id);
}

TEST_CASE("store: a newer schema is refused and the file left as it was", "[store]") {
  test::TempDir dir;
  const fs::path path = dir.path() / "new.db";
  {
    PopulationStore store(path, Access::kReadWrite);
    store.AddPending(store.CreateRun(MakeSpec()), 0, {{"cfg-a", MakeProposal(64)}});
  }
  {
    sqlite::Database db(path, sqlite::Database::Mode::kReadWrite);
    db.Execute("PRAGMA user_version = " + std::to_string(PopulationStore::kSchemaVersion + 1));
  }
  const std::string bytes = ReadFile(path);
  const std::string expected =
      "database '" + path.string() + "' was written by a newer evo (schema " +
      std::to_string(PopulationStore::kSchemaVersion + 1) + "; this evo reads up to " +
      std::to_string(PopulationStore::kSchemaVersion) + ")";
  CHECK_THROWS_WITH(PopulationStore(path, Access::kReadWrite), expected);
  CHECK_THROWS_WITH(PopulationStore(path, Access::kReadOnly), expected);
  CHECK(ReadFile(path) == bytes);
  CheckNothingLogged(path);
  CHECK(PragmaInt(path, "user_version") == PopulationStore::kSchemaVersion + 1);
}

TEST_CASE("store: a file that is not a SQLite database is refused and left alone", "[store]") {
  test::TempDir dir;
  const fs::path path = dir.path() / "notes.db";
  std::string content;
  for (int i = 0; i < 400; ++i) content += "line " + std::to_string(i * 7919 % 1013) + " of text\n";
  test::WriteFile(path, content);
  const std::vector<std::string> listing = DirectoryListing(dir.path());
  CHECK_THROWS_WITH(PopulationStore(path, Access::kReadWrite),
                    "'" + path.string() + "' is not an evo database: it is not a SQLite file");
  CHECK_THROWS_WITH(PopulationStore(path, Access::kReadOnly),
                    Catch::Contains("is not an evo database"));
  CHECK(ReadFile(path) == content);
  CHECK(DirectoryListing(dir.path()) == listing);

  const fs::path short_file = dir.path() / "short.db";
  test::WriteFile(short_file, "SQLite");
  CHECK_THROWS_WITH(PopulationStore(short_file, Access::kReadWrite),
                    Catch::Contains("is not an evo database"));
  CHECK(ReadFile(short_file) == "SQLite");

  CHECK_THROWS_WITH(PopulationStore(dir.path(), Access::kReadWrite),
                    Catch::Contains("is not a regular file"));
}

TEST_CASE("store: missing and empty files", "[store]") {
  test::TempDir dir;
  CHECK_THROWS_WITH(PopulationStore(dir.path() / "missing.db", Access::kReadOnly),
                    Catch::Contains("does not exist"));
  CHECK(!fs::exists(dir.path() / "missing.db"));

  const fs::path empty = dir.path() / "empty.db";
  test::WriteFile(empty, "");
  CHECK_THROWS_WITH(PopulationStore(empty, Access::kReadOnly), Catch::Contains("is empty"));
  {
    PopulationStore store(empty, Access::kReadWrite);
    CHECK(store.opened_schema_version() == 0);
    store.CreateRun(MakeSpec());
  }
  CHECK(PopulationStore(empty, Access::kReadOnly).Runs().size() == 1);
}

TEST_CASE("store: another application's SQLite database is refused and left alone", "[store]") {
  test::TempDir dir;
  const fs::path path = dir.path() / "other.db";
  {
    sqlite::Database db(path, sqlite::Database::Mode::kReadWriteCreate);
    db.Execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)");
    db.Execute("INSERT INTO notes (text) VALUES ('keep me')");
  }
  SECTION("without an application id") {}
  SECTION("with its own application id") {
    sqlite::Database db(path, sqlite::Database::Mode::kReadWrite);
    db.Execute("PRAGMA application_id = 305419896");
  }
  const std::string bytes = ReadFile(path);
  const std::vector<std::string> listing = DirectoryListing(dir.path());
  CHECK_THROWS_WITH(PopulationStore(path, Access::kReadWrite),
                    Catch::Contains("is not an evo database: it is a SQLite database of another "
                                    "application"));
  CHECK_THROWS_WITH(PopulationStore(path, Access::kReadOnly),
                    Catch::Contains("another application"));
  CHECK(ReadFile(path) == bytes);
  CHECK(DirectoryListing(dir.path()) == listing);
}

TEST_CASE("store: a corrupt database is refused and left as it was", "[store]") {
  test::TempDir dir;
  const fs::path path = dir.path() / "corrupt.db";
  {
    PopulationStore store(path, Access::kReadWrite);
    const int64_t run_id = store.CreateRun(MakeSpec());
    std::vector<std::pair<std::string, Proposal>> proposals;
    for (int i = 0; i < 200; ++i)
      proposals.emplace_back("cfg-" + std::to_string(i), MakeProposal(i));
    for (int64_t id : store.AddPending(run_id, 0, proposals)) {
      store.Finish(id, MakeOutcome(Status::kMeasured, static_cast<double>(id)), MakeTiming(1));
    }
  }
  int64_t page_size = 0;
  int64_t root = 0;
  {
    sqlite::Database db(path, sqlite::Database::Mode::kReadOnly);
    auto size = db.Prepare("PRAGMA page_size");
    REQUIRE(size.Step());
    page_size = size.ColumnInt(0);
    auto table = db.Prepare("SELECT rootpage FROM sqlite_master WHERE name = 'candidates'");
    REQUIRE(table.Step());
    root = table.ColumnInt(0);
    auto pages = db.Prepare("PRAGMA page_count");
    REQUIRE(pages.Step());
    REQUIRE(pages.ColumnInt(0) > root + 10);  // the table spans pages below its root
  }
  {
    // The root page's child pointers (right-most child, then the cell pointer array) become
    // garbage: page numbers and offsets no b-tree can have.
    std::fstream file(path, std::ios::binary | std::ios::in | std::ios::out);
    file.seekp((root - 1) * page_size + 8);
    const std::string garbage(32, '\xff');
    file.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
    REQUIRE(file.good());
  }
  {
    // SQLite itself must see the damage, or the test would prove nothing.
    sqlite::Database db(path, sqlite::Database::Mode::kReadOnly);
    auto check = db.Prepare("PRAGMA integrity_check");
    REQUIRE(check.Step());
    REQUIRE(check.ColumnText(0) != "ok");
  }
  const std::string bytes = ReadFile(path);
  CHECK_THROWS_WITH(PopulationStore(path, Access::kReadWrite),
                    Catch::StartsWith("database '" + path.string() + "' is corrupt") &&
                        Catch::Contains("it was left as it was"));
  CHECK_THROWS_WITH(PopulationStore(path, Access::kReadOnly), Catch::Contains("is corrupt"));
  CHECK(ReadFile(path) == bytes);
  CheckNothingLogged(path);
}

TEST_CASE("store: a reader follows a writer on the same file (WAL)", "[store]") {
  test::TempDir dir;
  const fs::path path = dir.path() / "shared.db";
  PopulationStore writer(path, Access::kReadWrite);
  const int64_t run_id = writer.CreateRun(MakeSpec());
  PopulationStore reader(path, Access::kReadOnly);
  CHECK(reader.FindRun(run_id)->pending_candidates == 0);

  const std::vector<int64_t> ids =
      writer.AddPending(run_id, 0, {{"cfg-a", MakeProposal(64)}, {"cfg-b", MakeProposal(128)}});
  CHECK(reader.FindRun(run_id)->pending_candidates == 2);
  writer.Finish(ids[1], MakeOutcome(Status::kMeasured), MakeTiming(3));
  CHECK(reader.FindCandidate(ids[1])->state == CandidateState::kFinished);
  CHECK(Ids(reader.Elite(run_id)) == std::vector<int64_t>{ids[1]});
  CHECK_THROWS_AS(reader.CreateRun(MakeSpec()), Error);

  // A second writer's connection (a resumed run after this one) sees the same population.
  PopulationStore second(path, Access::kReadWrite);
  second.Finish(ids[0], MakeOutcome(Status::kMeasured), MakeTiming(2));
  CHECK(Ids(writer.Elite(run_id)) == std::vector<int64_t>{ids[0], ids[1]});
  CHECK(Ids(reader.Elite(run_id)) == std::vector<int64_t>{ids[0], ids[1]});
  CHECK(reader.FindRun(run_id)->finished_candidates == 2);
}

}  // namespace
}  // namespace evo
