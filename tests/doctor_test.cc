#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <set>
#include <sstream>

#include "common/files.h"
#include "common/sha256.h"
#include "population/run_lock.h"
#include "population/sqlite.h"
#include "population/store.h"
#include "tests/test_support.h"

namespace evo {
namespace {

using test::RunEvo;

std::string FileHash(const std::filesystem::path& path) { return Sha256Hex(ReadFile(path)); }

std::set<std::string> Listing(const std::filesystem::path& folder) {
  std::set<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    names.insert(entry.path().filename().string());
  }
  return names;
}

// True when a line of doctor's output has this kind ("ok", "note", "PROBLEM"), this topic and
// holds `text`; the topic column's width follows the longest topic.
bool HasLine(const std::string& out, const std::string& kind, const std::string& topic,
             const std::string& text) {
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    const std::string start = kind + std::string(8 - kind.size(), ' ') + " " + topic + " ";
    if (line.rfind(start, 0) == 0 && line.find(text, start.size()) != std::string::npos) {
      return true;
    }
  }
  return false;
}

// A finished replayed run, and a second run left as a killed `evo run` leaves one: running,
// with candidates in flight.
std::filesystem::path MakeDatabase(const std::filesystem::path& folder) {
  const auto db = folder / "evo.db";
  const auto run = RunEvo({"run", "--replay", test::H100Recording().string(), "--db", db.string(),
                           "--budget", "12", "--seed", "5"},
                          folder);
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  PopulationStore store(db, PopulationStore::Access::kReadWrite);
  RunSpec spec = store.FindRun(1)->spec;
  spec.budget = 30;
  const int64_t killed = store.CreateRun(spec);
  Proposal proposal;
  proposal.genome = store.Candidates(1).front().proposal.genome;
  proposal.operator_name = "default";
  store.AddPending(killed, 0, {{"in-flight", proposal}});
  return db;
}

TEST_CASE("evo doctor lists NVRTC, the driver and GPUs, the templates, the cache and the disk",
          "[doctor]") {
  test::TempDir dir;
  const auto result = RunEvo({"doctor"}, dir.path());
  INFO(result.out << result.err);
  CHECK(HasLine(result.out, "ok", "nvrtc", "compiles for sm_"));
  CHECK(result.out.find("probe compiles: sm_80 ") != std::string::npos);
  CHECK(result.out.find(", sm_90a ") != std::string::npos);
  CHECK(HasLine(result.out, "ok", "sqlite", "SQLite 3."));
  CHECK(HasLine(result.out, "note", "cache", "runs/cache does not exist yet"));
  CHECK(HasLine(result.out, "ok", "disk", "free under runs"));
  CHECK(HasLine(result.out, "note", "database", "none checked"));
  // Nothing was created where it looked.
  CHECK(Listing(dir.path()).empty());
  if (test::HaveGpuDriver()) {
    WARN("a GPU driver is here: the no-GPU findings are not checked (the [gpu] test checks it)");
    return;
  }
  // This machine has no GPU: a problem with its fix, and what still works.
  CHECK(result.exit_code == 1);
  CHECK(HasLine(result.out, "PROBLEM", "driver", "libcuda.so.1 could not be loaded"));
  CHECK(result.out.find("fix:  searches (evo run), evo bench and evo sweep run kernels on an "
                        "NVIDIA GPU") != std::string::npos);
  CHECK(result.out.find("replays recorded searches (evo run --replay FILE)") != std::string::npos);
  CHECK(HasLine(result.out, "note", "template sdpa_hopper",
                "sm_90, arch-specific: NVRTC compiles for it here (evo compile -t sdpa_hopper "
                "--arch sm_90); running it needs a GPU"));
  CHECK(HasLine(result.out, "note", "hopper",
                "compile here but cannot run here: they need a Hopper GPU"));
  CHECK(result.out.find("It cannot search (evo run), bench or sweep") != std::string::npos);
  CHECK(result.out.find("1 problem found") != std::string::npos);
}

TEST_CASE("evo doctor on a GPU machine runs a probe kernel on each GPU and finds nothing to fix",
          "[doctor][gpu]") {
  if (!test::HaveGpuDriver()) {
    WARN("skipped: no GPU driver (libcuda.so.1) on this machine");
    return;
  }
  test::TempDir dir;
  const auto result = RunEvo({"doctor"}, dir.path());
  INFO(result.out << result.err);
  CHECK(HasLine(result.out, "ok", "driver", "CUDA "));
  CHECK(HasLine(result.out, "ok", "gpu 0", "compiled, loaded and ran a probe kernel for sm_"));
  CHECK(result.out.find("It can also search (evo run), bench and sweep on") != std::string::npos);
  // On a Hopper GPU the arch-specific templates run: the probe issued a wgmma fence there.
  if (result.out.find(", sm_90, ") != std::string::npos) {
    CHECK(HasLine(result.out, "ok", "gpu 0", "probe kernel for sm_90, sm_90a"));
    CHECK(HasLine(result.out, "ok", "template sdpa_hopper", "runs on gpu 0"));
    CHECK(HasLine(result.out, "ok", "hopper", "run on this machine's Hopper GPU"));
  }
  CHECK(result.out.find("No problems found.") != std::string::npos);
  CHECK(result.exit_code == 0);
}

TEST_CASE("evo doctor reports the compile cache's size", "[doctor]") {
  test::TempDir dir;
  test::WriteFile(dir.path() / "cache" / "a.json", std::string(1000, 'x'));
  test::WriteFile(dir.path() / "cache" / "a.cubin", std::string(3000, 'x'));
  const auto result =
      RunEvo({"doctor", "--cache-dir", (dir.path() / "cache").string()}, dir.path());
  INFO(result.out);
  CHECK(result.out.find("cache: 1 compiles, 3.9 KiB") != std::string::npos);
}

TEST_CASE("evo doctor --db shows schema, integrity and unfinished runs, and changes nothing",
          "[doctor]") {
  test::TempDir dir;
  const auto db = MakeDatabase(dir.path());
  const std::string hash = FileHash(db);
  const auto result = RunEvo({"doctor", "--db", db.string()}, dir.path());
  INFO(result.out << result.err);
  CHECK(result.exit_code != 2);
  CHECK(result.out.find("evo schema " + std::to_string(PopulationStore::kSchemaVersion) +
                        " (current)") != std::string::npos);
  CHECK(result.out.find("wal journal") != std::string::npos);
  CHECK(result.out.find("integrity_check ok, foreign_key_check ok") != std::string::npos);
  CHECK(result.out.find("2 runs, 1 finished, 1 unfinished") != std::string::npos);
  CHECK(result.out.find("run 2") != std::string::npos);
  CHECK(result.out.find("running, 0 of 30 evaluated, 1 pending") != std::string::npos);
  CHECK(result.out.find("stopped without finishing (killed or crashed)") != std::string::npos);
  CHECK(result.out.find("resume: evo run --db " + db.string() + " --resume 2") !=
        std::string::npos);
  CHECK(FileHash(db) == hash);

  // While an evo run holds the database, doctor names it and leaves it alone.
  {
    RunLock lock(db);
    const auto held = RunEvo({"doctor", "--db", db.string()}, dir.path());
    INFO(held.out);
    CHECK(held.out.find("evo run (pid " + std::to_string(::getpid()) +
                        ") is searching this database now") != std::string::npos);
    CHECK(held.out.find("being searched now") != std::string::npos);
  }
  CHECK(FileHash(db) == hash);
}

TEST_CASE("evo doctor --db refuses what is not an evo database and leaves it as it was",
          "[doctor]") {
  test::TempDir dir;
  const auto folder = dir.path() / "inputs";
  std::filesystem::create_directories(folder / "a folder");
  test::WriteFile(folder / "notes.txt", "not a database\n");
  test::WriteFile(folder / "empty.db", "");
  {
    sqlite::Database other(folder / "other.db", sqlite::Database::Mode::kReadWriteCreate);
    other.Execute("PRAGMA application_id = 42; CREATE TABLE t (x); INSERT INTO t VALUES (1);");
  }
  const auto evo_db = MakeDatabase(dir.path());
  std::filesystem::copy_file(evo_db, folder / "newer.db");
  {
    sqlite::Database newer(folder / "newer.db", sqlite::Database::Mode::kReadWrite);
    newer.Execute("PRAGMA journal_mode = DELETE; PRAGMA user_version = " +
                  std::to_string(PopulationStore::kSchemaVersion + 1));
  }

  struct Case {
    std::string name;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"missing.db", "does not exist"},
      {"a folder", "is a folder, not a database file"},
      {"notes.txt", "is not a SQLite file, so not an evo database"},
      {"empty.db", "is empty, not an evo database"},
      {"other.db", "is a SQLite database of another application (application id 0x0000002a"},
      {"newer.db",
       "was written by a newer evo (schema " + std::to_string(PopulationStore::kSchemaVersion + 1)},
  };
  for (const Case& c : cases) {
    const auto path = folder / c.name;
    const bool is_file = std::filesystem::is_regular_file(path);
    const std::string before = is_file ? FileHash(path) : "";
    const std::set<std::string> listing = Listing(folder);
    const auto result = RunEvo({"doctor", "--db", path.string()}, dir.path());
    INFO(c.name << "\n" << result.out << result.err);
    CHECK(result.exit_code == 2);
    CHECK(result.err.find("evo: error: --db '" + path.string() + "' " + c.message) !=
          std::string::npos);
    CHECK(HasLine(result.out, "PROBLEM", "database", c.message));
    // The machine's checks are still there.
    CHECK(result.out.find("nvrtc") != std::string::npos);
    if (is_file) CHECK(FileHash(path) == before);
    CHECK(Listing(folder) == listing);
  }
}

TEST_CASE("evo doctor --db finds a damaged evo database, a problem with its fix, and leaves it",
          "[doctor]") {
  test::TempDir dir;
  const auto db = MakeDatabase(dir.path());
  const auto damaged = dir.path() / "damaged.db";
  std::filesystem::copy_file(db, damaged);
  {
    // Page 2 is the runs table's root; its first byte is the b-tree page type.
    const std::string content = ReadFile(damaged);
    const size_t page_size =
        (static_cast<unsigned char>(content[16]) << 8) | static_cast<unsigned char>(content[17]);
    REQUIRE(content.size() > 3 * page_size);
    std::fstream file(damaged, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(static_cast<std::streamoff>(page_size));
    file.write("\x42\x42\x42\x42", 4);
  }
  const std::string hash = FileHash(damaged);
  const auto result = RunEvo({"doctor", "--db", damaged.string()}, dir.path());
  INFO(result.out << result.err);
  CHECK(result.exit_code == 1);
  CHECK(HasLine(result.out, "PROBLEM", "integrity", "PRAGMA integrity_check: "));
  CHECK(result.out.find("fix:  evo never repairs a database") != std::string::npos);
  CHECK(FileHash(damaged) == hash);
}

}  // namespace
}  // namespace evo
