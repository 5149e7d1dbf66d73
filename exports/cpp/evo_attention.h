// Attention kernels tuned by evo, with their dispatch table, for C++ programs (written by
// `evo export --cpp`; evo is not needed to build or use it).
//
//   evo_attention::Attention attention;            // loads the kernels into the current context
//   evo_attention::Shape shape;                     // B, H, H_kv, S_q, S_kv, D, causal, dtypes
//   attention.Run(shape, {q, k, v, out}, stream);   // picks a kernel, computes its grid, launches
//
// Tensors are contiguous [B, H, S_q, D] (q, out) and [B, H_kv, S_kv, D] (k, v) device arrays;
// the softmax scale is 1/sqrt(D). Pick() applies the table's rule without a GPU. The CUDA
// driver is loaded at run time (dlopen of libcuda.so.1), so the library links without it and
// says plainly when it is missing.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace evo_attention {

enum class DType { kF16, kBF16, kE4M3 };

// One call's sizes and types.
struct Shape {
  int64_t B = 1;
  int64_t H = 1;
  int64_t H_kv = 0;  // key/value heads; 0: as many as H (no grouped heads), as in Python
  int64_t S_q = 1;
  int64_t S_kv = 1;
  int64_t D = 64;
  bool causal = false;
  DType q_dtype = DType::kF16;
  DType kv_dtype = DType::kF16;
};

// A call that no kernel of the table serves, or sizes a kernel argument cannot carry; the
// message says why.
class DispatchError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// The table's entry that serves a call.
struct Choice {
  size_t entry = 0;
  bool exact = false;  // the tuned shape itself, not the nearest one
  std::string description;
};

// The dispatch rule (the same as the Python export's; see table.json's "rule"): which entry
// serves this call on a GPU of compute capability `sm` (90 for sm_90). No GPU involved.
Choice Pick(const Shape& shape, int sm);

// Everything a call would launch, evaluated for a device with `num_sms` multiprocessors and
// `ctas_per_sm` resident CTAs of every kernel, as text (one line per scratch tensor, memset,
// launch and argument), or "error: <why>". The tests compare it with the Python export's.
std::string DescribeCall(const Shape& shape, int sm, int num_sms, int ctas_per_sm);

// The dtype of the output for this call's key.
DType OutputDType(const Shape& shape, int sm);

// An entry of the table: a tuned shape, the target its kernel was compiled for ("sm_90a") and
// the kernel's measured time there.
struct TunedEntry {
  Shape shape;
  std::string target;
  std::string template_name;
  double score_us = 0;
};
std::vector<TunedEntry> Entries();

// Device pointers of one call.
struct Tensors {
  CUdeviceptr q = 0;
  CUdeviceptr k = 0;
  CUdeviceptr v = 0;
  CUdeviceptr out = 0;
  // Per-head float scales [B, H], for a table of fp8 kernels only.
  CUdeviceptr q_scale = 0;
  CUdeviceptr k_scale = 0;
  CUdeviceptr v_scale = 0;
};

// The table's kernels loaded into one CUDA context. Not copyable; destroy it while its context
// is alive.
class Attention {
 public:
  // Loads every kernel that runs on the current context's device. Throws std::runtime_error
  // when the driver is missing, no context is current or a load fails.
  Attention();
  ~Attention();
  Attention(const Attention&) = delete;
  Attention& operator=(const Attention&) = delete;

  int sm() const;

  // Bytes of device scratch a call of this shape needs on this GPU (0 for most kernels; a
  // kernel's scratch may grow with the GPU's multiprocessor count).
  size_t WorkspaceBytes(const Shape& shape) const;

  // Launches the call on `stream` (it can be captured into a CUDA graph). `workspace` holds at
  // least WorkspaceBytes(shape) bytes; when null and the call needs scratch, it is allocated
  // and freed on the stream (cuMemAllocAsync / cuMemFreeAsync). Throws DispatchError for a call
  // no kernel serves, std::runtime_error for a CUDA error.
  Choice Run(const Shape& shape, const Tensors& tensors, CUstream stream, CUdeviceptr workspace = 0,
             size_t workspace_bytes = 0);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace evo_attention
