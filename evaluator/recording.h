#pragma once

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "evaluator/candidate_evaluator.h"

namespace evo {

// Measurements of one task recorded on a GPU by `evo sweep`: a header line, then one JSON line
// per configuration with its outcome and any re-measurements. The replay evaluator answers from
// it, so the whole search loop runs, on real figures, where there is no GPU.
struct RecordingHeader {
  std::string recorded_by;  // the command line
  std::string recorded_at;  // ISO 8601, UTC
  std::string evo_version;
  std::string template_name;
  Problem problem;
  EvaluatorIdentity identity;  // of the GPU pipeline that measured
};

struct RecordedCandidate {
  Genome genome;
  CandidateOutcome outcome;
  std::vector<GpuVerdict> remeasurements;  // confirming measurements, in the order taken
};

struct Recording {
  RecordingHeader header;
  std::map<Genome, RecordedCandidate> candidates;
  std::string sha256;  // of the file's bytes: which recording it is, whatever its path
};

// Throws evo::Error naming the file and line for anything malformed. A last line cut short (a
// sweep killed while writing) is ignored when `allow_torn_tail`.
Recording ReadRecording(const std::filesystem::path& path, bool allow_torn_tail = false);

// A replay's evaluator reads "replay PATH (sha256 HEX16)"; runs stored before the hash read
// "replay PATH".
inline constexpr std::string_view kRecordingHashMark = " (sha256 ";

// Whether two evaluator identities replay one recording: by its content where both name it, and
// by the path where the stored one predates the hash.
bool ReplaysOneRecording(const std::string& stored, const std::string& now);

// The header line alone (what task a recording measured), without reading its configurations.
RecordingHeader ReadRecordingHeader(const std::filesystem::path& path);

// Appends to a recording, each line flushed and synced, so a killed sweep loses at most the
// configuration it was writing and can continue where it stopped.
class RecordingWriter {
 public:
  // Creates the file with `header`, or continues an existing one of the same task and template
  // version (a torn last line is cut off); throws evo::Error otherwise.
  RecordingWriter(const std::filesystem::path& path, const RecordingHeader& header);
  RecordingWriter(const RecordingWriter&) = delete;
  RecordingWriter& operator=(const RecordingWriter&) = delete;
  ~RecordingWriter();

  // What the file already held when it was opened.
  const std::map<Genome, RecordedCandidate>& existing() const { return existing_; }
  void Append(const RecordedCandidate& candidate);

 private:
  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
  std::map<Genome, RecordedCandidate> existing_;
};

// Answers from a recording instead of a GPU, and says so. `delay` is spent per evaluation, so
// tests can give a replayed run a GPU-like pace. `gpus` simulates that many GPUs (named by these
// ordinals, each of the recording's model) answering at once, each lane spending its own
// delay: a search over several GPUs runs, concurrency and all, where there is none.
class ReplayEvaluator final : public CandidateEvaluator {
 public:
  // Throws evo::Error when the recording is of another template or problem. A recording made
  // before the template gained a knob or a problem parameter replays as measured with that knob
  // (parameter) at its default: its configurations and problem are completed with the
  // manifest's defaults, which is exact where the new knob's default leaves the kernel as it
  // was recorded.
  // `template_hash`, where given, is the template's version today: a recording of another
  // version says so in the notice (its figures are of the kernel as it was then).
  ReplayEvaluator(const std::filesystem::path& path, const Manifest& manifest,
                  const Problem& problem, std::chrono::milliseconds delay = {},
                  std::string_view template_hash = {}, const std::vector<int>& gpus = {0});

  const EvaluatorIdentity& identity() const override { return identity_; }
  const std::vector<GpuIdentity>& lanes() const override { return lanes_; }
  void Prefetch(const std::vector<Genome>&) override {}
  void Speculate(const std::vector<Genome>&) override {}
  bool ReadyToMeasure(const Genome&) const override { return true; }
  // Throws evo::Error when the recording holds no such configuration.
  CandidateOutcome Evaluate(int lane, const Genome& genome) override;
  // The recorded re-measurements in turn, then the first measurement again.
  GpuVerdict Remeasure(int lane, const Genome& genome) override;
  // A replay cannot re-time: its figures were taken one configuration after another when the
  // sweep was recorded, so timing them "side by side" would only repeat those.
  std::string RetimingUnavailable() const override {
    return "a replay repeats the figures its recording holds and cannot time the elite side "
           "by side";
  }

  size_t size() const { return recording_.candidates.size(); }
  // What the recording holds of a configuration; throws evo::Error when it holds nothing.
  const RecordedCandidate& Find(const Genome& genome) const;

  // The space the recording measured: `manifest` with each knob's domain cut to the values the
  // recording holds (a knob the recording predates keeps its default alone, a knob the sweep
  // fixed with --fix its fixed value), and the starting points that set a knob to a value
  // outside that left out. A replayed search searches this space, every point of it recorded.
  Manifest RecordedSpace(const Manifest& manifest) const;

 private:
  Recording recording_;
  std::vector<std::string> unrecorded_knobs_;  // knobs the recording predates
  EvaluatorIdentity identity_;
  std::vector<GpuIdentity> lanes_;
  std::chrono::milliseconds delay_;
  std::mutex mutex_;  // lanes remeasure at once
  std::map<Genome, size_t> remeasured_;
};

std::string NowIso8601();

}  // namespace evo
