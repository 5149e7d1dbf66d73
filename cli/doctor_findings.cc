#include "cli/doctor_findings.h"

#include <fmt/format.h>

#include <algorithm>

namespace evo::cli {
namespace {

const char* KindLabel(Finding::Kind kind) {
  switch (kind) {
    case Finding::Kind::kOk:
      return "ok";
    case Finding::Kind::kNote:
      return "note";
    case Finding::Kind::kProblem:
      return "PROBLEM";
  }
  return "?";
}

}  // namespace

std::string FindingsToText(const std::vector<Finding>& findings) {
  size_t topic_width = 0;
  for (const Finding& finding : findings) topic_width = std::max(topic_width, finding.topic.size());
  std::string text;
  for (const Finding& finding : findings) {
    text += fmt::format("{:<8} {:<{}}  {}\n", KindLabel(finding.kind), finding.topic, topic_width,
                        finding.text);
    if (!finding.fix.empty()) {
      text += fmt::format("{:<8} {:>{}}  {}\n", "", "fix:", topic_width, finding.fix);
    }
  }
  return text;
}

}  // namespace evo::cli
