#include "population/store.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "common/error.h"

namespace evo {
namespace {

namespace fs = std::filesystem;

constexpr int kBusyTimeoutMs = 10000;
// What a run created before these settings existed searched with.
constexpr int kMigratedGenerationSize = 16;
constexpr int kMigratedPatience = 0;

// Version 1 as it was released; the migration test builds files from it, so it never changes.
constexpr std::string_view kSchemaVersion1 = R"sql(PRAGMA application_id = 1702260513;
PRAGMA user_version = 1;
CREATE TABLE runs (
  id INTEGER PRIMARY KEY,
  template_name TEXT NOT NULL,
  template_hash TEXT NOT NULL,
  problem TEXT NOT NULL,
  arch TEXT NOT NULL,
  device TEXT NOT NULL,
  evaluator TEXT NOT NULL,
  driver_version TEXT NOT NULL,
  nvrtc_version TEXT NOT NULL,
  evo_version TEXT NOT NULL,
  seed TEXT NOT NULL,
  budget INTEGER NOT NULL,
  elite_size INTEGER NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('running', 'paused', 'finished')),
  stop_reason TEXT NOT NULL DEFAULT '',
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
CREATE TABLE candidates (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs (id),
  config_id TEXT NOT NULL,
  genome TEXT NOT NULL,
  generation INTEGER NOT NULL,
  operator TEXT NOT NULL,
  parent1 INTEGER REFERENCES candidates (id),
  parent2 INTEGER REFERENCES candidates (id),
  state TEXT NOT NULL CHECK (state IN ('pending', 'finished')),
  status TEXT,
  reason TEXT,
  registers INTEGER,
  spill_stores INTEGER,
  spill_loads INTEGER,
  smem_static INTEGER,
  dynamic_smem INTEGER,
  threads INTEGER,
  compile_ms REAL,
  max_abs_error REAL,
  median_us REAL,
  p10_us REAL,
  p90_us REAL,
  tflops REAL,
  outcome_json TEXT,
  created_at TEXT NOT NULL,
  finished_at TEXT,
  UNIQUE (run_id, config_id)
);
CREATE TABLE elite (
  run_id INTEGER NOT NULL REFERENCES runs (id),
  rank INTEGER NOT NULL,
  candidate_id INTEGER NOT NULL REFERENCES candidates (id),
  PRIMARY KEY (run_id, rank)
);
)sql";

// Version 2 as it was released; the migration test builds files from it, so it never changes.
constexpr std::string_view kSchemaVersion2 = R"sql(PRAGMA application_id = 1702260513;
PRAGMA user_version = 2;
CREATE TABLE runs (
  id INTEGER PRIMARY KEY,
  template_name TEXT NOT NULL,
  template_hash TEXT NOT NULL,
  problem TEXT NOT NULL,
  arch TEXT NOT NULL,
  device TEXT NOT NULL,
  evaluator TEXT NOT NULL,
  driver_version TEXT NOT NULL,
  nvrtc_version TEXT NOT NULL,
  evo_version TEXT NOT NULL,
  seed TEXT NOT NULL,
  budget INTEGER NOT NULL,
  elite_size INTEGER NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('running', 'paused', 'finished')),
  stop_reason TEXT NOT NULL DEFAULT '',
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  generation_size INTEGER NOT NULL DEFAULT 16,
  patience INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE candidates (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs (id),
  config_id TEXT NOT NULL,
  genome TEXT NOT NULL,
  generation INTEGER NOT NULL,
  operator TEXT NOT NULL,
  parent1 INTEGER REFERENCES candidates (id),
  parent2 INTEGER REFERENCES candidates (id),
  state TEXT NOT NULL CHECK (state IN ('pending', 'finished')),
  status TEXT,
  reason TEXT,
  registers INTEGER,
  spill_stores INTEGER,
  spill_loads INTEGER,
  smem_static INTEGER,
  dynamic_smem INTEGER,
  threads INTEGER,
  compile_ms REAL,
  max_abs_error REAL,
  median_us REAL,
  p10_us REAL,
  p90_us REAL,
  tflops REAL,
  outcome_json TEXT,
  created_at TEXT NOT NULL,
  finished_at TEXT,
  confirm_median_us REAL,
  confirm_p10_us REAL,
  confirm_p90_us REAL,
  confirmation_json TEXT,
  UNIQUE (run_id, config_id)
);
CREATE TABLE elite (
  run_id INTEGER NOT NULL REFERENCES runs (id),
  rank INTEGER NOT NULL,
  candidate_id INTEGER NOT NULL REFERENCES candidates (id),
  PRIMARY KEY (run_id, rank)
);
)sql";

// The columns a migration adds come last, in the order the migration adds them, so that a
// migrated file and a fresh one have the same tables (the migration test compares them).
constexpr std::string_view kSchemaVersion3 = R"sql(PRAGMA application_id = 1702260513;
PRAGMA user_version = 3;
CREATE TABLE runs (
  id INTEGER PRIMARY KEY,
  template_name TEXT NOT NULL,
  template_hash TEXT NOT NULL,
  problem TEXT NOT NULL,
  arch TEXT NOT NULL,
  device TEXT NOT NULL,
  evaluator TEXT NOT NULL,
  driver_version TEXT NOT NULL,
  nvrtc_version TEXT NOT NULL,
  evo_version TEXT NOT NULL,
  seed TEXT NOT NULL,
  budget INTEGER NOT NULL,
  elite_size INTEGER NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('running', 'paused', 'finished')),
  stop_reason TEXT NOT NULL DEFAULT '',
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  generation_size INTEGER NOT NULL DEFAULT 16,
  patience INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE candidates (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs (id),
  config_id TEXT NOT NULL,
  genome TEXT NOT NULL,
  generation INTEGER NOT NULL,
  operator TEXT NOT NULL,
  parent1 INTEGER REFERENCES candidates (id),
  parent2 INTEGER REFERENCES candidates (id),
  state TEXT NOT NULL CHECK (state IN ('pending', 'finished')),
  status TEXT,
  reason TEXT,
  registers INTEGER,
  spill_stores INTEGER,
  spill_loads INTEGER,
  smem_static INTEGER,
  dynamic_smem INTEGER,
  threads INTEGER,
  compile_ms REAL,
  max_abs_error REAL,
  median_us REAL,
  p10_us REAL,
  p90_us REAL,
  tflops REAL,
  outcome_json TEXT,
  created_at TEXT NOT NULL,
  finished_at TEXT,
  confirm_median_us REAL,
  confirm_p10_us REAL,
  confirm_p90_us REAL,
  confirmation_json TEXT,
  gpu INTEGER,
  gpu_name TEXT,
  gpu_uuid TEXT,
  UNIQUE (run_id, config_id)
);
CREATE TABLE elite (
  run_id INTEGER NOT NULL REFERENCES runs (id),
  rank INTEGER NOT NULL,
  candidate_id INTEGER NOT NULL REFERENCES candidates (id),
  PRIMARY KEY (run_id, rank)
);
)sql";

constexpr std::string_view kMigrateVersion1To2 = R"sql(
ALTER TABLE runs ADD COLUMN generation_size INTEGER NOT NULL DEFAULT 16;
ALTER TABLE runs ADD COLUMN patience INTEGER NOT NULL DEFAULT 0;
ALTER TABLE candidates ADD COLUMN confirm_median_us REAL;
ALTER TABLE candidates ADD COLUMN confirm_p10_us REAL;
ALTER TABLE candidates ADD COLUMN confirm_p90_us REAL;
ALTER TABLE candidates ADD COLUMN confirmation_json TEXT;
PRAGMA user_version = 2;
)sql";

// The GPU that measured each candidate (a run may measure on several); older candidates have
// none, which is what NULL says.
constexpr std::string_view kMigrateVersion2To3 = R"sql(
ALTER TABLE candidates ADD COLUMN gpu INTEGER;
ALTER TABLE candidates ADD COLUMN gpu_name TEXT;
ALTER TABLE candidates ADD COLUMN gpu_uuid TEXT;
PRAGMA user_version = 3;
)sql";

// Side-by-side re-timings of a run's elite (population/retiming.h): one row per re-timing, one
// per timing. Only new tables, so nothing older changes; a new file gets schema 3 and this too,
// so a fresh file and a migrated one cannot differ.
constexpr std::string_view kMigrateVersion3To4 = R"sql(
CREATE TABLE retimings (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs (id),
  rounds INTEGER NOT NULL,
  gpu INTEGER,
  gpu_name TEXT,
  gpu_uuid TEXT,
  started_at TEXT NOT NULL,
  finished_at TEXT NOT NULL
);
CREATE TABLE retiming_timings (
  retiming_id INTEGER NOT NULL REFERENCES retimings (id),
  sequence INTEGER NOT NULL,
  candidate_id INTEGER NOT NULL REFERENCES candidates (id),
  round INTEGER NOT NULL,
  median_us REAL NOT NULL,
  p10_us REAL NOT NULL,
  p90_us REAL NOT NULL,
  sm_clock_mhz REAL NOT NULL,
  timing_json TEXT NOT NULL,
  PRIMARY KEY (retiming_id, sequence)
);
PRAGMA user_version = 4;
)sql";

// The knobs a run holds fixed (RunSpec::fixed), as a JSON object; every older run searched all.
constexpr std::string_view kMigrateVersion4To5 = R"sql(
ALTER TABLE runs ADD COLUMN fixed_knobs TEXT NOT NULL DEFAULT '{}';
PRAGMA user_version = 5;
)sql";

static_assert(PopulationStore::kApplicationId == 1702260513,
              "the schema texts spell the application id in decimal");
static_assert(PopulationStore::kSchemaVersion == 5, "a new schema needs its text and migration");
static_assert(kMigratedGenerationSize == 16 && kMigratedPatience == 0,
              "the migration's column defaults spell these out");

constexpr std::array<std::pair<RunState, std::string_view>, 3> kRunStateNames = {{
    {RunState::kRunning, "running"},
    {RunState::kPaused, "paused"},
    {RunState::kFinished, "finished"},
}};

std::string Quoted(const fs::path& path) { return "'" + path.string() + "'"; }

std::string NowUtc() {
  const auto now = std::chrono::system_clock::now();
  const int64_t ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
  const std::time_t seconds = static_cast<std::time_t>(ms / 1000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[32];
  const size_t length = std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%S", &utc);
  std::snprintf(text + length, sizeof(text) - length, ".%03dZ", static_cast<int>(ms % 1000));
  return text;
}

int64_t QueryInt(sqlite::Database& db, std::string_view sql) {
  auto statement = db.Prepare(sql);
  if (!statement.Step()) db.Fail("no result from '" + std::string(sql) + "'");
  return statement.ColumnInt(0);
}

// evo::Error messages of the SQLite layer start with the path, which ours already name.
std::string WithoutPathPrefix(const std::string& message, const fs::path& path) {
  const std::string prefix = "database " + Quoted(path) + ": ";
  return message.rfind(prefix, 0) == 0 ? message.substr(prefix.size()) : message;
}

enum class FileKind { kMissing, kEmpty, kSqlite };

// SQLite would take any file and, asked to write, turn it into a database; its own header is
// checked here first so that a file of someone else's is never handed to it.
FileKind InspectFile(const fs::path& path) {
  std::error_code error;
  const fs::file_status status = fs::status(path, error);
  if (status.type() == fs::file_type::not_found) return FileKind::kMissing;
  if (error) throw Error("cannot read " + Quoted(path) + ": " + error.message());
  if (!fs::is_regular_file(status)) {
    throw Error(Quoted(path) + " is not an evo database: it is not a regular file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read " + Quoted(path));
  static constexpr char kMagic[16] = "SQLite format 3";  // with its terminating zero
  char header[sizeof(kMagic)] = {};
  in.read(header, sizeof(header));
  const std::streamsize read = in.gcount();
  if (read == 0) return FileKind::kEmpty;
  if (read != sizeof(header) || std::memcmp(header, kMagic, sizeof(kMagic)) != 0) {
    throw Error(Quoted(path) + " is not an evo database: it is not a SQLite file");
  }
  return FileKind::kSqlite;
}

// Refuses a file that is not ours, is newer or is damaged, reading only: `db` is a read-only
// connection, so nothing reaches the file, not even a WAL checkpoint when it closes (a file in
// WAL mode may gain the empty -wal and -shm files that any reader creates). Returns the schema
// version, 0 for a SQLite database without tables.
int CheckExistingDatabase(sqlite::Database& db) {
  const fs::path& path = db.path();
  int64_t application_id = 0;
  int64_t version = 0;
  int64_t tables = 0;
  try {
    db.Execute("PRAGMA busy_timeout = " + std::to_string(kBusyTimeoutMs));
    application_id = QueryInt(db, "PRAGMA application_id");
    version = QueryInt(db, "PRAGMA user_version");
    tables = QueryInt(db, "SELECT count(*) FROM sqlite_master");
  } catch (const Error& e) {
    throw Error("database " + Quoted(path) + " is corrupt or not an evo database (" +
                WithoutPathPrefix(e.what(), path) + "); it was left as it was");
  }
  if (application_id != PopulationStore::kApplicationId) {
    if (application_id == 0 && version == 0 && tables == 0) return 0;
    char hex[16];
    std::snprintf(hex, sizeof(hex), "0x%08x", static_cast<uint32_t>(application_id));
    throw Error(Quoted(path) +
                " is not an evo database: it is a SQLite database of another application "
                "(application id " +
                hex + ", " + std::to_string(tables) + " schema objects); it was left as it was");
  }
  if (version > PopulationStore::kSchemaVersion) {
    throw Error("database " + Quoted(path) + " was written by a newer evo (schema " +
                std::to_string(version) + "; this evo reads up to " +
                std::to_string(PopulationStore::kSchemaVersion) + ")");
  }
  if (version < 1) {
    throw Error("database " + Quoted(path) +
                " carries evo's application id but no schema version; it was left as it was");
  }
  std::vector<std::string> problems;
  try {
    auto check = db.Prepare("PRAGMA integrity_check(3)");
    while (check.Step()) {
      std::string line = check.ColumnText(0);
      if (line == "ok") continue;
      // One line of message, however SQLite splits its report.
      std::replace(line.begin(), line.end(), '\n', ' ');
      problems.push_back(line);
    }
  } catch (const Error& e) {
    problems.push_back(WithoutPathPrefix(e.what(), path));
  }
  if (!problems.empty()) {
    std::string report;
    for (const std::string& problem : problems) report += (report.empty() ? "" : "; ") + problem;
    throw Error("database " + Quoted(path) + " is corrupt (integrity check: " + report +
                "); it was left as it was");
  }
  return static_cast<int>(version);
}

// Whether this process may create files beside `path` (SQLite's -shm file of a database in
// write-ahead-log mode, even to read it).
bool FolderWritable(const fs::path& path) {
  const fs::path folder = path.has_parent_path() ? path.parent_path() : fs::path(".");
  return ::access(folder.c_str(), W_OK) == 0;
}

}  // namespace

sqlite::Database::Mode ReadOnlyMode(const fs::path& path) {
  if (FolderWritable(path)) return sqlite::Database::Mode::kReadOnly;
  // As the file is on disk, which holds everything unless a write-ahead log beside it holds more.
  fs::path wal = path;
  wal += "-wal";
  std::error_code error;
  if (fs::exists(wal, error) && fs::file_size(wal, error) > 0) {
    throw Error("database " + Quoted(path) +
                " cannot be read from here: its folder is not writable, and its write-ahead log " +
                Quoted(wal) +
                " holds changes that only a process that can write in that folder can read "
                "(an evo run there may still be going, or was killed); read it as a user who "
                "can write there, or once the run has ended");
  }
  return sqlite::Database::Mode::kReadOnlyImmutable;
}

namespace {

sqlite::Database OpenChecked(const fs::path& path, PopulationStore::Access access) {
  using Mode = sqlite::Database::Mode;
  if (access == PopulationStore::Access::kReadWrite && !path.parent_path().empty()) {
    std::error_code error;
    fs::create_directories(path.parent_path(), error);
    if (error) {
      throw Error("cannot create the folder of database " + Quoted(path) + ": " + error.message());
    }
  }
  const FileKind kind = InspectFile(path);
  if (access == PopulationStore::Access::kReadOnly) {
    if (kind == FileKind::kMissing) throw Error("database " + Quoted(path) + " does not exist");
    if (kind == FileKind::kEmpty) throw Error("database " + Quoted(path) + " is empty");
    sqlite::Database db(path, ReadOnlyMode(path));
    if (CheckExistingDatabase(db) == 0) throw Error("database " + Quoted(path) + " is empty");
    return db;
  }
  if (kind == FileKind::kSqlite) {
    sqlite::Database check(path, Mode::kReadOnly);
    CheckExistingDatabase(check);
  }
  sqlite::Database db(path, Mode::kReadWriteCreate);
  if (db.IsReadOnly()) {
    throw Error("database " + Quoted(path) + " cannot be written (check its permissions)");
  }
  db.Execute("PRAGMA busy_timeout = " + std::to_string(kBusyTimeoutMs));
  return db;
}

std::string RunSelect(int schema_version) {
  const std::string settings = schema_version >= 2 ? "generation_size, patience"
                                                   : std::to_string(kMigratedGenerationSize) +
                                                         ", " + std::to_string(kMigratedPatience);
  return "SELECT id, template_name, template_hash, problem, arch, device, evaluator, "
         "driver_version, nvrtc_version, evo_version, seed, budget, elite_size, " +
         settings +
         ", state, stop_reason, created_at, updated_at, "
         "(SELECT count(*) FROM candidates c WHERE c.run_id = runs.id AND c.state = 'finished' "
         "AND c.status <> 'invalid'), "
         "(SELECT count(*) FROM candidates c WHERE c.run_id = runs.id AND c.state = 'pending'), " +
         std::string(schema_version >= 5 ? "fixed_knobs" : "'{}'") + " FROM runs ";
}

RunRecord ReadRun(const sqlite::Statement& row, const fs::path& path) {
  RunRecord run;
  run.id = row.ColumnInt(0);
  RunSpec& spec = run.spec;
  spec.template_name = row.ColumnText(1);
  spec.template_hash = row.ColumnText(2);
  const std::string seed = row.ColumnText(10);
  try {
    spec.problem = nlohmann::json::parse(row.ColumnText(3)).get<Problem>();
  } catch (const nlohmann::json::exception& e) {
    throw Error("database " + Quoted(path) + ": run " + std::to_string(run.id) +
                " has a malformed problem: " + e.what());
  }
  spec.arch = row.ColumnText(4);
  spec.device = row.ColumnText(5);
  spec.evaluator = row.ColumnText(6);
  spec.driver_version = row.ColumnText(7);
  spec.nvrtc_version = row.ColumnText(8);
  spec.evo_version = row.ColumnText(9);
  const auto [end, error] = std::from_chars(seed.data(), seed.data() + seed.size(), spec.seed);
  if (error != std::errc() || end != seed.data() + seed.size() || seed.empty()) {
    throw Error("database " + Quoted(path) + ": run " + std::to_string(run.id) +
                " has a malformed seed '" + seed + "'");
  }
  spec.budget = row.ColumnInt(11);
  spec.elite_size = static_cast<int>(row.ColumnInt(12));
  spec.generation_size = static_cast<int>(row.ColumnInt(13));
  spec.patience = static_cast<int>(row.ColumnInt(14));
  const std::string state = row.ColumnText(15);
  const auto parsed = RunStateFromString(state);
  if (!parsed) {
    throw Error("database " + Quoted(path) + ": run " + std::to_string(run.id) +
                " has an unknown state '" + state + "'");
  }
  run.state = *parsed;
  run.stop_reason = row.ColumnText(16);
  run.created_at = row.ColumnText(17);
  run.updated_at = row.ColumnText(18);
  run.finished_candidates = row.ColumnInt(19);
  run.pending_candidates = row.ColumnInt(20);
  try {
    spec.fixed = nlohmann::json::parse(row.ColumnText(21)).get<Genome>();
  } catch (const nlohmann::json::exception& e) {
    throw Error("database " + Quoted(path) + ": run " + std::to_string(run.id) +
                " has malformed fixed knobs: " + e.what());
  }
  return run;
}

std::string CandidateSelect(int schema_version) {
  // Qualified, since the elite's query joins a table that also has a run_id.
  return std::string(
             "SELECT candidates.id, candidates.run_id, config_id, genome, generation, operator, "
             "parent1, parent2, state, outcome_json, ") +
         (schema_version >= 2 ? "confirmation_json" : "NULL") + ", created_at, finished_at, " +
         (schema_version >= 3 ? "gpu, gpu_name, gpu_uuid" : "NULL, NULL, NULL") +
         " FROM candidates ";
}

std::optional<int64_t> OptionalInt(const sqlite::Statement& row, int column) {
  if (row.ColumnIsNull(column)) return std::nullopt;
  return row.ColumnInt(column);
}

CandidateRecord ReadCandidate(const sqlite::Statement& row, const fs::path& path) {
  CandidateRecord candidate;
  candidate.id = row.ColumnInt(0);
  candidate.run_id = row.ColumnInt(1);
  candidate.config_id = row.ColumnText(2);
  candidate.generation = static_cast<int>(row.ColumnInt(4));
  candidate.proposal.operator_name = row.ColumnText(5);
  candidate.proposal.parent1 = OptionalInt(row, 6);
  candidate.proposal.parent2 = OptionalInt(row, 7);
  const std::string state = row.ColumnText(8);
  if (state == "finished") {
    candidate.state = CandidateState::kFinished;
  } else if (state == "pending") {
    candidate.state = CandidateState::kPending;
  } else {
    throw Error("database " + Quoted(path) + ": candidate " + std::to_string(candidate.id) +
                " has an unknown state '" + state + "'");
  }
  try {
    candidate.proposal.genome = nlohmann::json::parse(row.ColumnText(3)).get<Genome>();
    if (candidate.state == CandidateState::kFinished) {
      candidate.outcome = CandidateOutcomeFromJson(nlohmann::json::parse(row.ColumnText(9)));
      if (!row.ColumnIsNull(10)) {
        candidate.confirmation = TimingFiguresFromJson(nlohmann::json::parse(row.ColumnText(10)));
      }
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error("database " + Quoted(path) + ": candidate " + std::to_string(candidate.id) +
                " has malformed figures: " + e.what());
  }
  candidate.created_at = row.ColumnText(11);
  candidate.finished_at = row.ColumnText(12);
  if (!row.ColumnIsNull(13)) {
    candidate.measured_on =
        GpuIdentity{static_cast<int>(row.ColumnInt(13)), row.ColumnText(14), row.ColumnText(15)};
  }
  return candidate;
}

void TouchRun(sqlite::Database& db, int64_t run_id, const std::string& now) {
  db.Prepare("UPDATE runs SET updated_at = ? WHERE id = ?").Bind(1, now).Bind(2, run_id).Step();
}

void WriteElite(sqlite::Database& db, int64_t run_id, const std::vector<CandidateRecord>& elite) {
  db.Prepare("DELETE FROM elite WHERE run_id = ?").Bind(1, run_id).Step();
  auto insert = db.Prepare("INSERT INTO elite (run_id, rank, candidate_id) VALUES (?, ?, ?)");
  for (size_t i = 0; i < elite.size(); ++i) {
    insert.Bind(1, run_id).Bind(2, static_cast<int64_t>(i + 1)).Bind(3, elite[i].id).Step();
    insert.Reset();
  }
}

int64_t EliteSize(sqlite::Database& db, int64_t run_id) {
  auto statement = db.Prepare("SELECT elite_size FROM runs WHERE id = ?");
  statement.Bind(1, run_id);
  if (!statement.Step()) {
    throw Error("database " + Quoted(db.path()) + " has no run " + std::to_string(run_id));
  }
  return statement.ColumnInt(0);
}

// A new file, or an empty SQLite database, gets the whole current schema.
void CreateSchema(sqlite::Database& db) {
  sqlite::Transaction transaction(db);
  // Two evo processes may have opened the same new file; the second finds the first's schema.
  if (QueryInt(db, "SELECT count(*) FROM sqlite_master") > 0) {
    if (QueryInt(db, "PRAGMA application_id") == PopulationStore::kApplicationId &&
        QueryInt(db, "PRAGMA user_version") == PopulationStore::kSchemaVersion) {
      return;
    }
    throw Error("database " + Quoted(db.path()) + " was changed by another program while opening");
  }
  db.Execute(kSchemaVersion3);
  db.Execute(kMigrateVersion3To4);
  db.Execute(kMigrateVersion4To5);
  transaction.Commit();
}

}  // namespace

std::string_view ToString(RunState state) {
  for (const auto& [value, name] : kRunStateNames) {
    if (value == state) return name;
  }
  return "unknown";
}

std::optional<RunState> RunStateFromString(std::string_view name) {
  for (const auto& [value, text] : kRunStateNames) {
    if (text == name) return value;
  }
  return std::nullopt;
}

std::string_view SchemaVersion1Sql() { return kSchemaVersion1; }
std::string_view SchemaVersion2Sql() { return kSchemaVersion2; }
std::string_view SchemaVersion3Sql() { return kSchemaVersion3; }
std::string_view MigrateVersion3To4Sql() { return kMigrateVersion3To4; }

std::vector<CandidateRecord> SelectElite(const std::vector<CandidateRecord>& candidates,
                                         int elite_size) {
  std::vector<CandidateRecord> scored;
  for (const CandidateRecord& candidate : candidates) {
    if (candidate.score_us()) scored.push_back(candidate);
  }
  std::sort(scored.begin(), scored.end(), [](const CandidateRecord& a, const CandidateRecord& b) {
    const double score_a = *a.score_us();
    const double score_b = *b.score_us();
    if (score_a != score_b) return score_a < score_b;
    return a.id < b.id;
  });
  scored.resize(std::min(scored.size(), static_cast<size_t>(std::max(elite_size, 0))));
  return scored;
}

PopulationStore::PopulationStore(const fs::path& path, Access access)
    : db_(OpenChecked(path, access)) {
  if (access == Access::kReadWrite) {
    // Readers never block the writer, and a committed candidate survives a power cut.
    auto journal = db_.Prepare("PRAGMA journal_mode = WAL");
    if (!journal.Step() || journal.ColumnText(0) != "wal") {
      throw Error("database " + Quoted(path) +
                  " cannot use a write-ahead log here (is it on a network file system?)");
    }
    db_.Execute("PRAGMA synchronous = FULL");
    db_.Execute("PRAGMA foreign_keys = ON");
  }
  opened_schema_version_ = static_cast<int>(QueryInt(db_, "PRAGMA user_version"));
  schema_version_ = opened_schema_version_;
  if (access == Access::kReadWrite) {
    if (opened_schema_version_ == 0) {
      CreateSchema(db_);
    } else if (opened_schema_version_ < kSchemaVersion) {
      Migrate();
    }
    schema_version_ = kSchemaVersion;
  }
}

void PopulationStore::Migrate() {
  sqlite::Transaction transaction(db_);
  // Another evo may have migrated it since the check; the transaction now holds the file.
  const int64_t version = QueryInt(db_, "PRAGMA user_version");
  if (version == kSchemaVersion) return;
  if (version < 1 || version > 4) {
    throw Error("database " + Quoted(path()) + " has schema " + std::to_string(version) +
                ", which this evo cannot migrate");
  }
  if (version == 1) db_.Execute(kMigrateVersion1To2);
  if (version <= 2) db_.Execute(kMigrateVersion2To3);
  if (version <= 3) db_.Execute(kMigrateVersion3To4);
  db_.Execute(kMigrateVersion4To5);
  schema_version_ = kSchemaVersion;
  if (version == 1) {
    // Version 1 had no confirmation, so its elites do not follow today's rule; the elite is what
    // the stored candidates imply, and now recomputed from them.
    for (const RunRecord& run : Runs()) {
      WriteElite(db_, run.id, SelectElite(Candidates(run.id), run.spec.elite_size));
    }
  }
  transaction.Commit();
}

int64_t PopulationStore::CreateRun(const RunSpec& spec) {
  const std::string now = NowUtc();
  auto insert = db_.Prepare(
      "INSERT INTO runs (template_name, template_hash, problem, arch, device, evaluator, "
      "driver_version, nvrtc_version, evo_version, seed, budget, elite_size, generation_size, "
      "patience, state, stop_reason, created_at, updated_at, fixed_knobs) "
      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '', ?, ?, ?)");
  insert.Bind(1, spec.template_name)
      .Bind(2, spec.template_hash)
      .Bind(3, nlohmann::json(spec.problem).dump())
      .Bind(4, spec.arch)
      .Bind(5, spec.device)
      .Bind(6, spec.evaluator)
      .Bind(7, spec.driver_version)
      .Bind(8, spec.nvrtc_version)
      .Bind(9, spec.evo_version)
      // Text, because SQLite's integers are signed and a seed takes all 64 bits.
      .Bind(10, std::to_string(spec.seed))
      .Bind(11, spec.budget)
      .Bind(12, static_cast<int64_t>(spec.elite_size))
      .Bind(13, static_cast<int64_t>(spec.generation_size))
      .Bind(14, static_cast<int64_t>(spec.patience))
      .Bind(15, ToString(RunState::kRunning))
      .Bind(16, now)
      .Bind(17, now)
      .Bind(18, nlohmann::json(spec.fixed).dump())
      .Step();
  return db_.LastInsertRowId();
}

std::optional<RunRecord> PopulationStore::FindRun(int64_t run_id) {
  auto select = db_.Prepare(RunSelect(schema_version_) + "WHERE id = ?");
  select.Bind(1, run_id);
  if (!select.Step()) return std::nullopt;
  return ReadRun(select, path());
}

std::vector<RunRecord> PopulationStore::Runs() {
  auto select = db_.Prepare(RunSelect(schema_version_) + "ORDER BY id");
  std::vector<RunRecord> runs;
  while (select.Step()) runs.push_back(ReadRun(select, path()));
  return runs;
}

void PopulationStore::SetRunState(int64_t run_id, RunState state, std::string_view stop_reason) {
  db_.Prepare("UPDATE runs SET state = ?, stop_reason = ?, updated_at = ? WHERE id = ?")
      .Bind(1, ToString(state))
      .Bind(2, stop_reason)
      .Bind(3, NowUtc())
      .Bind(4, run_id)
      .Step();
  if (db_.Changes() == 0) {
    throw Error("database " + Quoted(path()) + " has no run " + std::to_string(run_id));
  }
}

void PopulationStore::SetRunBudget(int64_t run_id, int64_t budget) {
  db_.Prepare("UPDATE runs SET budget = ?, updated_at = ? WHERE id = ?")
      .Bind(1, budget)
      .Bind(2, NowUtc())
      .Bind(3, run_id)
      .Step();
  if (db_.Changes() == 0) {
    throw Error("database " + Quoted(path()) + " has no run " + std::to_string(run_id));
  }
}

void PopulationStore::SetRunPatience(int64_t run_id, int patience) {
  db_.Prepare("UPDATE runs SET patience = ?, updated_at = ? WHERE id = ?")
      .Bind(1, static_cast<int64_t>(patience))
      .Bind(2, NowUtc())
      .Bind(3, run_id)
      .Step();
  if (db_.Changes() == 0) {
    throw Error("database " + Quoted(path()) + " has no run " + std::to_string(run_id));
  }
}

std::vector<int64_t> PopulationStore::AddPending(
    int64_t run_id, int generation,
    const std::vector<std::pair<std::string, Proposal>>& proposals) {
  sqlite::Transaction transaction(db_);
  EliteSize(db_, run_id);  // throws for an unknown run
  const std::string now = NowUtc();
  auto existing = db_.Prepare("SELECT id FROM candidates WHERE run_id = ? AND config_id = ?");
  auto insert = db_.Prepare(
      "INSERT INTO candidates (run_id, config_id, genome, generation, operator, parent1, "
      "parent2, state, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', ?)");
  std::vector<int64_t> ids;
  std::set<std::string_view> batch;
  for (const auto& [config_id, proposal] : proposals) {
    if (!batch.insert(config_id).second) {
      throw Error("configuration " + config_id + " is proposed twice in generation " +
                  std::to_string(generation) + " of run " + std::to_string(run_id));
    }
    existing.Bind(1, run_id).Bind(2, config_id);
    if (existing.Step()) {
      throw Error("configuration " + config_id + " is already candidate " +
                  std::to_string(existing.ColumnInt(0)) + " of run " + std::to_string(run_id) +
                  " in database " + Quoted(path()));
    }
    existing.Reset();
    insert.Bind(1, run_id)
        .Bind(2, config_id)
        .Bind(3, nlohmann::json(proposal.genome).dump())
        .Bind(4, static_cast<int64_t>(generation))
        .Bind(5, proposal.operator_name)
        .Bind(6, proposal.parent1)
        .Bind(7, proposal.parent2)
        .Bind(8, now)
        .Step();
    insert.Reset();
    ids.push_back(db_.LastInsertRowId());
  }
  TouchRun(db_, run_id, now);
  transaction.Commit();
  return ids;
}

int64_t PopulationStore::DropPending(int64_t run_id) {
  sqlite::Transaction transaction(db_);
  EliteSize(db_, run_id);  // throws for an unknown run
  db_.Prepare("DELETE FROM candidates WHERE run_id = ? AND state = 'pending'")
      .Bind(1, run_id)
      .Step();
  const int64_t dropped = db_.Changes();
  const std::string now = NowUtc();
  TouchRun(db_, run_id, now);
  transaction.Commit();
  return dropped;
}

void PopulationStore::Finish(int64_t candidate_id, const CandidateOutcome& outcome,
                             const std::optional<TimingFigures>& confirmation,
                             const std::optional<GpuIdentity>& measured_on) {
  sqlite::Transaction transaction(db_);
  int64_t run_id = 0;
  {
    auto find = db_.Prepare("SELECT run_id, state FROM candidates WHERE id = ?");
    find.Bind(1, candidate_id);
    if (!find.Step()) {
      throw Error("database " + Quoted(path()) + " has no candidate " +
                  std::to_string(candidate_id));
    }
    if (find.ColumnText(1) != "pending") {
      throw Error("candidate " + std::to_string(candidate_id) + " of database " + Quoted(path()) +
                  " is already finished");
    }
    run_id = find.ColumnInt(0);
  }

  // The figures people query get columns of their own; the JSON keeps every one exactly.
  const KernelResources* resources = outcome.resources ? &*outcome.resources : nullptr;
  const TimingFigures* timing = outcome.timing();
  const bool compiled = outcome.status != Status::kInvalid;
  const bool checked = outcome.gpu && outcome.gpu->correctness.checks > 0;
  auto resource = [&](int64_t KernelResources::*field) -> std::optional<int64_t> {
    if (resources == nullptr) return std::nullopt;
    return resources->*field;
  };
  auto timed = [&](const TimingFigures* figures,
                   double TimingFigures::*field) -> std::optional<double> {
    if (figures == nullptr) return std::nullopt;
    return figures->*field;
  };
  const TimingFigures* confirmed = confirmation ? &*confirmation : nullptr;
  const std::string now = NowUtc();
  auto update = db_.Prepare(
      "UPDATE candidates SET state = 'finished', status = ?, reason = ?, registers = ?, "
      "spill_stores = ?, spill_loads = ?, smem_static = ?, dynamic_smem = ?, threads = ?, "
      "compile_ms = ?, max_abs_error = ?, median_us = ?, p10_us = ?, p90_us = ?, tflops = ?, "
      "outcome_json = ?, confirm_median_us = ?, confirm_p10_us = ?, confirm_p90_us = ?, "
      "confirmation_json = ?, finished_at = ?, gpu = ?, gpu_name = ?, gpu_uuid = ? WHERE id = ?");
  update.Bind(1, ToString(outcome.status))
      .Bind(2, outcome.reason)
      .Bind(3, resources ? std::optional<int64_t>(resources->registers) : std::nullopt)
      .Bind(4, resource(&KernelResources::spill_stores))
      .Bind(5, resource(&KernelResources::spill_loads))
      .Bind(6, resource(&KernelResources::smem_static))
      .Bind(7, compiled ? std::optional<int64_t>(outcome.dynamic_smem) : std::nullopt)
      .Bind(8, compiled ? std::optional<int64_t>(outcome.threads_per_block) : std::nullopt)
      .Bind(9, compiled ? std::optional<double>(outcome.compile_ms) : std::nullopt)
      .Bind(10, checked ? std::optional<double>(outcome.gpu->correctness.worst.max_abs_error)
                        : std::nullopt)
      .Bind(11, timed(timing, &TimingFigures::median_us))
      .Bind(12, timed(timing, &TimingFigures::p10_us))
      .Bind(13, timed(timing, &TimingFigures::p90_us))
      .Bind(14, timed(timing, &TimingFigures::tflops))
      .Bind(15, CandidateOutcomeToJson(outcome).dump())
      .Bind(16, timed(confirmed, &TimingFigures::median_us))
      .Bind(17, timed(confirmed, &TimingFigures::p10_us))
      .Bind(18, timed(confirmed, &TimingFigures::p90_us))
      .Bind(19, confirmed ? std::optional<std::string>(TimingFiguresToJson(*confirmed).dump())
                          : std::nullopt)
      .Bind(20, now)
      .Bind(21, measured_on ? std::optional<int64_t>(measured_on->ordinal) : std::nullopt)
      .Bind(22, measured_on ? std::optional<std::string>(measured_on->name) : std::nullopt)
      .Bind(23, measured_on ? std::optional<std::string>(measured_on->uuid) : std::nullopt)
      .Bind(24, candidate_id)
      .Step();
  TouchRun(db_, run_id, now);

  // Finished candidates never change, so the best K of all of them are the best K of the
  // previous elite and this one: the rule runs over K + 1 candidates, not the whole run.
  std::vector<CandidateRecord> contenders = EliteByScore(run_id);
  contenders.push_back(*FindCandidate(candidate_id));
  WriteElite(db_, run_id, SelectElite(contenders, static_cast<int>(EliteSize(db_, run_id))));
  transaction.Commit();
}

std::vector<CandidateRecord> PopulationStore::Candidates(int64_t run_id) {
  auto select = db_.Prepare(CandidateSelect(schema_version_) + "WHERE run_id = ? ORDER BY id");
  select.Bind(1, run_id);
  std::vector<CandidateRecord> candidates;
  while (select.Step()) candidates.push_back(ReadCandidate(select, path()));
  return candidates;
}

std::optional<CandidateRecord> PopulationStore::FindCandidate(int64_t candidate_id) {
  auto select = db_.Prepare(CandidateSelect(schema_version_) + "WHERE id = ?");
  select.Bind(1, candidate_id);
  if (!select.Step()) return std::nullopt;
  return ReadCandidate(select, path());
}

std::vector<CandidateRecord> PopulationStore::Elite(int64_t run_id) {
  std::vector<CandidateRecord> by_score = EliteByScore(run_id);
  const std::optional<Retiming> latest = LatestRetiming(run_id);
  if (!latest) return by_score;
  std::vector<CandidateRecord> retimed;
  for (const int64_t id : latest->Members()) {
    if (std::optional<CandidateRecord> c = FindCandidate(id)) retimed.push_back(std::move(*c));
  }
  retimed = SelectElite(retimed, static_cast<int>(retimed.size()));
  return EliteBySideBySide(std::move(by_score), std::move(retimed), latest);
}

std::vector<CandidateRecord> PopulationStore::Contenders(int64_t run_id) {
  return SelectContenders(Candidates(run_id), static_cast<int>(EliteSize(db_, run_id)));
}

int64_t PopulationStore::AddRetiming(const Retiming& retiming) {
  sqlite::Transaction transaction(db_);
  auto member = db_.Prepare("SELECT run_id, state FROM candidates WHERE id = ?");
  for (const int64_t id : retiming.Members()) {
    member.Bind(1, id);
    if (!member.Step() || member.ColumnInt(0) != retiming.run_id ||
        member.ColumnText(1) != "finished") {
      throw Error("database " + Quoted(path()) + ": candidate " + std::to_string(id) +
                  " is not a finished candidate of run " + std::to_string(retiming.run_id) +
                  ", so it cannot be re-timed");
    }
    member.Reset();
  }
  const std::optional<GpuIdentity>& gpu = retiming.gpu;
  db_.Prepare(
         "INSERT INTO retimings (run_id, rounds, gpu, gpu_name, gpu_uuid, started_at, "
         "finished_at) VALUES (?, ?, ?, ?, ?, ?, ?)")
      .Bind(1, retiming.run_id)
      .Bind(2, static_cast<int64_t>(retiming.rounds))
      .Bind(3, gpu ? std::optional<int64_t>(gpu->ordinal) : std::nullopt)
      .Bind(4, gpu ? std::optional<std::string>(gpu->name) : std::nullopt)
      .Bind(5, gpu ? std::optional<std::string>(gpu->uuid) : std::nullopt)
      .Bind(6, retiming.started_at)
      .Bind(7, retiming.finished_at)
      .Step();
  const int64_t id = db_.LastInsertRowId();
  auto insert = db_.Prepare(
      "INSERT INTO retiming_timings (retiming_id, sequence, candidate_id, round, median_us, "
      "p10_us, p90_us, sm_clock_mhz, timing_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)");
  for (size_t i = 0; i < retiming.timings.size(); ++i) {
    const RetimingTiming& t = retiming.timings[i];
    insert.Bind(1, id)
        .Bind(2, static_cast<int64_t>(i))
        .Bind(3, t.candidate_id)
        .Bind(4, static_cast<int64_t>(t.round))
        .Bind(5, t.timing.median_us)
        .Bind(6, t.timing.p10_us)
        .Bind(7, t.timing.p90_us)
        .Bind(8, t.timing.sm_clock_mhz)
        .Bind(9, TimingFiguresToJson(t.timing).dump())
        .Step();
    insert.Reset();
  }
  TouchRun(db_, retiming.run_id, NowUtc());
  transaction.Commit();
  return id;
}

std::vector<Retiming> PopulationStore::Retimings(int64_t run_id) {
  return ReadRetimings("run_id = ?", run_id);
}

std::optional<Retiming> PopulationStore::LatestRetiming(int64_t run_id) {
  std::vector<Retiming> latest =
      ReadRetimings("id = (SELECT max(id) FROM retimings WHERE run_id = ?)", run_id);
  if (latest.empty()) return std::nullopt;
  return std::move(latest.front());
}

std::vector<Retiming> PopulationStore::ReadRetimings(const std::string& where, int64_t value) {
  std::vector<Retiming> retimings;
  if (schema_version_ < 4) return retimings;
  auto select = db_.Prepare(
      "SELECT id, run_id, rounds, gpu, gpu_name, gpu_uuid, started_at, finished_at FROM "
      "retimings WHERE " +
      where + " ORDER BY id");
  select.Bind(1, value);
  while (select.Step()) {
    Retiming retiming;
    retiming.id = select.ColumnInt(0);
    retiming.run_id = select.ColumnInt(1);
    retiming.rounds = static_cast<int>(select.ColumnInt(2));
    if (!select.ColumnIsNull(3)) {
      retiming.gpu = GpuIdentity{static_cast<int>(select.ColumnInt(3)), select.ColumnText(4),
                                 select.ColumnText(5)};
    }
    retiming.started_at = select.ColumnText(6);
    retiming.finished_at = select.ColumnText(7);
    retimings.push_back(std::move(retiming));
  }
  auto timings = db_.Prepare(
      "SELECT candidate_id, round, timing_json FROM retiming_timings WHERE retiming_id = ? "
      "ORDER BY sequence");
  for (Retiming& retiming : retimings) {
    timings.Bind(1, retiming.id);
    while (timings.Step()) {
      RetimingTiming t;
      t.candidate_id = timings.ColumnInt(0);
      t.round = static_cast<int>(timings.ColumnInt(1));
      try {
        t.timing = TimingFiguresFromJson(nlohmann::json::parse(timings.ColumnText(2)));
      } catch (const nlohmann::json::exception& e) {
        throw Error("database " + Quoted(path()) + ": re-timing " + std::to_string(retiming.id) +
                    " has malformed figures: " + e.what());
      }
      retiming.timings.push_back(std::move(t));
    }
    timings.Reset();
  }
  return retimings;
}

std::vector<CandidateRecord> PopulationStore::EliteByScore(int64_t run_id) {
  auto select = db_.Prepare(CandidateSelect(schema_version_) +
                            "JOIN elite ON elite.candidate_id = candidates.id "
                            "WHERE elite.run_id = ? ORDER BY elite.rank");
  select.Bind(1, run_id);
  std::vector<CandidateRecord> elite;
  while (select.Step()) elite.push_back(ReadCandidate(select, path()));
  return elite;
}

}  // namespace evo
