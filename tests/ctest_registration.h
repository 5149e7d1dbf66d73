#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace evo::test {

// A Catch2 test spec that selects exactly the test case of this name, whatever characters it
// holds: every character but letters and digits is escaped, so commas, brackets, quotes,
// wildcards and a leading '~' stand for themselves.
std::string ExactTestSpec(std::string_view test_name);

// `text` as one CMake bracket argument ([==[text]==]), with enough '=' that no closing bracket
// inside the text ends it early. CMake takes its content literally: no variable expansion, no
// list splitting on ';', no escapes.
std::string CMakeBracketArgument(std::string_view text);

// The CTest script that registers each of `test_names` as its own test, running `executable`
// on exactly that test case. A test that matches no test case fails (Catch2's --warn NoTests),
// so a name mangled on its way here cannot pass silently.
std::string CTestRegistration(const std::string& executable,
                              const std::vector<std::string>& test_names);

// The names of the test cases this binary holds that a plain run executes (hidden ones are
// left out), as --list-test-names-only lists them.
std::vector<std::string> RegisteredTestNames();

}  // namespace evo::test
