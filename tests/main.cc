#define CATCH_CONFIG_RUNNER
#include <spdlog/spdlog.h>

#include <catch2/catch.hpp>

int main(int argc, char** argv) {
  // Expected warnings of the code under test (damaged cache entries, ...) stay out of the output.
  spdlog::set_level(spdlog::level::err);
  return Catch::Session().run(argc, argv);
}
