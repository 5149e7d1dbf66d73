#pragma once

#include <cuda.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/error.h"
#include "evaluator/arch.h"

namespace evo {

// No usable GPU driver on this machine: libcuda.so.1 is missing or cuInit failed.
class NoGpuError : public Error {
 public:
  using Error::Error;
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
  decltype(&::cuGetErrorName) GetErrorName = nullptr;
  decltype(&::cuGetErrorString) GetErrorString = nullptr;
};

// Loads the driver and calls cuInit once; throws NoGpuError saying why when that fails.
const DriverApi& Driver();

// "CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered)".
std::string DescribeCudaError(CUresult result);

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
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

int DriverVersion();  // e.g. 13000
std::vector<DeviceInfo> QueryDevices();

}  // namespace evo
