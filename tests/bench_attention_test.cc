// scripts/bench-attention.py's options, checked before it needs PyTorch or a GPU.

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "tests/test_support.h"

namespace evo {
namespace {

TEST_CASE("bench-attention refuses outlier keys it cannot draw, before it needs torch", "[bench]") {
  if (!test::HaveProgram("python3")) {
    WARN("skipped: scripts/bench-attention.py needs python3, which is not here");
    return;
  }
  test::TempDir dir;
  for (const char* keys : {"1:12", "32", "32:1", "32:0.5", "32:nan", "32:inf", "2:x", "x:12"}) {
    INFO(keys);
    const test::CommandResult result = test::RunProgram(
        test::SourceDir() / "scripts" / "bench-attention.py", {"--outlier-keys", keys}, dir.path());
    CHECK(result.exit_code == 2);
    CHECK_THAT(result.err,
               Catch::Contains("argument --outlier-keys: '" + std::string(keys) +
                               "' is not EVERY:SCALE with EVERY an integer of at least 2 and "
                               "SCALE a factor above 1"));
  }
  // A good value passes the parser; --help stops there, so nothing needs torch.
  const test::CommandResult help =
      test::RunProgram(test::SourceDir() / "scripts" / "bench-attention.py",
                       {"--outlier-keys", "32:12", "--help"}, dir.path());
  CHECK(help.exit_code == 0);
  CHECK_THAT(help.out, Catch::Contains("--outlier-keys EVERY:SCALE"));
}

}  // namespace
}  // namespace evo
