#include "evaluator/recording.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "common/error.h"
#include "common/sha256.h"
#include "evaluator/gpu_verdict_json.h"

namespace evo {
namespace {

constexpr int kRecordingFormat = 1;

nlohmann::json HeaderToJson(const RecordingHeader& header) {
  const EvaluatorIdentity& id = header.identity;
  return {{"evo_recording", kRecordingFormat},
          {"recorded_by", header.recorded_by},
          {"recorded_at", header.recorded_at},
          {"evo_version", header.evo_version},
          {"template", header.template_name},
          {"template_hash", id.template_hash},
          {"problem", header.problem},
          {"device", id.device},
          {"arch", id.arch},
          {"driver_version", id.driver_version},
          {"nvrtc_version", id.nvrtc_version}};
}

RecordingHeader HeaderFromJson(const nlohmann::json& json) {
  if (json.value("evo_recording", 0) != kRecordingFormat) {
    throw Error("not an evo recording of format " + std::to_string(kRecordingFormat));
  }
  RecordingHeader header;
  header.recorded_by = json.at("recorded_by").get<std::string>();
  header.recorded_at = json.at("recorded_at").get<std::string>();
  header.evo_version = json.at("evo_version").get<std::string>();
  header.template_name = json.at("template").get<std::string>();
  header.problem = json.at("problem").get<Problem>();
  header.identity.template_hash = json.at("template_hash").get<std::string>();
  header.identity.device = json.at("device").get<std::string>();
  header.identity.arch = json.at("arch").get<std::string>();
  header.identity.driver_version = json.at("driver_version").get<std::string>();
  header.identity.nvrtc_version = json.at("nvrtc_version").get<std::string>();
  return header;
}

nlohmann::json CandidateToJson(const RecordedCandidate& candidate) {
  nlohmann::json json = {{"genome", candidate.genome},
                         {"outcome", CandidateOutcomeToJson(candidate.outcome)}};
  if (!candidate.remeasurements.empty()) {
    json["remeasurements"] = nlohmann::json::array();
    for (const GpuVerdict& verdict : candidate.remeasurements) {
      json["remeasurements"].push_back(GpuVerdictToJson(verdict));
    }
  }
  return json;
}

RecordedCandidate CandidateFromJson(const nlohmann::json& json) {
  RecordedCandidate candidate;
  candidate.genome = json.at("genome").get<Genome>();
  candidate.outcome = CandidateOutcomeFromJson(json.at("outcome"));
  if (json.contains("remeasurements")) {
    for (const auto& verdict : json["remeasurements"]) {
      candidate.remeasurements.push_back(GpuVerdictFromJson(verdict));
    }
  }
  return candidate;
}

// Recordings are kept compressed where space counts (the held-out ones of .device/holdout), and
// a compressed one would otherwise be refused with a JSON parser's complaint about its first
// byte. `start`: the file's first bytes.
void RefuseCompressed(const std::filesystem::path& path, std::string_view start) {
  struct Format {
    std::string_view magic, name, command;
  };
  static constexpr Format kFormats[] = {{"\x1f\x8b", "gzip", "gunzip -k"},
                                        {"\xfd\x37\x7a\x58\x5a", "xz", "unxz -k"},
                                        {"\x28\xb5\x2f\xfd", "zstd", "unzstd"},
                                        {"BZh", "bzip2", "bunzip2 -k"}};
  for (const Format& format : kFormats) {
    if (start.substr(0, format.magic.size()) == format.magic) {
      throw Error("recording '" + path.string() + "' is " + std::string(format.name) +
                  "-compressed; evo reads recordings as plain JSON lines: decompress it first (" +
                  std::string(format.command) + " '" + path.string() + "')");
    }
  }
}

// What one configuration's line must hold beyond its JSON shape: the knobs the first
// configuration's line set (`first_knobs`: its line and knob names, set here from the first),
// and a positive time where it was timed.
void CheckRecordedCandidate(const RecordedCandidate& candidate, int line_number,
                            std::optional<std::pair<int, std::vector<std::string>>>& first_knobs) {
  std::vector<std::string> knobs;
  for (const auto& [knob, value] : candidate.genome) knobs.push_back(knob);
  if (!first_knobs) {
    first_knobs.emplace(line_number, knobs);
  } else if (knobs != first_knobs->second) {
    const auto list = [](const std::vector<std::string>& names) {
      std::string text;
      for (const std::string& name : names) text += (text.empty() ? "" : ", ") + name;
      return text;
    };
    throw Error("the configuration sets knobs " + list(knobs) + ", but line " +
                std::to_string(first_knobs->first) + " sets " + list(first_knobs->second) +
                "; every line of a recording sets the same knobs");
  }
  if (const TimingFigures* timing = candidate.outcome.timing()) {
    if (!(timing->median_us > 0) || !std::isfinite(timing->median_us)) {
      throw Error("median_us " + nlohmann::json(timing->median_us).dump() +
                  " is not a time: a timed configuration took a positive, finite time");
    }
  }
}

// The text of the file up to its last newline, and whether anything followed it.
std::string ReadWholeLines(const std::filesystem::path& path, bool& torn) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read recording '" + path.string() + "'");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  RefuseCompressed(path, text);
  const size_t end = text.rfind('\n');
  const size_t whole = end == std::string::npos ? 0 : end + 1;
  torn = whole != text.size();
  text.resize(whole);
  return text;
}

}  // namespace

std::string NowIso8601() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &utc);
  char result[40];
  std::snprintf(result, sizeof result, "%s.%03dZ", text, static_cast<int>(millis));
  return result;
}

Recording ReadRecording(const std::filesystem::path& path, bool allow_torn_tail) {
  bool torn = false;
  const std::string text = ReadWholeLines(path, torn);
  if (torn && !allow_torn_tail) {
    throw Error("recording '" + path.string() + "' ends in the middle of a line");
  }
  Recording recording;
  recording.sha256 = Sha256Hex(text);
  size_t start = 0;
  int line_number = 0;
  // Where each configuration was recorded, and its line's text (in `text`): a configuration
  // recorded twice with different outcomes is refused, not settled by whichever line came last.
  std::map<Genome, std::pair<int, std::string_view>> lines;
  std::optional<std::pair<int, std::vector<std::string>>> first_knobs;
  while (start < text.size()) {
    const size_t end = text.find('\n', start);
    const std::string_view line = std::string_view(text).substr(start, end - start);
    start = end + 1;
    ++line_number;
    // Blank lines (an editor's trailing newline, files joined by hand) hold nothing.
    if (line_number > 1 && line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      const nlohmann::json json = nlohmann::json::parse(line);
      if (line_number == 1) {
        recording.header = HeaderFromJson(json);
        continue;
      }
      if (json.is_object() && json.contains("template") && !json.contains("genome")) {
        throw Error("a second header: recordings are not joined by concatenating their files");
      }
      RecordedCandidate candidate = CandidateFromJson(json);
      CheckRecordedCandidate(candidate, line_number, first_knobs);
      const auto [known, inserted] =
          lines.try_emplace(candidate.genome, std::make_pair(line_number, line));
      if (!inserted) {
        if (known->second.second == line) continue;  // the same line twice says nothing new
        throw Error("configuration " + nlohmann::json(candidate.genome).dump() +
                    " is also recorded on line " + std::to_string(known->second.first) +
                    ", with another outcome; a recording holds one per configuration");
      }
      Genome genome = candidate.genome;
      recording.candidates.emplace(std::move(genome), std::move(candidate));
    } catch (const std::exception& error) {
      throw Error("recording '" + path.string() + "', line " + std::to_string(line_number) + ": " +
                  JsonMessage(error));
    }
  }
  if (line_number == 0) throw Error("recording '" + path.string() + "' is empty");
  return recording;
}

bool ReplaysOneRecording(const std::string& stored, const std::string& now) {
  if (!stored.starts_with("replay ") || !now.starts_with("replay ")) return false;
  const size_t stored_mark = stored.rfind(kRecordingHashMark);
  const size_t now_mark = now.rfind(kRecordingHashMark);
  if (stored_mark != std::string::npos && now_mark != std::string::npos) {
    return stored.substr(stored_mark) == now.substr(now_mark);
  }
  return stored == now.substr(0, now_mark);
}

RecordingHeader ReadRecordingHeader(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read recording '" + path.string() + "'");
  std::string line;
  if (!std::getline(in, line) || line.empty()) {
    throw Error("recording '" + path.string() + "' is empty");
  }
  RefuseCompressed(path, line);
  try {
    return HeaderFromJson(nlohmann::json::parse(line));
  } catch (const std::exception& error) {
    throw Error("recording '" + path.string() + "', line 1: " + JsonMessage(error));
  }
}

RecordingWriter::RecordingWriter(const std::filesystem::path& path, const RecordingHeader& header)
    : path_(path) {
  if (std::filesystem::exists(path) && std::filesystem::file_size(path) > 0) {
    Recording existing = ReadRecording(path, true);
    const RecordingHeader& old = existing.header;
    if (old.template_name != header.template_name || old.problem != header.problem ||
        old.identity.template_hash != header.identity.template_hash ||
        old.identity.device != header.identity.device) {
      throw Error("recording '" + path.string() +
                  "' holds another task, template version or GPU; name another --out");
    }
    existing_ = std::move(existing.candidates);
    bool torn = false;
    const std::string whole = ReadWholeLines(path, torn);
    if (torn) std::filesystem::resize_file(path, whole.size());
    file_ = std::fopen(path.c_str(), "ab");
  } else {
    if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
    file_ = std::fopen(path.c_str(), "wb");
    if (file_ != nullptr) {
      const std::string line = HeaderToJson(header).dump() + "\n";
      std::fwrite(line.data(), 1, line.size(), file_);
    }
  }
  if (file_ == nullptr) throw Error("cannot write recording '" + path.string() + "'");
}

RecordingWriter::~RecordingWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

void RecordingWriter::Append(const RecordedCandidate& candidate) {
  const std::string line = CandidateToJson(candidate).dump() + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0 ||
      fsync(fileno(file_)) != 0) {
    throw Error("cannot write recording '" + path_.string() + "'");
  }
}

ReplayEvaluator::ReplayEvaluator(const std::filesystem::path& path, const Manifest& manifest,
                                 const Problem& problem, std::chrono::milliseconds delay,
                                 std::string_view template_hash, const std::vector<int>& gpus)
    : recording_(ReadRecording(path)), delay_(delay) {
  if (gpus.empty()) throw Error("a replay needs at least one simulated GPU");
  if (recording_.candidates.empty()) {
    throw Error("recording '" + path.string() +
                "' holds no configurations, only its header: there is nothing to replay");
  }
  RecordingHeader& header = recording_.header;
  if (header.template_name == manifest.name) {
    try {
      header.problem = CompleteProblem(manifest, header.problem);
    } catch (const Error& error) {
      throw Error("recording '" + path.string() + "' measured " + header.template_name + " at " +
                  nlohmann::json(header.problem).dump() + ", which this evo's " + manifest.name +
                  " does not take: " + error.what());
    }
    if (!recording_.candidates.empty()) {
      const Genome& recorded = recording_.candidates.begin()->first;
      for (const auto& [knob, value] : recorded) {
        if (manifest.FindKnob(knob) == nullptr) {
          throw Error("recording '" + path.string() + "' sets knob " + knob + ", which " +
                      manifest.name +
                      " does not have: it was recorded with another version of the template");
        }
      }
      for (const KnobSpec& knob : manifest.knobs) {
        if (!recorded.contains(knob.name)) unrecorded_knobs_.push_back(knob.name);
      }
    }
    std::map<Genome, RecordedCandidate> completed;
    for (auto& [genome, candidate] : recording_.candidates) {
      Genome full = genome;
      for (const KnobSpec& knob : manifest.knobs) full.try_emplace(knob.name, knob.default_value);
      candidate.genome = full;
      completed.emplace(std::move(full), std::move(candidate));
    }
    recording_.candidates = std::move(completed);
  }
  if (header.template_name != manifest.name || header.problem != problem) {
    throw Error("recording '" + path.string() + "' is of " + header.template_name + " at " +
                nlohmann::json(header.problem).dump() + ", not of " + manifest.name + " at " +
                nlohmann::json(problem).dump());
  }
  identity_ = header.identity;
  // The path for the reader, the content for the resume check (ReplaysOneRecording): a copy
  // elsewhere is the same recording, another file at the same path is not.
  identity_.evaluator = "replay " + path.string() + std::string(kRecordingHashMark) +
                        recording_.sha256.substr(0, 16) + ")";
  identity_.notice = "replaying " + std::to_string(recording_.candidates.size()) +
                     " configurations measured on " + header.identity.device + " at " +
                     header.recorded_at + " (" + header.recorded_by + "): nothing runs on a GPU";
  for (int gpu : gpus) lanes_.push_back({gpu, header.identity.device, ""});
  if (gpus.size() > 1) {
    identity_.notice += "; " + std::to_string(gpus.size()) + " simulated GPUs answer it at once";
  }
  if (!template_hash.empty() && template_hash != header.identity.template_hash) {
    identity_.notice += "; recorded with an earlier version of " + header.template_name + " (" +
                        header.identity.template_hash.substr(0, 12) + ", today " +
                        std::string(template_hash.substr(0, 12)) + ")";
    if (!unrecorded_knobs_.empty()) {
      std::string knobs;
      for (const std::string& knob : unrecorded_knobs_) knobs += (knobs.empty() ? "" : ", ") + knob;
      identity_.notice += ", before " + knobs + " existed: those stay at their defaults";
    }
  }
}

Manifest ReplayEvaluator::RecordedSpace(const Manifest& manifest) const {
  // Each knob's domain shrinks to the values the recording holds: a knob it predates holds its
  // default only, a sweep's --fix its fixed value, and a value no valid configuration takes
  // was never recorded either.
  std::map<std::string, std::set<int64_t>, std::less<>> recorded;
  for (const auto& [genome, candidate] : recording_.candidates) {
    for (const auto& [knob, value] : genome) recorded[knob].insert(value);
  }
  Manifest space = manifest;
  for (KnobSpec& knob : space.knobs) {
    const auto values = recorded.find(knob.name);
    if (values == recorded.end()) continue;  // an empty recording
    const std::vector<int64_t> domain = knob.values;
    std::erase_if(knob.values, [&](int64_t value) { return values->second.count(value) == 0; });
    if (knob.values.empty() || values->second.count(knob.default_value) > 0) continue;
    // The default was not recorded: the recorded value nearest to it along the domain.
    const auto position = [&](int64_t value) {
      return std::find(domain.begin(), domain.end(), value) - domain.begin();
    };
    knob.default_value =
        *std::min_element(knob.values.begin(), knob.values.end(), [&](int64_t a, int64_t b) {
          return std::abs(position(a) - position(knob.default_value)) <
                 std::abs(position(b) - position(knob.default_value));
        });
  }
  std::erase_if(space.starting_points, [&](const KnobSettings& point) {
    return std::any_of(point.begin(), point.end(), [&](const auto& setting) {
      const KnobSpec* knob = space.FindKnob(setting.first);
      return knob != nullptr && std::find(knob->values.begin(), knob->values.end(),
                                          setting.second) == knob->values.end();
    });
  });
  return space;
}

const RecordedCandidate& ReplayEvaluator::Find(const Genome& genome) const {
  const auto found = recording_.candidates.find(genome);
  if (found == recording_.candidates.end()) {
    throw Error("the recording holds no measurement of " + nlohmann::json(genome).dump() +
                "; it covers " + std::to_string(recording_.candidates.size()) + " configurations");
  }
  return found->second;
}

CandidateOutcome ReplayEvaluator::Evaluate(int /*lane*/, const Genome& genome) {
  const RecordedCandidate& recorded = Find(genome);
  if (delay_.count() > 0) std::this_thread::sleep_for(delay_);
  return recorded.outcome;
}

GpuVerdict ReplayEvaluator::Remeasure(int /*lane*/, const Genome& genome) {
  const RecordedCandidate& recorded = Find(genome);
  if (!recorded.outcome.gpu) {
    throw Error("the recording holds no GPU measurement of " + nlohmann::json(genome).dump());
  }
  if (delay_.count() > 0) std::this_thread::sleep_for(delay_);
  std::lock_guard lock(mutex_);
  size_t& turn = remeasured_[genome];
  const size_t index = turn++ % (recorded.remeasurements.size() + 1);
  return index < recorded.remeasurements.size() ? recorded.remeasurements[index]
                                                : *recorded.outcome.gpu;
}

}  // namespace evo
