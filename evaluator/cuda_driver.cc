#include "evaluator/cuda_driver.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>

namespace evo {
namespace {

template <typename Function>
void Resolve(void* library, const char* symbol, Function& function) {
  function = reinterpret_cast<Function>(::dlsym(library, symbol));
  if (function == nullptr) {
    throw NoGpuError(std::string("the GPU driver (libcuda.so.1) lacks ") + symbol +
                     "; it is older than evo needs");
  }
}

DriverApi LoadDriver() {
  DisableCudaComputeCache();
  // Kept loaded for the life of the process: CUDA objects may outlive any scope here.
  void* library = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = ::dlerror();
    throw NoGpuError(std::string("no GPU: the CUDA driver library libcuda.so.1 could not be "
                                 "loaded (") +
                     (why ? why : "unknown reason") + ")");
  }
  DriverApi api;
  Resolve(library, "cuInit", api.Init);
  Resolve(library, "cuDriverGetVersion", api.DriverGetVersion);
  Resolve(library, "cuDeviceGetCount", api.DeviceGetCount);
  Resolve(library, "cuDeviceGet", api.DeviceGet);
  Resolve(library, "cuDeviceGetName", api.DeviceGetName);
  Resolve(library, "cuDeviceGetAttribute", api.DeviceGetAttribute);
  Resolve(library, "cuDeviceTotalMem_v2", api.DeviceTotalMem);
  // Optional: a GPU's UUID only labels the candidates it measured.
  api.DeviceGetUuid =
      reinterpret_cast<decltype(api.DeviceGetUuid)>(::dlsym(library, "cuDeviceGetUuid_v2"));
  Resolve(library, "cuGetErrorName", api.GetErrorName);
  Resolve(library, "cuGetErrorString", api.GetErrorString);
  Resolve(library, "cuDevicePrimaryCtxRetain", api.DevicePrimaryCtxRetain);
  Resolve(library, "cuDevicePrimaryCtxRelease_v2", api.DevicePrimaryCtxRelease);
  Resolve(library, "cuCtxSetCurrent", api.CtxSetCurrent);
  Resolve(library, "cuCtxSynchronize", api.CtxSynchronize);
  Resolve(library, "cuModuleLoadData", api.ModuleLoadData);
  Resolve(library, "cuModuleUnload", api.ModuleUnload);
  Resolve(library, "cuModuleGetFunction", api.ModuleGetFunction);
  Resolve(library, "cuFuncSetAttribute", api.FuncSetAttribute);
  Resolve(library, "cuFuncGetAttribute", api.FuncGetAttribute);
  Resolve(library, "cuOccupancyMaxActiveBlocksPerMultiprocessor",
          api.OccupancyMaxActiveBlocksPerMultiprocessor);
  Resolve(library, "cuLaunchKernel", api.LaunchKernel);
  Resolve(library, "cuLaunchKernelEx", api.LaunchKernelEx);
  Resolve(library, "cuMemAlloc_v2", api.MemAlloc);
  Resolve(library, "cuMemFree_v2", api.MemFree);
  Resolve(library, "cuMemcpyHtoD_v2", api.MemcpyHtoD);
  Resolve(library, "cuMemcpyDtoH_v2", api.MemcpyDtoH);
  Resolve(library, "cuMemsetD8Async", api.MemsetD8Async);
  Resolve(library, "cuMemsetD32Async", api.MemsetD32Async);
  Resolve(library, "cuStreamCreate", api.StreamCreate);
  Resolve(library, "cuStreamDestroy_v2", api.StreamDestroy);
  Resolve(library, "cuStreamSynchronize", api.StreamSynchronize);
  Resolve(library, "cuStreamQuery", api.StreamQuery);
  Resolve(library, "cuEventCreate", api.EventCreate);
  Resolve(library, "cuEventDestroy_v2", api.EventDestroy);
  Resolve(library, "cuEventRecord", api.EventRecord);
  Resolve(library, "cuEventSynchronize", api.EventSynchronize);
  Resolve(library, "cuEventElapsedTime_v2", api.EventElapsedTime);
  Resolve(library, "cuStreamBeginCapture_v2", api.StreamBeginCapture);
  Resolve(library, "cuStreamEndCapture", api.StreamEndCapture);
  Resolve(library, "cuGraphInstantiateWithFlags", api.GraphInstantiateWithFlags);
  Resolve(library, "cuGraphLaunch", api.GraphLaunch);
  Resolve(library, "cuGraphDestroy", api.GraphDestroy);
  Resolve(library, "cuGraphExecDestroy", api.GraphExecDestroy);
  Resolve(library, "cuTensorMapEncodeTiled", api.TensorMapEncodeTiled);
  const CUresult result = api.Init(0);
  if (result != CUDA_SUCCESS) {
    const char* name = nullptr;
    api.GetErrorName(result, &name);
    throw NoGpuError(std::string("no GPU: cuInit failed with ") +
                     (name ? name : "an unknown error"));
  }
  return api;
}

// As nvidia-smi prints it: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx.
std::string FormatUuid(const CUuuid& uuid) {
  std::string text = "GPU-";
  for (int i = 0; i < 16; ++i) {
    char hex[3];
    std::snprintf(hex, sizeof(hex), "%02x", static_cast<unsigned char>(uuid.bytes[i]));
    text += hex;
    if (i == 3 || i == 5 || i == 7 || i == 9) text += '-';
  }
  return text;
}

}  // namespace

void DisableCudaComputeCache() {
  static std::once_flag once;
  std::call_once(once, [] { ::setenv("CUDA_CACHE_DISABLE", "1", 1); });
}

void CheckCuda(CUresult result, const char* what) {
  if (result != CUDA_SUCCESS) {
    throw CudaError(result, std::string(what) + ": " + DescribeCudaError(result));
  }
}

const DriverApi& Driver() {
  // A failed load is retried on the next call rather than cached, so the message stays exact.
  static std::mutex mutex;
  static std::optional<DriverApi> api;
  std::lock_guard lock(mutex);
  if (!api) api = LoadDriver();
  return *api;
}

std::string DescribeCudaError(CUresult result) {
  const DriverApi& api = Driver();
  const char* name = nullptr;
  const char* text = nullptr;
  api.GetErrorName(result, &name);
  api.GetErrorString(result, &text);
  return std::string(name ? name : "CUDA error " + std::to_string(static_cast<int>(result))) +
         " (" + (text ? text : "no description") + ")";
}

ArchInfo DeviceInfo::arch_info() const {
  ArchInfo info;
  info.name = arch();
  info.sm = cc_major * 10 + cc_minor;
  info.max_smem_per_block_optin = max_smem_per_block_optin;
  info.regs_per_block = regs_per_block;
  info.max_threads_per_block = max_threads_per_block;
  return info;
}

int DriverVersion() {
  int version = 0;
  CheckCuda(Driver().DriverGetVersion(&version), "cuDriverGetVersion");
  return version;
}

std::vector<DeviceInfo> QueryDevices() {
  const DriverApi& api = Driver();
  int count = 0;
  CheckCuda(api.DeviceGetCount(&count), "cuDeviceGetCount");
  std::vector<DeviceInfo> devices;
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    CUdevice device = 0;
    CheckCuda(api.DeviceGet(&device, ordinal), "cuDeviceGet");
    DeviceInfo info;
    info.ordinal = ordinal;
    char name[256] = {};
    CheckCuda(api.DeviceGetName(name, sizeof(name), device), "cuDeviceGetName");
    info.name = name;
    CUuuid uuid{};
    if (api.DeviceGetUuid != nullptr && api.DeviceGetUuid(&uuid, device) == CUDA_SUCCESS) {
      info.uuid = FormatUuid(uuid);
    }
    auto attribute = [&](CUdevice_attribute which) {
      int value = 0;
      CheckCuda(api.DeviceGetAttribute(&value, which, device), "cuDeviceGetAttribute");
      return value;
    };
    info.cc_major = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    info.cc_minor = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    info.sm_count = attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    info.max_smem_per_block_optin =
        attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
    info.max_smem_per_sm = attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
    info.regs_per_block = attribute(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK);
    info.max_threads_per_block = attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
    info.l2_bytes = attribute(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
    info.sm_clock_khz = attribute(CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
    info.memory_clock_khz = attribute(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE);
    size_t bytes = 0;
    CheckCuda(api.DeviceTotalMem(&bytes, device), "cuDeviceTotalMem");
    info.global_memory_bytes = static_cast<int64_t>(bytes);
    devices.push_back(std::move(info));
  }
  return devices;
}

}  // namespace evo
