#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "kernel_templates/genome.h"

namespace evo {
struct KernelTemplate;
}

namespace evo::test {

// The template's defaults with space-separated "KNOB=VALUE" settings applied.
Genome GenomeFromSettings(const Manifest& manifest, const std::string& settings);

// An attention template's defaults with these sizes, checked against its problem domains.
Problem AttentionProblem(const Manifest& manifest, int64_t b, int64_t h, int64_t s_q, int64_t s_kv,
                         int64_t d, int64_t causal);

// A database at `db` holding one run of the template on the problem, on an H100, with one
// candidate of these knob settings, finished with `status` (no figures) or, without one,
// pending; returns the candidate's id.
int64_t StoreOneCandidate(const std::filesystem::path& db, const KernelTemplate& kernel_template,
                          const Problem& problem, const std::string& settings,
                          std::optional<Status> status = Status::kMeasured);

// A fresh folder under the system's temporary folder, removed with everything in it.
class TempDir {
 public:
  TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir();
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

void WriteFile(const std::filesystem::path& path, const std::string& content);

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// The evo binary beside the test executable, and the source tree: the compiled-in one, or the
// parent of the build folder when the build folder was carried to another machine.
std::filesystem::path EvoBinary();
std::filesystem::path SourceDir();

// The sweep of sdpa_fp16 at B=2, H=8, S=512, D=64 recorded on an H100 by `evo sweep`, which the
// replay evaluator answers from.
std::filesystem::path H100Recording();

// That recording claimed for sdpa_fp16 at 2,8,S,64 (causal or not) and for the template's
// version of today, written into `dir`: the measurements are the same, only the header differs.
// It gives `evo tune` a recording per shape, and `evo export` runs of the template it compiles
// today.
std::filesystem::path H100RecordingAs(const std::filesystem::path& dir, int64_t s, int64_t causal);

// Runs `program` with these arguments in `working_dir`, capturing its output.
CommandResult RunProgram(const std::filesystem::path& program, const std::vector<std::string>& args,
                         const std::filesystem::path& working_dir);

// Runs the built evo binary with these arguments in `working_dir`.
CommandResult RunEvo(const std::vector<std::string>& args,
                     const std::filesystem::path& working_dir);

// True when `name` is a program on the PATH (python3, g++, cmake).
bool HaveProgram(const std::string& name);

// True when a CUDA driver can be loaded here; GPU tests skip (and say so) when it is false.
bool HaveGpuDriver();

// A small template written into `folder`: one knob TILE in {1, 2, 4}, a constraint, and a source
// given by the caller (it must define `extern "C" __global__ void tiny(...)` using TILE).
void WriteTinyTemplate(const std::filesystem::path& folder, const std::string& name,
                       const std::string& source);

}  // namespace evo::test
