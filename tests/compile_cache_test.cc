#include "evaluator/compile_cache.h"

#include <catch2/catch.hpp>

#include "common/files.h"
#include "evaluator/nvrtc_compiler.h"
#include "tests/test_support.h"

namespace evo {
namespace {

// Counts the compiles that reach NVRTC.
class CountingCompiler final : public Compiler {
 public:
  CompileResult Compile(const CompileRequest& request) override {
    ++compiles;
    return nvrtc.Compile(request);
  }
  std::string Version() const override { return nvrtc.Version(); }
  std::vector<std::string> Options(const CompileRequest& request) const override {
    return nvrtc.Options(request);
  }

  NvrtcCompiler nvrtc;
  int compiles = 0;
};

const char* kSource = R"(extern "C" __global__ void scale(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= FACTOR;
})";

CompileRequest Request(int factor, const std::string& arch = "sm_90") {
  return {"#define FACTOR " + std::to_string(factor) + "\n" + kSource, "scale.cu", arch, {}, {}};
}

TEST_CASE("the compile cache hits on the same request and misses on any change", "[cache][nvrtc]") {
  test::TempDir dir;
  const CompileCache cache(dir.path() / "cache");
  CountingCompiler counting;
  CachingCompiler compiler(counting, cache);

  const CompileResult cold = compiler.Compile(Request(2));
  REQUIRE(cold.ok);
  CHECK_FALSE(cold.cache_hit);
  CHECK(counting.compiles == 1);

  const CompileResult warm = compiler.Compile(Request(2));
  CHECK(warm.cache_hit);
  CHECK(counting.compiles == 1);
  CHECK(warm.cubin == cold.cubin);
  CHECK(warm.log == cold.log);
  CHECK(warm.compile_ms == cold.compile_ms);
  REQUIRE(warm.kernels.size() == 1);
  CHECK(warm.kernels[0].registers == cold.kernels[0].registers);

  SECTION("a knob value changes the source") {
    CHECK_FALSE(compiler.Compile(Request(3)).cache_hit);
    CHECK(counting.compiles == 2);
  }
  SECTION("a change of the source text itself") {
    CompileRequest request = Request(2);
    request.source += "\n// a comment\n";
    CHECK_FALSE(compiler.Compile(request).cache_hit);
    CHECK(counting.compiles == 2);
  }
  SECTION("an option") {
    CompileRequest request = Request(2);
    request.extra_options = {"--use_fast_math"};
    CHECK_FALSE(compiler.Compile(request).cache_hit);
    CHECK(counting.compiles == 2);
    CHECK(compiler.Compile(request).cache_hit);
    CHECK(counting.compiles == 2);
  }
  SECTION("the arch") {
    const CompileResult sm80 = compiler.Compile(Request(2, "sm_80"));
    CHECK_FALSE(sm80.cache_hit);
    CHECK(sm80.kernels.at(0).arch == "sm_80");
    CHECK(counting.compiles == 2);
  }
  SECTION("the program name") {
    CompileRequest request = Request(2);
    request.program_name = "other.cu";
    CHECK_FALSE(compiler.Compile(request).cache_hit);
  }
  SECTION("the cache survives a new process: a new CompileCache on the folder hits") {
    const CompileCache reopened(dir.path() / "cache");
    CachingCompiler again(counting, reopened);
    CHECK(again.Compile(Request(2)).cache_hit);
    CHECK(counting.compiles == 1);
  }
  SECTION("a damaged entry is compiled again and repaired") {
    const std::string key = compiler.Key(Request(2));
    WriteFileAtomically(dir.path() / "cache" / (key + ".cubin"), "not a cubin");
    const CompileResult again = compiler.Compile(Request(2));
    CHECK_FALSE(again.cache_hit);
    CHECK(again.cubin == cold.cubin);
    CHECK(counting.compiles == 2);
    CHECK(compiler.Compile(Request(2)).cache_hit);

    WriteFileAtomically(dir.path() / "cache" / (key + ".json"), "{\"format\": 1, \"ok\": tr");
    CHECK_FALSE(compiler.Compile(Request(2)).cache_hit);
    CHECK(counting.compiles == 3);
  }
}

TEST_CASE("failed compiles are cached with their log", "[cache][nvrtc]") {
  test::TempDir dir;
  const CompileCache cache(dir.path());
  CountingCompiler counting;
  CachingCompiler compiler(counting, cache);
  const CompileRequest broken{
      "extern \"C\" __global__ void k() { undefined_name = 1; }", "k.cu", "sm_90", {}, {}};
  const CompileResult first = compiler.Compile(broken);
  CHECK_FALSE(first.ok);
  CHECK(first.log.find("undefined_name") != std::string::npos);
  const CompileResult second = compiler.Compile(broken);
  CHECK(second.cache_hit);
  CHECK_FALSE(second.ok);
  CHECK(second.log == first.log);
  CHECK(counting.compiles == 1);
}

TEST_CASE("a cache folder that cannot be made is a clear error", "[cache]") {
  test::TempDir dir;
  test::WriteFile(dir.path() / "file", "x");
  CHECK_THROWS_WITH(CompileCache(dir.path() / "file" / "cache"),
                    Catch::Contains("cannot use compile cache folder"));
}

}  // namespace
}  // namespace evo
