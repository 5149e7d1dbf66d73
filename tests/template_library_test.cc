#include "kernel_templates/template_library.h"

#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <functional>
#include <map>
#include <optional>

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
  SECTION(
      "one folder reached twice is loaded once: named twice, spelled otherwise, or through "
      "its parent") {
    for (const std::vector<std::filesystem::path>& folders :
         {std::vector<std::filesystem::path>{dir.path() / "a", dir.path() / "a"},
          {dir.path() / "a", dir.path() / "." / "a" / ""},
          {dir.path(), dir.path() / "a"}}) {
      const TemplateLibrary twice = TemplateLibrary::Load(folders);
      CHECK(twice.Find("tiny_a").manifest.knobs.size() == 1);
      CHECK(std::count_if(twice.templates().begin(), twice.templates().end(),
                          [](const KernelTemplate& t) { return t.manifest.name == "tiny_a"; }) ==
            1);
    }
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
  // A manifest.json that is a folder read as an empty file: a JSON parse error.
  std::filesystem::create_directories(dir.path() / "folder_manifest" / "manifest.json");
  CHECK_THROWS_WITH(
      TemplateLibrary::Load({dir.path() / "folder_manifest"}),
      Catch::Contains("folder_manifest/manifest.json") && Catch::Contains("it is a folder"));
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
  const std::string source = InstantiateSource(sdpa, sdpa.manifest.main_kernel(), &genome, problem);
  CHECK(source.find("#define BLOCK_M 64\n") != std::string::npos);
  CHECK(source.find("#define HEAD_DIM 128\n") != std::string::npos);
  CHECK(source.find("#define IS_CAUSAL 0\n#line 1 \"sdpa_fp16.cu\"\n") != std::string::npos);
  CHECK(source.find("#define S_q") == std::string::npos);

  const std::string reference = InstantiateSource(sdpa, sdpa.manifest.reference, nullptr, problem);
  CHECK(reference.find("#define BLOCK_M") == std::string::npos);
  CHECK(reference.find("#define HEAD_DIM 128\n") != std::string::npos);
  // Arguments with a define name their dtype for the shared reference.
  CHECK(reference.find("#define REF_Q EVO_DTYPE_F16\n") != std::string::npos);
  CHECK(reference.find("#define REF_O EVO_DTYPE_F32\n") != std::string::npos);
  CHECK(reference.find("#define REF_K_SCALE") == std::string::npos);
  CHECK(source.find("REF_Q") == std::string::npos);

  // Only the arguments present for the problem define theirs: Q is fp16 or e4m3 with a scale.
  const KernelTemplate& fp8 = library.Find("sdpa_fp8");
  Problem fp8_problem = DefaultProblem(fp8.manifest);
  fp8_problem["Q_FP8"] = 0;
  const std::string fp16_q = InstantiateSource(fp8, fp8.manifest.reference, nullptr, fp8_problem);
  CHECK(fp16_q.find("#define REF_Q EVO_DTYPE_F16\n") != std::string::npos);
  CHECK(fp16_q.find("#define REF_Q_SCALE") == std::string::npos);
  CHECK(fp16_q.find("#define REF_K EVO_DTYPE_FP8E4M3\n") != std::string::npos);
  CHECK(fp16_q.find("#define REF_K_SCALE EVO_DTYPE_F32\n") != std::string::npos);
  fp8_problem["Q_FP8"] = 1;
  const std::string e4m3_q = InstantiateSource(fp8, fp8.manifest.reference, nullptr, fp8_problem);
  CHECK(e4m3_q.find("#define REF_Q EVO_DTYPE_FP8E4M3\n") != std::string::npos);
  CHECK(e4m3_q.find("#define REF_Q_SCALE EVO_DTYPE_F32\n") != std::string::npos);
}

TEST_CASE("templates include the device library; the shipped ones share one attention reference",
          "[templates]") {
  CHECK(DeviceLibrary().contains("evo/core.cuh"));
  CHECK(DeviceLibrary().contains("evo/attention_reference.cu"));
  const TemplateLibrary library = TemplateLibrary::Load({});
  for (const char* name : {"sdpa_fp16", "sdpa_fp8", "sdpa_fp16_wgmma"}) {
    INFO(name);
    const KernelTemplate& shipped = library.Find(name);
    CHECK(shipped.manifest.reference.source_path == "evo/attention_reference.cu");
    CHECK(shipped.manifest.reference.entry == "attention_reference_f32");
    std::vector<std::string> header_names;
    for (const HeaderFile& header : shipped.headers) {
      header_names.push_back(header.name);
      CHECK(header.content == DeviceLibrary().at(header.name));
    }
    // Directly (the kernel), through another header (core.cuh through online_softmax.cuh) and
    // through the reference (dtype.cuh).
    for (const char* header : {"evo/online_softmax.cuh", "evo/core.cuh", "evo/dtype.cuh"}) {
      CHECK(std::find(header_names.begin(), header_names.end(), header) != header_names.end());
    }
    CHECK(std::is_sorted(header_names.begin(), header_names.end()));
  }
}

// A template folder's files for ResolveIncludes, by their path from its root.
std::function<std::optional<std::string>(const std::string&)> local(
    std::map<std::string, std::string> files) {
  return [files](const std::string& name) -> std::optional<std::string> {
    const auto it = files.find(name);
    if (it == files.end()) return std::nullopt;
    return it->second;
  };
}

TEST_CASE("a template's version covers every header it includes, and nothing it does not",
          "[templates]") {
  const std::vector<HeaderFile> headers = ResolveIncludes(
      {{"k.cu",
        "#include \"mine.cuh\"\n  #  include <evo/mma_sync.cuh>\n#include <cuda_fp16.h>\n"
        "// #include \"evo/not_a_header.cuh\" is a comment\nint x;\n"}},
      local({{"mine.cuh", "#include \"evo/online_softmax.cuh\"\n"}, {"unused.cuh", "x"}}));
  std::vector<std::string> names;
  for (const HeaderFile& header : headers) names.push_back(header.name);
  // NVRTC's own cuda_fp16.h is left to NVRTC; an unused file of the folder is not a header.
  CHECK(names == std::vector<std::string>{"evo/core.cuh", "evo/mma_sync.cuh",
                                          "evo/online_softmax.cuh", "mine.cuh"});
  CHECK_THROWS_WITH(ResolveIncludes({{"k.cu", "#include \"evo/missing.cuh\"\n"}}, local({})),
                    Catch::Contains("k.cu includes \"evo/missing.cuh\", which is not in evo's "
                                    "device library") &&
                        Catch::Contains("evo/core.cuh"));
  // A template folder cannot stand in for the device library.
  const std::vector<HeaderFile> library_only =
      ResolveIncludes({{"k.cu", "#include \"evo/core.cuh\"\n"}}, local({{"evo/core.cuh", "fake"}}));
  REQUIRE(library_only.size() == 1);
  CHECK(library_only[0].content == DeviceLibrary().at("evo/core.cuh"));

  // A header the template includes changes its version when it changes (the device library's
  // headers are hashed the same way); a file it does not include leaves the version as it is.
  test::TempDir dir;
  const std::string source = std::string("#include \"part.cuh\"\n") + kTinySource;
  test::WriteTinyTemplate(dir.path(), "tiny_headers", source);
  test::WriteFile(dir.path() / "part.cuh", "#define PART 1\n");
  const std::string first = TemplateLibrary::Load({dir.path()}).Find("tiny_headers").source_hash;
  test::WriteFile(dir.path() / "other.cuh", "#define OTHER 1\n");
  CHECK(TemplateLibrary::Load({dir.path()}).Find("tiny_headers").source_hash == first);
  test::WriteFile(dir.path() / "part.cuh", "#define PART 2\n");
  const TemplateLibrary reloaded = TemplateLibrary::Load({dir.path()});
  const KernelTemplate& changed = reloaded.Find("tiny_headers");
  CHECK(changed.source_hash != first);
  REQUIRE(changed.headers.size() == 1);
  CHECK(changed.headers[0].name == "part.cuh");

  test::TempDir broken;
  test::WriteTinyTemplate(broken.path(), "tiny_broken",
                          std::string("#include \"evo/no_such.cuh\"\n") + kTinySource);
  CHECK_THROWS_WITH(
      TemplateLibrary::Load({broken.path()}),
      Catch::Contains("manifest.json") && Catch::Contains("tiny.cu includes \"evo/no_such.cuh\""));
}

TEST_CASE("includes that evo cannot version are refused, naming the file, the include and the rule",
          "[templates]") {
  test::TempDir dir;
  const std::string outside = (dir.path() / "outside.cuh").string();
  test::WriteFile(outside, "#define OUTSIDE 1\n");
  const std::string rule =
      "quoted includes name evo's device library (\"evo/...\") or files of "
      "the folder from its root (so that evo versions them)";

  SECTION("a quoted absolute path, even to a file that exists") {
    CHECK_THROWS_WITH(
        ResolveIncludes({{"k.cu", "#include \"" + outside + "\"\n"}}, local({})),
        Catch::Contains("k.cu includes \"" + outside + "\", which leaves the template's folder") &&
            Catch::Contains(rule));
  }
  SECTION("a quoted name that is not in the folder, which NVRTC would look up from the cwd") {
    CHECK_THROWS_WITH(
        ResolveIncludes({{"k.cu", "#include \"elsewhere.cuh\"\n"}}, local({{"other.cuh", ""}})),
        Catch::Contains("k.cu includes \"elsewhere.cuh\", which is not in the template's "
                        "folder: " +
                        rule) &&
            !Catch::Contains("e.g."));
  }
  SECTION("a quoted or <...> name with \"..\", or a <...> absolute path") {
    for (const std::string& include : std::vector<std::string>{
             "\"../x.cuh\"", "<../x.cuh>", "<" + outside + ">", "\"sub/../../x.cuh\""}) {
      CHECK_THROWS_WITH(
          ResolveIncludes({{"k.cu", "#include " + include + "\n"}}, local({{"x.cuh", ""}})),
          Catch::Contains("k.cu includes " + include + ", which leaves the template's folder") &&
              Catch::Contains("<...> is for NVRTC's built-in headers"));
    }
  }
  SECTION("a name relative to the including file's subfolder, with its root-relative spelling") {
    const auto files = [](bool with_neighbour) {
      std::map<std::string, std::string> folder{{"sub/a.cuh", "#include \"b.cuh\"\n"}};
      if (with_neighbour) folder.emplace("sub/b.cuh", "");
      return local(folder);
    };
    CHECK_THROWS_WITH(ResolveIncludes({{"k.cu", "#include \"sub/a.cuh\"\n"}}, files(true)),
                      Catch::Contains("sub/a.cuh includes \"b.cuh\", which is not in the "
                                      "template's folder: " +
                                      rule + ", e.g. \"sub/b.cuh\""));
    CHECK_THROWS_WITH(ResolveIncludes({{"k.cu", "#include \"sub/a.cuh\"\n"}}, files(false)),
                      Catch::Contains("sub/a.cuh includes \"b.cuh\"") && !Catch::Contains("e.g."));
  }
  SECTION("NVRTC's built-in headers are <...> names; quoted, they get a hint") {
    std::vector<HeaderFile> headers;
    CHECK_NOTHROW(headers = ResolveIncludes({{"k.cu",
                                              "#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n"
                                              "#include <cuda/std/cstdint>\n// #include \"" +
                                                  outside + "\" is a comment\n"}},
                                            local({})));
    CHECK(headers.empty());
    CHECK_THROWS_WITH(
        ResolveIncludes({{"k.cu", "#include \"cuda_fp16.h\"\n"}}, local({})),
        Catch::Contains("k.cu includes \"cuda_fp16.h\", which is not in the "
                        "template's folder") &&
            Catch::Contains("NVRTC's built-in headers are included as <cuda_fp16.h>"));
  }
  SECTION("loading the folder names its manifest; the root-relative name loads and is versioned") {
    test::WriteTinyTemplate(dir.path() / "t", "tiny_sub",
                            std::string("#include \"sub/a.cuh\"\n") + kTinySource);
    test::WriteFile(dir.path() / "t" / "sub" / "a.cuh", "#include \"b.cuh\"\n");
    test::WriteFile(dir.path() / "t" / "sub" / "b.cuh", "#define B 1\n");
    CHECK_THROWS_WITH(TemplateLibrary::Load({dir.path() / "t"}),
                      Catch::Contains("t/manifest.json: sub/a.cuh includes \"b.cuh\"") &&
                          Catch::Contains("e.g. \"sub/b.cuh\""));

    test::WriteFile(dir.path() / "t" / "sub" / "a.cuh", "#include \"sub/b.cuh\"\n");
    const TemplateLibrary fixed = TemplateLibrary::Load({dir.path() / "t"});
    const KernelTemplate& loaded = fixed.Find("tiny_sub");
    std::vector<std::string> names;
    for (const HeaderFile& header : loaded.headers) names.push_back(header.name);
    CHECK(names == std::vector<std::string>{"sub/a.cuh", "sub/b.cuh"});
    test::WriteFile(dir.path() / "t" / "sub" / "b.cuh", "#define B 2\n");
    CHECK(TemplateLibrary::Load({dir.path() / "t"}).Find("tiny_sub").source_hash !=
          loaded.source_hash);
  }
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
