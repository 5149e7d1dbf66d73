#include <algorithm>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <set>

#include "common/files.h"
#include "kernel_templates/template_library.h"
#include "population/store.h"
#include "tests/test_support.h"

namespace evo {
namespace {

using test::RunEvo;

std::vector<std::string> TuneArgs(const std::filesystem::path& dir,
                                  const std::vector<std::string>& shapes, int budget) {
  std::vector<std::string> args = {
      "tune",   "--db", (dir / "tune.db").string(), "--budget", std::to_string(budget),
      "--seed", "5"};
  for (const std::string& shape : shapes) {
    args.push_back("--shape");
    args.push_back(shape);
  }
  for (const auto& [s, causal] :
       std::vector<std::pair<int64_t, int64_t>>{{512, 0}, {1024, 0}, {2048, 0}, {512, 1}}) {
    args.push_back("--replay");
    args.push_back(test::H100RecordingAs(dir, s, causal).string());
  }
  return args;
}

TEST_CASE("evo tune searches a set of shapes into one database, each run seeded by those before",
          "[cli][tune]") {
  test::TempDir dir;
  const std::vector<std::string> shapes = {"2,8,512,64", "2,8,1024,64", "2,8,512,64,causal"};
  const auto tuned = RunEvo(TuneArgs(dir.path(), shapes, 20), dir.path());
  INFO(tuned.err);
  REQUIRE(tuned.exit_code == 0);
  CHECK(tuned.err.find("tuning 3 runs (3 shapes x 1 templates)") != std::string::npos);
  CHECK(tuned.err.find("| set 60/60") != std::string::npos);
  CHECK(tuned.out.find("[1/3] sdpa_fp16 2,8,512,64 ") != std::string::npos);
  CHECK(tuned.out.find("[2/3] sdpa_fp16 2,8,1024,64 ") != std::string::npos);
  CHECK(tuned.out.find("(seeded with 3 elites)") != std::string::npos);
  const size_t third = tuned.out.find("[3/3] sdpa_fp16 2,8,512,64 causal");
  REQUIRE(third != std::string::npos);
  // A causal kernel is not opened with the elites of non-causal ones.
  CHECK(tuned.out.substr(third, tuned.out.find('\n', third) - third).find("seeded") ==
        std::string::npos);
  CHECK(tuned.out.find("evo export --python DIR --db") != std::string::npos);

  {
    PopulationStore store(dir.path() / "tune.db", PopulationStore::Access::kReadOnly);
    const std::vector<RunRecord> runs = store.Runs();
    REQUIRE(runs.size() == 3);
    for (const RunRecord& run : runs) {
      CHECK(run.finished_candidates == 20);
      CHECK(run.state == RunState::kFinished);
    }
    CHECK(runs[1].spec.problem.at("S_q") == 1024);
    // The second run's first generation opens with the first run's elite (after the defaults).
    std::set<Genome> opened;
    for (const CandidateRecord& c : store.Candidates(runs[1].id)) {
      if (c.generation == 0) opened.insert(c.proposal.genome);
    }
    for (const CandidateRecord& elite : store.Elite(runs[0].id)) {
      CHECK(opened.count(elite.proposal.genome) == 1);
    }
  }

  // The same set again: nothing to do, nothing measured twice.
  const auto again = RunEvo(TuneArgs(dir.path(), shapes, 20), dir.path());
  CHECK(again.exit_code == 0);
  CHECK(again.out.find("[2/3] sdpa_fp16 2,8,1024,64") != std::string::npos);
  CHECK(again.out.find("(tuned before)") != std::string::npos);
  {
    PopulationStore store(dir.path() / "tune.db", PopulationStore::Access::kReadOnly);
    CHECK(store.Runs().size() == 3);
    CHECK(store.Candidates(1).size() == 20);
  }

  // A larger budget extends every run; a shape added to the set gets a run of its own.
  std::vector<std::string> more = shapes;
  more.push_back("2,8,2048,64");
  const auto extended = RunEvo(TuneArgs(dir.path(), more, 28), dir.path());
  INFO(extended.err);
  CHECK(extended.exit_code == 0);
  CHECK(extended.err.find("| set 112/112") != std::string::npos);
  PopulationStore store(dir.path() / "tune.db", PopulationStore::Access::kReadOnly);
  REQUIRE(store.Runs().size() == 4);
  for (const RunRecord& run : store.Runs()) CHECK(run.finished_candidates == 28);

  // A resumed run keeps its seed, elite and generation size, and says so; a new run takes them.
  std::vector<std::string> changed = TuneArgs(dir.path(), more, 36);
  changed.insert(changed.end(), {"--generation-size", "8"});
  changed[std::find(changed.begin(), changed.end(), "--seed") - changed.begin() + 1] = "6";
  const auto kept = RunEvo(changed, dir.path());
  INFO(kept.err);
  CHECK(kept.exit_code == 0);
  CHECK(kept.err.find("evo: run 1 (sdpa_fp16 2,8,512,64) keeps --seed 5, --generation-size 16, as "
                      "it was stored; the options given apply to new runs") != std::string::npos);
  {
    PopulationStore after(dir.path() / "tune.db", PopulationStore::Access::kReadOnly);
    for (const RunRecord& run : after.Runs()) {
      CHECK(run.spec.seed == 5);
      CHECK(run.spec.generation_size == 16);
      CHECK(run.finished_candidates == 36);
    }
  }

  // A shape without a recording is refused before anything is touched.
  std::vector<std::string> missing = TuneArgs(dir.path(), {"2,8,4096,64"}, 20);
  const auto refused = RunEvo(missing, dir.path());
  CHECK(refused.exit_code == 2);
  CHECK(refused.err.find("no --replay recording measured\n  sdpa_fp16 2,8,4096,64") !=
        std::string::npos);
  // Two recordings of one task: the order given would choose the landscape.
  std::vector<std::string> twice = TuneArgs(dir.path(), {"2,8,512,64"}, 20);
  const std::filesystem::path second = dir.path() / "second.jsonl";
  std::filesystem::copy_file(test::H100RecordingAs(dir.path(), 512, 0), second);
  twice.insert(twice.end(), {"--replay", second.string()});
  const auto ambiguous = RunEvo(twice, dir.path());
  CHECK(ambiguous.exit_code == 2);
  CHECK(ambiguous.err.find("and --replay " + second.string() +
                           " both measured sdpa_fp16 2,8,512,64; give one recording per task") !=
        std::string::npos);
}

TEST_CASE("evo tune does not take a run of evo run --fix for its task's search", "[cli][tune]") {
  test::TempDir dir;
  const auto fixed = RunEvo(
      {"run", "--replay", test::H100RecordingAs(dir.path(), 512, 0).string(), "--db",
       (dir.path() / "tune.db").string(), "--budget", "20", "--seed", "5", "--fix", "NUM_WARPS=4"},
      dir.path());
  INFO(fixed.err);
  REQUIRE(fixed.exit_code == 0);
  const auto tuned = RunEvo(TuneArgs(dir.path(), {"2,8,512,64"}, 20), dir.path());
  INFO(tuned.err);
  REQUIRE(tuned.exit_code == 0);
  PopulationStore store(dir.path() / "tune.db", PopulationStore::Access::kReadOnly);
  const std::vector<RunRecord> runs = store.Runs();
  REQUIRE(runs.size() == 2);
  CHECK(runs[0].spec.problem == runs[1].spec.problem);
  CHECK(runs[0].spec.fixed == Genome{{"NUM_WARPS", 4}});
  CHECK(runs[1].spec.fixed.empty());
  CHECK(runs[1].finished_candidates == 20);
  std::set<int64_t> warps;
  for (const CandidateRecord& c : store.Candidates(runs[1].id)) {
    warps.insert(c.proposal.genome.at("NUM_WARPS"));
  }
  CHECK(warps.size() > 1);
}

TEST_CASE("evo tune continues runs stopped by their time limit", "[cli][tune]") {
  test::TempDir dir;
  std::vector<std::string> args = TuneArgs(dir.path(), {"2,8,512,64", "2,8,1024,64"}, 30);
  std::vector<std::string> slow = args;
  for (const char* arg : {"--replay-delay-ms", "60", "--time-limit", "1s"}) slow.push_back(arg);
  const auto stopped = RunEvo(slow, dir.path());
  INFO(stopped.err);
  REQUIRE(stopped.exit_code == 0);
  CHECK(stopped.out.find("(time limit)") != std::string::npos);
  int64_t before = 0;
  {
    PopulationStore store(dir.path() / "tune.db", PopulationStore::Access::kReadOnly);
    REQUIRE(store.Runs().size() == 2);
    for (const RunRecord& run : store.Runs()) {
      CHECK(run.state == RunState::kPaused);
      CHECK(run.finished_candidates < 30);
      before += run.finished_candidates;
    }
  }
  CHECK(before > 0);
  const auto resumed = RunEvo(args, dir.path());
  INFO(resumed.err);
  REQUIRE(resumed.exit_code == 0);
  PopulationStore store(dir.path() / "tune.db", PopulationStore::Access::kReadOnly);
  REQUIRE(store.Runs().size() == 2);
  for (const RunRecord& run : store.Runs()) {
    CHECK(run.state == RunState::kFinished);
    CHECK(run.finished_candidates == 30);
    // Each configuration once: resumed, not repeated.
    std::set<std::string> ids;
    for (const CandidateRecord& c : store.Candidates(run.id)) ids.insert(c.config_id);
    CHECK(ids.size() == store.Candidates(run.id).size());
  }
}

TEST_CASE(
    "evo tune: a run its patience stopped keeps its budget and says why; another --patience goes "
    "on",
    "[cli][tune]") {
  test::TempDir dir;
  auto args = TuneArgs(dir.path(), {"2,8,512,64"}, 1000);
  args.insert(args.end(), {"--patience", "2"});
  const auto stopped = RunEvo(args, dir.path());
  INFO(stopped.err);
  REQUIRE(stopped.exit_code == 0);
  REQUIRE(stopped.out.find("(patience out)") != std::string::npos);
  const auto stored = [&] {
    PopulationStore store(dir.path() / "tune.db", PopulationStore::Access::kReadOnly);
    return store.Runs().at(0);
  };
  const int64_t evaluated = stored().finished_candidates;
  REQUIRE(evaluated < 1000);

  const auto raised = RunEvo(TuneArgs(dir.path(), {"2,8,512,64"}, 1200), dir.path());
  INFO(raised.err);
  CHECK(raised.exit_code == 0);
  CHECK(raised.err.find("2,8,512,64: run 1 has gone 2 generations without improvement, which its "
                        "--patience of 2 does not allow") != std::string::npos);
  CHECK(stored().spec.budget == 1000);
  CHECK(stored().finished_candidates == evaluated);

  auto longer = TuneArgs(dir.path(), {"2,8,512,64"}, 1000);
  longer.insert(longer.end(), {"--patience", "3"});
  const auto resumed = RunEvo(longer, dir.path());
  INFO(resumed.err);
  CHECK(resumed.exit_code == 0);
  CHECK(resumed.out.find("(tuned before)") == std::string::npos);
  CHECK(stored().spec.patience == 3);
  CHECK(stored().finished_candidates > evaluated);
}

TEST_CASE("evo tune --list expands shapes, files and grids per template; bad ones are named",
          "[cli][tune]") {
  test::TempDir dir;
  const auto grid =
      RunEvo({"tune", "--list", "--grid", "BxH=1x8,2x16 S=512..2048 D=64 CAUSAL=0,1"}, dir.path());
  INFO(grid.err);
  REQUIRE(grid.exit_code == 0);
  CHECK(grid.out.find("[1/12] sdpa_fp16 1,8,512,64\n") == 0);
  CHECK(grid.out.find("[3/12] sdpa_fp16 1,8,2048,64\n") != std::string::npos);
  CHECK(grid.out.find("[4/12] sdpa_fp16 2,16,512,64\n") != std::string::npos);
  CHECK(grid.out.find("[12/12] sdpa_fp16 2,16,2048,64 causal\n") != std::string::npos);

  // Grouped heads: a template without H_kv skips the shape and says why.
  const auto grouped = RunEvo({"tune", "--list", "-t", "sdpa_fp16", "-t", "sdpa_fp16_wgmma",
                               "--shape", "1,32:8,1,4096,128", "--shape", "2,8,2048,128,causal"},
                              dir.path());
  INFO(grouped.err);
  REQUIRE(grouped.exit_code == 0);
  CHECK(grouped.out ==
        "[1/3] sdpa_fp16 1,32:8,1,4096,128\n[2/3] sdpa_fp16 2,8,2048,128 causal\n"
        "[3/3] sdpa_fp16_wgmma 2,8,2048,128 causal\n");
  CHECK(grouped.err.find("skipped sdpa_fp16_wgmma") != std::string::npos);

  // --problem for every shape; a template without the parameter is skipped.
  const auto bf16 = RunEvo({"tune", "--list", "-t", "sdpa_fp16", "-t", "sdpa_hopper", "--shape",
                            "2,8,1024,128", "--problem", "BF16=1"},
                           dir.path());
  CHECK(bf16.exit_code == 0);
  CHECK(bf16.out == "[1/1] sdpa_hopper 2,8,1024,128 BF16=1\n");

  test::WriteFile(dir.path() / "shapes.txt",
                  "# decode\n1,16,1,4096,128  # one query\n\n2,8,1024,1024,64,causal\n4,x,1,2\n");
  const auto file = RunEvo({"tune", "--list", "--shapes", "shapes.txt"}, dir.path());
  CHECK(file.exit_code == 2);
  CHECK(file.err.find("shapes.txt:5: malformed shape '4,x,1,2'") != std::string::npos);
  // A byte that is not text is named, not quoted (a NUL cut the message off at it).
  test::WriteFile(dir.path() / "shapes.txt",
                  std::string("1,16,1,4096,128\n2,8,10") + '\0' + "24,64\n");
  const auto nul = RunEvo({"tune", "--list", "--shapes", "shapes.txt"}, dir.path());
  CHECK(nul.exit_code == 2);
  CHECK(nul.err.find("shapes.txt:2: column 7 holds the byte 0x00, which is not text") !=
        std::string::npos);
  test::WriteFile(dir.path() / "shapes.txt", "1,16,1,4096,128\n2,8,1024,1024,64,causal\n");
  const auto listed = RunEvo({"tune", "--list", "--shapes", "shapes.txt"}, dir.path());
  CHECK(listed.out == "[1/2] sdpa_fp16 1,16,1,4096,128\n[2/2] sdpa_fp16 2,8,1024,64 causal\n");

  const auto empty = RunEvo({"tune", "--list", "--grid", "S=512..256"}, dir.path());
  CHECK(empty.exit_code == 2);
  CHECK(empty.err.find("the range 512..256 is empty") != std::string::npos);
  // LO doubled within HI, to the largest 64-bit range without overflow.
  const auto doubled = RunEvo({"tune", "--list", "--grid", "BxH=2x8 S=3..20 D=64"}, dir.path());
  CHECK(doubled.out ==
        "[1/3] sdpa_fp16 2,8,3,64\n[2/3] sdpa_fp16 2,8,6,64\n"
        "[3/3] sdpa_fp16 2,8,12,64\n");
  const auto widest =
      RunEvo({"tune", "--list", "--grid", "BxH=2x8 S=1..9223372036854775807 D=64"}, dir.path());
  INFO(widest.err);
  CHECK(widest.out.find("[63/63] sdpa_fp16 2,8,4611686018427387904,64\n") != std::string::npos);
  const auto unknown = RunEvo({"tune", "--list", "--grid", "L=512"}, dir.path());
  CHECK(unknown.exit_code == 2);
  CHECK(unknown.err.find("the names are B, H, H_kv, S") != std::string::npos);
  const auto none = RunEvo({"tune", "--list"}, dir.path());
  CHECK(none.exit_code == 2);
  CHECK(none.err.find("evo tune needs shapes") != std::string::npos);
}

}  // namespace
}  // namespace evo
