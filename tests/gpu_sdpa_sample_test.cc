#include <catch2/catch.hpp>

#include "evaluator/compile_gate.h"
#include "evaluator/gpu_gates.h"
#include "evaluator/nvrtc_compiler.h"
#include "kernel_templates/template_library.h"
#include "tests/test_support.h"

namespace evo {
namespace {

TEST_CASE("sdpa_fp16 passes the correctness gate across a sample of configurations and shapes",
          "[gpu]") {
  if (!test::HaveGpuDriver()) {
    WARN("skipped: no GPU driver (libcuda.so.1) on this machine");
    return;
  }
  const TemplateLibrary library = TemplateLibrary::Load({});
  const KernelTemplate& sdpa = library.Find("sdpa_fp16");
  const Manifest& manifest = sdpa.manifest;
  NvrtcCompiler compiler;
  GpuGates gates(0, compiler);
  const ArchInfo arch = gates.device().arch_info();

  const char* configs[] = {
      "",
      "BLOCK_M=128 BLOCK_N=64 NUM_WARPS=8 STAGES=3",
      "BLOCK_M=64 BLOCK_N=32 NUM_WARPS=4 STAGES=1 FAST_EXP=0",
      "BLOCK_M=16 BLOCK_N=16 NUM_WARPS=1 STAGES=4",
      "BLOCK_M=128 BLOCK_N=128 NUM_WARPS=8 STAGES=2 PERSISTENT=1",
      "BLOCK_M=32 BLOCK_N=64 NUM_WARPS=2 STAGES=2 PERSISTENT=1",
      "BLOCK_M=64 BLOCK_N=64 NUM_WARPS=4 STAGES=2 WARP_SPECIALIZED=1",
      // At D=64, exactly 48 KiB of dynamic shared memory beside the static mbarriers.
      "BLOCK_M=128 BLOCK_N=64 NUM_WARPS=4 STAGES=2 WARP_SPECIALIZED=1",
      "BLOCK_M=64 BLOCK_N=32 NUM_WARPS=4 STAGES=3 WARP_SPECIALIZED=1 PERSISTENT=1",
      "BLOCK_M=32 BLOCK_N=16 NUM_WARPS=2 STAGES=4 WARP_SPECIALIZED=1 FAST_EXP=0",
  };
  // B, H, S: every length of the list and B*H from 1 to 128, spread over the configs.
  const int64_t shapes[][3] = {{1, 1, 1},    {1, 2, 17},   {2, 4, 509},  {2, 8, 512},
                               {1, 3, 1000}, {4, 8, 2048}, {8, 16, 512}, {1, 2, 4096}};
  int evaluated = 0;
  int warp_specialized = 0;
  int head_dim_256 = 0;
  size_t shape_index = 0;
  for (const char* settings : configs) {
    const Genome genome = test::GenomeFromSettings(manifest, settings);
    for (int64_t d : {64, 128, 256}) {
      for (int64_t causal : {0, 1}) {
        // Two shapes per (config, D, causal), walking round the list.
        for (int k = 0; k < 2; ++k) {
          const auto& shape = shapes[shape_index++ % std::size(shapes)];
          const Problem problem =
              test::AttentionProblem(manifest, shape[0], shape[1], shape[2], shape[2], d, causal);
          INFO(settings << " D=" << d << " causal=" << causal << " B=" << shape[0]
                        << " H=" << shape[1] << " S=" << shape[2]);
          const CompileOutcome compiled = RunCompileGate(sdpa, genome, problem, arch, compiler, {});
          if (compiled.status != Status::kCompiled) {
            // Too large for this arch's shared memory or registers: the gate says so.
            CHECK((compiled.status == Status::kInvalid ||
                   compiled.status == Status::kResourceReject));
            continue;
          }
          const GpuVerdict verdict =
              gates.Evaluate(sdpa, genome, problem, compiled.compiled.cubin, true, {});
          INFO(verdict.correctness.failure << verdict.error);
          CHECK(verdict.status == Status::kMeasured);
          CHECK(verdict.correctness.passed);
          CHECK(verdict.correctness.worst.max_abs_error < 0.005);
          ++evaluated;
          warp_specialized += genome.at("WARP_SPECIALIZED") == 1 ? 1 : 0;
          head_dim_256 += d == 256 ? 1 : 0;
        }
      }
    }
  }
  CHECK(evaluated >= 60);
  CHECK(warp_specialized >= 12);
  CHECK(head_dim_256 >= 8);
}

}  // namespace
}  // namespace evo
