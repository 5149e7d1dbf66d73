#include "common/status.h"

#include <array>
#include <utility>

namespace evo {
namespace {

constexpr std::array<std::pair<Status, std::string_view>, 9> kNames = {{
    {Status::kInvalid, "invalid"},
    {Status::kCompileError, "compile_error"},
    {Status::kResourceReject, "resource_reject"},
    {Status::kCompiled, "compiled"},
    {Status::kRuntimeError, "runtime_error"},
    {Status::kTimeout, "timeout"},
    {Status::kIncorrect, "incorrect"},
    {Status::kSlow, "slow"},
    {Status::kMeasured, "measured"},
}};

}  // namespace

std::string_view ToString(Status status) {
  for (const auto& [value, name] : kNames) {
    if (value == status) return name;
  }
  return "unknown";
}

std::optional<Status> StatusFromString(std::string_view name) {
  for (const auto& [value, text] : kNames) {
    if (text == name) return value;
  }
  return std::nullopt;
}

}  // namespace evo
