#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernel_templates/genome.h"
#include "population/candidate.h"
#include "population/retiming.h"
#include "population/sqlite.h"

namespace evo {

// What a run searches and how; written when the run is created.
struct RunSpec {
  std::string template_name;
  std::string template_hash;  // KernelTemplate::source_hash of the version searched
  Problem problem;
  std::string arch;            // "sm_90"
  std::string device;          // the GPU's name (for a replay: the GPU the recording came from)
  std::string evaluator;       // "gpu", or "replay <file>"
  std::string driver_version;  // "13.0"; empty when no driver was involved
  std::string nvrtc_version;
  std::string evo_version;
  uint64_t seed = 0;
  int64_t budget = 0;  // candidates that reach the gates
  int elite_size = 3;  // K of the Top-K elite
  int generation_size = 16;
  int patience = 0;  // generations without improvement before the run stops; 0: no limit
  // Knobs held at one value for the whole run (`evo run --fix`), part of the task it searches:
  // a run continues only a run that fixed the same. Empty: every knob searched.
  Genome fixed;
};

enum class RunState {
  kRunning,   // being searched, or its process was killed: resumable
  kPaused,    // stopped on purpose (time limit, Ctrl-C): resumable
  kFinished,  // budget spent, patience out or space exhausted; a larger budget extends it
};

std::string_view ToString(RunState state);
std::optional<RunState> RunStateFromString(std::string_view name);

struct RunRecord {
  int64_t id = 0;
  RunSpec spec;
  RunState state = RunState::kRunning;
  std::string stop_reason;  // why it last stopped; empty while running
  std::string created_at;   // ISO 8601, UTC
  std::string updated_at;
  int64_t finished_candidates = 0;  // that reached the gates: what the budget counts
  int64_t pending_candidates = 0;
};

// The population of every run in one SQLite file: runs, candidates with their genome, parents,
// operator, generation, status and every figure from the gates, and each run's elite.
//
// The file is stamped with an application id and a schema version; older schemas are migrated
// when opened for writing, newer ones refused. WAL journal, synchronous=FULL and a busy timeout,
// so readers (`evo show`) never block the writer and a committed candidate survives a power cut.
// Opening checks integrity; a file that is not an evo database, is corrupt, or has a newer
// schema gives evo::Error saying so, and the file is left exactly as it was.
// How to open `path` to read it without writing anything: kReadOnly, or kReadOnlyImmutable
// where this process cannot write in its folder (a colleague's results, a read-only share), in
// which SQLite can make no -shm file even to read. Throws evo::Error there when a write-ahead
// log beside it holds changes, which only a writer's kind of connection can read.
sqlite::Database::Mode ReadOnlyMode(const std::filesystem::path& path);

class PopulationStore {
 public:
  static constexpr int kSchemaVersion = 5;
  static constexpr int32_t kApplicationId = 0x65766f21;  // "evo!"

  enum class Access { kReadWrite, kReadOnly };

  // kReadWrite creates the file (and its folder) when missing; kReadOnly requires it.
  PopulationStore(const std::filesystem::path& path, Access access);

  const std::filesystem::path& path() const { return db_.path(); }
  // The schema version the file had when opened (0 for a file this call created).
  int opened_schema_version() const { return opened_schema_version_; }

  int64_t CreateRun(const RunSpec& spec);
  std::optional<RunRecord> FindRun(int64_t run_id);
  std::vector<RunRecord> Runs();  // by id
  void SetRunState(int64_t run_id, RunState state, std::string_view stop_reason);
  // A resumed run may be given a larger budget or other patience; nothing else of a run changes.
  void SetRunBudget(int64_t run_id, int64_t budget);
  void SetRunPatience(int64_t run_id, int patience);

  // One transaction: the proposals of one generation, as pending candidates in the given order.
  // Returns their ids. Throws evo::Error when a config id is already in the run.
  std::vector<int64_t> AddPending(int64_t run_id, int generation,
                                  const std::vector<std::pair<std::string, Proposal>>& proposals);

  // One transaction: deletes the run's pending candidates, which were proposed and never
  // measured, so that the search may propose others in their place; no measurement is lost.
  // Returns how many there were. Throws evo::Error for an unknown run.
  int64_t DropPending(int64_t run_id);

  // One transaction per finished candidate: its outcome and confirmation, the GPU that measured
  // both (none when it never reached one), and the run's elite recomputed from every stored
  // candidate (SelectElite). Throws when the candidate is unknown or already finished.
  void Finish(int64_t candidate_id, const CandidateOutcome& outcome,
              const std::optional<TimingFigures>& confirmation,
              const std::optional<GpuIdentity>& measured_on = std::nullopt);

  std::vector<CandidateRecord> Candidates(int64_t run_id);  // by id
  std::optional<CandidateRecord> FindCandidate(int64_t candidate_id);
  // The elite, best first: when the latest side-by-side re-timing timed every member of the
  // score's elite, K of the candidates it timed, by its medians and, where those cannot tell two
  // apart, by cycles (each then carries its CandidateRecord::side_by_side; a close contender can
  // take a member's place), else the elite by score (EliteBySideBySide). What users take as "the
  // best" (show, exports, tune's dispatch) comes from here.
  std::vector<CandidateRecord> Elite(int64_t run_id);
  // What a re-timing of the run times: the score's elite and its close contenders
  // (SelectContenders), best first by score.
  std::vector<CandidateRecord> Contenders(int64_t run_id);
  // The elite by score alone (SelectElite's order), as the search decides on it: what it
  // proposes and confirms must not depend on whether a re-timing ran in between.
  std::vector<CandidateRecord> EliteByScore(int64_t run_id);

  // One transaction: a side-by-side re-timing of the run's elite with every timing. Returns its
  // id. Throws when a timed candidate is not a finished candidate of the run.
  int64_t AddRetiming(const Retiming& retiming);
  // The run's re-timings, oldest first, and the latest; none in a file older than schema 4.
  std::vector<Retiming> Retimings(int64_t run_id);
  std::optional<Retiming> LatestRetiming(int64_t run_id);

 private:
  void Migrate();
  std::vector<Retiming> ReadRetimings(const std::string& where, int64_t value);
  sqlite::Database db_;
  int opened_schema_version_ = 0;
  // The schema queries are written against: kSchemaVersion, or an older one read without
  // migrating through kReadOnly.
  int schema_version_ = kSchemaVersion;
};

// The elite rule, which the store applies on every Finish and tests recompute: among a run's
// finished candidates with a score (CandidateRecord::score_us), the `elite_size` lowest scores,
// ties broken by the lower candidate id.
std::vector<CandidateRecord> SelectElite(const std::vector<CandidateRecord>& candidates,
                                         int elite_size);

// The SQL that created schema versions 1, 2 and 3, and that made 3 into 4, kept so that the
// migrations from them stay tested.
std::string_view SchemaVersion1Sql();
std::string_view SchemaVersion2Sql();
std::string_view SchemaVersion3Sql();
std::string_view MigrateVersion3To4Sql();

}  // namespace evo
