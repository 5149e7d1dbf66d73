#include "cli/command_support.h"

#include <charconv>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <optional>

#include "common/error.h"

namespace evo::cli {

namespace fs = std::filesystem;

namespace {

bool SameFile(const fs::path& a, const fs::path& b) {
  std::error_code error;
  return fs::exists(a, error) && fs::exists(b, error) && fs::equivalent(a, b, error);
}

// `input` as a whole number of type T, written in decimal digits alone; nothing for anything
// else, a value that does not fit included (CLI11 would clamp or wrap it).
template <typename T>
std::optional<T> WholeNumberOf(const std::string& input) {
  T value{};
  const char* end = input.data() + input.size();
  const auto [stop, error] = std::from_chars(input.data(), end, value);
  if (input.empty() || error != std::errc() || stop != end) return std::nullopt;
  return value;
}

// Whole numbers of type T from `least` to `most`, in a validator called `name`. The input is
// rewritten as its value: CLI11 reads what follows as C does, "010" as 8 and "0x10" as 16.
template <typename T>
CLI::Validator WholeNumberFrom(T least, const std::string& name,
                               T most = std::numeric_limits<T>::max()) {
  const std::string message = "must be a whole number from " + std::to_string(least) + " to " +
                              std::to_string(most) + ", not '";
  return CLI::Validator(
      [least, most, message](std::string& input) -> std::string {
        const std::optional<T> value = WholeNumberOf<T>(input);
        if (!value || *value < least || *value > most) return message + input + "'";
        input = std::to_string(*value);
        return "";
      },
      name);
}

}  // namespace

CLI::Validator PositiveNumber() { return WholeNumberFrom<int64_t>(1, "POSITIVE"); }
CLI::Validator NonNegativeNumber() { return WholeNumberFrom<int64_t>(0, "NONNEGATIVE"); }
CLI::Validator SeedNumber() { return WholeNumberFrom<uint64_t>(0, "SEED"); }
CLI::Validator WholeNumberBetween(int64_t least, int64_t most) {
  return WholeNumberFrom<int64_t>(least, "INT", most);
}

CLI::Validator DecimalId() {
  return CLI::Validator(
      [](std::string& input) -> std::string {
        const bool negative = input.starts_with('-');
        std::optional<int64_t> value = WholeNumberOf<int64_t>(negative ? input.substr(1) : input);
        if (!value) return "must be a whole number in decimal digits, not '" + input + "'";
        input = std::to_string(negative ? -*value : *value);
        return "";
      },
      "ID");
}

namespace {

// The first `bytes` bytes of `out` (fewer where it is shorter), or nullopt where there is no
// such file; throws evo::Error, naming `option`, where `out` is something other than a file.
std::optional<std::string> ExistingFileHead(const fs::path& out, const std::string& option,
                                            size_t bytes) {
  std::error_code error;
  const fs::file_status status = fs::status(out, error);
  if (status.type() == fs::file_type::not_found) return std::nullopt;
  if (!fs::is_regular_file(status)) throw Error(option + " " + out.string() + " is not a file");
  std::ifstream in(out, std::ios::binary);
  std::string head(bytes, '\0');
  in.read(head.data(), static_cast<std::streamsize>(bytes));
  head.resize(static_cast<size_t>(in.gcount()));
  return head;
}

}  // namespace

void RefuseToOverwrite(const fs::path& out, const std::string& option, const fs::path& db,
                       const std::vector<fs::path>& inputs) {
  if (out.empty()) throw Error(option + " is empty: name the file to write");
  if (!db.empty()) {
    for (const char* suffix : {"", "-wal", "-shm", "-journal", ".lock"}) {
      fs::path side = db;
      side += suffix;
      if (SameFile(out, side)) {
        throw Error(option + " " + out.string() + " is the database's own file " + side.string());
      }
    }
  }
  for (const fs::path& input : inputs) {
    if (SameFile(out, input)) {
      throw Error(option + " " + out.string() + " is " + input.string() +
                  ", which this command reads; name another file");
    }
  }
  const std::optional<std::string> head = ExistingFileHead(out, option, 16);
  if (head && *head == std::string("SQLite format 3", 16)) {
    throw Error(option + " " + out.string() + " is a SQLite database; evo does not overwrite it");
  }
}

void RefuseToOverwriteButACubin(const fs::path& out, const std::string& option) {
  const std::optional<std::string> head = ExistingFileHead(out, option, 4);
  if (head && *head !=
                  "\x7f"
                  "ELF") {
    throw Error(option + " " + out.string() +
                " exists and is not a cubin; evo writes a cubin only over an earlier one: name "
                "another file");
  }
}

TemplateLibrary LoadLibrary(const GlobalOptions& global) {
  std::vector<std::filesystem::path> folders(global.template_folders.begin(),
                                             global.template_folders.end());
  return TemplateLibrary::Load(folders);
}

const KernelTemplate& TemplateOfRun(const TemplateLibrary& library, const RunSpec& spec) {
  const KernelTemplate* known = library.TryFind(spec.template_name);
  if (known == nullptr) {
    // A user's template is found only where --templates points, for every command alike.
    throw Error("the run searched template '" + spec.template_name +
                "', which is not among the templates this evo loaded; pass its folder with "
                "--templates, as to the evo run that made it");
  }
  const KernelTemplate& kernel_template = *known;
  if (kernel_template.source_hash != spec.template_hash) {
    throw Error("the run searched version " + spec.template_hash.substr(0, 12) + " of " +
                spec.template_name + ", but this evo has version " +
                kernel_template.source_hash.substr(0, 12) +
                (kernel_template.origin == "embedded"
                     ? " built in, and a kernel is exported only as it was measured: run the "
                       "search again with this evo (a replay of a recording made with an "
                       "earlier version, as tests/data's are, is searched with the current "
                       "source but measured with the old one), or pass a folder holding the "
                       "old version with --templates"
                     : "; pass the old version's folder with --templates"));
  }
  return kernel_template;
}

void ApplyShape(const Manifest& manifest, const std::string& shape, Problem& problem) {
  std::vector<int64_t> values;
  size_t start = 0;
  while (start <= shape.size()) {
    const size_t comma = std::min(shape.find(',', start), shape.size());
    const std::optional<int64_t> value =
        ParseInteger(std::string_view(shape).substr(start, comma - start));
    if (!value || *value < 1) {
      values.clear();
      break;
    }
    values.push_back(*value);
    start = comma + 1;
  }
  if (!TakesShape(manifest)) {
    throw Error("template " + manifest.name + " takes no --shape (B,H,S,D is attention's); give " +
                "its problem as --problem NAME=VALUE: " + ProblemParamNames(manifest));
  }
  if (values.size() != 4 && values.size() != 5) {
    throw Error("malformed --shape '" + shape +
                "': expected B,H,S,D or B,H,S_q,S_kv,D as positive integers");
  }
  const bool split = values.size() == 5;
  const std::vector<std::pair<const char*, int64_t>> assignments = {
      {"B", values[0]},
      {"H", values[1]},
      {"S_q", values[2]},
      {"S_kv", split ? values[3] : values[2]},
      {"D", values.back()}};
  for (const auto& [name, value] : assignments) {
    SetProblemParam(manifest, name, value, problem);
  }
}

namespace {

// Adds the one value `setting` gives (`one`, a knob or a problem parameter) to `given`. The same
// name given before with another value is a mistake on the command line, where the last used to
// win silently: refused with `contradiction` (the name and the earlier value in it).
void AddOnce(const Genome& one, Genome& given,
             const std::function<std::string(const std::string&, int64_t)>& contradiction) {
  for (const auto& [name, value] : one) {
    const auto before = given.find(name);
    if (before != given.end() && before->second != value) {
      throw Error(contradiction(name, before->second));
    }
    given[name] = value;
  }
}

}  // namespace

void RequireOutlierRows(const Manifest& manifest) {
  for (const KernelSpec& kernel : manifest.kernels) {
    for (const KernelArgSpec& arg : kernel.args) {
      if (arg.outlier_rows) return;
    }
  }
  throw Error("--time-on-outliers: no input of template " + manifest.name +
              " has outlier rows (its manifest's \"outlier_rows\"), so its timing inputs would "
              "not change");
}

void ApplyKnobSettings(const Manifest& manifest, const std::vector<std::string>& settings,
                       const std::string& option, Genome& genome) {
  Genome given;
  for (const std::string& setting : settings) {
    Genome one;
    ApplyKnobSetting(manifest, setting, one);
    AddOnce(one, given, [&](const std::string& knob, int64_t before) {
      return option + " " + setting + " contradicts an earlier " + option + " " + knob + "=" +
             std::to_string(before) + "; give each knob once";
    });
  }
  for (const auto& [knob, value] : given) genome[knob] = value;
}

Problem CommandLineProblem(const Manifest& manifest, const std::string& shape, bool causal,
                           const std::vector<std::string>& problem_settings) {
  // Only what the command line gives is set here; the rest takes its defaults afterwards, so a
  // default that follows another parameter (H_kv = H) follows the given value.
  Problem given;
  if (!shape.empty()) ApplyShape(manifest, shape, given);
  if (causal) {
    if (manifest.FindProblemParam("CAUSAL") == nullptr) {
      throw Error("template " + manifest.name + " takes no --causal (its problem parameters: " +
                  ProblemParamNames(manifest) + ")");
    }
    SetProblemParam(manifest, "CAUSAL", 1, given);
  }
  for (const std::string& setting : problem_settings) {
    Problem one;
    ApplyProblemSetting(manifest, setting, one);
    AddOnce(one, given, [&](const std::string& name, int64_t before) {
      return "--problem " + setting + " contradicts " + name + "=" + std::to_string(before) +
             ", given before it (by --shape, --causal or another --problem); give each "
             "parameter once";
    });
  }
  Problem problem = CompleteProblem(manifest, given);
  CheckProblem(manifest, problem);
  return problem;
}

bool TakesShape(const Manifest& manifest) {
  return std::all_of(kShapeParams.begin(), kShapeParams.end(), [&](std::string_view name) {
    return manifest.FindProblemParam(name) != nullptr;
  });
}

std::string ProblemParamNames(const Manifest& manifest) {
  std::string names;
  for (const ProblemParamSpec& param : manifest.problem) {
    names += (names.empty() ? "" : ", ") + param.name;
  }
  return names;
}

std::string ProblemOptions(const Manifest& manifest, const Problem& problem) {
  std::string text;
  const bool shape = TakesShape(manifest);
  if (shape) {
    text = "--shape " + std::to_string(problem.at("B")) + "," + std::to_string(problem.at("H")) +
           "," + std::to_string(problem.at("S_q")) + "," + std::to_string(problem.at("S_kv")) +
           "," + std::to_string(problem.at("D"));
  }
  const auto causal = problem.find("CAUSAL");
  if (causal != problem.end() && causal->second != 0) text += " --causal";
  for (const auto& [name, value] : problem) {
    const bool in_shape =
        shape && std::find(kShapeParams.begin(), kShapeParams.end(), name) != kShapeParams.end();
    if (in_shape || name == "CAUSAL") continue;
    text +=
        (text.empty() ? "" : " ") + std::string("--problem ") + name + "=" + std::to_string(value);
  }
  return text;
}

std::chrono::seconds ParseDuration(const std::string& text, const std::string& option) {
  std::string digits = text;
  int64_t unit = 1;
  if (!digits.empty()) {
    switch (digits.back()) {
      case 's':
        digits.pop_back();
        break;
      case 'm':
        unit = 60;
        digits.pop_back();
        break;
      case 'h':
        unit = 3600;
        digits.pop_back();
        break;
      default:
        break;
    }
  }
  const std::optional<int64_t> value = ParseInteger(digits);
  if (!value || *value < 1) {
    throw Error("malformed " + option + " '" + text + "': expected a duration like 90s, 15m or 2h");
  }
  // A year bounds it well before the clock's nanoseconds overflow (a limit that wraps around
  // would stop a search at once).
  constexpr int64_t kYear = 365LL * 24 * 3600;
  if (*value > kYear / unit) {
    throw Error(option + " '" + text + "' is longer than a year (8760h); leave " + option +
                " out for no time limit");
  }
  return std::chrono::seconds(*value * unit);
}

}  // namespace evo::cli
