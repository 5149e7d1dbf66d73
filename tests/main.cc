#define CATCH_CONFIG_RUNNER
#include <spdlog/spdlog.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <exception>
#include <iostream>

#include "common/files.h"
#include "tests/ctest_registration.h"

int main(int argc, char** argv) {
  // `evo_tests --write-ctest-file FILE` writes the CTest registration of every test case (the
  // build runs it); CTest reads FILE, so no test name passes through CMake's list handling.
  if (argc == 3 && std::strcmp(argv[1], "--write-ctest-file") == 0) {
    try {
      evo::WriteFileAtomically(
          argv[2], evo::test::CTestRegistration(std::filesystem::absolute(argv[0]).string(),
                                                evo::test::RegisteredTestNames()));
      return 0;
    } catch (const std::exception& error) {
      std::cerr << "evo_tests: " << error.what() << "\n";
      return 1;
    }
  }
  // Expected warnings of the code under test (damaged cache entries, ...) stay out of the output.
  spdlog::set_level(spdlog::level::err);
  return Catch::Session().run(argc, argv);
}
