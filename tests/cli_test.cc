#include <algorithm>
#include <catch2/catch.hpp>
#include <functional>
#include <nlohmann/json.hpp>

#include "common/files.h"
#include "tests/test_support.h"

namespace evo {
namespace {

using test::RunEvo;

TEST_CASE("evo templates lists the templates with knobs and domains", "[cli]") {
  test::TempDir dir;
  const auto text = RunEvo({"templates"}, dir.path());
  CHECK(text.exit_code == 0);
  CHECK(text.out.find("sdpa_fp16") != std::string::npos);
  CHECK(text.out.find("BLOCK_M            16 32 [64] 128 256") != std::string::npos);
  CHECK(text.out.find("warp_rows_multiple_of_16") != std::string::npos);
  // How to set each problem parameter, Q_FP8 of sdpa_fp8 included.
  CHECK(text.out.find("problem (--shape B,H,S,D, --causal, --problem NAME=VALUE):") !=
        std::string::npos);
  CHECK(text.out.find("Q_FP8              [0] 1") != std::string::npos);

  const auto json = RunEvo({"templates", "--json"}, dir.path());
  REQUIRE(json.exit_code == 0);
  const auto parsed = nlohmann::json::parse(json.out);
  REQUIRE(parsed.is_array());
  // In the order of their folders' names (rmsnorm before sdpa_fp16).
  const auto sdpa = std::find_if(parsed.begin(), parsed.end(),
                                 [](const nlohmann::json& t) { return t["name"] == "sdpa_fp16"; });
  REQUIRE(sdpa != parsed.end());
  CHECK((*sdpa)["knobs"][0]["values"] == nlohmann::json::array({16, 32, 64, 128, 256}));
}

TEST_CASE("evo sweep --count counts a subspace fixed by --fix without a GPU", "[cli]") {
  test::TempDir dir;
  const std::vector<std::string> base = {"sweep",      "--template", "sdpa_fp16", "--shape",
                                         "2,8,512,64", "--count",    "sm_90"};
  const auto whole = RunEvo(base, dir.path());
  INFO(whole.err);
  REQUIRE(whole.exit_code == 0);
  std::vector<std::string> fixed = base;
  for (const char* setting : {"SPLITS=1", "PACK_GQA=0", "LAST_CTA_COMBINES=0"}) {
    fixed.push_back("--fix");
    fixed.push_back(setting);
  }
  const auto subspace = RunEvo(fixed, dir.path());
  REQUIRE(subspace.exit_code == 0);
  // The tests' recording covers exactly this subspace (made before split KV existed).
  CHECK(std::stoll(subspace.out) == 2128);
  CHECK(std::stoll(whole.out) > std::stoll(subspace.out));

  std::vector<std::string> unknown = base;
  unknown.insert(unknown.end(), {"--fix", "TILE=4"});
  const auto refused = RunEvo(unknown, dir.path());
  CHECK(refused.exit_code != 0);
  CHECK(refused.err.find("has no knob 'TILE'") != std::string::npos);
  std::vector<std::string> outside = base;
  outside.insert(outside.end(), {"--fix", "SPLITS=3"});
  CHECK(RunEvo(outside, dir.path()).exit_code != 0);

  const auto no_out = RunEvo({"sweep", "--template", "sdpa_fp16"}, dir.path());
  CHECK(no_out.exit_code != 0);
  CHECK(no_out.err.find("needs --out") != std::string::npos);

  // What a sweep would compile: a problem whose S_q no i32 argument holds leaves none, and says
  // why on stderr.
  const auto unlaunchable =
      RunEvo({"sweep", "--template", "sdpa_fp16", "--shape", "2,8,3000000000,64", "--count",
              "sm_90", "--fix", "SPLITS=1", "--fix", "PACK_GQA=0", "--fix", "LAST_CTA_COMBINES=0"},
             dir.path());
  INFO(unlaunchable.err);
  CHECK(unlaunchable.exit_code == 0);
  CHECK(unlaunchable.out == "0\n");
  CHECK(unlaunchable.err.find(" configurations the constraints allow cannot be launched on this "
                              "problem, e.g. the launch of sdpa_fp16_fwd cannot be made for this "
                              "configuration: ") != std::string::npos);
  CHECK(unlaunchable.err.find("does not fit an i32") != std::string::npos);

  // An arch the template does not take counts nothing: refused as `evo compile` refuses it.
  const auto hopper_on_ampere =
      RunEvo({"sweep", "--template", "sdpa_hopper", "--shape", "2,8,512,64", "--count", "sm_80"},
             dir.path());
  CHECK(hopper_on_ampere.exit_code == 2);
  CHECK(hopper_on_ampere.err.find("template sdpa_hopper needs sm_90, not sm_80") !=
        std::string::npos);
}

TEST_CASE("evo compile prints resources, then serves the same configuration from the cache",
          "[cli][nvrtc]") {
  test::TempDir dir;
  const std::vector<std::string> args = {"compile",    "--template", "sdpa_fp16", "--set",
                                         "BLOCK_N=32", "--set",      "STAGES=3",  "--arch",
                                         "sm_90",      "--json"};
  const auto cold = RunEvo(args, dir.path());
  INFO(cold.err);
  REQUIRE(cold.exit_code == 0);
  const auto first = nlohmann::json::parse(cold.out);
  CHECK(first["status"] == "compiled");
  CHECK(first["knobs"]["BLOCK_N"] == 32);
  CHECK(first["knobs"]["STAGES"] == 3);
  CHECK(first["knobs"]["BLOCK_M"] == 64);
  CHECK(first["arch"] == "sm_90");
  CHECK(first["cache_hit"] == false);
  CHECK(first["resources"]["registers"].get<int>() > 0);
  CHECK(first["resources"]["smem_dynamic"] == (64 * 64 + 3 * 2 * 32 * 64) * 2);
  CHECK(first["resources"]["spill_stores"] == 0);
  CHECK(std::filesystem::exists(dir.path() / "runs" / "cache"));

  const auto warm = RunEvo(args, dir.path());
  REQUIRE(warm.exit_code == 0);
  const auto second = nlohmann::json::parse(warm.out);
  CHECK(second["cache_hit"] == true);
  CHECK(second["resources"] == first["resources"]);
  CHECK(second["configuration_id"] == first["configuration_id"]);

  const auto text =
      RunEvo({"compile", "--arch", "sm_90", "--shape", "4,16,1000,128", "--causal"}, dir.path());
  CHECK(text.exit_code == 0);
  CHECK(text.out.find("status      compiled") != std::string::npos);
  // (H_kv, where the template has it, follows H between them.)
  CHECK(text.out.find("B=4 H=16 ") != std::string::npos);
  CHECK(text.out.find("S_q=1000 S_kv=1000 D=128 CAUSAL=1") != std::string::npos);
  CHECK(text.out.find("registers") != std::string::npos);

  // --cubin writes a cubin, again over its own, but over no other file.
  std::vector<std::string> cubin = args;
  cubin.insert(cubin.end(), {"--cubin", "k.cubin"});
  REQUIRE(RunEvo(cubin, dir.path()).exit_code == 0);
  CHECK(ReadFile(dir.path() / "k.cubin").substr(0, 4) ==
        "\x7f"
        "ELF");
  CHECK(RunEvo(cubin, dir.path()).exit_code == 0);
  for (const std::string text_file : {"notes.txt", "evo.db"}) {
    const std::string content =
        text_file == "evo.db" ? std::string("SQLite format 3") + '\0' + "pages" : "mine\n";
    test::WriteFile(dir.path() / text_file, content);
    cubin.back() = text_file;
    const auto refused = RunEvo(cubin, dir.path());
    CHECK(refused.exit_code == 2);
    CHECK(refused.err.find("--cubin " + text_file +
                           " exists and is not a cubin; evo writes a cubin only over an earlier "
                           "one") != std::string::npos);
    CHECK(ReadFile(dir.path() / text_file) == content);
  }
}

TEST_CASE("evo compile reports a violated constraint with exit code 1", "[cli]") {
  test::TempDir dir;
  const auto result = RunEvo(
      {"compile", "--set", "BLOCK_M=16", "--set", "NUM_WARPS=4", "--arch", "sm_90"}, dir.path());
  CHECK(result.exit_code == 1);
  CHECK(result.out.find("status      invalid: constraint warp_rows_multiple_of_16") !=
        std::string::npos);
}

TEST_CASE("evo compile --problem sets a problem parameter: an e4m3 Q takes the e4m3 MMA", "[cli]") {
  test::TempDir dir;
  const std::vector<std::string> fp8_mma = {"compile", "-t",       "sdpa_fp8",     "--arch",
                                            "sm_90",   "--set",    "QK_FP8_MMA=1", "--no-cache",
                                            "--shape", "1,1,64,64"};
  const auto without = RunEvo(fp8_mma, dir.path());
  CHECK(without.exit_code == 1);
  CHECK(without.out.find("invalid: constraint fp8_mma_needs_fp8_q") != std::string::npos);
  std::vector<std::string> with = fp8_mma;
  with.insert(with.end(), {"--problem", "Q_FP8=1"});
  const auto result = RunEvo(with, dir.path());
  INFO(result.out << result.err);
  CHECK(result.exit_code == 0);
  CHECK(result.out.find("status      compiled") != std::string::npos);
}

TEST_CASE(
    "a problem default that follows another parameter follows the command line's value; a "
    "problem breaking a check is refused with its reason",
    "[cli][nvrtc]") {
  test::TempDir dir;
  // tests/data/two_kernels with heads H and key/value heads H_kv, which default to H.
  const auto folder = dir.path() / "templates" / "two_kernels";
  std::filesystem::create_directories(folder);
  const auto data = test::SourceDir() / "tests" / "data" / "two_kernels";
  std::filesystem::copy_file(data / "two_kernels.cu", folder / "two_kernels.cu");
  auto manifest = nlohmann::json::parse(*TryReadFile(data / "manifest.json"));
  manifest["problem"].push_back({{"name", "H"}, {"min", 1}, {"default", 8}});
  manifest["problem"].push_back({{"name", "H_kv"},
                                 {"min", 1},
                                 {"default", "H"},
                                 {"check", "H % H_kv == 0"},
                                 {"check_doc", "KV heads serve whole groups of query heads"}});
  test::WriteFile(folder / "manifest.json", manifest.dump(2));
  const std::string templates = (dir.path() / "templates").string();
  const auto problem_of = [&](const std::vector<std::string>& settings) {
    std::vector<std::string> args = {"compile", "-t",     "two_kernels", "--templates",
                                     templates, "--arch", "sm_90",       "--json"};
    for (const std::string& setting : settings) args.insert(args.end(), {"--problem", setting});
    const auto result = RunEvo(args, dir.path());
    INFO(result.err);
    REQUIRE(result.exit_code == 0);
    return nlohmann::json::parse(result.out)["problem"];
  };
  CHECK(problem_of({})["H_kv"] == 8);
  CHECK(problem_of({"H=32"})["H_kv"] == 32);
  CHECK(problem_of({"H=32", "H_kv=4"})["H_kv"] == 4);
  CHECK(problem_of({"H_kv=2"})["H"] == 8);

  const auto broken = RunEvo({"compile", "-t", "two_kernels", "--templates", templates, "--arch",
                              "sm_90", "--problem", "H=32", "--problem", "H_kv=3"},
                             dir.path());
  CHECK(broken.exit_code == 2);
  CHECK(broken.err.find("problem N=1000 H=32 H_kv=3 of template two_kernels breaks H % H_kv == 0 "
                        "(KV heads serve whole groups of query heads)") != std::string::npos);

  const auto listed = RunEvo({"templates", "--templates", templates}, dir.path());
  REQUIRE(listed.exit_code == 0);
  CHECK(listed.out.find(">= 1 (default H)") != std::string::npos);
  CHECK(listed.out.find("must hold: H % H_kv == 0") != std::string::npos);
  const auto json = RunEvo({"templates", "--json", "--templates", templates}, dir.path());
  REQUIRE(json.exit_code == 0);
  for (const auto& listed_template : nlohmann::json::parse(json.out)) {
    if (listed_template["name"] != "two_kernels") continue;
    CHECK(listed_template["problem"][2]["default_expr"] == "H");
    CHECK(listed_template["problem"][2]["check"] == "H % H_kv == 0");
  }
}

TEST_CASE(
    "evo compile checks the template's reference kernel too, and a broken one is an error naming "
    "it",
    "[cli][nvrtc]") {
  test::TempDir dir;
  const auto data = test::SourceDir() / "tests" / "data" / "two_kernels";
  const nlohmann::json original = nlohmann::json::parse(*TryReadFile(data / "manifest.json"));
  // Each a template whose candidates compile and whose reference the GPU gates could not use.
  const auto compile_with = [&](const std::string& name,
                                const std::function<void(nlohmann::json&)>& edit,
                                const std::string& extra_source = {}) {
    const auto folder = dir.path() / name / "two_kernels";
    std::filesystem::create_directories(folder);
    std::filesystem::copy_file(data / "two_kernels.cu", folder / "two_kernels.cu");
    if (!extra_source.empty()) test::WriteFile(folder / "reference.cu", extra_source);
    nlohmann::json manifest = original;
    edit(manifest["reference"]);
    test::WriteFile(folder / "manifest.json", manifest.dump(2));
    return RunEvo({"compile", "-t", "two_kernels", "--templates", (dir.path() / name).string(),
                   "--arch", "sm_90", "--no-cache"},
                  dir.path());
  };
  const auto sound = compile_with("sound", [](nlohmann::json&) {});
  INFO(sound.out << sound.err);
  CHECK(sound.exit_code == 0);
  CHECK(sound.out.find("reference   two_reference: compiled, ") != std::string::npos);

  const auto no_entry =
      compile_with("no_entry", [](nlohmann::json& reference) { reference["entry"] = "missing"; });
  INFO(no_entry.out << no_entry.err);
  CHECK(no_entry.exit_code == 2);
  CHECK(no_entry.out.find("status      compiled") != std::string::npos);
  CHECK(no_entry.err.find("the reference kernel missing of template two_kernels cannot be used "
                          "on this problem (compile_error: the ptxas report has no entry function "
                          "missing") != std::string::npos);

  const auto syntax = compile_with(
      "syntax",
      [](nlohmann::json& reference) {
        reference["source"] = "reference.cu";
        reference["entry"] = "reference_kernel";
      },
      "extern \"C\" __global__ void reference_kernel(const float* x, float* y, int n) {\n"
      "  y[threadIdx.x] = x[threadIdx.x] +;\n}\n");
  INFO(syntax.out << syntax.err);
  CHECK(syntax.exit_code == 2);
  CHECK(syntax.out.find("reference log:") != std::string::npos);
  CHECK(syntax.out.find("expected an expression") != std::string::npos);
  CHECK(syntax.err.find("reference kernel reference_kernel of template two_kernels") !=
        std::string::npos);

  const auto empty_grid =
      compile_with("empty_grid", [](nlohmann::json& reference) { reference["grid"][0] = "N - N"; });
  INFO(empty_grid.out << empty_grid.err);
  CHECK(empty_grid.exit_code == 2);
  CHECK(empty_grid.err.find("(invalid: the launch of two_reference cannot be made for this "
                            "problem: grid.x N - N is 0; CUDA takes 1 to 2147483647)") !=
        std::string::npos);

  const auto wide_block =
      compile_with("wide_block", [](nlohmann::json& reference) { reference["block"][0] = "2048"; });
  INFO(wide_block.out << wide_block.err);
  CHECK(wide_block.exit_code == 2);
  CHECK(wide_block.err.find("(resource_reject: 2048 threads per block; the limit is 1024)") !=
        std::string::npos);
}

TEST_CASE("evo compile refuses bad input with a clear message and exit code 2", "[cli]") {
  test::TempDir dir;
  test::WriteFile(dir.path() / "not_a_folder", "x");
  struct Case {
    std::vector<std::string> args;
    const char* message;
  };
  const std::vector<Case> cases = {
      {{"compile", "--template", "sdpa_fp32", "--arch", "sm_90"}, "unknown template 'sdpa_fp32'"},
      {{"compile", "--set", "BLOCK_K=64", "--arch", "sm_90"}, "has no knob 'BLOCK_K'"},
      {{"compile", "--set", "BLOCK_M=48", "--arch", "sm_90"},
       "BLOCK_M of template sdpa_fp16 cannot be 48"},
      {{"compile", "--set", "BLOCK_M", "--arch", "sm_90"}, "malformed setting 'BLOCK_M'"},
      {{"compile", "--set", "BLOCK_M=sixty", "--arch", "sm_90"}, "'sixty' is not an integer"},
      {{"compile", "--arch", "sm_91"}, "unknown arch 'sm_91'"},
      {{"compile", "--arch", "sm_90", "--shape", "2,8,512"}, "malformed --shape '2,8,512'"},
      {{"compile", "--arch", "sm_90", "--shape", "2,8,0,64"}, "malformed --shape"},
      {{"compile", "--arch", "sm_90", "--shape", "2,8,512,96"},
       "D of template sdpa_fp16 cannot be 96"},
      {{"compile", "--arch", "sm_90", "--problem", "Q_FP8=1"},
       "template sdpa_fp16 has no problem parameter 'Q_FP8'"},
      {{"compile", "-t", "sdpa_fp8", "--arch", "sm_90", "--problem", "Q_FP8=2"},
       "problem parameter Q_FP8 of template sdpa_fp8 cannot be 2 (allowed: 0, 1)"},
      {{"compile", "-t", "sdpa_fp8", "--arch", "sm_90", "--problem", "Q_FP8"},
       "malformed problem setting 'Q_FP8': expected PARAM=INTEGER"},
      {{"compile", "-t", "sdpa_fp8", "--arch", "sm_80"},
       "template sdpa_fp8 needs sm_89 or newer, not sm_80"},
      {{"compile", "-t", "sdpa_fp16_wgmma", "--arch", "sm_89"},
       "template sdpa_fp16_wgmma needs sm_90, not sm_89"},
      {{"compile", "-t", "sdpa_fp16_wgmma", "--arch", "sm_100"},
       "template sdpa_fp16_wgmma needs sm_90, not sm_100"},
      {{"compile", "--arch", "sm_90", "--templates", "missing_folder"}, "does not exist"},
      {{"compile", "--arch", "sm_90", "--templates", "not_a_folder"}, "is not a folder"},
      {{"templates", "--templates", "."}, "holds no manifest.json"},
      // One folder per --templates: what follows it is the command's (here export's ID).
      {{"export", "--templates", ".", "1", "--db", "none.db", "--out", "x"},
       "there is no database none.db"},
      {{"compile", "--arch", "sm_90", "--bogus"}, "--bogus"},
      {{"frobnicate"}, "frobnicate"},
  };
  for (const Case& c : cases) {
    std::string joined;
    for (const auto& arg : c.args) joined += arg + " ";
    INFO(joined);
    const auto result = RunEvo(c.args, dir.path());
    CHECK(result.exit_code == 2);
    CHECK(result.err.find(c.message) != std::string::npos);
    CHECK(result.out.empty());
  }
}

TEST_CASE("without a GPU, evo compile asks for --arch and evo info says there is none", "[cli]") {
  if (test::HaveGpuDriver()) {
    WARN("a GPU driver is here: the no-GPU messages are not checked");
    return;
  }
  test::TempDir dir;
  const auto compile = RunEvo({"compile"}, dir.path());
  CHECK(compile.exit_code == 2);
  CHECK(compile.err.find("no GPU") != std::string::npos);
  CHECK(compile.err.find("pass --arch") != std::string::npos);
  const auto info = RunEvo({"info"}, dir.path());
  CHECK(info.exit_code == 0);
  CHECK(info.out.find("driver     none") != std::string::npos);
  CHECK(info.out.find("nvrtc      13.") != std::string::npos);
}

TEST_CASE("evo bench checks its command line before it looks for a GPU", "[cli]") {
  test::TempDir dir;
  const auto unknown = RunEvo({"bench", "-t", "nope"}, dir.path());
  CHECK(unknown.exit_code == 2);
  CHECK(unknown.err.find("unknown template 'nope'") != std::string::npos);
  const auto shape = RunEvo({"bench", "--shape", "1,2,3"}, dir.path());
  CHECK(shape.exit_code == 2);
  CHECK(shape.err.find("malformed --shape '1,2,3'") != std::string::npos);
  const auto knob = RunEvo({"bench", "--set", "TILE=4"}, dir.path());
  CHECK(knob.exit_code == 2);
  CHECK(knob.err.find("TILE") != std::string::npos);
  // It compiles for the GPU it runs on: --arch is not in its help, and refused by name.
  const auto help = RunEvo({"bench", "--help"}, dir.path());
  CHECK(help.exit_code == 0);
  CHECK(help.out.find("--arch") == std::string::npos);
  const auto arch = RunEvo({"bench", "--arch", "sm_90"}, dir.path());
  CHECK(arch.exit_code == 2);
  CHECK(arch.err.find("drop --arch") != std::string::npos);
  // Timing on outlier inputs needs a template whose inputs have outlier rows.
  const auto plain = RunEvo({"bench", "-t", "rmsnorm", "--time-on-outliers"}, dir.path());
  CHECK(plain.exit_code == 2);
  CHECK(plain.err.find("--time-on-outliers: no input of template rmsnorm has outlier rows") !=
        std::string::npos);
}

}  // namespace
}  // namespace evo
