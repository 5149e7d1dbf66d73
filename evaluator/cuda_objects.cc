#include "evaluator/cuda_objects.h"

#include <utility>

#include "evaluator/cuda_driver.h"

namespace evo {

Context::Context(int ordinal) {
  const DriverApi& api = Driver();
  CheckCuda(api.DeviceGet(&device_, ordinal), "cuDeviceGet");
  CheckCuda(api.DevicePrimaryCtxRetain(&context_, device_), "cuDevicePrimaryCtxRetain");
  const CUresult current = api.CtxSetCurrent(context_);
  if (current != CUDA_SUCCESS) {
    api.DevicePrimaryCtxRelease(device_);
    CheckCuda(current, "cuCtxSetCurrent");
  }
}

Context::~Context() {
  const DriverApi& api = Driver();
  api.CtxSetCurrent(nullptr);
  api.DevicePrimaryCtxRelease(device_);
}

void Context::Synchronize() const { CheckCuda(Driver().CtxSynchronize(), "cuCtxSynchronize"); }

Module::Module(std::string_view cubin) {
  // cuModuleLoadData reads the image's own size from its ELF header.
  CheckCuda(Driver().ModuleLoadData(&module_, cubin.data()), "cuModuleLoadData");
}

Module::~Module() { Driver().ModuleUnload(module_); }

CUfunction Module::Function(const std::string& name) const {
  CUfunction function = nullptr;
  CheckCuda(Driver().ModuleGetFunction(&function, module_, name.c_str()),
            ("cuModuleGetFunction(" + name + ")").c_str());
  return function;
}

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  CheckCuda(Driver().MemAlloc(&pointer_, bytes == 0 ? 1 : bytes), "cuMemAlloc");
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : pointer_(std::exchange(other.pointer_, 0)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (pointer_ != 0) Driver().MemFree(pointer_);
    pointer_ = std::exchange(other.pointer_, 0);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (pointer_ != 0) Driver().MemFree(pointer_);
}

void DeviceSpan::Upload(const void* data, size_t count) const {
  if (count > bytes)
    throw Error("an upload of " + std::to_string(count) + " bytes into " + std::to_string(bytes));
  CheckCuda(Driver().MemcpyHtoD(pointer, data, count), "cuMemcpyHtoD");
}

void DeviceSpan::Download(void* data, size_t count) const {
  if (count > bytes)
    throw Error("a download of " + std::to_string(count) + " bytes from " + std::to_string(bytes));
  CheckCuda(Driver().MemcpyDtoH(data, pointer, count), "cuMemcpyDtoH");
}

Stream::Stream() {
  CheckCuda(Driver().StreamCreate(&stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
}

Stream::~Stream() { Driver().StreamDestroy(stream_); }

void Stream::Synchronize() const {
  CheckCuda(Driver().StreamSynchronize(stream_), "cuStreamSynchronize");
}

CapturedGraph::CapturedGraph(const Stream& stream, const std::function<void()>& enqueue) {
  CheckCuda(Driver().StreamBeginCapture(stream.get(), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
            "cuStreamBeginCapture");
  try {
    enqueue();
  } catch (...) {
    CUgraph abandoned = nullptr;
    Driver().StreamEndCapture(stream.get(), &abandoned);
    if (abandoned != nullptr) Driver().GraphDestroy(abandoned);
    throw;
  }
  CheckCuda(Driver().StreamEndCapture(stream.get(), &graph_), "cuStreamEndCapture");
  const CUresult instantiated = Driver().GraphInstantiateWithFlags(&exec_, graph_, 0);
  if (instantiated != CUDA_SUCCESS) {
    Driver().GraphDestroy(graph_);
    CheckCuda(instantiated, "cuGraphInstantiateWithFlags");
  }
}

CapturedGraph::~CapturedGraph() {
  if (exec_ != nullptr) Driver().GraphExecDestroy(exec_);
  if (graph_ != nullptr) Driver().GraphDestroy(graph_);
}

void CapturedGraph::Launch(const Stream& stream) const {
  CheckCuda(Driver().GraphLaunch(exec_, stream.get()), "cuGraphLaunch");
}

Event::Event() { CheckCuda(Driver().EventCreate(&event_, CU_EVENT_DEFAULT), "cuEventCreate"); }

Event::Event(Event&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}

Event::~Event() {
  if (event_ != nullptr) Driver().EventDestroy(event_);
}

void Event::Record(const Stream& stream) {
  CheckCuda(Driver().EventRecord(event_, stream.get()), "cuEventRecord");
}

void Event::Synchronize() const {
  CheckCuda(Driver().EventSynchronize(event_), "cuEventSynchronize");
}

float Event::ElapsedSince(const Event& start) const {
  float milliseconds = 0;
  CheckCuda(Driver().EventElapsedTime(&milliseconds, start.event_, event_), "cuEventElapsedTime");
  return milliseconds;
}

void Launch(CUfunction function, const LaunchShape& shape, const Stream& stream,
            std::vector<void*>& arguments) {
  if (shape.clustered()) {
    CUlaunchAttribute cluster{};
    cluster.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    cluster.value.clusterDim.x = shape.cluster[0];
    cluster.value.clusterDim.y = shape.cluster[1];
    cluster.value.clusterDim.z = shape.cluster[2];
    CUlaunchConfig config{};
    config.gridDimX = shape.grid[0];
    config.gridDimY = shape.grid[1];
    config.gridDimZ = shape.grid[2];
    config.blockDimX = shape.block[0];
    config.blockDimY = shape.block[1];
    config.blockDimZ = shape.block[2];
    config.sharedMemBytes = shape.dynamic_smem;
    config.hStream = stream.get();
    config.attrs = &cluster;
    config.numAttrs = 1;
    CheckCuda(Driver().LaunchKernelEx(&config, function, arguments.data(), nullptr),
              "cuLaunchKernelEx (cluster)");
    return;
  }
  CheckCuda(Driver().LaunchKernel(function, shape.grid[0], shape.grid[1], shape.grid[2],
                                  shape.block[0], shape.block[1], shape.block[2],
                                  shape.dynamic_smem, stream.get(), arguments.data(), nullptr),
            "cuLaunchKernel");
}

void AllowDynamicSharedMemory(CUfunction function, unsigned bytes) {
  // Static shared memory counts toward the 48 KiB a launch gets without asking too, so 48 KiB of
  // dynamic memory beside a few static bytes already needs the attribute; setting it is
  // harmless when it is not needed.
  if (bytes == 0) return;
  CheckCuda(Driver().FuncSetAttribute(function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                      static_cast<int>(bytes)),
            "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
}

int MaxActiveBlocksPerSm(CUfunction function, unsigned threads, unsigned dynamic_smem) {
  int blocks = 0;
  CheckCuda(Driver().OccupancyMaxActiveBlocksPerMultiprocessor(
                &blocks, function, static_cast<int>(threads), dynamic_smem),
            "cuOccupancyMaxActiveBlocksPerMultiprocessor");
  return blocks;
}

}  // namespace evo
