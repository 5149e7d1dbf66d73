#include "cli/doctor_database.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>

#include "common/error.h"
#include "population/run_lock.h"
#include "population/sqlite.h"
#include "population/store.h"

namespace evo::cli {
namespace {

namespace fs = std::filesystem;

constexpr const char* kRecoverFix =
    "evo never repairs a database: copy the file aside, then recover what SQLite can read with "
    "sqlite3 FILE .recover | sqlite3 recovered.db, and check it with evo doctor --db recovered.db";

std::string Quoted(const fs::path& path) { return "'" + path.string() + "'"; }

int64_t QueryInt(sqlite::Database& db, const std::string& sql) {
  auto statement = db.Prepare(sql);
  if (!statement.Step()) db.Fail("no result from '" + sql + "'");
  return statement.ColumnInt(0);
}

std::vector<std::string> QueryLines(sqlite::Database& db, const std::string& sql) {
  std::vector<std::string> lines;
  auto statement = db.Prepare(sql);
  while (statement.Step()) lines.push_back(statement.ColumnText(0));
  return lines;
}

// What the file is, from the file system and SQLite's own 16-byte header, before SQLite sees
// it: a file that is not a database is never handed to SQLite. Returns why it is not an evo
// database, or nothing.
std::optional<std::string> RefuseByFile(const fs::path& path) {
  std::error_code error;
  const fs::file_status status = fs::status(path, error);
  if (status.type() == fs::file_type::not_found) {
    return Quoted(path) + " does not exist (evo run creates a database; --db names it)";
  }
  if (error) return "cannot read " + Quoted(path) + ": " + error.message();
  if (fs::is_directory(status)) return Quoted(path) + " is a folder, not a database file";
  if (!fs::is_regular_file(status)) return Quoted(path) + " is not a regular file";
  std::ifstream in(path, std::ios::binary);
  if (!in) return "cannot read " + Quoted(path) + ": " + std::strerror(errno);
  char header[16] = {};
  in.read(header, sizeof(header));
  if (in.gcount() == 0) return Quoted(path) + " is empty, not an evo database";
  if (in.gcount() != sizeof(header) || std::memcmp(header, "SQLite format 3", 16) != 0) {
    return Quoted(path) + " is not a SQLite file, so not an evo database";
  }
  return std::nullopt;
}

std::string Size(uintmax_t bytes) {
  if (bytes >= (uintmax_t{1} << 20)) {
    return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20));
  }
  return fmt::format("{:.1f} KiB", static_cast<double>(bytes) / 1024);
}

class DatabaseChecker {
 public:
  explicit DatabaseChecker(const fs::path& path) : path_(path) {}

  DatabaseCheck Run() {
    if (auto why = RefuseByFile(path_)) return Refuse(*why);
    std::optional<sqlite::Database> db;
    int64_t application_id = 0;
    int64_t version = 0;
    int64_t objects = 0;
    try {
      db.emplace(path_, ReadOnlyMode(path_));
      application_id = QueryInt(*db, "PRAGMA application_id");
      version = QueryInt(*db, "PRAGMA user_version");
      objects = QueryInt(*db, "SELECT count(*) FROM sqlite_master");
    } catch (const Error& error) {
      return Refuse(Quoted(path_) + " cannot be read as a SQLite database: " + error.what());
    }
    if (application_id != PopulationStore::kApplicationId) {
      if (application_id == 0 && objects == 0) {
        return Refuse(Quoted(path_) + " is an empty SQLite database, not an evo database");
      }
      return Refuse(fmt::format(
          "{} is a SQLite database of another application (application id 0x{:08x}, {} schema "
          "objects), not an evo database",
          Quoted(path_), static_cast<uint32_t>(application_id), objects));
    }
    if (version > PopulationStore::kSchemaVersion) {
      return Refuse(fmt::format(
          "{} was written by a newer evo (schema {}; this evo reads schemas 1 to {}); use that "
          "evo",
          Quoted(path_), version, PopulationStore::kSchemaVersion));
    }
    if (version < 1) {
      return Refuse(Quoted(path_) + " carries evo's application id but no schema version");
    }
    CheckFile(*db, version);
    if (!CheckIntegrity(*db)) return std::move(result_);
    db.reset();  // the store opens its own read-only connection
    CheckRuns();
    return std::move(result_);
  }

 private:
  DatabaseCheck Refuse(const std::string& why) {
    result_.refused = why;
    result_.findings.push_back(
        ProblemFinding("database", why, "name an evo database with --db (evo run creates one)"));
    return std::move(result_);
  }

  void CheckFile(sqlite::Database& db, int64_t version) {
    std::error_code error;
    const uintmax_t size = fs::file_size(path_, error);
    fs::path wal = path_;
    wal += "-wal";
    const uintmax_t wal_size = fs::exists(wal, error) ? fs::file_size(wal, error) : 0;
    const std::string journal = QueryLines(db, "PRAGMA journal_mode").front();
    const std::string schema =
        version == PopulationStore::kSchemaVersion
            ? fmt::format("evo schema {} (current)", version)
            : fmt::format("evo schema {} (this evo migrates it to {} when it next writes to it)",
                          version, PopulationStore::kSchemaVersion);
    std::string text =
        fmt::format("{}: {}, {}, {} journal", path_.string(), schema, Size(size), journal);
    if (wal_size > 0) {
      text += fmt::format(" ({} in the write-ahead log, not yet checkpointed)", Size(wal_size));
    }
    result_.findings.push_back(OkFinding("database", text));
    for (const char* table : {"runs", "candidates", "elite"}) {
      if (QueryInt(db, fmt::format("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND "
                                   "name = '{}'",
                                   table)) == 0) {
        result_.findings.push_back(
            ProblemFinding("schema", fmt::format("the table '{}' is missing", table), kRecoverFix));
      }
    }
  }

  // False when the file is damaged, so that its rows are not read.
  bool CheckIntegrity(sqlite::Database& db) {
    std::vector<std::string> problems;
    try {
      for (std::string line : QueryLines(db, "PRAGMA integrity_check(20)")) {
        if (line == "ok") continue;
        std::replace(line.begin(), line.end(), '\n', ' ');
        problems.push_back(line);
      }
    } catch (const Error& error) {
      problems.push_back(error.what());
    }
    if (!problems.empty()) {
      std::string text;
      for (const std::string& problem : problems) text += (text.empty() ? "" : "; ") + problem;
      result_.findings.push_back(
          ProblemFinding("integrity", "PRAGMA integrity_check: " + text, kRecoverFix));
      return false;
    }
    int64_t orphans = 0;
    try {
      orphans = static_cast<int64_t>(QueryLines(db, "PRAGMA foreign_key_check").size());
    } catch (const Error& error) {
      result_.findings.push_back(ProblemFinding("integrity", error.what(), kRecoverFix));
      return false;
    }
    if (orphans > 0) {
      result_.findings.push_back(
          ProblemFinding("integrity",
                         fmt::format("{} rows point at a run or candidate that does not exist "
                                     "(PRAGMA foreign_key_check)",
                                     orphans),
                         kRecoverFix));
      return false;
    }
    result_.findings.push_back(OkFinding("integrity", "integrity_check ok, foreign_key_check ok"));
    return true;
  }

  void CheckRuns() {
    std::vector<RunRecord> runs;
    try {
      PopulationStore store(path_, PopulationStore::Access::kReadOnly);
      runs = store.Runs();
    } catch (const Error& error) {
      result_.findings.push_back(ProblemFinding("runs", error.what(), kRecoverFix));
      return;
    }
    int unfinished = 0;
    for (const RunRecord& run : runs) {
      unfinished += run.state != RunState::kFinished || run.pending_candidates > 0 ? 1 : 0;
    }
    result_.findings.push_back(
        OkFinding("runs", fmt::format("{} {}, {} finished, {} unfinished", runs.size(),
                                      runs.size() == 1 ? "run" : "runs",
                                      runs.size() - static_cast<size_t>(unfinished), unfinished)));
    const std::optional<int64_t> holder = RunLockHolder(path_);
    if (holder) {
      result_.findings.push_back(NoteFinding(
          "lock", fmt::format("evo run (pid {}) is searching this database now", *holder)));
    }
    for (const RunRecord& run : runs) {
      if (run.state == RunState::kFinished && run.pending_candidates == 0) continue;
      const std::string progress =
          fmt::format("{}, {} of {} evaluated, {} pending ({} on {})", ToString(run.state),
                      run.finished_candidates, run.spec.budget, run.pending_candidates,
                      run.spec.template_name, run.spec.device);
      const std::string resume = fmt::format("evo run --db {} --resume {}", path_.string(), run.id);
      std::string text;
      if (run.state == RunState::kRunning && holder) {
        text = progress + "; being searched now";
      } else if (run.state == RunState::kRunning) {
        text = progress +
               "; no evo run holds the database, so it was stopped without finishing "
               "(killed or crashed); resuming redoes the pending candidates";
      } else {
        text = progress + (run.stop_reason.empty() ? "" : " (" + run.stop_reason + ")");
      }
      result_.findings.push_back(
          NoteFinding("run " + std::to_string(run.id), text, holder ? "" : "resume: " + resume));
    }
  }

  fs::path path_;
  DatabaseCheck result_;
};

}  // namespace

DatabaseCheck CheckDatabase(const fs::path& path) { return DatabaseChecker(path).Run(); }

}  // namespace evo::cli
