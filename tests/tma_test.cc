// Tensor maps as manifest arguments: validated when the manifest loads and when a configuration
// is compiled, described for exports, and (on a GPU) built by the worker and read by a kernel's
// bulk tensor copies through the gates.

#include <catch2/catch.hpp>
#include <string>

#include "common/error.h"
#include "common/files.h"
#include "evaluator/compile_gate.h"
#include "evaluator/cuda_driver.h"
#include "evaluator/gpu_gates.h"
#include "evaluator/nvrtc_compiler.h"
#include "kernel_templates/configuration.h"
#include "kernel_templates/template_library.h"
#include "kernel_templates/tensor_map.h"
#include "tests/test_support.h"

namespace evo {
namespace {

// A template that copies X to Y through shared memory, a tile of ROWS rows of 64 fp16 values at a
// time: the accelerator loads the tile with the 128-byte swizzle, the threads undo it.
const char* kManifest = R"json({
  "name": "tma_copy",
  "version": 1,
  "description": "a copy through the tensor memory accelerator, for the tests",
  "min_sm": 90,
  "max_sm": 90,
  "arch_specific": true,
  "knobs": [{"name": "ROWS", "values": [32, 64, 512], "default": 64}],
  "problem": [{"name": "R", "min": 1, "default": 200}],
  "constraints": [],
  "kernel": {
    "source": "tma_copy.cu", "entry": "tma_copy",
    "grid": ["ceil_div(R, ROWS)", "1", "1"], "block": ["128", "1", "1"],
    "dynamic_smem": "ROWS * 128 + 1024",
    "args": [
      {"name": "X", "kind": "input", "dtype": "f16", "shape": ["R", "64"]},
      {"name": "X_map", "kind": "tensor_map", "tensor": "X", "box": ["64", "ROWS"],
       "swizzle": "SWIZZLE_MODE"},
      {"name": "Y", "kind": "output", "dtype": "f16", "shape": ["R", "64"]},
      {"name": "R", "kind": "scalar", "dtype": "i32", "value": "R"}
    ]
  },
  "reference": {
    "source": "tma_copy.cu", "entry": "copy_reference",
    "grid": ["ceil_div(R * 64, 256)", "1", "1"], "block": ["256", "1", "1"], "dynamic_smem": "0",
    "args": [
      {"name": "X", "kind": "input", "dtype": "f16", "shape": ["R", "64"]},
      {"name": "Y", "kind": "output", "dtype": "f32", "shape": ["R", "64"]},
      {"name": "n", "kind": "scalar", "dtype": "i32", "value": "R * 64"}
    ]
  },
  "correctness": {"seeds": 2, "atol": 1e-6, "rtol": 0, "problems": [{"R": "R + 17"}]}
})json";

const char* kSource = R"cuda(#include "evo/core.cuh"
#include "evo/mbarrier.cuh"
#include "evo/tma.cuh"

#ifdef ROWS  // the reference is compiled without the knobs
extern "C" __global__ void tma_copy(const unsigned short* __restrict__ X,
                                    const __grid_constant__ evo::TensorMap X_map,
                                    unsigned short* __restrict__ Y, int R) {
  extern __shared__ unsigned char smem[];
  __shared__ __align__(8) unsigned long long barrier;
  const unsigned tile = (evo::smem_u32(smem) + 1023) & ~1023u;
  const unsigned bar = evo::smem_u32(&barrier);
  const int row0 = blockIdx.x * ROWS;
  if (threadIdx.x == 0) {
    evo::prefetch_tensor_map(X_map);
    evo::mbar_init(bar, 1);
    evo::fence_mbarrier_init();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    // The whole box counts, rows past R included (the accelerator writes them as zeros).
    evo::mbar_arrive_expect_tx(bar, ROWS * 128);
    evo::tma_load_2d(tile, X_map, 0, row0, bar);
  }
  evo::mbar_wait(bar, 0);
  for (int i = threadIdx.x; i < ROWS * 8; i += blockDim.x) {
    const int r = i / 8;
    const int c = i % 8;
    if (row0 + r < R) {
      unsigned v[4];
      evo::ld_shared_v4(v, tile + evo::swizzle_128b(r, c));
      evo::st_global_v4(Y + static_cast<long long>(row0 + r) * 64 + c * 8, v);
    }
  }
}
#endif

extern "C" __global__ void copy_reference(const unsigned short* __restrict__ X,
                                          float* __restrict__ Y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) Y[i] = evo::half_to_float(X[i]);
}
)cuda";

// The template in `folder`, its map under `swizzle` (the kernel undoes the 128-byte one).
void WriteTmaCopy(const std::filesystem::path& folder, const std::string& swizzle) {
  std::string manifest = kManifest;
  manifest.replace(manifest.find("SWIZZLE_MODE"), 12, swizzle);
  test::WriteFile(folder / "manifest.json", manifest);
  test::WriteFile(folder / "tma_copy.cu", kSource);
}

TEST_CASE("a tensor map's description follows its tensor and box; bad boxes are refused by name",
          "[manifest]") {
  test::TempDir dir;
  WriteTmaCopy(dir.path(), "128B");
  const TemplateLibrary library = TemplateLibrary::Load({dir.path()});
  const Manifest& manifest = library.Find("tma_copy").manifest;
  const KernelArgSpec& map_arg = manifest.main_kernel().args[1];
  REQUIRE(map_arg.map);
  Bindings bindings = {{"R", 200}, {"ROWS", 64}};
  const TensorMapDescription map = DescribeTensorMap(map_arg, manifest.main_kernel(), bindings);
  CHECK(map.tensor == "X");
  CHECK(map.dtype == "f16");
  CHECK(map.dims == std::vector<uint64_t>{64, 200});  // innermost first
  CHECK(map.strides == std::vector<uint64_t>{128});   // bytes per row
  CHECK(map.box == std::vector<uint32_t>{64, 64});
  CHECK(map.element_strides == std::vector<uint32_t>{1, 1});
  const nlohmann::json json = TensorMapToJson(map);
  for (const char* key : {"dtype", "dims", "strides_bytes", "box", "element_strides", "swizzle",
                          "interleave", "l2_promotion", "fill"}) {
    CHECK(json.contains(key));
  }
  CHECK(json.at("swizzle") == "128B");
  CHECK(json.at("fill") == "zero");
  // A box over 256 rows is refused, and so is a configuration of it at the compile gate.
  bindings["ROWS"] = 512;
  CHECK_THROWS_WITH(DescribeTensorMap(map_arg, manifest.main_kernel(), bindings),
                    Catch::Contains("tensor map X_map: box[1] is 512, outside [1, 256]"));
  NvrtcCompiler compiler;
  Genome genome = DefaultGenome(manifest);
  genome["ROWS"] = 512;
  const CompileOutcome refused =
      RunCompileGate(library.Find("tma_copy"), genome, DefaultProblem(manifest),
                     ArchByName("sm_90"), compiler, {});
  CHECK(refused.status == Status::kInvalid);
  CHECK(refused.reason.find("box[1] is 512") != std::string::npos);
  // 64 fp16 values are 128 bytes: over the span of a 64-byte swizzle.
  test::TempDir narrow;
  WriteTmaCopy(narrow.path(), "64B");
  const TemplateLibrary narrow_library = TemplateLibrary::Load({narrow.path()});
  const Manifest& narrow_manifest = narrow_library.Find("tma_copy").manifest;
  CHECK_THROWS_WITH(DescribeTensorMap(narrow_manifest.main_kernel().args[1],
                                      narrow_manifest.main_kernel(), {{"R", 200}, {"ROWS", 64}}),
                    Catch::Contains("inner extent is 128 bytes, over the 64B swizzle's span"));
}

TEST_CASE("manifests with broken tensor maps are refused naming the field", "[manifest]") {
  const std::pair<std::string, std::string> cases[] = {
      {R"("tensor": "X")", R"("tensor": "Z")"},
      {R"("box": ["64", "ROWS"])", R"("box": ["64"])"},
      {R"("swizzle": "128B")", R"("swizzle": "96B")"},
      {R"("swizzle": "128B")", R"("swizzle": "128B", "dtype": "f16")"},
      {R"("kind": "input", "dtype": "f16", "shape": ["R", "64"]},
      {"name": "X_map")",
       R"("kind": "input", "dtype": "f16", "shape": ["R", "64"], "box": ["1"]},
      {"name": "X_map")"},
  };
  const char* messages[] = {
      "kernel.args[1].tensor: 'Z' is no tensor argument of this kernel",
      "kernel.args[1].box: 'X' has 2 dimensions, the box 1",
      "kernel.args[1].swizzle: '96B' is not one of none, 32B, 64B, 128B",
      "kernel.args[1].dtype: a tensor_map takes this from the tensor it describes",
      "kernel.args[0].box: only a tensor_map argument has this field",
  };
  for (size_t i = 0; i < std::size(cases); ++i) {
    INFO(messages[i]);
    test::TempDir dir;
    WriteTmaCopy(dir.path(), "128B");
    std::string manifest = evo::ReadFile(dir.path() / "manifest.json");
    const size_t at = manifest.find(cases[i].first);
    REQUIRE(at != std::string::npos);
    manifest.replace(at, cases[i].first.size(), cases[i].second);
    test::WriteFile(dir.path() / "manifest.json", manifest);
    CHECK_THROWS_WITH(TemplateLibrary::Load({dir.path()}), Catch::Contains(messages[i]));
  }
}

TEST_CASE("a kernel taking a tensor map compiles for sm_90a", "[nvrtc]") {
  test::TempDir dir;
  WriteTmaCopy(dir.path(), "128B");
  const TemplateLibrary library = TemplateLibrary::Load({dir.path()});
  const KernelTemplate& copy = library.Find("tma_copy");
  NvrtcCompiler compiler;
  const CompileOutcome compiled =
      RunCompileGate(copy, DefaultGenome(copy.manifest), DefaultProblem(copy.manifest),
                     ArchByName("sm_90"), compiler, {});
  INFO(compiled.reason << compiled.compiled.log);
  CHECK(compiled.status == Status::kCompiled);
  CHECK(compiled.target == "sm_90a");
}

TEST_CASE("the worker builds tensor maps: a TMA copy passes the gates, with a wrong swizzle not",
          "[gpu]") {
  if (!test::HaveGpuDriver()) {
    WARN("skipped: no GPU driver (libcuda.so.1) on this machine");
    return;
  }
  NvrtcCompiler compiler;
  GpuGates gates(0, compiler);
  if (gates.device().arch_info().sm != 90) {
    WARN("skipped: the tensor memory accelerator copy needs sm_90");
    return;
  }
  for (const char* swizzle : {"128B", "none"}) {
    test::TempDir dir;
    WriteTmaCopy(dir.path(), swizzle);
    const TemplateLibrary library = TemplateLibrary::Load({dir.path()});
    const KernelTemplate& copy = library.Find("tma_copy");
    for (int64_t rows : {32, 64}) {
      INFO("swizzle " << swizzle << ", ROWS=" << rows);
      Genome genome = DefaultGenome(copy.manifest);
      genome["ROWS"] = rows;
      const Problem problem = {{"R", 1000}};  // and 1017: partial tiles
      const CompileOutcome compiled =
          RunCompileGate(copy, genome, problem, gates.device().arch_info(), compiler, {});
      REQUIRE(compiled.status == Status::kCompiled);
      const GpuVerdict verdict =
          gates.Evaluate(copy, genome, problem, compiled.compiled.cubin, false, {});
      INFO(verdict.correctness.failure << verdict.error);
      // The kernel undoes the 128-byte swizzle: with a map that has none it reads the wrong
      // chunks, and the gate says so.
      CHECK(verdict.status ==
            (std::string(swizzle) == "128B" ? Status::kMeasured : Status::kIncorrect));
    }
  }
}

}  // namespace
}  // namespace evo
