#include "kernel_templates/genome.h"

#include <algorithm>
#include <charconv>
#include <utility>

#include "common/error.h"

namespace evo {
namespace {

std::string JoinValues(const std::vector<int64_t>& values) {
  std::string text;
  for (int64_t v : values) text += (text.empty() ? "" : ", ") + std::to_string(v);
  return text;
}

std::string KnobNames(const Manifest& manifest) {
  std::string names;
  for (const KnobSpec& knob : manifest.knobs) names += (names.empty() ? "" : ", ") + knob.name;
  return names;
}

void CheckKnobValue(const Manifest& manifest, const KnobSpec& knob, int64_t value) {
  if (std::find(knob.values.begin(), knob.values.end(), value) == knob.values.end()) {
    throw Error("knob " + knob.name + " of template " + manifest.name + " cannot be " +
                std::to_string(value) + " (allowed: " + JoinValues(knob.values) + ")");
  }
}

}  // namespace

std::optional<int64_t> ParseInteger(std::string_view text) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

Genome DefaultGenome(const Manifest& manifest) {
  Genome genome;
  for (const KnobSpec& knob : manifest.knobs) genome[knob.name] = knob.default_value;
  return genome;
}

Problem DefaultProblem(const Manifest& manifest) { return CompleteProblem(manifest, {}); }

Problem CompleteProblem(const Manifest& manifest, const Problem& given) {
  Problem problem;
  for (const ProblemParamSpec& param : manifest.problem) {
    const auto it = given.find(param.name);
    problem[param.name] = it != given.end()    ? it->second
                          : param.default_expr ? param.default_expr->Evaluate(problem)
                                               : param.default_value;
  }
  for (const auto& [name, value] : given) {
    if (!problem.contains(name)) problem[name] = value;  // CheckProblem names it
  }
  return problem;
}

namespace {

// "NAME=INTEGER" as typed on a command line; `what` ("setting") and `form` ("KNOB=VALUE") word
// the error.
std::pair<std::string_view, int64_t> ParseNamedInteger(std::string_view setting,
                                                       std::string_view what,
                                                       std::string_view form) {
  const size_t equals = setting.find('=');
  if (equals == std::string_view::npos || equals == 0 || equals + 1 == setting.size()) {
    throw Error("malformed " + std::string(what) + " '" + std::string(setting) + "': expected " +
                std::string(form));
  }
  const std::string_view text = setting.substr(equals + 1);
  const std::optional<int64_t> value = ParseInteger(text);
  if (!value) {
    throw Error("malformed " + std::string(what) + " '" + std::string(setting) + "': '" +
                std::string(text) + "' is not an integer");
  }
  return {setting.substr(0, equals), *value};
}

}  // namespace

void ApplyKnobSetting(const Manifest& manifest, std::string_view setting, Genome& genome) {
  const auto [name, value] = ParseNamedInteger(setting, "setting", "KNOB=VALUE");
  const KnobSpec* knob = manifest.FindKnob(name);
  if (knob == nullptr) {
    throw Error("template " + manifest.name + " has no knob '" + std::string(name) +
                "' (knobs: " + KnobNames(manifest) + ")");
  }
  CheckKnobValue(manifest, *knob, value);
  genome[knob->name] = value;
}

void SetProblemParam(const Manifest& manifest, std::string_view name, int64_t value,
                     Problem& problem) {
  const ProblemParamSpec* param = manifest.FindProblemParam(name);
  if (param == nullptr) {
    throw Error("template " + manifest.name + " has no problem parameter '" + std::string(name) +
                "'");
  }
  if (param->values.empty()
          ? value < param->min
          : std::find(param->values.begin(), param->values.end(), value) == param->values.end()) {
    const std::string allowed = param->values.empty() ? "at least " + std::to_string(param->min)
                                                      : "allowed: " + JoinValues(param->values);
    throw Error("problem parameter " + param->name + " of template " + manifest.name +
                " cannot be " + std::to_string(value) + " (" + allowed + ")");
  }
  problem[param->name] = value;
}

void ApplyProblemSetting(const Manifest& manifest, std::string_view setting, Problem& problem) {
  const auto [name, value] = ParseNamedInteger(setting, "problem setting", "PARAM=INTEGER");
  SetProblemParam(manifest, name, value, problem);
}

void CheckGenome(const Manifest& manifest, const Genome& genome) {
  for (const auto& [name, value] : genome) {
    const KnobSpec* knob = manifest.FindKnob(name);
    if (knob == nullptr) {
      throw Error("template " + manifest.name + " has no knob '" + name +
                  "' (knobs: " + KnobNames(manifest) + ")");
    }
    CheckKnobValue(manifest, *knob, value);
  }
  for (const KnobSpec& knob : manifest.knobs) {
    if (!genome.contains(knob.name)) throw Error("knob " + knob.name + " has no value");
  }
}

void CheckProblem(const Manifest& manifest, const Problem& problem) {
  for (const auto& [name, value] : problem) {
    Problem scratch;
    SetProblemParam(manifest, name, value, scratch);
  }
  for (const ProblemParamSpec& param : manifest.problem) {
    if (!problem.contains(param.name)) {
      throw Error("problem parameter " + param.name + " has no value");
    }
  }
  for (const ProblemParamSpec& param : manifest.problem) {
    bool holds = true;
    try {
      holds = !param.check || param.check->Evaluate(problem) != 0;
    } catch (const Error& error) {
      throw Error("problem " + FormatProblem(manifest, problem) + " of template " + manifest.name +
                  ": the check of parameter " + param.name +
                  " cannot be evaluated: " + error.what());
    }
    if (!holds) {
      throw Error("problem " + FormatProblem(manifest, problem) + " of template " + manifest.name +
                  " breaks " + param.check->text() +
                  (param.check_doc.empty() ? "" : " (" + param.check_doc + ")"));
    }
  }
}

std::string FormatGenome(const Manifest& manifest, const Genome& genome) {
  std::string text;
  for (const KnobSpec& knob : manifest.knobs) {
    const auto it = genome.find(knob.name);
    if (it == genome.end()) continue;
    text += (text.empty() ? "" : " ") + knob.name + "=" + std::to_string(it->second);
  }
  return text;
}

std::string FormatSettings(const Genome& settings, std::string_view separator) {
  std::string text;
  for (const auto& [name, value] : settings) {
    if (!text.empty()) text += separator;
    text += name + "=" + std::to_string(value);
  }
  return text;
}

std::string FormatProblem(const Manifest& manifest, const Problem& problem) {
  std::string text;
  for (const ProblemParamSpec& param : manifest.problem) {
    const auto it = problem.find(param.name);
    if (it == problem.end()) continue;
    text += (text.empty() ? "" : " ") + param.name + "=" + std::to_string(it->second);
  }
  return text;
}

}  // namespace evo
