// docs/templates.md, run as written: its commands are read from the guide itself (the code
// blocks after a `<!-- guide-test: ... -->` line), so the guide cannot drift from what evo does.
// The commands run from a scratch folder holding build/evo (this build's binary) and docs/ (the
// source tree's), as they would from the repository root.
#include <catch2/catch.hpp>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/files.h"
#include "tests/test_support.h"

namespace evo {
namespace {

namespace fs = std::filesystem;

struct GuideCommand {
  std::string kind;  // "cpu" or "gpu"
  int exit_code = 0;
  std::string line;
};

struct Guide {
  std::vector<GuideCommand> commands;
  std::vector<std::pair<size_t, std::vector<std::string>>> outputs;  // command index, lines
};

// The lines of the fenced block that starts at or after line `i`, whose index it advances past
// the block.
std::vector<std::string> FencedBlock(const std::vector<std::string>& lines, size_t& i) {
  while (i < lines.size() && !lines[i].starts_with("```")) ++i;
  REQUIRE(i < lines.size());
  std::vector<std::string> block;
  for (++i; i < lines.size() && !lines[i].starts_with("```"); ++i) block.push_back(lines[i]);
  REQUIRE(i < lines.size());
  ++i;
  return block;
}

// Reads the guide's tested blocks: `<!-- guide-test: cpu -->`, `<!-- guide-test: cpu, exit 1 -->`
// or `<!-- guide-test: gpu -->` before a block of commands (one a line; `\` continues one), and
// `<!-- guide-output: N -->` before a sample of what command N (from 1) of the block before
// prints.
Guide ReadGuide() {
  std::istringstream text(ReadFile(test::SourceDir() / "docs" / "templates.md"));
  std::vector<std::string> lines;
  for (std::string line; std::getline(text, line);) lines.push_back(line);
  Guide guide;
  size_t block_start = 0;
  for (size_t i = 0; i < lines.size();) {
    const std::string& line = lines[i];
    const std::string test_marker = "<!-- guide-test: ";
    const std::string output_marker = "<!-- guide-output: ";
    if (line.starts_with(test_marker)) {
      const std::string spec =
          line.substr(test_marker.size(), line.find(" -->") - test_marker.size());
      GuideCommand command;
      command.kind = spec.substr(0, spec.find(','));
      REQUIRE((command.kind == "cpu" || command.kind == "gpu"));
      if (spec.find(", exit ") != std::string::npos) {
        command.exit_code = std::stoi(spec.substr(spec.find(", exit ") + 7));
      }
      block_start = guide.commands.size();
      std::string pending;
      for (const std::string& block_line : FencedBlock(lines, ++i)) {
        if (block_line.empty() || block_line.starts_with("#")) continue;
        if (block_line.ends_with("\\")) {
          pending += block_line.substr(0, block_line.size() - 1);
          continue;
        }
        command.line = pending + block_line;
        pending.clear();
        guide.commands.push_back(command);
      }
      continue;
    }
    if (line.starts_with(output_marker)) {
      const size_t n = std::stoul(line.substr(output_marker.size()));
      REQUIRE(n >= 1);
      REQUIRE(block_start + n - 1 < guide.commands.size());
      guide.outputs.emplace_back(block_start + n - 1, FencedBlock(lines, ++i));
      continue;
    }
    ++i;
  }
  return guide;
}

// A scratch folder that looks like the repository root to the guide's commands.
class GuideRoot {
 public:
  GuideRoot() {
    fs::create_directories(dir_.path() / "build");
    fs::create_symlink(test::EvoBinary(), dir_.path() / "build" / "evo");
    fs::create_directory_symlink(test::SourceDir() / "docs", dir_.path() / "docs");
  }
  test::CommandResult Run(const std::string& command) const {
    return test::RunProgram("/bin/bash", {"-c", command}, dir_.path());
  }
  const fs::path& path() const { return dir_.path(); }

 private:
  test::TempDir dir_;
};

// Runs the guide's commands of one kind in order; checks each exit code and the sample outputs
// the guide shows for them (the lines whose values do not depend on the NVRTC version).
void RunGuide(const std::string& kind, const GuideRoot& root) {
  const Guide guide = ReadGuide();
  std::vector<test::CommandResult> results(guide.commands.size());
  int ran = 0;
  for (size_t i = 0; i < guide.commands.size(); ++i) {
    const GuideCommand& command = guide.commands[i];
    if (command.kind != kind) continue;
    INFO(command.line);
    CHECK(command.line.starts_with("./build/evo "));
    results[i] = root.Run(command.line);
    INFO(results[i].out << results[i].err);
    CHECK(results[i].exit_code == command.exit_code);
    ++ran;
  }
  CHECK(ran >= (kind == "cpu" ? 5 : 4));
  static const std::set<std::string> kStable = {"knobs", "problem", "bytes",
                                                "arch",  "status",  "constraint"};
  for (const auto& [index, lines] : guide.outputs) {
    if (guide.commands[index].kind != kind) continue;
    for (const std::string& line : lines) {
      if (!kStable.contains(line.substr(0, line.find(' ')))) continue;
      INFO(guide.commands[index].line << "\nprinted:\n" << results[index].out);
      CHECK(results[index].out.find(line + "\n") != std::string::npos);
    }
  }
}

TEST_CASE("the template guide's commands run as written, without a GPU", "[cli][nvrtc]") {
  const Guide guide = ReadGuide();
  REQUIRE(guide.outputs.size() >= 2);
  const GuideRoot root;
  RunGuide("cpu", root);
}

TEST_CASE("the template guide's GPU commands run as written", "[gpu]") {
  if (!test::HaveGpuDriver()) {
    WARN("skipped: no GPU driver (libcuda.so.1) on this machine");
    return;
  }
  const GuideRoot root;
  RunGuide("gpu", root);
  // The search's database and the export the guide's commands name.
  CHECK(fs::exists(root.path() / "runs" / "softmax.db"));
  CHECK(fs::exists(root.path() / "runs" / "softmax_export" / "launch.json"));
}

}  // namespace
}  // namespace evo
