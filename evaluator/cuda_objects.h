#pragma once

#include <cuda.h>

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace evo {

// RAII owners of Driver API objects. Constructors throw CudaError; destructors never throw (a
// failure to release is ignored: the context may already be poisoned, and the worker process
// that owns it is then replaced anyway).

// The device's primary context, made current on the calling thread.
class Context {
 public:
  explicit Context(int ordinal);
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  ~Context();

  CUdevice device() const { return device_; }
  void Synchronize() const;

 private:
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
};

class Module {
 public:
  explicit Module(std::string_view cubin);
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  ~Module();

  CUfunction Function(const std::string& name) const;

 private:
  CUmodule module_ = nullptr;
};

// Bytes of device memory that something else owns (a buffer, or a tensor inside its guarded
// allocation).
struct DeviceSpan {
  CUdeviceptr pointer = 0;
  size_t bytes = 0;

  void Upload(const void* data, size_t count) const;
  void Download(void* data, size_t count) const;
};

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  ~DeviceBuffer();

  CUdeviceptr get() const { return pointer_; }
  size_t bytes() const { return bytes_; }
  DeviceSpan span() const { return {pointer_, bytes_}; }
  void Upload(const void* data, size_t bytes) { span().Upload(data, bytes); }
  void Download(void* data, size_t bytes) const { span().Download(data, bytes); }

 private:
  CUdeviceptr pointer_ = 0;
  size_t bytes_ = 0;
};

class Stream {
 public:
  Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream();

  CUstream get() const { return stream_; }
  void Synchronize() const;

 private:
  CUstream stream_ = nullptr;
};

class Event {
 public:
  Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  Event(Event&& other) noexcept;
  ~Event();

  void Record(const Stream& stream);
  void Synchronize() const;
  // Milliseconds from `start` to this event; both must have completed.
  float ElapsedSince(const Event& start) const;

 private:
  CUevent event_ = nullptr;
};

// What a callback enqueues on a stream, captured once into a CUDA graph and launched as one:
// kernels back to back without the host's launch gaps between them, as users run short kernels
// in sustained use.
class CapturedGraph {
 public:
  CapturedGraph(const Stream& stream, const std::function<void()>& enqueue);
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;
  ~CapturedGraph();

  void Launch(const Stream& stream) const;

 private:
  CUgraph graph_ = nullptr;
  CUgraphExec exec_ = nullptr;
};

struct LaunchShape {
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  unsigned dynamic_smem = 0;
  // Thread-block cluster extents; all 1 launches without clusters.
  unsigned cluster[3] = {1, 1, 1};

  bool clustered() const { return cluster[0] * cluster[1] * cluster[2] > 1; }
};

// Launches `function` with arguments given as pointers to their values, in order.
void Launch(CUfunction function, const LaunchShape& shape, const Stream& stream,
            std::vector<void*>& arguments);

// Raises the function's dynamic shared memory limit when it needs more than the default 48 KiB.
void AllowDynamicSharedMemory(CUfunction function, unsigned bytes);

int MaxActiveBlocksPerSm(CUfunction function, unsigned threads, unsigned dynamic_smem);

}  // namespace evo
