#pragma once

#include <cuda.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/error.h"
#include "kernel_templates/arch.h"

namespace evo {

// No usable GPU driver on this machine: libcuda.so.1 is missing or cuInit failed.
class NoGpuError : public Error {
 public:
  using Error::Error;
};

// A CUDA call failed; `result` lets the evaluator tell context-poisoning errors from others.
class CudaError : public Error {
 public:
  CudaError(CUresult result, const std::string& message) : Error(message), result_(result) {}
  CUresult result() const { return result_; }

 private:
  CUresult result_;
};

// The Driver API entry points evo uses, resolved from libcuda.so.1 at run time so that evo runs
// and compiles on machines without a driver.
struct DriverApi {
  decltype(&::cuInit) Init = nullptr;
  decltype(&::cuDriverGetVersion) DriverGetVersion = nullptr;
  decltype(&::cuDeviceGetCount) DeviceGetCount = nullptr;
  decltype(&::cuDeviceGet) DeviceGet = nullptr;
  decltype(&::cuDeviceGetName) DeviceGetName = nullptr;
  decltype(&::cuDeviceGetAttribute) DeviceGetAttribute = nullptr;
  decltype(&::cuDeviceTotalMem) DeviceTotalMem = nullptr;
  decltype(&::cuDeviceGetUuid) DeviceGetUuid = nullptr;  // null on drivers without it
  decltype(&::cuGetErrorName) GetErrorName = nullptr;
  decltype(&::cuGetErrorString) GetErrorString = nullptr;
  decltype(&::cuDevicePrimaryCtxRetain) DevicePrimaryCtxRetain = nullptr;
  decltype(&::cuDevicePrimaryCtxRelease) DevicePrimaryCtxRelease = nullptr;
  decltype(&::cuCtxSetCurrent) CtxSetCurrent = nullptr;
  decltype(&::cuCtxSynchronize) CtxSynchronize = nullptr;
  decltype(&::cuModuleLoadData) ModuleLoadData = nullptr;
  decltype(&::cuModuleUnload) ModuleUnload = nullptr;
  decltype(&::cuModuleGetFunction) ModuleGetFunction = nullptr;
  decltype(&::cuFuncSetAttribute) FuncSetAttribute = nullptr;
  decltype(&::cuFuncGetAttribute) FuncGetAttribute = nullptr;
  decltype(&::cuOccupancyMaxActiveBlocksPerMultiprocessor)
      OccupancyMaxActiveBlocksPerMultiprocessor = nullptr;
  decltype(&::cuLaunchKernel) LaunchKernel = nullptr;
  decltype(&::cuLaunchKernelEx) LaunchKernelEx = nullptr;  // thread-block clusters
  decltype(&::cuMemAlloc) MemAlloc = nullptr;
  decltype(&::cuMemFree) MemFree = nullptr;
  decltype(&::cuMemcpyHtoD) MemcpyHtoD = nullptr;
  decltype(&::cuMemcpyDtoH) MemcpyDtoH = nullptr;
  decltype(&::cuMemsetD8Async) MemsetD8Async = nullptr;
  decltype(&::cuMemsetD32Async) MemsetD32Async = nullptr;
  decltype(&::cuStreamCreate) StreamCreate = nullptr;
  decltype(&::cuStreamDestroy) StreamDestroy = nullptr;
  decltype(&::cuStreamSynchronize) StreamSynchronize = nullptr;
  decltype(&::cuStreamQuery) StreamQuery = nullptr;
  decltype(&::cuEventCreate) EventCreate = nullptr;
  decltype(&::cuEventDestroy) EventDestroy = nullptr;
  decltype(&::cuEventRecord) EventRecord = nullptr;
  decltype(&::cuEventSynchronize) EventSynchronize = nullptr;
  decltype(&::cuEventElapsedTime) EventElapsedTime = nullptr;
  decltype(&::cuStreamBeginCapture) StreamBeginCapture = nullptr;
  decltype(&::cuStreamEndCapture) StreamEndCapture = nullptr;
  decltype(&::cuGraphInstantiateWithFlags) GraphInstantiateWithFlags = nullptr;
  decltype(&::cuGraphLaunch) GraphLaunch = nullptr;
  decltype(&::cuGraphDestroy) GraphDestroy = nullptr;
  decltype(&::cuGraphExecDestroy) GraphExecDestroy = nullptr;
  decltype(&::cuTensorMapEncodeTiled) TensorMapEncodeTiled = nullptr;
};

// Where a driver is installed, NVRTC serves repeated compiles from the driver's compute cache and
// then prints no ptxas report, which is where every resource figure comes from; the driver reads
// the switch when it initializes. evo keeps its own cache of whole results, so the driver's is
// turned off before the driver is loaded and before any compile.
void DisableCudaComputeCache();

// Loads the driver and calls cuInit once; throws NoGpuError saying why when that fails.
const DriverApi& Driver();

// "CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered)".
std::string DescribeCudaError(CUresult result);

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  std::string uuid;  // "GPU-8c2a...", as nvidia-smi prints it; empty where the driver cannot say
  int cc_major = 0;
  int cc_minor = 0;
  int sm_count = 0;
  int64_t max_smem_per_block_optin = 0;
  int64_t max_smem_per_sm = 0;
  int64_t regs_per_block = 0;
  int64_t max_threads_per_block = 0;
  int64_t l2_bytes = 0;
  int64_t global_memory_bytes = 0;
  int sm_clock_khz = 0;
  int memory_clock_khz = 0;

  std::string arch() const { return ArchNameForComputeCapability(cc_major, cc_minor); }
  // The compile gate's limits, read off this device rather than from evo's table.
  ArchInfo arch_info() const;
};

// Throws CudaError naming `what` and the CUDA error unless `result` is CUDA_SUCCESS.
void CheckCuda(CUresult result, const char* what);

int DriverVersion();  // e.g. 13000
std::vector<DeviceInfo> QueryDevices();

}  // namespace evo
