#pragma once

#include <string>
#include <utility>
#include <vector>

#include "evaluator/ptxas_report.h"

namespace evo {

struct CompileRequest {
  std::string source;
  std::string program_name;  // shown in compiler messages, e.g. "sdpa_fp16.cu"
  std::string arch;          // "sm_90"
  std::vector<std::string> extra_options;
  // (include name, content): what the source's #include lines find, in place of files.
  std::vector<std::pair<std::string, std::string>> headers;
};

struct CompileResult {
  bool ok = false;
  std::string cubin;  // empty unless ok
  std::string log;    // NVRTC's whole log: errors, warnings and the ptxas report
  std::vector<KernelResources> kernels;
  double compile_ms = 0;  // NVRTC's time when this result was first produced
  double elapsed_ms = 0;  // time of this call: equal to compile_ms unless served from a cache
  bool cache_hit = false;
};

// Turns CUDA source into a cubin; behind an interface so tests and the cache can wrap it.
// A source that does not compile is a result (ok == false, with the log); a broken
// environment throws evo::Error.
class Compiler {
 public:
  virtual ~Compiler() = default;
  virtual CompileResult Compile(const CompileRequest& request) = 0;
  // Identifies the compiler's version; part of every cache key.
  virtual std::string Version() const = 0;
  // The complete option list the compiler passes for a request.
  virtual std::vector<std::string> Options(const CompileRequest& request) const = 0;
};

}  // namespace evo
