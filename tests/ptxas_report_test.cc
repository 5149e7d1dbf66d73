#include "evaluator/ptxas_report.h"

#include <catch2/catch.hpp>

#include "evaluator/candidate_outcome.h"
#include "evaluator/nvrtc_compiler.h"

namespace evo {
namespace {

TEST_CASE("a ptxas report with several functions is read per entry", "[ptxas]") {
  // As NVRTC 13.0 prints it, with a non-entry function's properties between the entries.
  const std::string log =
      "t.cu(3): warning #177-D: variable \"x\" was declared but never referenced\n"
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function 'big' for 'sm_90'\n"
      "ptxas info    : Function properties for big\n"
      "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 10 registers, used 1 barriers, 320000 bytes smem\n"
      "ptxas info    : Compile time = 5.899 ms\n"
      "ptxas info    : Function properties for helper\n"
      "ptxas         .     16 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads\n"
      "ptxas info    : Compiling entry function 'k' for 'sm_80'\n"
      "ptxas info    : Function properties for k\n"
      "ptxas         .     4704 bytes stack frame, 5052 bytes spill stores, 13712 bytes spill "
      "loads\n"
      "ptxas info    : Used 64 registers, used 0 barriers, 4704 bytes cumulative stack size, "
      "384 bytes cmem[0]\n";
  const auto kernels = ParsePtxasReport(log);
  REQUIRE(kernels.size() == 2);
  const KernelResources* big = FindKernel(kernels, "big");
  REQUIRE(big != nullptr);
  CHECK(big->arch == "sm_90");
  CHECK(big->registers == 10);
  CHECK(big->barriers == 1);
  CHECK(big->smem_static == 320000);
  CHECK_FALSE(big->spills());
  const KernelResources* k = FindKernel(kernels, "k");
  REQUIRE(k != nullptr);
  CHECK(k->arch == "sm_80");
  CHECK(k->registers == 64);
  CHECK(k->stack_frame == 4704);
  CHECK(k->spill_stores == 5052);
  CHECK(k->spill_loads == 13712);
  CHECK(k->cumulative_stack == 4704);
  CHECK(k->cmem0 == 384);
  CHECK(k->smem_static == 0);
  CHECK(FindKernel(kernels, "helper") == nullptr);
}

TEST_CASE("ptxas's performance-loss notes are kept with the function they name", "[ptxas]") {
  // As NVRTC 13.0 printed it for a Hopper kernel whose wgmma ptxas serialized: the note comes
  // before the entry it is about, and another entry sits between.
  const std::string log =
      "ptxas info    : (C7514) Potential Performance Loss: wgmma.mma_async instructions are "
      "serialized due to non wgmma instructions reading accumulator registers of  a wgmma "
      "between start and end of the pipeline stage in the function 'fwd'\n"
      "ptxas info    : Compiling entry function 'combine' for 'sm_90a'\n"
      "ptxas info    : Function properties for combine\n"
      "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 20 registers, used 0 barriers\n"
      "ptxas info    : Compiling entry function 'fwd' for 'sm_90a'\n"
      "ptxas info    : Function properties for fwd\n"
      "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 168 registers, used 16 barriers\n"
      "ptxas info    : Potential Performance Loss: a note without a function\n";
  const auto kernels = ParsePtxasReport(log);
  REQUIRE(kernels.size() == 2);
  const KernelResources* fwd = FindKernel(kernels, "fwd");
  REQUIRE(fwd != nullptr);
  CHECK(fwd->registers == 168);
  REQUIRE(fwd->performance_losses.size() == 1);
  CHECK(fwd->performance_losses[0] ==
        "(C7514) wgmma.mma_async instructions are serialized due to non wgmma instructions "
        "reading accumulator registers of  a wgmma between start and end of the pipeline stage");
  CHECK(FindKernel(kernels, "combine")->performance_losses.empty());

  // Stored (outcomes, recordings, the compile cache) and read back; absent where there is none.
  CHECK(KernelResourcesFromJson(KernelResourcesToJson(*fwd)).performance_losses ==
        fwd->performance_losses);
  CHECK_FALSE(
      KernelResourcesToJson(*FindKernel(kernels, "combine")).contains("performance_losses"));
}

TEST_CASE("ptxas figures read from real NVRTC output", "[ptxas][nvrtc]") {
  NvrtcCompiler compiler;
  SECTION("registers, barriers and static shared memory") {
    const CompileResult result = compiler.Compile({R"(extern "C" __global__ void staged(float* x) {
              __shared__ float tile[1024];
              tile[threadIdx.x] = x[threadIdx.x];
              __syncthreads();
              x[threadIdx.x] = tile[1023 - threadIdx.x];
            })",
                                                   "staged.cu",
                                                   "sm_90",
                                                   {},
                                                   {}});
    REQUIRE(result.ok);
    CHECK_FALSE(result.cubin.empty());
    const KernelResources* staged = FindKernel(result.kernels, "staged");
    REQUIRE(staged != nullptr);
    CHECK(staged->arch == "sm_90");
    CHECK(staged->smem_static == 4096);
    CHECK(staged->barriers == 1);
    CHECK(staged->registers > 0);
    CHECK_FALSE(staged->spills());
  }
  SECTION("a kernel made to spill") {
    // 200 live floats under a 64-register cap (1024 threads per block) cannot stay in registers.
    const CompileResult result = compiler.Compile(
        {R"(extern "C" __global__ void __launch_bounds__(1024) spills(float* x, int n) {
              float acc[200];
              #pragma unroll
              for (int i = 0; i < 200; ++i) acc[i] = x[threadIdx.x + i * n];
              float s = 0;
              #pragma unroll
              for (int j = 0; j < 200; ++j)
                for (int i = 0; i < 200; ++i) s += acc[i] * acc[(i + j) % 200];
              x[threadIdx.x] = s;
            })",
         "spills.cu",
         "sm_90",
         {},
         {}});
    REQUIRE(result.ok);
    const KernelResources* spills = FindKernel(result.kernels, "spills");
    REQUIRE(spills != nullptr);
    CHECK(spills->registers <= 64);
    CHECK(spills->spill_stores > 0);
    CHECK(spills->spill_loads > 0);
    CHECK(spills->stack_frame > 0);
  }
  SECTION("static shared memory over the limit fails with the figure in the report") {
    const CompileResult result = compiler.Compile({R"(extern "C" __global__ void hoard(float* x) {
              __shared__ float s[80000];
              s[threadIdx.x] = x[threadIdx.x];
              __syncthreads();
              x[0] = s[static_cast<int>(x[1])];
            })",
                                                   "hoard.cu",
                                                   "sm_90",
                                                   {},
                                                   {}});
    CHECK_FALSE(result.ok);
    CHECK(result.cubin.empty());
    const KernelResources* hoard = FindKernel(result.kernels, "hoard");
    REQUIRE(hoard != nullptr);
    CHECK(hoard->smem_static == 320000);
  }
}

}  // namespace
}  // namespace evo
