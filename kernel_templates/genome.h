#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "kernel_templates/manifest.h"

namespace evo {

// A configuration's knob values (knob -> value), and a problem (parameter -> value).
using Genome = std::map<std::string, int64_t, std::less<>>;
using Problem = std::map<std::string, int64_t, std::less<>>;

Genome DefaultGenome(const Manifest& manifest);
Problem DefaultProblem(const Manifest& manifest);
// The parameters `given` sets, and every other one at its default, in the manifest's order (a
// default that is an expression reads the values before it: H_kv follows a given H).
Problem CompleteProblem(const Manifest& manifest, const Problem& given);

// Applies "KNOB=VALUE" as typed on a command line. Throws evo::Error for a malformed setting,
// an unknown knob or a value outside the knob's domain, naming the choices.
void ApplyKnobSetting(const Manifest& manifest, std::string_view setting, Genome& genome);

// Sets one problem parameter; throws evo::Error when the template has no such parameter or the
// value is outside its domain.
void SetProblemParam(const Manifest& manifest, std::string_view name, int64_t value,
                     Problem& problem);

// Applies "PARAM=VALUE" as typed on a command line (--problem Q_FP8=1); throws like
// SetProblemParam, or for a malformed setting.
void ApplyProblemSetting(const Manifest& manifest, std::string_view setting, Problem& problem);

// Throws evo::Error unless every knob (parameter) is set to a value of its domain and nothing
// else is set; a problem must also hold every parameter's check (H a multiple of H_kv).
void CheckGenome(const Manifest& manifest, const Genome& genome);
void CheckProblem(const Manifest& manifest, const Problem& problem);

// "BLOCK_M=64 BLOCK_N=64 ..." in the manifest's order.
std::string FormatGenome(const Manifest& manifest, const Genome& genome);
std::string FormatProblem(const Manifest& manifest, const Problem& problem);
// "B=2 CAUSAL=0 D=64 ..." in name order, without a manifest: a stored genome, problem or set of
// fixed knobs as `evo show` and the report print it ("A=1, B=2" with separator ", ").
std::string FormatSettings(const Genome& settings, std::string_view separator = " ");

// Parses a decimal integer; nothing else (no sign for unsigned contexts is checked here).
std::optional<int64_t> ParseInteger(std::string_view text);

}  // namespace evo
