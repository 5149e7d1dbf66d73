#include "cli/tune_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cstdlib>
#include <set>
#include <sstream>
#include <tuple>

#include "common/error.h"
#include "common/files.h"

namespace evo::cli {
namespace {

std::vector<std::string> Split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(separator, start), text.size());
    parts.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

int64_t Positive(const std::string& text, const std::string& context) {
  const std::optional<int64_t> value = ParseInteger(text);
  if (!value || *value < 1) {
    throw Error("malformed " + context + ": '" + text + "' is not a positive integer");
  }
  return *value;
}

// "512..16384": 512, 1024, ..., 16384 (LO doubled while it stays within HI, so "3..20" is 3, 6,
// 12); "64": 64.
std::vector<int64_t> Values(const std::string& item, const std::string& context) {
  const size_t dots = item.find("..");
  if (dots == std::string::npos) return {Positive(item, context)};
  const int64_t low = Positive(item.substr(0, dots), context);
  const int64_t high = Positive(item.substr(dots + 2), context);
  if (high < low) throw Error("malformed " + context + ": the range " + item + " is empty");
  std::vector<int64_t> values;
  // Doubling stops before it could pass HI, so it never overflows.
  for (int64_t value = low;; value *= 2) {
    values.push_back(value);
    if (value > high / 2) break;
  }
  return values;
}

int64_t HalfOctaves(int64_t x) {
  x = std::clamp<int64_t>(x, 1, (int64_t{1} << 31) - 1);
  return static_cast<int64_t>(std::bit_width(static_cast<uint64_t>(x * x))) - 1;
}

int64_t Get(const Problem& problem, const char* name, int64_t fallback) {
  const auto found = problem.find(name);
  return found != problem.end() ? found->second : fallback;
}

// Half-octaves between two problems over S_q, S_kv, B*H and H/H_kv (the dispatch rule's).
int64_t ShapeDistance(const Problem& a, const Problem& b) {
  const auto features = [](const Problem& p) {
    const int64_t h = Get(p, "H", 1);
    const int64_t h_kv = Get(p, "H_kv", h);
    return std::vector<int64_t>{Get(p, "S_q", 1), Get(p, "S_kv", 1), Get(p, "B", 1) * h,
                                h / std::max<int64_t>(h_kv, 1)};
  };
  const std::vector<int64_t> fa = features(a);
  const std::vector<int64_t> fb = features(b);
  int64_t sum = 0;
  for (size_t i = 0; i < fa.size(); ++i) sum += std::abs(HalfOctaves(fa[i]) - HalfOctaves(fb[i]));
  return sum;
}

std::string Label(const Manifest& manifest, const Problem& problem) {
  const int64_t h = problem.at("H");
  const int64_t h_kv = Get(problem, "H_kv", h);
  std::string label = manifest.name + " " + std::to_string(problem.at("B")) + "," +
                      std::to_string(h) + (h_kv != h ? ":" + std::to_string(h_kv) : "") + "," +
                      std::to_string(problem.at("S_q"));
  if (problem.at("S_kv") != problem.at("S_q")) label += "," + std::to_string(problem.at("S_kv"));
  label += "," + std::to_string(problem.at("D"));
  if (problem.at("CAUSAL") != 0) label += " causal";
  for (const ProblemParamSpec& param : manifest.problem) {
    if (!param.compile_time() || param.name == "D" || param.name == "CAUSAL") continue;
    if (problem.at(param.name) != param.default_value) {
      label += " " + param.name + "=" + std::to_string(problem.at(param.name));
    }
  }
  return label;
}

}  // namespace

TuneShape ParseTuneShape(const std::string& text) {
  std::vector<std::string> fields = Split(text, ',');
  TuneShape shape;
  if (!fields.empty() && fields.back() == "causal") {
    shape.causal = true;
    fields.pop_back();
  }
  const std::string context = "shape '" + text + "'";
  if (fields.size() != 4 && fields.size() != 5) {
    throw Error("malformed " + context +
                ": expected B,H,S,D or B,H,S_q,S_kv,D (H may be H:H_kv; ,causal may follow)");
  }
  shape.sizes["B"] = Positive(fields[0], context);
  const size_t colon = fields[1].find(':');
  shape.sizes["H"] = Positive(fields[1].substr(0, colon), context);
  if (colon != std::string::npos)
    shape.sizes["H_kv"] = Positive(fields[1].substr(colon + 1), context);
  shape.sizes["S_q"] = Positive(fields[2], context);
  shape.sizes["S_kv"] = Positive(fields[fields.size() == 5 ? 3 : 2], context);
  shape.sizes["D"] = Positive(fields.back(), context);
  return shape;
}

std::vector<TuneShape> ReadShapesFile(const std::filesystem::path& path) {
  std::istringstream in(ReadFile(path));
  std::vector<TuneShape> shapes;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    // A byte that is not text would end up inside the message that quotes the line (a NUL
    // cuts it off there), so it is named here instead.
    const auto control = std::find_if(line.begin(), line.end(), [](char c) {
      const auto byte = static_cast<unsigned char>(c);
      return (byte < 0x20 && !std::isspace(byte)) || byte == 0x7f;
    });
    if (control != line.end()) {
      throw Error(fmt::format("{}:{}: column {} holds the byte 0x{:02x}, which is not text",
                              path.string(), number, control - line.begin() + 1,
                              static_cast<unsigned char>(*control)));
    }
    line = line.substr(0, line.find('#'));
    line.erase(
        std::remove_if(line.begin(), line.end(),
                       [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }),
        line.end());
    if (line.empty()) continue;
    try {
      shapes.push_back(ParseTuneShape(line));
    } catch (const Error& error) {
      throw Error(path.string() + ":" + std::to_string(number) + ": " + error.what());
    }
  }
  if (shapes.empty()) throw Error(path.string() + " holds no shapes");
  return shapes;
}

std::vector<TuneShape> ExpandGrid(const std::string& spec) {
  std::map<std::string, std::vector<int64_t>> terms;
  std::vector<std::pair<int64_t, int64_t>> bxh;
  std::istringstream words(spec);
  std::string term;
  while (words >> term) {
    const size_t equals = term.find('=');
    const std::string context = "--grid term '" + term + "'";
    if (equals == std::string::npos) throw Error("malformed " + context + ": expected NAME=VALUES");
    const std::string name = term.substr(0, equals);
    static const std::set<std::string> kNames = {"B",    "H", "H_kv",   "S",  "S_q",
                                                 "S_kv", "D", "CAUSAL", "BxH"};
    if (kNames.count(name) == 0) {
      throw Error("malformed " + context +
                  ": the names are B, H, H_kv, S, S_q, S_kv, D, CAUSAL and BxH");
    }
    if (terms.count(name) > 0 || (name == "BxH" && !bxh.empty())) {
      throw Error("malformed " + context + ": " + name + " is given twice");
    }
    for (const std::string& item : Split(term.substr(equals + 1), ',')) {
      if (name == "BxH") {
        const size_t x = item.find('x');
        if (x == std::string::npos)
          throw Error("malformed " + context + ": pairs are BxH, e.g. 2x8");
        bxh.emplace_back(Positive(item.substr(0, x), context),
                         Positive(item.substr(x + 1), context));
        continue;
      }
      if (name == "CAUSAL") {
        if (item != "0" && item != "1") throw Error("malformed " + context + ": CAUSAL is 0 or 1");
        terms[name].push_back(item == "1");
        continue;
      }
      for (int64_t value : Values(item, context)) terms[name].push_back(value);
    }
  }
  const auto has = [&](const char* name) { return terms.count(name) > 0; };
  if (has("S") && (has("S_q") || has("S_kv"))) {
    throw Error("malformed --grid '" + spec + "': S sets both lengths; give S or S_q/S_kv");
  }
  if (!bxh.empty() && (has("B") || has("H"))) {
    throw Error("malformed --grid '" + spec + "': BxH sets B and H; give BxH or B/H");
  }
  if (terms.empty() && bxh.empty()) throw Error("--grid '" + spec + "' names no terms");
  // Unset names: a single "unset" value, so that the product still has one element for them.
  const auto values = [&](const char* name) {
    const auto found = terms.find(name);
    return found != terms.end() ? found->second : std::vector<int64_t>{0};
  };
  std::vector<std::pair<int64_t, int64_t>> pairs = bxh;
  if (pairs.empty()) {
    for (int64_t b : values("B")) {
      for (int64_t h : values("H")) pairs.emplace_back(b, h);
    }
  }
  std::vector<TuneShape> shapes;
  for (int64_t d : values("D")) {
    for (int64_t causal : values("CAUSAL")) {
      for (const auto& [b, h] : pairs) {
        for (int64_t h_kv : values("H_kv")) {
          for (int64_t s_q : has("S") ? values("S") : values("S_q")) {
            for (int64_t s_kv : has("S") ? std::vector<int64_t>{0} : values("S_kv")) {
              TuneShape shape;
              shape.causal = causal != 0;
              const auto set = [&](const char* name, int64_t value) {
                if (value > 0) shape.sizes[name] = value;
              };
              set("D", d);
              set("B", b);
              set("H", h);
              set("H_kv", h_kv);
              set("S_q", s_q);
              set("S_kv", has("S") ? s_q : s_kv);
              shapes.push_back(shape);
            }
          }
        }
      }
    }
  }
  return shapes;
}

TunePlan PlanTune(const TemplateLibrary& library, const std::vector<std::string>& templates,
                  const std::vector<TuneShape>& shapes, bool causal,
                  const std::vector<std::string>& problem_settings) {
  TunePlan plan;
  std::set<std::pair<std::string, Problem>> seen;
  std::vector<const KernelTemplate*> kernel_templates;
  for (const std::string& name : templates) kernel_templates.push_back(&library.Find(name));
  for (const TuneShape& shape : shapes) {
    for (const KernelTemplate* kernel_template : kernel_templates) {
      const Manifest& manifest = kernel_template->manifest;
      Problem given;
      try {
        for (const auto& [name, value] : shape.sizes) {
          // A template without grouped heads takes H_kv = H as its own problem.
          if (name == "H_kv" && manifest.FindProblemParam("H_kv") == nullptr &&
              value == shape.sizes.at("H")) {
            continue;
          }
          SetProblemParam(manifest, name, value, given);
        }
        if (causal || shape.causal) SetProblemParam(manifest, "CAUSAL", 1, given);
        for (const std::string& setting : problem_settings) {
          ApplyProblemSetting(manifest, setting, given);
        }
        Problem problem = CompleteProblem(manifest, given);
        CheckProblem(manifest, problem);
        if (!seen.emplace(manifest.name, problem).second) continue;
        plan.tasks.push_back({kernel_template, problem, Label(manifest, problem)});
      } catch (const Error& error) {
        std::string text;
        for (const auto& [name, value] : shape.sizes) {
          text += (text.empty() ? "" : " ") + name + "=" + std::to_string(value);
        }
        plan.skipped.push_back(manifest.name + " " + text + (shape.causal ? " causal" : "") + ": " +
                               error.what());
      }
    }
  }
  return plan;
}

std::vector<KnobSettings> SeedStartingPoints(const Manifest& manifest, const Problem& problem,
                                             const std::vector<TunedBefore>& before, size_t limit) {
  // (compile-time parameters that differ, half-octaves, earlier task, rank) -> genome
  std::vector<std::tuple<int, int64_t, size_t, size_t, const Genome*>> ranked;
  for (size_t task = 0; task < before.size(); ++task) {
    int differing = 0;
    for (const ProblemParamSpec& param : manifest.problem) {
      if (param.compile_time() && Get(before[task].problem, param.name.c_str(), -1) !=
                                      Get(problem, param.name.c_str(), -1)) {
        ++differing;
      }
    }
    // Only runs compiled alike seed each other: an elite of another D, causality or dtype is
    // another kernel's optimum, and on the H100 recordings such seeds cost candidates
    // (scripts/tune-bench.py: 69.5 against 47.5 for a causal shape opened with non-causal
    // elites, 33 against 18.5 for D=128 opened with D=64 ones; medians of 10 seeds).
    if (differing > 0) continue;
    const int64_t distance = ShapeDistance(problem, before[task].problem);
    for (size_t rank = 0; rank < before[task].elite.size(); ++rank) {
      ranked.emplace_back(differing, distance, task, rank,
                          &before[task].elite[rank].proposal.genome);
    }
  }
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
    return std::make_tuple(std::get<0>(a), std::get<1>(a), std::get<2>(a), std::get<3>(a)) <
           std::make_tuple(std::get<0>(b), std::get<1>(b), std::get<2>(b), std::get<3>(b));
  });
  std::vector<KnobSettings> points;
  std::set<Genome> taken;
  for (const auto& item : ranked) {
    if (points.size() >= limit) break;
    const Genome& genome = *std::get<4>(item);
    if (!taken.insert(genome).second) continue;
    // A knob outside the searched space's domain (a replay pins the knobs its recording
    // predates) leaves the configuration out: the search would propose what it cannot measure.
    KnobSettings point;
    bool inside = true;
    for (const KnobSpec& knob : manifest.knobs) {
      const auto value = genome.find(knob.name);
      if (value == genome.end()) continue;
      inside = inside && std::find(knob.values.begin(), knob.values.end(), value->second) !=
                             knob.values.end();
      point[knob.name] = value->second;
    }
    if (inside) points.push_back(std::move(point));
  }
  return points;
}

}  // namespace evo::cli
