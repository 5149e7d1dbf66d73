#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernel_templates/template_library.h"
#include "population/store.h"

namespace evo::cli {

// One peer's time for a run's task, e.g. cuDNN at 41.7 us.
struct PeerTime {
  std::string name;
  double us = 0;
};

// Times of other kernels for the tasks evo searched. evo's database stores only evo's own
// candidates, so peers come from a file: the JSON that `scripts/bench-attention.py --json`
// writes, an array of rows such as
//   {"problem": {"B": 2, "H": 8, "H_kv": 8, "S_q": 512, "S_kv": 512, "D": 64}, "causal": false,
//    "device": "NVIDIA H100 80GB HBM3", "flash_us": 12.3, "cudnn_us": 9.4, "flex_us": null}
// A row may instead give {"peers": {"name": us, ...}}. A row matches a run when its problem,
// completed with the template's defaults, is the run's problem, and its device (when it names
// one) is the run's device.
class PeerTable {
 public:
  // Throws evo::Error naming the file and the row for anything malformed.
  static PeerTable Load(const std::filesystem::path& path);

  // The first matching row's peers, in the row's order; empty when no row matches. `library`
  // completes a row's problem with the defaults of the run's template; without the template,
  // every parameter the row names must equal the run's.
  std::vector<PeerTime> Match(const RunSpec& spec, const TemplateLibrary* library) const;

  const std::filesystem::path& path() const { return path_; }
  size_t size() const { return rows_.size(); }

 private:
  struct Row {
    Problem problem;  // the parameters the row names, CAUSAL among them when it says
    std::string device;
    std::vector<PeerTime> peers;
  };

  std::filesystem::path path_;
  std::vector<Row> rows_;
};

}  // namespace evo::cli
