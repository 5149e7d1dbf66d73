#pragma once

#include <string>
#include <utility>
#include <vector>

namespace evo::cli {

// One thing `evo doctor` found out about this machine or a database.
struct Finding {
  enum class Kind {
    kOk,       // works
    kNote,     // worth knowing, nothing to fix (an unfinished run, a GPU that is not Hopper)
    kProblem,  // something evo needs that does not work here; `fix` says what to do
  };
  Kind kind = Kind::kOk;
  std::string topic;  // "nvrtc", "driver", "gpu 0", "database", "run 3", ...
  std::string text;
  std::string fix;  // for problems, and for notes that suggest a command
};

inline Finding OkFinding(std::string topic, std::string text) {
  return {Finding::Kind::kOk, std::move(topic), std::move(text), ""};
}
inline Finding NoteFinding(std::string topic, std::string text, std::string fix = "") {
  return {Finding::Kind::kNote, std::move(topic), std::move(text), std::move(fix)};
}
inline Finding ProblemFinding(std::string topic, std::string text, std::string fix) {
  return {Finding::Kind::kProblem, std::move(topic), std::move(text), std::move(fix)};
}

// Aligned lines "ok      nvrtc     ...", each problem's fix on the line below it.
std::string FindingsToText(const std::vector<Finding>& findings);

}  // namespace evo::cli
