#include "kernel_templates/template_library.h"

#include <unistd.h>

#include <catch2/catch.hpp>

#include "common/error.h"
#include "kernel_templates/configuration.h"
#include "tests/test_support.h"

namespace evo {
namespace {

const char* kTinySource = R"(extern "C" __global__ void tiny(float* x, int n) {
  int i = (blockIdx.x * blockDim.x + threadIdx.x) * TILE;
  for (int t = 0; t < TILE; ++t) if (i + t < n) x[i + t] = 1.0f;
}
extern "C" __global__ void tiny_reference(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = 1.0f;
}
)";

TEST_CASE("the embedded templates include sdpa_fp16", "[templates]") {
  const TemplateLibrary library = TemplateLibrary::Load({});
  const KernelTemplate& sdpa = library.Find("sdpa_fp16");
  CHECK(sdpa.origin == "embedded");
  CHECK(sdpa.source_hash.size() == 64);
  CHECK_THROWS_WITH(library.Find("sdpa_fp32"), Catch::Contains("unknown template 'sdpa_fp32'") &&
                                                   Catch::Contains("sdpa_fp16"));
}

TEST_CASE("user template folders are loaded, one template or a collection", "[templates]") {
  test::TempDir dir;
  test::WriteTinyTemplate(dir.path() / "a", "tiny_a", kTinySource);
  test::WriteTinyTemplate(dir.path() / "b", "tiny_b", kTinySource);

  const TemplateLibrary collection = TemplateLibrary::Load({dir.path()});
  CHECK(collection.Find("tiny_a").origin == (dir.path() / "a").string());
  CHECK(collection.Find("tiny_b").manifest.knobs.size() == 1);
  CHECK(collection.templates().size() >= 3);

  const TemplateLibrary single = TemplateLibrary::Load({dir.path() / "a"});
  CHECK_NOTHROW(single.Find("tiny_a"));
  CHECK_THROWS(single.Find("tiny_b"));

  SECTION("the same name twice among the user's templates is refused") {
    test::WriteTinyTemplate(dir.path() / "c", "tiny_a", kTinySource);
    CHECK_THROWS_WITH(TemplateLibrary::Load({dir.path()}),
                      Catch::Contains("template tiny_a is defined twice"));
  }
  SECTION("a user's template replaces the embedded one of its name") {
    test::TempDir other;
    test::WriteTinyTemplate(other.path(), "sdpa_fp16", kTinySource);
    const TemplateLibrary replaced = TemplateLibrary::Load({other.path()});
    CHECK(replaced.Find("sdpa_fp16").origin == other.path().string());
  }
}

TEST_CASE("unusable template folders give clear errors", "[templates]") {
  test::TempDir dir;
  CHECK_THROWS_WITH(TemplateLibrary::Load({dir.path() / "missing"}),
                    Catch::Contains("does not exist"));
  test::WriteFile(dir.path() / "file", "x");
  CHECK_THROWS_WITH(TemplateLibrary::Load({dir.path() / "file"}),
                    Catch::Contains("is not a folder"));
  std::filesystem::create_directories(dir.path() / "empty");
  CHECK_THROWS_WITH(TemplateLibrary::Load({dir.path() / "empty"}),
                    Catch::Contains("holds no manifest.json"));
  test::WriteTinyTemplate(dir.path() / "broken", "tiny", kTinySource);
  test::WriteFile(dir.path() / "broken" / "manifest.json", "{\"name\": \"tiny\"}");
  CHECK_THROWS_WITH(
      TemplateLibrary::Load({dir.path() / "broken"}),
      Catch::Contains("broken/manifest.json") && Catch::Contains("missing \"version\""));
  if (::geteuid() != 0) {
    std::filesystem::create_directories(dir.path() / "locked");
    std::filesystem::permissions(dir.path() / "locked", std::filesystem::perms::none);
    CHECK_THROWS_WITH(TemplateLibrary::Load({dir.path() / "locked"}),
                      Catch::Contains("cannot read templates folder"));
  } else {
    WARN(
        "running as root: permissions do not lock a folder, the unreadable-folder case is skipped");
  }
}

TEST_CASE("instantiation defines the knobs and points messages at the template's lines",
          "[templates]") {
  const TemplateLibrary library = TemplateLibrary::Load({});
  const KernelTemplate& sdpa = library.Find("sdpa_fp16");
  Genome genome = DefaultGenome(sdpa.manifest);
  Problem problem = DefaultProblem(sdpa.manifest);
  problem["D"] = 128;
  const std::string source = InstantiateSource(sdpa, sdpa.manifest.kernel, &genome, problem);
  CHECK(source.find("#define BLOCK_M 64\n") != std::string::npos);
  CHECK(source.find("#define HEAD_DIM 128\n") != std::string::npos);
  CHECK(source.find("#define IS_CAUSAL 0\n#line 1 \"sdpa_fp16.cu\"\n") != std::string::npos);
  CHECK(source.find("#define S_q") == std::string::npos);

  const std::string reference = InstantiateSource(sdpa, sdpa.manifest.reference, nullptr, problem);
  CHECK(reference.find("#define BLOCK_M") == std::string::npos);
  CHECK(reference.find("#define HEAD_DIM 128\n") != std::string::npos);
}

TEST_CASE("configuration ids are stable and tell configurations apart", "[templates]") {
  const TemplateLibrary library = TemplateLibrary::Load({});
  const KernelTemplate& sdpa = library.Find("sdpa_fp16");
  const Genome genome = DefaultGenome(sdpa.manifest);
  const Problem problem = DefaultProblem(sdpa.manifest);
  const std::string id = ConfigurationId(sdpa, genome, problem, "sm_90");
  CHECK(id == ConfigurationId(sdpa, genome, problem, "sm_90"));
  Genome other = genome;
  other["STAGES"] = 3;
  CHECK(id != ConfigurationId(sdpa, other, problem, "sm_90"));
  Problem longer = problem;
  longer["S_q"] = 1024;
  CHECK(id != ConfigurationId(sdpa, genome, longer, "sm_90"));
  CHECK(id != ConfigurationId(sdpa, genome, problem, "sm_80"));
}

}  // namespace
}  // namespace evo
