#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/test_support.h"

namespace evo {
namespace {

std::filesystem::path Script() { return test::SourceDir() / "scripts" / "bench-gpus.py"; }

bool HavePython() {
  if (std::filesystem::exists("/usr/bin/python3")) return true;
  WARN("skipped: scripts/bench-gpus.py runs on /usr/bin/python3, which is not here");
  return false;
}

TEST_CASE("bench-gpus runs the same search on one GPU and on two, at both shapes",
          "[bench][gpus]") {
  if (!HavePython()) return;
  test::TempDir dir;
  const test::CommandResult plan =
      test::RunProgram(Script(), {"--evo", "EVO", "--dry-run", "--budget", "10"}, dir.path());
  INFO(plan.out << plan.err);
  REQUIRE(plan.exit_code == 0);
  std::vector<std::string> lines;
  std::istringstream out(plan.out);
  for (std::string line; std::getline(out, line);) lines.push_back(line);
  // Per shape: the warm-up on both GPUs, then one GPU, then both, each with the same seed.
  REQUIRE(lines.size() == 6);
  for (size_t i = 0; i < 6; ++i) {
    INFO(lines[i]);
    CHECK(lines[i].rfind("EVO run --new --json ", 0) == 0);
    CHECK_THAT(lines[i], Catch::Contains("--seed 1"));
    CHECK_THAT(lines[i], Catch::Contains(i < 3 ? "--shape 2,8,512,64" : "--shape 4,16,4096,128"));
    CHECK_THAT(lines[i], Catch::Contains(i % 3 == 1 ? "--gpus 0 " : "--gpus 0,1 "));
    CHECK_THAT(lines[i], Catch::Contains(i % 3 == 0 ? "--budget 20 " : "--budget 10 "));
  }
  // The timed runs start from copies of the warm-up's cache, not from it.
  CHECK_THAT(lines[1], Catch::Contains("/cache-one"));
  CHECK_THAT(lines[2], Catch::Contains("/cache-several"));

  for (const char* bad : {"0", "0,0", "0,x", ""}) {
    INFO("--gpus '" << bad << "'");
    const test::CommandResult refused =
        test::RunProgram(Script(), {"--gpus", bad, "--dry-run"}, dir.path());
    CHECK(refused.exit_code == 2);
    CHECK_THAT(refused.err, Catch::Contains("argument --gpus"));
  }
  const test::CommandResult shape =
      test::RunProgram(Script(), {"--shapes", "2,8,512", "--dry-run"}, dir.path());
  CHECK(shape.exit_code == 2);
  CHECK_THAT(shape.err, Catch::Contains("expected B,H,S,D"));
}

TEST_CASE("bench-gpus on two simulated GPUs prints both rates and their ratio", "[bench][gpus]") {
  if (!HavePython()) return;
  test::TempDir dir;
  const auto json_path = dir.path() / "bench.json";
  const test::CommandResult result = test::RunProgram(
      Script(),
      {"--evo", test::EvoBinary().string(), "--replay", test::H100Recording().string(),
       "--replay-delay-ms", "60", "--budget", "32", "--json", json_path.string()},
      dir.path());
  INFO(result.out << result.err);
  REQUIRE(result.exit_code == 0);
  CHECK_THAT(result.out, Catch::Contains("candidates per minute, 32 candidates per run"));
  CHECK_THAT(result.out, Catch::Contains("target 1.8x"));
  std::ifstream in(json_path);
  const nlohmann::json figures = nlohmann::json::parse(in);
  REQUIRE(figures.size() == 1);
  const nlohmann::json& replay = figures[0];
  CHECK(replay["one"]["evaluated"] == 32);
  CHECK(replay["several"]["evaluated"] == 32);
  CHECK(replay["one"]["per_minute"].get<double>() > 0);
  CHECK(replay["ratio"].get<double>() == Approx(replay["several"]["per_minute"].get<double>() /
                                                replay["one"]["per_minute"].get<double>()));
  // Two lanes, each 60 ms a measurement: well over one lane's rate.
  CHECK(replay["ratio"].get<double>() > 1.3);
}

}  // namespace
}  // namespace evo
