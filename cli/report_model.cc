#include "cli/report_model.h"

#include <algorithm>
#include <charconv>
#include <ctime>
#include <set>

#include "kernel_templates/genome.h"

namespace evo::cli {
namespace {

using Json = nlohmann::json;

// An absent figure stays absent in the page (null), never a zero that would be plotted.
template <typename T>
Json OrNull(const std::optional<T>& value) {
  return value ? Json(*value) : Json();
}

// Digits at text[at, at + count) as a number; nothing unless all are digits.
std::optional<int> Digits(std::string_view text, size_t at, size_t count) {
  if (at + count > text.size()) return std::nullopt;
  int value = 0;
  const char* begin = text.data() + at;
  const auto [end, error] = std::from_chars(begin, begin + count, value);
  if (error != std::errc() || end != begin + count) return std::nullopt;
  return value;
}

}  // namespace

std::string_view Provenance(std::string_view operator_name) {
  // The engine's names (engine/evolution.cc), possibly followed by " +repair" or the knobs a
  // mutation changed.
  if (operator_name.starts_with("default")) return "default";
  if (operator_name.starts_with("starting point")) return "starting point";
  if (operator_name.starts_with("neighbour")) return "neighbour scan";
  if (operator_name.starts_with("marginal")) return "knob marginals";
  if (operator_name.starts_with("model")) return "cost model";
  if (operator_name.starts_with("mutate")) return "mutation";
  if (operator_name.starts_with("crossover")) return "crossover";
  if (operator_name.starts_with("random")) return "random";
  return "other";
}

std::optional<double> ParseUtcSeconds(std::string_view text) {
  // YYYY-MM-DDTHH:MM:SS[.fff]Z
  const auto year = Digits(text, 0, 4);
  const auto month = Digits(text, 5, 2);
  const auto day = Digits(text, 8, 2);
  const auto hour = Digits(text, 11, 2);
  const auto minute = Digits(text, 14, 2);
  const auto second = Digits(text, 17, 2);
  if (!year || !month || !day || !hour || !minute || !second || text[4] != '-' || text[7] != '-' ||
      text[10] != 'T' || text[13] != ':' || text[16] != ':') {
    return std::nullopt;
  }
  double fraction = 0;
  size_t at = 19;
  if (at < text.size() && text[at] == '.') {
    double scale = 0.1;
    for (++at; at < text.size() && text[at] >= '0' && text[at] <= '9'; ++at, scale /= 10) {
      fraction += (text[at] - '0') * scale;
    }
  }
  if (at + 1 != text.size() || text[at] != 'Z') return std::nullopt;
  std::tm utc{};
  utc.tm_year = *year - 1900;
  utc.tm_mon = *month - 1;
  utc.tm_mday = *day;
  utc.tm_hour = *hour;
  utc.tm_min = *minute;
  utc.tm_sec = *second;
  return static_cast<double>(::timegm(&utc)) + fraction;
}

std::string RunTitle(const RunRecord& run) {
  return "run " + std::to_string(run.id) + ": " + run.spec.template_name + " " +
         FormatSettings(run.spec.problem) +
         (run.spec.fixed.empty() ? "" : ", fixed " + FormatSettings(run.spec.fixed));
}

Json RunChartData(const ReportRun& report) {
  const RunRecord& run = report.run;
  const std::optional<double> start = ParseUtcSeconds(run.created_at);
  auto since_start = [&](const std::string& at) -> std::optional<double> {
    const std::optional<double> time = ParseUtcSeconds(at);
    if (!time || !start) return std::nullopt;
    return *time - *start;
  };

  Json candidates = Json::array();
  for (const CandidateRecord& c : report.candidates) {
    const bool finished = c.state == CandidateState::kFinished;
    const CandidateOutcome& o = c.outcome;
    const TimingFigures* timing = finished ? o.timing() : nullptr;
    std::optional<int64_t> registers;
    std::optional<int64_t> smem;
    if (finished && o.resources) {
      registers = o.resources->registers;
      smem = o.resources->smem_static + o.dynamic_smem;
    }
    candidates.push_back({{"id", c.id},
                          {"generation", c.generation},
                          {"made", Provenance(c.proposal.operator_name)},
                          {"operator", c.proposal.operator_name},
                          {"status", finished ? std::string(ToString(o.status)) : "pending"},
                          {"median_us", timing ? Json(timing->median_us) : Json()},
                          {"confirm_us", c.confirmation ? Json(c.confirmation->median_us) : Json()},
                          {"score_us", OrNull(c.score_us())},
                          {"registers", OrNull(registers)},
                          {"smem_bytes", OrNull(smem)},
                          {"time_s", finished ? OrNull(since_start(c.finished_at)) : Json()},
                          {"genome", c.proposal.genome}});
  }

  // Best-so-far over the candidates the budget counts, in the order they finished.
  std::vector<const CandidateRecord*> evaluated;
  for (const CandidateRecord& c : report.candidates) {
    if (c.state == CandidateState::kFinished && c.outcome.reached_gates()) evaluated.push_back(&c);
  }
  std::stable_sort(evaluated.begin(), evaluated.end(),
                   [](const CandidateRecord* a, const CandidateRecord* b) {
                     return a->finished_at < b->finished_at;  // ISO 8601 sorts as text
                   });
  Json count = Json::array();
  Json time = Json::array();
  Json best = Json::array();
  Json ids = Json::array();
  std::optional<double> best_us;
  for (size_t i = 0; i < evaluated.size(); ++i) {
    const CandidateRecord& c = *evaluated[i];
    if (const auto score = c.score_us(); score && (!best_us || *score < *best_us)) best_us = score;
    count.push_back(i + 1);
    time.push_back(OrNull(since_start(c.finished_at)));
    best.push_back(OrNull(best_us));
    ids.push_back(c.id);
  }

  Json knobs = Json::array();
  for (const std::string& name : report.knobs) {
    std::set<int64_t> values;
    for (const CandidateRecord& c : report.candidates) {
      if (const auto it = c.proposal.genome.find(name); it != c.proposal.genome.end()) {
        values.insert(it->second);
      }
    }
    knobs.push_back({{"name", name}, {"values", values}});
  }

  Json peers = Json::array();
  for (const PeerTime& peer : report.peers) peers.push_back({{"name", peer.name}, {"us", peer.us}});

  return {{"id", run.id},
          {"title", RunTitle(run)},
          {"candidates", candidates},
          {"progress", {{"count", count}, {"time_s", time}, {"best_us", best}, {"candidate", ids}}},
          {"knobs", knobs},
          {"peers", peers}};
}

}  // namespace evo::cli
