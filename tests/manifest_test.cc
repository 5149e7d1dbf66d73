#include "kernel_templates/manifest.h"

#include <catch2/catch.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "common/error.h"
#include "common/files.h"
#include "evaluator/recording.h"
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

// The same manifest with its kernels as a "kernels" list, whichever form the file gives them in.
Json SdpaKernelsJson() {
  Json json = SdpaManifestJson();
  if (json.contains("kernel")) {
    json["kernels"] = Json::array({json["kernel"]});
    json.erase("kernel");
  }
  return json;
}

Manifest Parse(const Json& json) { return ParseManifest(json.dump(), "test", ReadSdpaSource); }

// A scratch argument for the tests' manifests.
Json Scratch(const std::string& name, const std::string& dtype, const std::string& zero) {
  return {
      {"name", name}, {"kind", "scratch"}, {"dtype", dtype}, {"shape", {"B", "H"}}, {"zero", zero}};
}

// The first kernel of the manifest, copied as a further kernel of the call under `entry`.
Json& AddKernel(Json& json, const std::string& entry) {
  Json kernel = json["kernels"][0];
  kernel["entry"] = entry;
  json["kernels"].push_back(kernel);
  return json["kernels"].back();
}

// The index of problem parameter `name` in the manifest's list.
size_t ProblemIndex(const Json& json, const std::string& name) {
  for (size_t i = 0; i < json["problem"].size(); ++i) {
    if (json["problem"][i]["name"] == name) return i;
  }
  FAIL("no problem parameter " << name);
  return 0;
}

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
  REQUIRE(manifest.main_kernel().args.size() >= 8);
  for (size_t i = 0; i < 4; ++i) {
    CHECK(manifest.main_kernel().args[i].name == std::string(1, "QKVO"[i]));
  }
  CHECK(manifest.main_kernel().args[4].kind == KernelArgSpec::Kind::kScalar);
  CHECK(manifest.correctness.seeds >= 3);
  CHECK(manifest.correctness.problems.size() >= 2);
  // Unless a manifest says otherwise, the gates demand the same bits from every call.
  CHECK(manifest.correctness.deterministic);
  Json relaxed = SdpaManifestJson();
  relaxed["correctness"]["deterministic"] = false;
  CHECK_FALSE(Parse(relaxed).correctness.deterministic);
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
      {"a missing source file", [](Json& j) { j["kernels"][0]["source"] = "missing.cu"; },
       "kernels[0].source: 'missing.cu' is not in"},
      {"a source outside the folder", [](Json& j) { j["kernels"][0]["source"] = "../x.cu"; },
       "kernels[0].source: '../x.cu' must be a path inside the template's folder"},
      {"a device library source it does not have",
       [](Json& j) { j["reference"]["source"] = "evo/missing.cu"; },
       "reference.source: 'evo/missing.cu' is not in evo's device library"},
      {"a define on a scalar", [](Json& j) { j["kernels"][0]["args"][4]["define"] = "B_DTYPE"; },
       "kernels[0].args[4].define: only a tensor's dtype is defined for the source"},
      {"a define that is not an identifier",
       [](Json& j) { j["kernels"][0]["args"][0]["define"] = "1Q"; },
       "kernels[0].args[0].define: '1Q' is not an identifier"},
      {"an argument's define naming a knob",
       [](Json& j) { j["kernels"][0]["args"][0]["define"] = "BLOCK_M"; },
       "kernels[0].args[0].define: 'BLOCK_M' is a knob or problem define"},
      {"an argument's define naming a problem define",
       [](Json& j) { j["reference"]["args"][0]["define"] = "HEAD_DIM"; },
       "reference.args[0].define: 'HEAD_DIM' is a knob or problem define"},
      {"one define for two arguments",
       [](Json& j) { j["reference"]["args"][1]["define"] = "REF_Q"; },
       "reference.args[1].define: 'REF_Q' is the define of Q already"},
      {"a reference launch using a knob", [](Json& j) { j["reference"]["grid"][0] = "BLOCK_M"; },
       "reference.grid[0]: unknown name 'BLOCK_M'"},
      {"a block size using the device", [](Json& j) { j["kernels"][0]["block"][0] = "NUM_SMS"; },
       "kernels[0].block[0]: unknown name 'NUM_SMS'"},
      {"a grid of two dimensions",
       [](Json& j) {
         j["kernels"][0]["grid"] = Json::array({"1", "1"});
       },
       "kernels[0].grid: expected three expressions"},
      {"a cluster of two dimensions",
       [](Json& j) {
         j["kernels"][0]["cluster"] = Json::array({"2", "1"});
       },
       "kernels[0].cluster: expected three expressions (x, y, z)"},
      {"a cluster using the device",
       [](Json& j) {
         j["kernels"][0]["cluster"] = Json::array({"NUM_SMS", "1", "1"});
       },
       "kernels[0].cluster[0]: unknown name 'NUM_SMS'"},
      {"an unknown argument kind", [](Json& j) { j["kernels"][0]["args"][0]["kind"] = "inout"; },
       "kernels[0].args[0].kind: expected input, output, scratch, scalar or tensor_map"},
      {"an upper arch bound below the lower", [](Json& j) { j["max_sm"] = 75; },
       "max_sm: expected at least min_sm"},
      {"arch_specific that is not a boolean", [](Json& j) { j["arch_specific"] = 1; },
       "arch_specific: expected true or false"},
      {"a determinism flag that is not a boolean",
       [](Json& j) { j["correctness"]["deterministic"] = "yes"; },
       "correctness.deterministic: expected true or false"},
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
      {"a compile-time parameter without values",
       [](Json& j) { j["problem"][ProblemIndex(j, "D")].erase("values"); },
       "a compile-time parameter (with a define) needs a list of values"},
      {"a uniform fill of an f16 input",
       [](Json& j) {
         j["kernels"][0]["args"][0]["uniform"] = Json::array({0.5, 2.0});
       },
       "kernels[0].args[0].uniform: only f32 inputs can be filled uniformly"},
      {"an empty uniform range",
       [](Json& j) {
         j["kernels"][0]["args"][0]["uniform"] = Json::array({2.0, 2.0});
       },
       "kernels[0].args[0].uniform: expected [lo, hi] with lo < hi"},
      {"outlier rows of an output",
       [](Json& j) {
         j["kernels"][0]["args"][3]["outlier_rows"] = {{"every", 32}, {"scale", 12}};
       },
       "kernels[0].args[3].outlier_rows: only an input is filled with outlier rows"},
      {"outlier rows that are not an object",
       [](Json& j) { j["kernels"][0]["args"][1]["outlier_rows"] = 32; },
       "kernels[0].args[1].outlier_rows: expected {\"every\": N, \"scale\": S}"},
      {"outlier rows in every row",
       [](Json& j) { j["kernels"][0]["args"][1]["outlier_rows"]["every"] = 1; },
       "kernels[0].args[1].outlier_rows.every: expected at least 2"},
      {"outlier rows that do not grow",
       [](Json& j) { j["kernels"][0]["args"][1]["outlier_rows"]["scale"] = 1.0; },
       "kernels[0].args[1].outlier_rows.scale: expected a finite factor above 1"},
      {"outlier rows with an unknown field",
       [](Json& j) { j["kernels"][0]["args"][1]["outlier_rows"]["fraction"] = 0.1; },
       "kernels[0].args[1].outlier_rows: unknown key \"fraction\""},
      {"outlier rows beside a uniform fill",
       [](Json& j) {
         j["kernels"][0]["args"].push_back({{"name", "K_scale"},
                                            {"kind", "input"},
                                            {"dtype", "f32"},
                                            {"shape", {"B", "H"}},
                                            {"uniform", {0.25, 4}},
                                            {"outlier_rows", {{"every", 32}, {"scale", 12}}}});
       },
       ".outlier_rows: a uniform fill has no outlier rows"},
      {"outlier rows declared by the reference",
       [](Json& j) {
         j["reference"]["args"][1]["outlier_rows"] = {{"every", 32}, {"scale", 12}};
       },
       "reference.args[1].outlier_rows: the reference reads the candidate's inputs"},
      {"outlier rows with one seed, the timed one", [](Json& j) { j["correctness"]["seeds"] = 1; },
       "correctness.seeds: input K has outlier rows, which every seed but the last gets"},
      {"starting points in the manifest",
       [](Json& j) {
         j["starting_points"] = Json::array({Json{{"BLOCK_M", 128}}});
       },
       "starting_points: starting points belong in the template folder's starting_points.json"},
      {"an argument under a knob", [](Json& j) { j["kernels"][0]["args"][0]["when"] = "FAST_EXP"; },
       "kernels[0].args[0].when: unknown name 'FAST_EXP'"},
      {"an argument named twice",
       [](Json& j) {
         Json copy = j["kernels"][0]["args"][0];
         copy["when"] = "CAUSAL";
         j["kernels"][0]["args"].push_back(copy);
       },
       "]: 'Q' appears twice, not each under its own \"when\""},
      {"a uniform fill of a scalar",
       [](Json& j) {
         j["kernels"][0]["args"][4]["uniform"] = Json::array({1, 2});
       },
       "kernels[0].args[4].uniform: a scalar is not filled"},
      {"both \"kernel\" and \"kernels\"", [](Json& j) { j["kernel"] = j["kernels"][0]; },
       "give \"kernel\" (one kernel) or \"kernels\" (several), not both"},
      {"neither \"kernel\" nor \"kernels\"", [](Json& j) { j.erase("kernels"); },
       "missing \"kernel\" (or \"kernels\", several launched in order)"},
      {"an empty list of kernels", [](Json& j) { j["kernels"] = Json::array(); },
       "kernels: expected at least one kernel"},
      {"a first kernel that may not run", [](Json& j) { j["kernels"][0]["when"] = "PERSISTENT"; },
       "kernels[0].when: the first kernel of a template always runs"},
      {"a second kernel from another source",
       [](Json& j) { AddKernel(j, "evo_test_other")["source"] = "evo/attention_reference.cu"; },
       ".source: the kernels of a template are entries of one source ('sdpa_fp16.cu'), compiled "
       "once"},
      {"an entry launched twice",
       [](Json& j) { AddKernel(j, j["kernels"][0]["entry"].get<std::string>()); },
       ".entry: 'sdpa_fp16_fwd' is launched twice in one call"},
      {"a tensor of one name with another dtype in a later kernel",
       [](Json& j) { AddKernel(j, "evo_test_second")["args"][0]["dtype"] = "bf16"; },
       "'Q' differs from the argument of that name in kernels[0] (kind, dtype, shape and zeroing "
       "must agree: it is the same memory)"},
      {"an input of one name with other outlier rows in a later kernel",
       [](Json& j) { AddKernel(j, "evo_test_second")["args"][1]["outlier_rows"]["scale"] = 8; },
       "'K' differs from the argument of that name in kernels[0] in how the gates fill it "
       "(uniform, outlier_rows): it is one input"},
      {"an input of one name without the outlier rows in a later kernel",
       [](Json& j) { AddKernel(j, "evo_test_second")["args"][1].erase("outlier_rows"); },
       "'K' differs from the argument of that name in kernels[0] in how the gates fill it"},
      {"a tensor of one name with another shape in a later kernel",
       [](Json& j) {
         AddKernel(j, "evo_test_second")["args"][0]["shape"] = Json::array({"B", "H", "S_q"});
       },
       "'Q' differs from the argument of that name in kernels[0]"},
      {"a tensor of one name of another kind in a later kernel",
       [](Json& j) { AddKernel(j, "evo_test_second")["args"][0]["kind"] = "output"; },
       "'Q' differs from the argument of that name in kernels[0]"},
      {"scratch of one name zeroed differently in two kernels",
       [](Json& j) {
         j["kernels"][0]["args"].push_back(Scratch("Counters", "i32", "once"));
         AddKernel(j, "evo_test_second")["args"].back()["zero"] = "each_call";
       },
       "'Counters' differs from the argument of that name in kernels[0]"},
      {"scratch of an unknown dtype",
       [](Json& j) { j["kernels"][0]["args"].push_back(Scratch("Acc", "fp8e4m3", "never")); },
       "]: unknown scratch dtype fp8e4m3 (f16, bf16, f32 or i32)"},
      {"scratch zeroed at an unknown time",
       [](Json& j) { j["kernels"][0]["args"].push_back(Scratch("Acc", "f32", "twice")); },
       "].zero: 'twice' is not one of never, once, each_call"},
      {"scratch without a shape",
       [](Json& j) {
         Json scratch = Scratch("Acc", "f32", "once");
         scratch["shape"] = Json::array();
         j["kernels"][0]["args"].push_back(scratch);
       },
       "].shape: expected at least one dimension"},
      {"scratch filled like an input",
       [](Json& j) {
         Json scratch = Scratch("Acc", "f32", "once");
         scratch["uniform"] = Json::array({0, 1});
         j["kernels"][0]["args"].push_back(scratch);
       },
       "].uniform: scratch is neither filled nor read by the reference"},
      {"\"zero\" on an input", [](Json& j) { j["kernels"][0]["args"][0]["zero"] = "once"; },
       "kernels[0].args[0].zero: only a scratch argument is zeroed"},
      {"scratch in the reference",
       [](Json& j) { j["reference"]["args"].push_back(Scratch("Acc", "f32", "once")); },
       ".kind: the reference kernel takes inputs and outputs, no scratch"},
      {"a reference that may not run", [](Json& j) { j["reference"]["when"] = "CAUSAL"; },
       "reference.when: the reference kernel always runs"},
      {"a default expression on a compile-time parameter",
       [](Json& j) { j["problem"][ProblemIndex(j, "D")]["default"] = "64"; },
       ".default: a compile-time parameter has a constant default"},
      {"a default expression naming a later parameter",
       [](Json& j) { j["problem"][ProblemIndex(j, "B")]["default"] = "H"; },
       ".default: unknown name 'H'"},
      {"a check_doc without a check",
       [](Json& j) { j["problem"][ProblemIndex(j, "H")]["check_doc"] = "heads come in pairs"; },
       ".check_doc: documents a \"check\", which is missing"},
      {"a check that the default problem breaks",
       [](Json& j) { j["problem"][ProblemIndex(j, "H")]["check"] = "H % 3 == 0"; },
       ".check: the default problem breaks it"},
      {"a check naming a later parameter",
       [](Json& j) { j["problem"][ProblemIndex(j, "B")]["check"] = "B <= H"; },
       ".check: unknown name 'H'"},
  };
  for (const Case& c : cases) {
    SECTION(c.what) {
      Json json = SdpaKernelsJson();
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

TEST_CASE(
    "a scratch shape may use the device's NUM_SMS; other shapes, values and the occupancy may not",
    "[manifest]") {
  // A persistent kernel's per-CTA partial results, in the scratch both kernels of the call share.
  const Json partials = {
      {"name", "Partials"},
      {"kind", "scratch"},
      {"dtype", "f32"},
      {"shape", {"PERSISTENT ? 2 * NUM_SMS * BLOCK_M : 1", "PERSISTENT ? D + 8 : 1"}},
      {"zero", "never"}};
  Json json = SdpaKernelsJson();
  REQUIRE(json["kernels"].size() == 2);
  for (Json& kernel : json["kernels"]) kernel["args"].push_back(partials);
  const std::string scratch_field =
      "kernels[0].args[" + std::to_string(json["kernels"][0]["args"].size() - 1) + "]";

  SECTION("accepted in the scratch of every kernel that shares it") {
    const Manifest manifest = Parse(json);
    for (const KernelSpec& kernel : manifest.kernels) {
      const KernelArgSpec& arg = kernel.args.back();
      CHECK(arg.name == "Partials");
      CHECK(arg.kind == KernelArgSpec::Kind::kScratch);
      REQUIRE(arg.shape.size() == 2);
      CHECK(arg.shape[0].text() == "PERSISTENT ? 2 * NUM_SMS * BLOCK_M : 1");
      CHECK(arg.shape[1].text() == "PERSISTENT ? D + 8 : 1");
    }
  }
  const std::string known_at_launch =
      " (NUM_SMS is the device's, known at launch only: grids and scratch shapes may use it)";
  struct Case {
    const char* what;
    std::function<void(Json&)> breakage;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"in an output's shape", [](Json& j) { j["kernels"][0]["args"][3]["shape"][2] = "NUM_SMS"; },
       "kernels[0].args[3].shape[2]: unknown name 'NUM_SMS' in 'NUM_SMS'" + known_at_launch},
      {"in an input's shape",
       [](Json& j) { j["kernels"][0]["args"][0]["shape"][0] = "min(B, NUM_SMS)"; },
       "kernels[0].args[0].shape[0]: unknown name 'NUM_SMS' in 'min(B, NUM_SMS)'" +
           known_at_launch},
      {"in a scalar's value", [](Json& j) { j["kernels"][0]["args"][4]["value"] = "NUM_SMS"; },
       "kernels[0].args[4].value: unknown name 'NUM_SMS' in 'NUM_SMS'" + known_at_launch},
      {"in shared memory", [](Json& j) { j["kernels"][0]["dynamic_smem"] = "NUM_SMS * 4"; },
       "kernels[0].dynamic_smem: unknown name 'NUM_SMS' in 'NUM_SMS * 4'" + known_at_launch},
      {"in a derived value", [](Json& j) { j["derived"][0]["expr"] = "NUM_SMS"; },
       "derived[0].expr: unknown name 'NUM_SMS' in 'NUM_SMS'" + known_at_launch},
      {"in a constraint", [](Json& j) { j["constraints"][0]["expr"] = "NUM_SMS > 0"; },
       "constraints[0].expr: unknown name 'NUM_SMS' in 'NUM_SMS > 0'" + known_at_launch},
      {"the occupancy in a scratch shape",
       [](Json& j) { j["kernels"][0]["args"].back()["shape"][1] = "CTAS_PER_SM"; },
       scratch_field + ".shape[1]: unknown name 'CTAS_PER_SM' in 'CTAS_PER_SM' (CTAS_PER_SM is the "
                       "device's, known at launch only: only grids may use it)"},
      {"a misspelt name in a scratch shape",
       [](Json& j) { j["kernels"][0]["args"].back()["shape"][0] = "2 * NUM_SM"; },
       scratch_field + ".shape[0]: unknown name 'NUM_SM' in '2 * NUM_SM'"},
      {"a scratch shape that differs from the other kernel's",
       [](Json& j) { j["kernels"][1]["args"].back()["shape"][0] = "2 * NUM_SMS * BLOCK_M"; },
       "'Partials' differs from the argument of that name in kernels[0] (kind, dtype, shape and "
       "zeroing must agree: it is the same memory)"},
      {"a tensor map of scratch sized by the device",
       [](Json& j) {
         j["kernels"][0]["args"].push_back({{"name", "Partials_map"},
                                            {"kind", "tensor_map"},
                                            {"tensor", "Partials"},
                                            {"box", {"8", "64"}}});
       },
       ".tensor: 'Partials' is sized by NUM_SMS, known at launch only; a tensor map's layout is "
       "checked before any device is involved"},
  };
  for (const Case& c : cases) {
    SECTION(c.what) {
      c.breakage(json);
      REQUIRE_THROWS_WITH(Parse(json), Catch::EndsWith(c.message));
    }
  }
}

TEST_CASE("a call of several kernels parses with its kernels, their conditions and scratch",
          "[manifest]") {
  Json json = SdpaKernelsJson();
  const size_t before = json["kernels"].size();
  json["kernels"][0]["args"].push_back(Scratch("Partial", "f32", "never"));
  json["kernels"][0]["args"].push_back(Scratch("Counters", "i32", "once"));
  Json& combine = AddKernel(json, "evo_test_combine");
  combine["when"] = "PERSISTENT && CAUSAL";
  combine["grid"] = Json::array({"B * H", "1", "1"});
  combine["args"].push_back(Scratch("Sums", "bf16", "each_call"));
  const Manifest manifest = Parse(json);
  REQUIRE(manifest.kernels.size() == before + 1);
  CHECK(manifest.main_kernel().entry == "sdpa_fp16_fwd");
  CHECK_FALSE(manifest.main_kernel().when);
  const KernelSpec& last = manifest.kernels.back();
  CHECK(last.entry == "evo_test_combine");
  CHECK(last.source_path == manifest.main_kernel().source_path);
  REQUIRE(last.when);
  CHECK(last.when->text() == "PERSISTENT && CAUSAL");
  CHECK(last.LaunchedFor({{"PERSISTENT", 1}, {"CAUSAL", 1}}));
  CHECK_FALSE(last.LaunchedFor({{"PERSISTENT", 1}, {"CAUSAL", 0}}));
  CHECK(manifest.main_kernel().LaunchedFor({}));
  std::map<std::string, const KernelArgSpec*> scratch;
  for (const KernelArgSpec& arg : last.args) {
    if (arg.kind == KernelArgSpec::Kind::kScratch) scratch[arg.name] = &arg;
  }
  for (const char* name : {"Partial", "Counters", "Sums"}) REQUIRE(scratch.contains(name));
  CHECK(scratch["Partial"]->zero == ScratchZero::kNever);
  CHECK(scratch["Partial"]->dtype == "f32");
  CHECK(scratch["Counters"]->zero == ScratchZero::kOnce);
  CHECK(scratch["Counters"]->dtype == "i32");
  CHECK(scratch["Sums"]->zero == ScratchZero::kEachCall);
  CHECK(scratch["Sums"]->is_tensor());
  REQUIRE(scratch["Sums"]->shape.size() == 2);
  CHECK(scratch["Sums"]->shape[0].text() == "B");
  // Scratch without "zero" is never zeroed.
  json["kernels"][0]["args"].push_back(Scratch("Spare", "f16", "never"));
  json["kernels"][0]["args"].back().erase("zero");
  CHECK(Parse(json).main_kernel().args.back().zero == ScratchZero::kNever);
}

TEST_CASE("a problem default may follow an earlier parameter, and a check refuses problems",
          "[manifest]") {
  Json json = SdpaKernelsJson();
  // H_kv after H, as grouped-query attention has it (replacing one the template may have).
  Json h_kv = {{"name", "H_kv"},
               {"min", 1},
               {"default", "H"},
               {"check", "H % H_kv == 0"},
               {"check_doc", "each KV head serves a whole group of query heads"},
               {"doc", "key/value heads"}};
  Json& problem = json["problem"];
  for (size_t i = 0; i < problem.size(); ++i) {
    if (problem[i]["name"] == "H_kv") problem.erase(i);
  }
  problem.insert(problem.begin() + static_cast<std::ptrdiff_t>(ProblemIndex(json, "H") + 1), h_kv);
  const Manifest manifest = Parse(json);
  const ProblemParamSpec* param = manifest.FindProblemParam("H_kv");
  REQUIRE(param != nullptr);
  REQUIRE(param->default_expr);
  CHECK(param->default_value == 8);  // the default problem's H

  CHECK(DefaultProblem(manifest).at("H_kv") == 8);
  CHECK(CompleteProblem(manifest, {{"H", 32}}).at("H_kv") == 32);
  const Problem grouped = CompleteProblem(manifest, {{"H", 32}, {"H_kv", 4}});
  CHECK(grouped.at("H_kv") == 4);
  CHECK(grouped.at("B") == 2);
  CHECK_NOTHROW(CheckProblem(manifest, grouped));
  CHECK_THROWS_WITH(CheckProblem(manifest, CompleteProblem(manifest, {{"H", 32}, {"H_kv", 3}})),
                    Catch::Contains("of template sdpa_fp16 breaks H % H_kv == 0 (each KV head "
                                    "serves a whole group of query heads)") &&
                        Catch::Contains("H=32") && Catch::Contains("H_kv=3"));
}

TEST_CASE("an f32 input may be filled uniformly, fp8 inputs are known", "[manifest]") {
  Json json = SdpaKernelsJson();
  json["kernels"][0]["args"].push_back({{"name", "K_scale"},
                                        {"kind", "input"},
                                        {"dtype", "f32"},
                                        {"shape", {"B", "H"}},
                                        {"uniform", {0.25, 4}}});
  json["kernels"][0]["args"].push_back({{"name", "K8"},
                                        {"kind", "input"},
                                        {"dtype", "fp8e4m3"},
                                        {"shape", {"B", "H", "S_kv", "D"}}});
  const Manifest manifest = Parse(json);
  const std::vector<KernelArgSpec>& args = manifest.main_kernel().args;
  REQUIRE(args.size() >= 10);
  const KernelArgSpec& scale = args[args.size() - 2];
  REQUIRE(scale.uniform);
  CHECK(scale.uniform->first == 0.25);
  CHECK(scale.uniform->second == 4.0);
  CHECK_FALSE(args.back().uniform);
  CHECK(args.back().dtype == "fp8e4m3");
}

TEST_CASE("every attention template checks with outlier keys; other inputs stay plain",
          "[manifest]") {
  const TemplateLibrary library = TemplateLibrary::Load({});
  for (const char* name : {"sdpa_fp16", "sdpa_fp16_wgmma", "sdpa_fp8", "sdpa_hopper"}) {
    INFO(name);
    const Manifest& manifest = library.Find(name).manifest;
    CHECK(manifest.correctness.seeds >= 2);
    int keys = 0;
    for (const KernelArgSpec& arg : manifest.main_kernel().args) {
      if (arg.kind != KernelArgSpec::Kind::kInput) continue;
      const bool is_key = arg.name == "K" || arg.name == "K8";
      CHECK(arg.outlier_rows.has_value() == is_key);
      if (!is_key || !arg.outlier_rows) continue;
      ++keys;
      CHECK(arg.outlier_rows->every == 32);
      CHECK(arg.outlier_rows->scale == 12.0);
    }
    CHECK(keys >= 1);
  }
}

TEST_CASE("knobs fixed: one value each, the default that value, the starting points taking it",
          "[manifest]") {
  const TemplateLibrary library = TemplateLibrary::Load({});
  const Manifest& manifest = library.Find("sdpa_hopper").manifest;
  REQUIRE(manifest.starting_points.size() >= 2);
  const Manifest fixed =
      WithKnobsFixed(manifest, {{"PERSISTENT", 0}, {"LAGGED_MAX", 0}, {"BLOCK_N", 64}});
  REQUIRE(fixed.knobs.size() == manifest.knobs.size());
  for (size_t i = 0; i < fixed.knobs.size(); ++i) {
    const KnobSpec& knob = fixed.knobs[i];
    INFO(knob.name);
    if (knob.name == "PERSISTENT" || knob.name == "LAGGED_MAX") {
      CHECK(knob.values == std::vector<int64_t>{0});
      CHECK(knob.default_value == 0);
    } else if (knob.name == "BLOCK_N") {
      CHECK(knob.values == std::vector<int64_t>{64});
      CHECK(knob.default_value == 64);
    } else {
      CHECK(knob.values == manifest.knobs[i].values);
      CHECK(knob.default_value == manifest.knobs[i].default_value);
    }
  }
  // Every starting point names PERSISTENT=1: each now names 0, keeps its other knobs, and the
  // ones that differed only there become one.
  std::set<KnobSettings> expected;
  for (KnobSettings point : manifest.starting_points) {
    if (point.count("PERSISTENT") > 0) point["PERSISTENT"] = 0;
    if (point.count("BLOCK_N") > 0) point["BLOCK_N"] = 64;
    if (point.count("LAGGED_MAX") > 0) point["LAGGED_MAX"] = 0;
    expected.insert(point);
  }
  CHECK(std::set<KnobSettings>(fixed.starting_points.begin(), fixed.starting_points.end()) ==
        expected);
  CHECK(fixed.starting_points.size() == expected.size());
  for (const KnobSettings& point : fixed.starting_points) {
    if (point.count("PERSISTENT") > 0) CHECK(point.at("PERSISTENT") == 0);
  }
  // Nothing else changes.
  CHECK(fixed.constraints.size() == manifest.constraints.size());
  CHECK(WithKnobsFixed(manifest, {}).starting_points == manifest.starting_points);

  CHECK_THROWS_WITH(WithKnobsFixed(manifest, {{"NOT_A_KNOB", 1}}),
                    "template sdpa_hopper has no knob 'NOT_A_KNOB' to fix");
  CHECK_THROWS_WITH(WithKnobsFixed(manifest, {{"PERSISTENT", 2}}),
                    "knob PERSISTENT of template sdpa_hopper cannot be fixed at 2: it is not "
                    "among its values");
}

TEST_CASE("arguments may depend on compile-time problem parameters", "[manifest]") {
  Json json = SdpaKernelsJson();
  Json fp8_q = json["kernels"][0]["args"][0];
  fp8_q["dtype"] = "fp8e4m3";
  fp8_q["when"] = "CAUSAL";
  json["kernels"][0]["args"][0]["when"] = "!CAUSAL";
  json["kernels"][0]["args"].push_back(fp8_q);
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
      {"a number past a double's range", R"({"starting_points": [{"BLOCK_M": 1e400}]})",
       "starts.json': JSON: number overflow parsing '1e400'"},
  };
  for (const Case& c : cases) {
    SECTION(c.what) {
      REQUIRE_THROWS_WITH(ParseStartingPoints(c.text, "starts.json", manifest),
                          Catch::Contains(c.message));
    }
  }
}

TEST_CASE("the replay recording is of sdpa_fp16; a replay says when it predates today's version",
          "[manifest]") {
  const TemplateLibrary library = TemplateLibrary::Load({});
  const KernelTemplate& sdpa = library.Find("sdpa_fp16");
  CHECK(sdpa.manifest.starting_points.size() >= 2);
  // A kernel or manifest change makes the recording a landscape of the template as it was: the
  // replay says so, and searches only what it measured (split-KV came after it).
  const std::string recording =
      ReadFile(test::SourceDir() / "tests" / "data" / "sdpa_fp16_h100_2x8x512x64.jsonl");
  const Json header = Json::parse(recording.substr(0, recording.find('\n')));
  CHECK(header.at("template") == "sdpa_fp16");
  const Problem problem = DefaultProblem(sdpa.manifest);
  const ReplayEvaluator replay(test::H100Recording(), sdpa.manifest, problem, {}, sdpa.source_hash);
  if (header.at("template_hash").get<std::string>() != sdpa.source_hash) {
    CHECK_THAT(replay.identity().notice, Catch::Contains("recorded with an earlier version"));
    CHECK_THAT(replay.identity().notice, Catch::Contains("SPLITS"));
  }
  const Manifest searched = replay.RecordedSpace(sdpa.manifest);
  CHECK(searched.FindKnob("SPLITS")->values == std::vector<int64_t>{1});
  CHECK(searched.FindKnob("BLOCK_M")->values == sdpa.manifest.FindKnob("BLOCK_M")->values);
  for (const KnobSettings& point : searched.starting_points) {
    CHECK((!point.contains("SPLITS") || point.at("SPLITS") == 1));
  }
  CHECK(searched.starting_points.size() < sdpa.manifest.starting_points.size());
}

}  // namespace
}  // namespace evo
