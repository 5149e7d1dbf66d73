#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>

#include "tests/test_support.h"

namespace {

// The layers in the order of the flow (ARCHITECTURE.md): a file may include its own layer and
// those before it, never one after it. The population stores the evaluator's outcomes, so it
// comes after the evaluator.
const std::map<std::string, int> kLayerRank = {
    {"common", 0}, {"kernel_templates", 1}, {"evaluator", 2}, {"population", 3},
    {"engine", 4}, {"exports", 5},          {"cli", 6},
};

}  // namespace

TEST_CASE(
    "includes only point down the layers: common, template model, evaluator, population, "
    "engine, exports, cli") {
  const std::regex include_line(R"re(^\s*#\s*include\s*"([a-z_]+)/[^"]+")re");
  int files = 0;
  for (const auto& [layer, rank] : kLayerRank) {
    const std::filesystem::path folder = evo::test::SourceDir() / layer;
    REQUIRE(std::filesystem::is_directory(folder));
    for (const auto& entry : std::filesystem::directory_iterator(folder)) {
      const std::string extension = entry.path().extension().string();
      if (extension != ".h" && extension != ".cc") continue;
      ++files;
      std::ifstream in(entry.path());
      std::string line;
      int line_number = 0;
      while (std::getline(in, line)) {
        ++line_number;
        std::smatch match;
        if (!std::regex_search(line, match, include_line)) continue;
        const auto included = kLayerRank.find(match[1].str());
        if (included == kLayerRank.end()) continue;  // not a layer of evo (tests/, ...)
        INFO(entry.path().string() << ":" << line_number << ": " << line);
        CHECK(included->second <= rank);
      }
    }
  }
  CHECK(files > 60);
}
