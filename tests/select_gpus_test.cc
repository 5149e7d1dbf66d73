#include <catch2/catch.hpp>

#include "evaluator/gpu_worker.h"

namespace evo {
namespace {

TEST_CASE("the gpus option names the GPUs to run on", "[cli]") {
  CHECK(SelectGpus("all", 1) == std::vector<int>{0});
  CHECK(SelectGpus("all", 3) == std::vector<int>{0, 1, 2});
  CHECK(SelectGpus("2,0", 4) == std::vector<int>{2, 0});
  CHECK_THROWS_WITH(SelectGpus("all", 0), Catch::Contains("no GPU is here"));
  CHECK_THROWS_WITH(SelectGpus("1", 1), Catch::Contains("there is no GPU 1 (found 1)"));
  CHECK_THROWS_WITH(SelectGpus("0,0", 2), Catch::Contains("GPU 0 is named twice"));
  for (const char* malformed : {"", "0,", ",1", "x", "-1", "0;1", "one"}) {
    INFO(malformed);
    CHECK_THROWS_WITH(SelectGpus(malformed, 4), Catch::Contains("malformed --gpus"));
  }
}

}  // namespace
}  // namespace evo
