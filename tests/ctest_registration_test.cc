#include "tests/ctest_registration.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/files.h"
#include "tests/test_support.h"

namespace {

// Names that broke or could break the registration: brackets (Catch2 tags, CMake list
// grouping), semicolons (CMake lists), commas (Catch2 alternatives), wildcards, quotes,
// backslashes, a leading '~' (Catch2 exclusion) or '#', CMake's variable syntax and the closing
// sequences of CMake bracket arguments.
const std::vector<std::string> kTrickyNames = {
    "Unit is in [0, 1) with mean one half",
    "a; b, c",
    "*starts and ends with a wildcard*",
    "~looks excluded",
    "#starts like a comment",
    "quotes \"inside\" and a \\ backslash",
    "exclude:[tag] and [.] hidden-looking",
    "ends in a bracket]",
    "ends in ]=",
    "holds ]] and ]=] and ]==]",
    "${NOT_A_VARIABLE} $<NOR_A_GENEXP> @AT@",
    "plain name",
};

std::filesystem::path ThisBinary() { return std::filesystem::read_symlink("/proc/self/exe"); }

}  // namespace

TEST_CASE("CMake bracket arguments close after the text, whatever it holds") {
  CHECK(evo::test::CMakeBracketArgument("plain") == "[[plain]]");
  CHECK(evo::test::CMakeBracketArgument("a]]b") == "[=[a]]b]=]");
  CHECK(evo::test::CMakeBracketArgument("ends]") == "[=[ends]]=]");
  CHECK(evo::test::CMakeBracketArgument("a]=]b]") == "[==[a]=]b]]==]");
}

TEST_CASE("CTest reads back every registered name and the spec it runs, character for character") {
  evo::test::TempDir dir;
  // CTest lists a test's command only when the executable exists.
  const std::filesystem::path executable = dir.path() / "a folder; with [brackets]" / "evo_tests";
  evo::test::WriteFile(executable, "#!/bin/sh\n");
  std::filesystem::permissions(executable, std::filesystem::perms::owner_exec,
                               std::filesystem::perm_options::add);
  evo::test::WriteFile(dir.path() / "CTestTestfile.cmake",
                       evo::test::CTestRegistration(executable.string(), kTrickyNames));
  const evo::test::CommandResult listed = evo::test::RunProgram(
      EVO_CTEST_COMMAND, {"--test-dir", dir.path().string(), "--show-only=json-v1"}, dir.path());
  REQUIRE(listed.exit_code == 0);
  const nlohmann::json tests = nlohmann::json::parse(listed.out).at("tests");
  REQUIRE(tests.size() == kTrickyNames.size());
  for (size_t i = 0; i < tests.size(); ++i) {
    INFO(kTrickyNames[i]);
    CHECK(tests[i].at("name").get<std::string>() == kTrickyNames[i]);
    const std::vector<std::string> command = tests[i].at("command");
    REQUIRE(command.size() == 4);
    CHECK(command[0] == executable.string());
    CHECK(command[1] == evo::test::ExactTestSpec(kTrickyNames[i]));
    CHECK(command[2] == "--warn");
    CHECK(command[3] == "NoTests");
  }
}

// The name holds the characters that broke the registration once, so CI's comparison of the
// CTest list with the Catch2 list checks them end to end too.
TEST_CASE(
    "each test case runs alone from its exact spec, this one's name holding [0, 1); a, b, "
    "\"quotes\", \\backslash, *stars* and ]=]") {
  const std::vector<std::string> names = evo::test::RegisteredTestNames();
  REQUIRE(names.size() > 100);
  std::vector<std::string> sorted = names;
  std::sort(sorted.begin(), sorted.end());
  CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end());
  for (const std::string& name : names) {
    INFO(name);
    const evo::test::CommandResult listed = evo::test::RunProgram(
        ThisBinary(), {evo::test::ExactTestSpec(name), "--list-test-names-only"},
        std::filesystem::current_path());
    CHECK(listed.out == name + "\n");
  }
}

TEST_CASE("a spec that matches no test case fails the run under --warn NoTests") {
  const evo::test::CommandResult run = evo::test::RunProgram(
      ThisBinary(), {evo::test::ExactTestSpec("no test case has this name"), "--warn", "NoTests"},
      std::filesystem::current_path());
  CHECK(run.exit_code != 0);
  CHECK(run.out.find("No test cases matched") != std::string::npos);
}
