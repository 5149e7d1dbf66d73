#include "evaluator/cuda_objects.h"

#include <catch2/catch.hpp>

#include "evaluator/cuda_driver.h"
#include "evaluator/nvrtc_compiler.h"
#include "tests/test_support.h"

namespace evo {
namespace {

TEST_CASE("driver objects: a JIT-compiled kernel runs and is timed with events", "[gpu]") {
  if (!test::HaveGpuDriver()) {
    WARN("skipped: no GPU driver (libcuda.so.1) on this machine");
    return;
  }
  const std::vector<DeviceInfo> devices = QueryDevices();
  REQUIRE_FALSE(devices.empty());
  const DeviceInfo& device = devices[0];
  CHECK(device.sm_count > 0);
  CHECK(device.max_smem_per_block_optin >= 48 * 1024);

  NvrtcCompiler compiler;
  const CompileResult compiled = compiler.Compile(
      {R"(extern "C" __global__ void axpy(float a, const float* x, float* y, int n) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) y[i] = a * x[i] + y[i];
          })",
       "axpy.cu",
       device.arch(),
       {},
       {}});
  REQUIRE(compiled.ok);

  Context context(0);
  Module module(compiled.cubin);
  CUfunction axpy = module.Function("axpy");
  CHECK_THROWS_AS(module.Function("missing"), CudaError);

  const int n = 1 << 20;
  std::vector<float> x(n), y(n);
  for (int i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i % 97);
    y[i] = 1.0f;
  }
  DeviceBuffer dx(n * sizeof(float)), dy(n * sizeof(float));
  dx.Upload(x.data(), dx.bytes());
  dy.Upload(y.data(), dy.bytes());
  Stream stream;
  Event start, stop;
  float a = 2.0f;
  CUdeviceptr px = dx.get(), py = dy.get();
  int count = n;
  std::vector<void*> args = {&a, &px, &py, &count};
  LaunchShape shape;
  shape.grid[0] = (n + 255) / 256;
  shape.block[0] = 256;
  start.Record(stream);
  Launch(axpy, shape, stream, args);
  stop.Record(stream);
  stop.Synchronize();
  CHECK(stop.ElapsedSince(start) > 0);
  dy.Download(y.data(), dy.bytes());
  for (int i : {0, 1, 96, 97, n - 1}) CHECK(y[i] == 2.0f * static_cast<float>(i % 97) + 1.0f);
  CHECK(MaxActiveBlocksPerSm(axpy, 256, 0) >= 1);
}

}  // namespace
}  // namespace evo
