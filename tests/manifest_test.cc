#include "kernel_templates/manifest.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/files.h"
#include "kernel_templates/genome.h"
#include "kernel_templates/template_library.h"
#include "tests/test_support.h"

namespace evo {
namespace {

using Json = nlohmann::json;

const std::string kSdpaFolder = (test::SourceDir() / "kernel_templates/sdpa_fp16/").string();

std::string ReadSdpaSource(const std::string& relative) {
  return ReadManifestSource(relative, kSdpaFolder, [](const std::string& name) {
    return TryReadFile(kSdpaFolder + name);
  });
}

Json SdpaManifestJson() { return Json::parse(ReadFile(kSdpaFolder + "manifest.json")); }

Manifest Parse(const Json& json) { return ParseManifest(json.dump(), "test", ReadSdpaSource); }

TEST_CASE("the sdpa_fp16 manifest parses with its knobs, problem and kernels", "[manifest]") {
  const Manifest manifest = Parse(SdpaManifestJson());
  CHECK(manifest.name == "sdpa_fp16");
  for (const char* knob : {"BLOCK_M", "BLOCK_N", "NUM_WARPS", "STAGES", "FAST_EXP",
                           "WARP_SPECIALIZED", "PERSISTENT"}) {
    CHECK(manifest.FindKnob(knob) != nullptr);
  }
  REQUIRE(manifest.FindProblemParam("D") != nullptr);
  CHECK(manifest.FindProblemParam("D")->compile_time());
  CHECK(manifest.FindProblemParam("D")->define == "HEAD_DIM");
  CHECK_FALSE(manifest.FindProblemParam("S_q")->compile_time());
  CHECK(manifest.main_kernel().entry == "sdpa_fp16_fwd");
  CHECK(manifest.reference.entry == "attention_reference_f32");
  CHECK(manifest.reference.source_path == "evo/attention_reference.cu");
  CHECK(manifest.main_kernel().source.find("sdpa_fp16_fwd") != std::string::npos);
  CHECK(manifest.main_kernel().args.size() == 8);
  CHECK(manifest.correctness.seeds >= 3);
  CHECK(manifest.correctness.problems.size() >= 2);
}

TEST_CASE("a broken manifest is refused naming the field", "[manifest]") {
  struct Case {
    const char* what;
    std::function<void(Json&)> breakage;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"a default outside the domain", [](Json& j) { j["knobs"][0]["default"] = 48; },
       "knobs[0].default: 48 is not one of its values"},
      {"an unknown key", [](Json& j) { j["knobs"][1]["valeus"] = Json::array({1}); },
       "knobs[1]: unknown key \"valeus\""},
      {"a constraint on an unknown name",
       [](Json& j) { j["constraints"][0]["expr"] = "BLOCK_K % 16 == 0"; },
       "constraints[0].expr: unknown name 'BLOCK_K'"},
      {"a constraint that does not parse",
       [](Json& j) { j["constraints"][0]["expr"] = "BLOCK_M %"; },
       "constraints[0].expr: expression 'BLOCK_M %'"},
      {"a knob declared twice", [](Json& j) { j["knobs"][1]["name"] = "BLOCK_M"; },
       "the name 'BLOCK_M' is taken"},
      {"a missing source file", [](Json& j) { j["kernel"]["source"] = "missing.cu"; },
       "kernel.source: 'missing.cu' is not in"},
      {"a source outside the folder", [](Json& j) { j["kernel"]["source"] = "../x.cu"; },
       "kernel.source: '../x.cu' must be a path inside the template's folder"},
      {"a device library source it does not have",
       [](Json& j) { j["reference"]["source"] = "evo/missing.cu"; },
       "reference.source: 'evo/missing.cu' is not in evo's device library"},
      {"a define on a scalar", [](Json& j) { j["kernel"]["args"][4]["define"] = "B_DTYPE"; },
       "kernel.args[4].define: only a tensor's dtype is defined for the source"},
      {"a define that is not an identifier",
       [](Json& j) { j["kernel"]["args"][0]["define"] = "1Q"; },
       "kernel.args[0].define: '1Q' is not an identifier"},
      {"an argument's define naming a knob",
       [](Json& j) { j["kernel"]["args"][0]["define"] = "BLOCK_M"; },
       "kernel.args[0].define: 'BLOCK_M' is a knob or problem define"},
      {"an argument's define naming a problem define",
       [](Json& j) { j["reference"]["args"][0]["define"] = "HEAD_DIM"; },
       "reference.args[0].define: 'HEAD_DIM' is a knob or problem define"},
      {"one define for two arguments",
       [](Json& j) { j["reference"]["args"][1]["define"] = "REF_Q"; },
       "reference.args[1].define: 'REF_Q' is the define of Q already"},
      {"a reference launch using a knob", [](Json& j) { j["reference"]["grid"][0] = "BLOCK_M"; },
       "reference.grid[0]: unknown name 'BLOCK_M'"},
      {"a block size using the device", [](Json& j) { j["kernel"]["block"][0] = "NUM_SMS"; },
       "kernel.block[0]: unknown name 'NUM_SMS'"},
      {"a grid of two dimensions",
       [](Json& j) {
         j["kernel"]["grid"] = Json::array({"1", "1"});
       },
       "kernel.grid: expected three expressions"},
      {"an unknown argument kind", [](Json& j) { j["kernel"]["args"][0]["kind"] = "inout"; },
       "kernel.args[0].kind: expected input, output, scratch, scalar or tensor_map"},
      {"an upper arch bound below the lower", [](Json& j) { j["max_sm"] = 75; },
       "max_sm: expected at least min_sm"},
      {"arch_specific that is not a boolean", [](Json& j) { j["arch_specific"] = 1; },
       "arch_specific: expected true or false"},
      {"an empty knob domain", [](Json& j) { j["knobs"][0]["values"] = Json::array(); },
       "knobs[0].values: expected at least one value"},
      {"a zero tolerance",
       [](Json& j) {
         j["correctness"]["atol"] = 0;
         j["correctness"]["rtol"] = 0;
       },
       "correctness: atol and rtol must be non-negative and not both zero"},
      {"a tolerance override on an unknown name",
       [](Json& j) {
         j["correctness"]["overrides"] =
             Json::array({{{"when", "FP8 == 1"}, {"atol", 0.06}, {"rtol", 0}}});
       },
       "correctness.overrides[0].when: unknown name 'FP8'"},
      {"a tolerance override without rtol",
       [](Json& j) {
         j["correctness"]["overrides"] = Json::array({{{"when", "FAST_EXP"}, {"atol", 0.06}}});
       },
       "correctness.overrides[0]: missing \"rtol\""},
      {"a zero tolerance override",
       [](Json& j) {
         j["correctness"]["overrides"] =
             Json::array({{{"when", "FAST_EXP"}, {"atol", 0}, {"rtol", 0}}});
       },
       "correctness.overrides[0]: atol and rtol must be non-negative and not both zero"},
      {"a check problem overriding a compile-time parameter",
       [](Json& j) { j["correctness"]["problems"][0]["D"] = "128"; },
       "correctness.problems[0]: 'D' is compile-time"},
      {"a check problem on an unknown name",
       [](Json& j) { j["correctness"]["problems"][0]["S_q"] = "S + 1"; },
       "correctness.problems[0].S_q: unknown name 'S'"},
      {"a compile-time parameter without values", [](Json& j) { j["problem"][4].erase("values"); },
       "a compile-time parameter (with a define) needs a list of values"},
      {"a uniform fill of an f16 input",
       [](Json& j) {
         j["kernel"]["args"][0]["uniform"] = Json::array({0.5, 2.0});
       },
       "kernel.args[0].uniform: only f32 inputs can be filled uniformly"},
      {"an empty uniform range",
       [](Json& j) {
         j["kernel"]["args"][0]["uniform"] = Json::array({2.0, 2.0});
       },
       "kernel.args[0].uniform: expected [lo, hi] with lo < hi"},
      {"starting points in the manifest",
       [](Json& j) {
         j["starting_points"] = Json::array({Json{{"BLOCK_M", 128}}});
       },
       "starting_points: starting points belong in the template folder's starting_points.json"},
      {"an argument under a knob", [](Json& j) { j["kernel"]["args"][0]["when"] = "FAST_EXP"; },
       "kernel.args[0].when: unknown name 'FAST_EXP'"},
      {"an argument named twice",
       [](Json& j) {
         Json copy = j["kernel"]["args"][0];
         copy["when"] = "CAUSAL";
         j["kernel"]["args"].push_back(copy);
       },
       "kernel.args[8]: 'Q' appears twice, not each under its own \"when\""},
      {"a uniform fill of a scalar",
       [](Json& j) {
         j["kernel"]["args"][4]["uniform"] = Json::array({1, 2});
       },
       "kernel.args[4].uniform: a scalar is not filled"},
  };
  for (const Case& c : cases) {
    SECTION(c.what) {
      Json json = SdpaManifestJson();
      c.breakage(json);
      REQUIRE_THROWS_WITH(Parse(json), Catch::Contains(c.message));
    }
  }
  SECTION("text that is not JSON") {
    REQUIRE_THROWS_WITH(ParseManifest("{\"name\": ", "broken.json", ReadSdpaSource),
                        Catch::Contains("manifest 'broken.json': JSON"));
  }
  SECTION("a key given twice in one object, the later one silently winning elsewhere") {
    std::string text = SdpaManifestJson().dump(2);
    const std::string name = "\"name\": \"sdpa_fp16\"";
    const size_t at = text.find(name);
    REQUIRE(at != std::string::npos);
    text.insert(at, "\"name\": \"other\",\n  ");
    REQUIRE_THROWS_WITH(ParseManifest(text, "twice.json", ReadSdpaSource),
                        Catch::Contains("manifest 'twice.json': JSON: key \"name\" appears twice "
                                        "in one object"));
    // The same key in two different objects is fine.
    CHECK_NOTHROW(ParseManifest(SdpaManifestJson().dump(2), "once.json", ReadSdpaSource));
  }
}

TEST_CASE("an f32 input may be filled uniformly, fp8 inputs are known", "[manifest]") {
  Json json = SdpaManifestJson();
  json["kernel"]["args"].push_back({{"name", "K_scale"},
                                    {"kind", "input"},
                                    {"dtype", "f32"},
                                    {"shape", {"B", "H"}},
                                    {"uniform", {0.25, 4}}});
  json["kernel"]["args"].push_back({{"name", "K8"},
                                    {"kind", "input"},
                                    {"dtype", "fp8e4m3"},
                                    {"shape", {"B", "H", "S_kv", "D"}}});
  const Manifest manifest = Parse(json);
  REQUIRE(manifest.main_kernel().args.size() == 10);
  REQUIRE(manifest.main_kernel().args[8].uniform);
  CHECK(manifest.main_kernel().args[8].uniform->first == 0.25);
  CHECK(manifest.main_kernel().args[8].uniform->second == 4.0);
  CHECK_FALSE(manifest.main_kernel().args[9].uniform);
  CHECK(manifest.main_kernel().args[9].dtype == "fp8e4m3");
}

TEST_CASE("arguments may depend on compile-time problem parameters", "[manifest]") {
  Json json = SdpaManifestJson();
  Json fp8_q = json["kernel"]["args"][0];
  fp8_q["dtype"] = "fp8e4m3";
  fp8_q["when"] = "CAUSAL";
  json["kernel"]["args"][0]["when"] = "!CAUSAL";
  json["kernel"]["args"].push_back(fp8_q);
  const Manifest manifest = Parse(json);
  const auto dtype_of_q = [&manifest](int64_t causal) {
    Bindings bindings = {{"CAUSAL", causal}};
    std::vector<std::string> dtypes;
    for (const KernelArgSpec& arg : manifest.main_kernel().args) {
      if (arg.name == "Q" && arg.PresentFor(bindings)) dtypes.push_back(arg.dtype);
    }
    return dtypes;
  };
  CHECK(dtype_of_q(0) == std::vector<std::string>{"f16"});
  CHECK(dtype_of_q(1) == std::vector<std::string>{"fp8e4m3"});
}

TEST_CASE("a tolerance override applies where its condition holds", "[manifest]") {
  Json json = SdpaManifestJson();
  json["correctness"]["overrides"] = Json::array(
      {{{"when", "FAST_EXP == 0 && D == 128"}, {"atol", 0.5}, {"rtol", 0}},
       {{"when", "FAST_EXP == 0"}, {"atol", 0.25}, {"rtol", 0.125}, {"doc", "first match wins"}}});
  const Manifest manifest = Parse(json);
  REQUIRE(manifest.correctness.overrides.size() == 2);
  const Tolerance base = manifest.correctness.tolerance;
  const auto tolerance = [&manifest](int64_t fast_exp, int64_t d) {
    return manifest.correctness.ToleranceFor({{"FAST_EXP", fast_exp}, {"D", d}});
  };
  CHECK(tolerance(1, 128).atol == base.atol);
  CHECK(tolerance(1, 128).rtol == base.rtol);
  CHECK(tolerance(0, 128).atol == 0.5);
  CHECK(tolerance(0, 64).atol == 0.25);
  CHECK(tolerance(0, 64).rtol == 0.125);
}

TEST_CASE("knob settings are checked against the manifest", "[manifest]") {
  const Manifest manifest = Parse(SdpaManifestJson());
  Genome genome = DefaultGenome(manifest);
  CHECK(genome.at("BLOCK_M") == 64);
  ApplyKnobSetting(manifest, "BLOCK_M=128", genome);
  CHECK(genome.at("BLOCK_M") == 128);
  CHECK(FormatGenome(manifest, genome).starts_with("BLOCK_M=128 BLOCK_N=64"));
  CHECK_THROWS_WITH(ApplyKnobSetting(manifest, "BLOCK_K=64", genome),
                    Catch::Contains("has no knob 'BLOCK_K'") && Catch::Contains("BLOCK_N"));
  CHECK_THROWS_WITH(ApplyKnobSetting(manifest, "BLOCK_M=48", genome),
                    Catch::Contains("cannot be 48") && Catch::Contains("16, 32, 64, 128, 256"));
  for (const char* malformed : {"BLOCK_M", "BLOCK_M=", "=64", "BLOCK_M=6x4", "BLOCK_M=1e2"}) {
    CHECK_THROWS_WITH(ApplyKnobSetting(manifest, malformed, genome), Catch::Contains("malformed"));
  }
  CHECK(genome.at("BLOCK_M") == 128);

  Problem problem = DefaultProblem(manifest);
  CHECK_THROWS_WITH(SetProblemParam(manifest, "D", 96, problem),
                    Catch::Contains("D of template sdpa_fp16 cannot be 96"));
  CHECK_THROWS_WITH(SetProblemParam(manifest, "S_q", 0, problem), Catch::Contains("at least 1"));
  CHECK_THROWS_WITH(SetProblemParam(manifest, "Z", 1, problem),
                    Catch::Contains("no problem parameter"));
  CheckGenome(manifest, genome);
  genome.erase("STAGES");
  CHECK_THROWS_WITH(CheckGenome(manifest, genome), Catch::Contains("STAGES has no value"));
}

TEST_CASE("starting points: read from their own file, checked against the knobs", "[manifest]") {
  const Manifest manifest = Parse(SdpaManifestJson());
  const auto points = ParseStartingPoints(
      R"({"doc": "hints", "starting_points": [{"BLOCK_M": 128, "NUM_WARPS": 8}, {"STAGES": 3}]})",
      "starts.json", manifest);
  REQUIRE(points.size() == 2);
  CHECK(points[0].at("BLOCK_M") == 128);
  CHECK(points[0].at("NUM_WARPS") == 8);
  CHECK(points[1].size() == 1);
  struct Case {
    const char* what;
    const char* text;
    const char* message;
  };
  const Case cases[] = {
      {"an unknown knob", R"({"starting_points": [{"BLOCK_M": 128, "TILE": 2}]})",
       "starts.json': starting_points[0]: unknown knob \"TILE\""},
      {"a value outside the domain", R"({"starting_points": [{"BLOCK_M": 128}, {"BLOCK_N": 48}]})",
       "starting_points[1].BLOCK_N: 48 is not one of its values"},
      {"an empty point", R"({"starting_points": [{}]})",
       "starting_points[0]: expected an object of knob settings"},
      {"an unknown key", R"({"starting_point": []})", "unknown key \"starting_point\""},
      {"text that is not JSON", R"({"starting_points": [)", "starts.json': JSON"},
  };
  for (const Case& c : cases) {
    SECTION(c.what) {
      REQUIRE_THROWS_WITH(ParseStartingPoints(c.text, "starts.json", manifest),
                          Catch::Contains(c.message));
    }
  }
}

TEST_CASE("the replay recording is of sdpa_fp16 as it is now; its starting points are loaded",
          "[manifest]") {
  const TemplateLibrary library = TemplateLibrary::Load({});
  const KernelTemplate& sdpa = library.Find("sdpa_fp16");
  CHECK(sdpa.manifest.starting_points.size() >= 2);
  // A kernel or manifest change needs a new recording (evo sweep on the H100); the starting
  // points live outside the hash, so changing them does not.
  const std::string recording =
      ReadFile(test::SourceDir() / "tests" / "data" / "sdpa_fp16_h100_2x8x512x64.jsonl");
  const Json header = Json::parse(recording.substr(0, recording.find('\n')));
  CHECK(header.at("template_hash").get<std::string>() == sdpa.source_hash);
}

}  // namespace
}  // namespace evo
