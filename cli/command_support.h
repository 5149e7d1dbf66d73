#pragma once

#include <CLI/CLI.hpp>
#include <array>
#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "kernel_templates/genome.h"
#include "kernel_templates/template_library.h"
#include "population/store.h"

namespace evo::cli {

// Options every command shares.
struct GlobalOptions {
  std::vector<std::string> template_folders;
  bool verbose = false;
};

// One subcommand: its name, what it does, how it reads its options and how it runs.
struct Command {
  const char* name;
  const char* description;
  std::function<std::function<int()>(CLI::App&, const GlobalOptions&)> setup;
};

TemplateLibrary LoadLibrary(const GlobalOptions& global);

// Checks of whole-number options whose messages read as sentences ("must be a whole number
// from 1 to ..., not '0'"), where CLI11's own print a range's bounds to 300 digits, and which
// refuse what does not fit the option rather than let it be clamped or wrapped around (a seed
// of -1 became 18446744073709551615).
CLI::Validator PositiveNumber();
CLI::Validator NonNegativeNumber();
CLI::Validator SeedNumber();
CLI::Validator WholeNumberBetween(int64_t least, int64_t most);
// A run or candidate id in decimal digits (a sign allowed, so that the command can say why 0 or
// -3 names nothing), rewritten as its value: CLI11 alone reads "010" as 8 and "0x5" as 5.
CLI::Validator DecimalId();

// Refuses `out`, a file that option `option` (e.g. "--out") is about to write, where it is the
// database `db` or one of SQLite's files beside it, one of `inputs` (what the command reads, e.g.
// a recording), a SQLite database, or not a plain file: what evo writes must never take the
// place of what it stores or reads. Symbolic and hard links are followed. `db` may be empty.
void RefuseToOverwrite(const std::filesystem::path& out, const std::string& option,
                       const std::filesystem::path& db,
                       const std::vector<std::filesystem::path>& inputs = {});

// Throws evo::Error unless `out` is absent or a cubin (an ELF file) an earlier command wrote:
// a binary written over a database, a template's source or a recording would destroy it.
void RefuseToOverwriteButACubin(const std::filesystem::path& out, const std::string& option);

// The template version a run searched, from the templates evo has now; throws evo::Error when
// evo has another version (its cubins would not be the ones measured).
const KernelTemplate& TemplateOfRun(const TemplateLibrary& library, const RunSpec& spec);

// "B,H,S,D" or "B,H,S_q,S_kv,D" onto the template's problem parameters of those names.
void ApplyShape(const Manifest& manifest, const std::string& shape, Problem& problem);

// The problem parameters --shape sets (attention's): B, H, S_q, S_kv and D.
inline constexpr std::array<std::string_view, 5> kShapeParams = {"B", "H", "S_q", "S_kv", "D"};

// Whether the template has every parameter of kShapeParams, so that --shape applies to it.
bool TakesShape(const Manifest& manifest);

// "ROWS, COLS, EPS_INV, BF16": the template's problem parameters, for messages.
std::string ProblemParamNames(const Manifest& manifest);

// The options that give `problem` on a command line: --shape and --causal where the template
// takes them, --problem NAME=VALUE for every other parameter.
std::string ProblemOptions(const Manifest& manifest, const Problem& problem);

// Applies each KNOB=VALUE of `settings` (what `option`, e.g. "--set", gave) to `genome`. A knob
// given twice with two values is refused, naming both: the last used to win silently.
void ApplyKnobSettings(const Manifest& manifest, const std::vector<std::string>& settings,
                       const std::string& option, Genome& genome);

// The problem the command line describes: the template's defaults, then --shape (when given),
// --causal and every --problem PARAM=VALUE.
Problem CommandLineProblem(const Manifest& manifest, const std::string& shape, bool causal,
                           const std::vector<std::string>& problem_settings);

// What --time-on-outliers says, for every command that takes it.
inline constexpr const char* kTimeOnOutliersHelp =
    "time on inputs with the manifest's outlier rows (e.g. keys with a few rows 12 times "
    "larger, as attention sinks make), checked as one more correctness seed, instead of N(0,1) "
    "inputs: for kernels whose speed depends on the data (sdpa_hopper's LAGGED_MAX); such "
    "timings do not compare with plain ones, so a run resumes only with the same choice";

// Throws evo::Error unless some input of `manifest`'s kernels has outlier rows: without them
// --time-on-outliers would time the same kind of inputs under another name.
void RequireOutlierRows(const Manifest& manifest);

// --deadline-ms of the commands that run gates 2 and 3 (bench, run, sweep).
inline constexpr const char* kDeadlineHelp =
    "the GPU worker's time for gates 2 and 3 of one candidate (default: twice what the gates do "
    "for a candidate as fast as the reference kernel, from the reference's runs on the task, at "
    "least 3000)";

// "90", "90s", "15m", "2h" as a duration; throws evo::Error for anything else.
std::chrono::seconds ParseDuration(const std::string& text, const std::string& option);

}  // namespace evo::cli
