#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "common/files.h"
#include "common/sha256.h"
#include "population/sqlite.h"
#include "tests/test_support.h"

namespace evo {
namespace {

using test::RunEvo;

// Two shapes of sdpa_fp16 tuned from (re-labelled) H100 recordings into dir/tune.db.
void TuneTwoShapes(const std::filesystem::path& dir) {
  const auto tuned = RunEvo(
      {"tune", "--db", (dir / "tune.db").string(), "--budget", "12", "--seed", "2", "--shape",
       "2,8,512,64", "--shape", "2,8,1024,64,causal", "--replay",
       test::H100RecordingAs(dir, 512, 0).string(), "--replay",
       test::H100RecordingAs(dir, 1024, 1).string(), "--cache-dir", (dir / "cache").string()},
      dir);
  INFO(tuned.err);
  REQUIRE(tuned.exit_code == 0);
}

TEST_CASE("evo export --python and --cpp write the tuned runs as packages that work without a GPU",
          "[cli][export]") {
  test::TempDir dir;
  TuneTwoShapes(dir.path());
  const std::string db = (dir.path() / "tune.db").string();
  const std::string cache = (dir.path() / "cache").string();
  const auto exported = RunEvo({"export", "--python", "py", "--cpp", "cpp", "--db", db,
                                "--cache-dir", cache, "--name", "tuned_attention"},
                               dir.path());
  INFO(exported.err);
  REQUIRE(exported.exit_code == 0);
  CHECK(exported.out.find("wrote the Python package py/tuned_attention: 2 entries") !=
        std::string::npos);
  CHECK(exported.out.find("wrote the C++ library cpp: 2 entries") != std::string::npos);

  // The package holds the table and the cubins it names, byte for byte.
  const std::filesystem::path package = dir.path() / "py" / "tuned_attention";
  const nlohmann::json table = nlohmann::json::parse(ReadFile(package / "table.json"));
  REQUIRE(table["entries"].size() == 2);
  for (const nlohmann::json& kernel : table["kernels"]) {
    const std::string cubin = ReadFile(package / kernel["cubin"].get<std::string>());
    CHECK(Sha256Hex(cubin) == kernel["cubin_sha256"]);
    CHECK(cubin.substr(1, 3) == "ELF");
    CHECK(kernel["target"] == "sm_90");
  }
  CHECK(table["entries"][0]["shape"]["S_q"] == 512);
  CHECK(table["entries"][1]["shape"]["S_q"] == 1024);
  CHECK(ReadFile(dir.path() / "cpp" / "table.json") == ReadFile(package / "table.json"));
  CHECK(ReadFile(package / "README.md").find("import tuned_attention") != std::string::npos);

  if (test::HaveProgram("python3")) {
    const auto checks = test::RunProgram(
        "python3",
        {(test::SourceDir() / "tests" / "data" / "export" / "python_checks.py").string(),
         (dir.path() / "py").string(), "tuned_attention"},
        dir.path());
    INFO(checks.out << checks.err);
    CHECK(checks.exit_code == 0);
    CHECK(checks.out.find("ok: the first entry's own shape picks it, exactly") !=
          std::string::npos);
    if (checks.out.find("SKIPPED-TORCH") != std::string::npos) {
      WARN("the PyTorch checks of the exported module were skipped: PyTorch is not installed");
    } else {
      CHECK(checks.out.find("PASSED") != std::string::npos);
    }
  } else {
    WARN("skipped the exported module's checks: no python3");
  }

  // The C++ library and its example build with the system's compiler and CMake (the example
  // links the driver's stub where no driver is installed).
  if (test::HaveProgram("cmake") && test::HaveProgram("g++")) {
    const std::string source = (dir.path() / "cpp").string();
    const std::string build = (dir.path() / "cpp" / "build").string();
    const auto configured = test::RunProgram(
        "cmake", {"-S", source, "-B", build, "-DCMAKE_BUILD_TYPE=Release"}, dir.path());
    INFO(configured.out << configured.err);
    REQUIRE(configured.exit_code == 0);
    const auto built = test::RunProgram("cmake", {"--build", build, "-j", "2"}, dir.path());
    INFO(built.out << built.err);
    CHECK(built.exit_code == 0);
    CHECK(std::filesystem::exists(dir.path() / "cpp" / "build" / "libevo_attention.a"));
    CHECK(std::filesystem::exists(dir.path() / "cpp" / "build" / "evo_attention_example"));
    // A Shape whose H_kv is left unset has a KV head per query head (as Python's pick() does),
    // not one KV head for all of them.
    test::WriteFile(dir.path() / "kv_heads.cc", R"(#include <cstdio>
#include "evo_attention.h"
int main() {
  evo_attention::Shape unset;
  unset.B = 2; unset.H = 8; unset.S_q = 512; unset.S_kv = 512; unset.D = 64;
  evo_attention::Shape heads = unset, one = unset;
  heads.H_kv = 8;
  one.H_kv = 1;
  const std::string a = evo_attention::DescribeCall(unset, 90, 132, 1);
  const std::string b = evo_attention::DescribeCall(heads, 90, 132, 1);
  const std::string c = evo_attention::DescribeCall(one, 90, 132, 1);
  std::printf("%s %s\n%s\n", a == b ? "as-H" : "not-as-H", a == c ? "as-one" : "not-as-one",
              a.c_str());
}
)");
    const auto compiled = test::RunProgram(
        "g++",
        {"-std=c++20", "-I", source + "/include", "-I", "/usr/local/cuda/include", "-o",
         (dir.path() / "kv_heads").string(), (dir.path() / "kv_heads.cc").string(),
         build + "/libevo_attention.a", "-ldl"},
        dir.path());
    INFO(compiled.out << compiled.err);
    REQUIRE(compiled.exit_code == 0);
    const auto kv_heads = test::RunProgram((dir.path() / "kv_heads").string(), {}, dir.path());
    INFO(kv_heads.out << kv_heads.err);
    CHECK(kv_heads.out.find("as-H not-as-one\n") == 0);
    CHECK(kv_heads.out.find("H_kv=8") != std::string::npos);
  } else {
    WARN("skipped building the C++ export: no cmake or g++");
  }

  // A run of another template version cannot be rebuilt as measured: a whole database's export
  // leaves it out and says so, asking for it by id is refused.
  std::string recording = ReadFile(test::H100RecordingAs(dir.path(), 2048, 0));
  const std::string hash = "\"template_hash\":\"";
  const size_t at = recording.find(hash);
  REQUIRE(at != std::string::npos);
  recording.replace(at + hash.size(), 64, std::string(64, '0'));
  test::WriteFile(dir.path() / "older.jsonl", recording);
  const auto old = RunEvo({"run", "--db", db, "--budget", "4", "--seed", "1", "--shape",
                           "2,8,2048,64", "--replay", (dir.path() / "older.jsonl").string()},
                          dir.path());
  INFO(old.err);
  REQUIRE(old.exit_code == 0);
  const auto without =
      RunEvo({"export", "--python", "py2", "--db", db, "--cache-dir", cache}, dir.path());
  INFO(without.err);
  CHECK(without.exit_code == 0);
  CHECK(without.err.find("left out run 3 (the run searched version") != std::string::npos);
  CHECK(without.out.find("2 entries") != std::string::npos);
  const auto asked = RunEvo({"export", "--python", "py3", "--db", db, "--run", "3"}, dir.path());
  CHECK(asked.exit_code == 2);
  CHECK(asked.err.find("run 3: the run searched version") != std::string::npos);
  // The template is built into evo: no old folder to pass, so the message says what to do.
  CHECK(asked.err.find("built in, and a kernel is exported only as it was measured: run the "
                       "search again with this evo") != std::string::npos);

  // A run of a user's template is exported where --templates names its folder; without it the
  // message says so instead of listing the shipped templates.
  {
    sqlite::Database store(db, sqlite::Database::Mode::kReadWrite);
    store.Execute("UPDATE runs SET template_name = 'row_softmax' WHERE id = 3");
  }
  const auto user = RunEvo({"export", "--python", "py4", "--db", db, "--run", "3"}, dir.path());
  CHECK(user.exit_code == 2);
  CHECK(user.err.find("run 3: the run searched template 'row_softmax', which is not among the "
                      "templates this evo loaded; pass its folder with --templates") !=
        std::string::npos);

  // Misuse is named.
  const auto both = RunEvo({"export", "3", "--python", "py", "--db", db}, dir.path());
  CHECK(both.exit_code == 2);
  CHECK(both.err.find("a candidate id exports one kernel") != std::string::npos);
  const auto neither = RunEvo({"export", "--db", db}, dir.path());
  CHECK(neither.exit_code == 2);
  CHECK(neither.err.find("evo export ID --out DIR writes one candidate") != std::string::npos);
  const auto name =
      RunEvo({"export", "--python", "py", "--db", db, "--name", "9lives"}, dir.path());
  CHECK(name.exit_code == 2);
  CHECK(name.err.find("is not a Python package name") != std::string::npos);
  const auto run = RunEvo({"export", "--cpp", "cpp2", "--db", db, "--run", "7"}, dir.path());
  CHECK(run.exit_code == 2);
  CHECK(run.err.find("there is no run 7") != std::string::npos);
}

// On the GPU machine: a set tuned on the GPU here, exported, and called from PyTorch
// (scripts/export-check.py: tuned and untuned shapes, partial tiles, CUDA graphs, torch.compile,
// against torch's math backend) and from C++ (the export's example program).
TEST_CASE(
    "an export writes into a new, empty or earlier export's folder, never over a user's files",
    "[cli][export]") {
  test::TempDir dir;
  TuneTwoShapes(dir.path());
  const std::string db = (dir.path() / "tune.db").string();
  const std::string cache = (dir.path() / "cache").string();
  const auto run = [&](std::vector<std::string> args) {
    args.insert(args.end(), {"--db", db});
    if (args.front() == "export") args.insert(args.end(), {"--cache-dir", cache});
    return RunEvo(args, dir.path());
  };
  const std::string refused = "holds files that are not an export of evo's";
  // Two measured candidates of the first run, to export one at a time.
  const auto elite = run({"show", "elite", "--run", "1", "--json"});
  REQUIRE(elite.exit_code == 0);
  const nlohmann::json members = nlohmann::json::parse(elite.out)["elite"];
  REQUIRE(members.size() >= 2);
  const std::string first = std::to_string(members[0]["id"].get<int64_t>());
  const std::string second = std::to_string(members[1]["id"].get<int64_t>());

  // A package folder of the user's own.
  const auto mine = dir.path() / "py" / "mylib";
  test::WriteFile(mine / "kernels" / "handwritten.cu", "mine\n");
  test::WriteFile(mine / "__init__.py", "# mine\n");
  const auto python = run({"export", "--python", "py", "--name", "mylib"});
  CHECK(python.exit_code == 2);
  CHECK(python.err.find("--python " + (std::filesystem::path("py") / "mylib").string() + " " +
                        refused) != std::string::npos);
  CHECK(ReadFile(mine / "kernels" / "handwritten.cu") == "mine\n");
  CHECK(ReadFile(mine / "__init__.py") == "# mine\n");

  test::WriteFile(dir.path() / "cpp" / "CMakeLists.txt", "project(mine)\n");
  const auto cpp = run({"export", "--cpp", "cpp"});
  CHECK(cpp.exit_code == 2);
  CHECK(cpp.err.find("--cpp cpp " + refused) != std::string::npos);
  CHECK(ReadFile(dir.path() / "cpp" / "CMakeLists.txt") == "project(mine)\n");

  test::WriteFile(dir.path() / "one" / "notes.txt", "mine\n");
  const auto one = run({"export", first, "--out", "one"});
  CHECK(one.exit_code == 2);
  CHECK(one.err.find("--out one " + refused) != std::string::npos);
  CHECK(!std::filesystem::exists(dir.path() / "one" / "launch.json"));

  // A file where the folder should be, or in its path: said plainly.
  test::WriteFile(dir.path() / "afile", "mine\n");
  const auto file = run({"export", first, "--out", "afile"});
  CHECK(file.exit_code == 2);
  CHECK(file.err.find("evo: error: --out afile is not a folder") != std::string::npos);
  const auto below = run({"export", first, "--out", "afile/sub"});
  CHECK(below.exit_code == 2);
  CHECK(below.err.find("evo: error: ") != std::string::npos);
  CHECK(below.err.find("Not a directory") != std::string::npos);
  CHECK(below.err.find("internal error") == std::string::npos);
  CHECK(ReadFile(dir.path() / "afile") == "mine\n");

  // A keyword is no package name: `import class` would not parse.
  const auto keyword = run({"export", "--python", "py", "--name", "class"});
  CHECK(keyword.exit_code == 2);
  CHECK(keyword.err.find("'class' is not a Python package name") != std::string::npos);

  // A package name that shadows a module the package imports is refused.
  const auto shadow = run({"export", "--python", "py", "--name", "torch"});
  CHECK(shadow.exit_code == 2);
  CHECK(shadow.err.find("--name 'torch' is a module the package imports") != std::string::npos);
  // Both destinations are checked before either is written: one inside the other is refused.
  const auto nested = run({"export", "--python", "same", "--cpp", "same"});
  CHECK(nested.exit_code == 2);
  CHECK(nested.err.find("one is inside the other") != std::string::npos);
  CHECK(!std::filesystem::exists(dir.path() / "same"));
  // An export of the other kind is not replaced: the two would mix.
  REQUIRE(run({"export", "--python", "kinds", "--name", "pkg"}).exit_code == 0);
  const auto other_kind = run({"export", "--cpp", "kinds/pkg"});
  CHECK(other_kind.exit_code == 2);
  CHECK(other_kind.err.find("--cpp kinds/pkg is an export of evo's of another kind (no "
                            "CMakeLists.txt)") != std::string::npos);
  CHECK(!std::filesystem::exists(dir.path() / "kinds" / "pkg" / "CMakeLists.txt"));

  // Exporting again over evo's own export replaces its files and keeps what the user added.
  REQUIRE(run({"export", "--python", "py", "--name", "tuned", "--cpp", "cpp2"}).exit_code == 0);
  REQUIRE(run({"export", first, "--out", "one2"}).exit_code == 0);
  const auto package = dir.path() / "py" / "tuned";
  test::WriteFile(package / "kernels" / "notes.txt", "mine\n");
  test::WriteFile(dir.path() / "cpp2" / "build" / "notes.txt", "mine\n");
  test::WriteFile(package / "kernels" / "stale.cubin", "old\n");
  const auto again = run({"export", "--python", "py", "--name", "tuned", "--cpp", "cpp2"});
  INFO(again.err);
  CHECK(again.exit_code == 0);
  CHECK(run({"export", second, "--out", "one2"}).exit_code == 0);
  CHECK(ReadFile(package / "kernels" / "notes.txt") == "mine\n");
  CHECK(!std::filesystem::exists(package / "kernels" / "stale.cubin"));
  CHECK(ReadFile(dir.path() / "cpp2" / "build" / "notes.txt") == "mine\n");
  const nlohmann::json table = nlohmann::json::parse(ReadFile(package / "table.json"));
  for (const nlohmann::json& kernel : table["kernels"]) {
    CHECK(std::filesystem::exists(package / kernel["cubin"].get<std::string>()));
  }
  CHECK(nlohmann::json::parse(ReadFile(dir.path() / "one2" / "launch.json"))["candidate"] ==
        members[1]["id"]);
}

TEST_CASE("the exported module and library run tuned and untuned shapes on the GPU",
          "[gpu][export]") {
  if (!test::HaveGpuDriver()) {
    WARN("skipped: no GPU driver (libcuda.so.1) on this machine");
    return;
  }
  test::TempDir dir;
  const std::string db = (dir.path() / "tune.db").string();
  const auto tuned = RunEvo({"tune", "--db", db, "--budget", "6", "--seed", "1", "--grid",
                             "BxH=2x8 S=512,1024 D=64 CAUSAL=0,1", "--shape", "1,16:4,1,2048,128"},
                            dir.path());
  INFO(tuned.out << tuned.err);
  REQUIRE(tuned.exit_code == 0);
  const auto exported =
      RunEvo({"export", "--python", "py", "--cpp", "cpp", "--db", db}, dir.path());
  INFO(exported.err);
  REQUIRE(exported.exit_code == 0);

  const auto python =
      test::RunProgram("python3",
                       {(test::SourceDir() / "scripts" / "export-check.py").string(),
                        (dir.path() / "py" / "evo_attention").string()},
                       dir.path());
  INFO(python.out << python.err);
  if (python.out.find("needs PyTorch") != std::string::npos) {
    WARN("skipped the Python module on the GPU: PyTorch is not installed");
  } else {
    CHECK(python.exit_code == 0);
    CHECK(python.out.find("all checks passed") != std::string::npos);
  }

  const std::string source = (dir.path() / "cpp").string();
  const std::string build = (dir.path() / "cpp" / "build").string();
  REQUIRE(test::RunProgram("cmake", {"-S", source, "-B", build}, dir.path()).exit_code == 0);
  const auto built = test::RunProgram("cmake", {"--build", build, "-j", "8"}, dir.path());
  INFO(built.out << built.err);
  REQUIRE(built.exit_code == 0);
  const auto example =
      test::RunProgram(dir.path() / "cpp" / "build" / "evo_attention_example", {}, dir.path());
  INFO(example.out << example.err);
  CHECK(example.exit_code == 0);
  CHECK(example.out.find("all calls match the reference") != std::string::npos);
}

}  // namespace
}  // namespace evo
