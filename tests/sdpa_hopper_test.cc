// sdpa_hopper: its space compiled for sm_90a (NVRTC, any machine) or refused by a named
// constraint; its tensor maps; and on an H100 the gates across D, dtype, causal and odd lengths,
// with broken variants of its pipeline (a skipped wait, a refill before release, a wrong swizzle,
// a turn never passed) and of its merges and combines that must not pass.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/files.h"
#include "evaluator/compile_gate.h"
#include "evaluator/cuda_driver.h"
#include "evaluator/gpu_worker.h"
#include "evaluator/nvrtc_compiler.h"
#include "kernel_templates/arch.h"
#include "kernel_templates/configuration.h"
#include "kernel_templates/template_library.h"
#include "kernel_templates/tensor_map.h"
#include "tests/sdpa_variants.h"
#include "tests/test_support.h"

namespace evo {
namespace {

Problem HopperProblem(const Manifest& manifest, int64_t b, int64_t h, int64_t s_q, int64_t s_kv,
                      int64_t d, int64_t causal, int64_t bf16) {
  Problem problem = test::AttentionProblem(manifest, b, h, s_q, s_kv, d, causal);
  problem["BF16"] = bf16;
  return problem;
}

// A grouped (H_kv < H) problem.
Problem GroupedProblem(const Manifest& manifest, int64_t b, int64_t h, int64_t h_kv, int64_t s_q,
                       int64_t s_kv, int64_t d, int64_t causal, int64_t bf16) {
  Problem problem = HopperProblem(manifest, b, h, s_q, s_kv, d, causal, bf16);
  problem["H_kv"] = h_kv;
  CheckProblem(manifest, problem);
  return problem;
}

// Split-KV and grouped-head settings, each with the problem it is meant for (B, H, H_kv, S_q,
// S_kv, D, causal, bf16): decoding, chunked prefill and a causal prefill, every value of SPLITS,
// PACK_GQA and LAST_CTA_COMBINES, with the pipeline's other knobs varied around them.
struct SplitCase {
  const char* settings;
  int64_t problem[8];
};
const SplitCase kSplitCases[] = {
    {"SPLITS=2 TMA_STORE=0", {2, 8, 2, 1, 4000, 128, 0, 0}},
    {"SPLITS=4 LAST_CTA_COMBINES=1 TMA_STORE=0 PERSISTENT=1", {1, 8, 8, 1, 3001, 128, 0, 1}},
    {"SPLITS=8 PACK_GQA=1 LAST_CTA_COMBINES=1 TMA_STORE=0 NUM_CONSUMERS=1 PINGPONG=0",
     {2, 8, 2, 1, 4097, 128, 0, 0}},
    {"SPLITS=16 PACK_GQA=1 TMA_STORE=0 NUM_CONSUMERS=1 PINGPONG=0 STAGES=4 BLOCK_N=64",
     {1, 16, 4, 1, 8000, 64, 0, 0}},
    {"SPLITS=32 PACK_GQA=1 LAST_CTA_COMBINES=1 TMA_STORE=0 NUM_CONSUMERS=1 PINGPONG=0 BLOCK_N=64",
     {1, 32, 8, 1, 9000, 128, 0, 1}},
    {"PACK_GQA=1", {2, 8, 2, 16, 1000, 128, 0, 0}},
    {"PACK_GQA=1 NUM_CONSUMERS=3 PERSISTENT=1 TMA_STORE=0", {1, 8, 2, 100, 777, 64, 1, 0}},
    {"PACK_GQA=1 TMA_STORE=0 INTRA_OVERLAP=0", {2, 4, 1, 70, 333, 128, 1, 1}},
    {"SPLITS=4 PACK_GQA=1 LAST_CTA_COMBINES=1 TMA_STORE=0", {1, 8, 4, 300, 900, 128, 1, 0}},
    {"SPLITS=2 TMA_STORE=0 PERSISTENT=1 BLOCK_N=80", {2, 4, 2, 500, 1000, 256, 1, 0}},
    {"", {2, 8, 2, 200, 600, 128, 1, 1}},
    // KV_INTERLEAVE: chunked prefill with packed heads, a persistent walk whose tiles have odd
    // KV counts (three consumers), splits with an uneven last split, and D = 256.
    {"KV_INTERLEAVE=1 PINGPONG=0 PACK_GQA=1", {2, 8, 2, 16, 1000, 128, 0, 0}},
    {"KV_INTERLEAVE=1 PINGPONG=0 NUM_CONSUMERS=3 STAGES=3 BLOCK_N=64 PERSISTENT=1 TMA_STORE=0 "
     "PACK_GQA=1",
     {1, 8, 2, 100, 777, 64, 1, 1}},
    {"KV_INTERLEAVE=1 PINGPONG=0 SPLITS=4 TMA_STORE=0 INTRA_OVERLAP=0 STAGES=4 BLOCK_N=64 "
     "PACK_GQA=1 FAST_EXP=0",
     {2, 32, 8, 3, 5000, 128, 0, 0}},
    {"KV_INTERLEAVE=1 PINGPONG=0 BLOCK_N=64 TMA_STORE=0 RESCALE_UNDER_QK=1",
     {1, 4, 4, 300, 2000, 256, 1, 0}},
    {"KV_INTERLEAVE=1 PINGPONG=0 PACK_GQA=1 SOFTMAX_WARP_SYNC=1", {2, 8, 2, 16, 1000, 128, 0, 1}},
};

// STREAM_K settings, each with a problem (as kSplitCases) whose tiles are not a whole number of
// rounds of a 132-SM grid: whole rounds and a tail (256 and 180 tiles), a tail alone (64 tiles,
// one), causal tails of unequal tiles, spans of one KV tile (S_kv = 129), packed grouped heads,
// D = 64, 128 and 256, both dtypes.
const SplitCase kStreamKCases[] = {
    {"PERSISTENT=1 STREAM_K=1", {2, 8, 8, 2048, 2048, 128, 0, 0}},
    {"PERSISTENT=1 STREAM_K=1 NUM_CONSUMERS=3 BLOCK_N=64", {1, 16, 16, 3000, 3001, 64, 1, 1}},
    {"PERSISTENT=1 STREAM_K=1 BLOCK_N=64 TMA_STORE=0", {1, 4, 4, 1000, 5000, 256, 0, 0}},
    {"PERSISTENT=1 STREAM_K=1 PACK_GQA=1 PRODUCER_REGS=40 RESCALE_UNDER_QK=1",
     {2, 8, 2, 300, 700, 128, 1, 0}},
    {"PERSISTENT=1 STREAM_K=1 FAST_EXP=0 INTRA_OVERLAP=0 BLOCK_N=128",
     {3, 5, 5, 1500, 129, 128, 0, 1}},
    {"PERSISTENT=1 STREAM_K=1 STAGES=1 BLOCK_N=96", {1, 1, 1, 1, 4096, 64, 0, 0}},
    {"PERSISTENT=1 STREAM_K=1 BLOCK_N=160 TMA_STORE=0 PINGPONG=0",
     {4, 16, 16, 4096, 4096, 128, 0, 1}},
    // Not causal: the causal one spills 8 bytes with SOFTMAX_WARP_SYNC (none without), which
    // the compile gate refuses.
    {"PERSISTENT=1 STREAM_K=1 BLOCK_N=160 RESCALE_UNDER_QK=1 SOFTMAX_WARP_SYNC=1",
     {3, 5, 5, 1500, 1300, 128, 0, 1}},
};

// CAUSAL_PAIRS settings, each with a causal problem (as kSplitCases): pairs in fewer CTAs than
// the grid could have, whole rounds of pairs and a stream-K tail with a single tile left over
// (297 tiles), an odd tile count without STREAM_K (135 tiles), a tail alone, packed grouped heads
// with S_kv < S_q, D = 64, 128 and 256, both dtypes.
const SplitCase kCausalPairCases[] = {
    {"PERSISTENT=1 CAUSAL_PAIRS=1", {2, 8, 8, 2048, 2048, 128, 1, 0}},
    {"PERSISTENT=1 CAUSAL_PAIRS=1 STREAM_K=1", {1, 9, 9, 4200, 4200, 128, 1, 1}},
    {"PERSISTENT=1 CAUSAL_PAIRS=1 NUM_CONSUMERS=3 BLOCK_N=64 TMA_STORE=0",
     {3, 5, 5, 1700, 1700, 64, 1, 0}},
    {"PERSISTENT=1 CAUSAL_PAIRS=1 STREAM_K=1 TMA_STORE=0 RESCALE_UNDER_QK=1",
     {3, 5, 5, 1100, 1100, 128, 1, 1}},
    {"PERSISTENT=1 CAUSAL_PAIRS=1 PACK_GQA=1", {2, 8, 2, 700, 300, 128, 1, 0}},
    {"PERSISTENT=1 CAUSAL_PAIRS=1 BLOCK_N=80 TMA_STORE=0 RESCALE_UNDER_QK=1 SOFTMAX_WARP_SYNC=1",
     {1, 3, 3, 1000, 1000, 256, 1, 0}},
};

// CLUSTER_M=2 settings, each with a non-causal problem (as kSplitCases): heads with an odd count
// of query tiles (a padding tile past the end), a single query row (one real tile and its
// padding), a persistent grid with a partial last round, one stage (every load waits for both
// CTAs' releases), packed grouped heads, partial KV tiles, D = 64, 128 and 256, both dtypes.
const SplitCase kClusterCases[] = {
    {"CLUSTER_M=2 PERSISTENT=1", {2, 8, 8, 2048, 2048, 128, 0, 0}},
    {"CLUSTER_M=2", {3, 5, 5, 1400, 1300, 128, 0, 1}},
    {"CLUSTER_M=2 PERSISTENT=1 NUM_CONSUMERS=3 BLOCK_N=64 TMA_STORE=0",
     {1, 9, 9, 1000, 777, 64, 0, 0}},
    {"CLUSTER_M=2 PERSISTENT=1 PACK_GQA=1 RESCALE_UNDER_QK=1", {2, 8, 2, 700, 300, 128, 0, 0}},
    {"CLUSTER_M=2 BLOCK_N=80 TMA_STORE=0", {1, 3, 3, 1000, 1000, 256, 0, 1}},
    {"CLUSTER_M=2 NUM_CONSUMERS=1 PINGPONG=0 STAGES=1 BLOCK_N=176", {1, 4, 4, 300, 4000, 64, 0, 0}},
    {"CLUSTER_M=2 PERSISTENT=1 BLOCK_N=160 RESCALE_UNDER_QK=1 SOFTMAX_WARP_SYNC=1",
     {1, 1, 1, 1, 4096, 128, 0, 0}},
};

// LAGGED_MAX=1 settings, each with a problem (as kSplitCases): the first tile of a piece exact
// and the rest lagged, across D = 64, 128 and 256, both dtypes, causal tiles (whose rows see
// their first keys in different tiles), partial last KV tiles, packed grouped heads, splits,
// KV_INTERLEAVE (tiles taken in turn), stream-K pieces that start inside a tile's KV range,
// causal pairs, clusters, one and three consumers.
const SplitCase kLaggedCases[] = {
    {"LAGGED_MAX=1 PERSISTENT=1 RESCALE_UNDER_QK=1", {2, 8, 8, 2048, 2048, 128, 0, 0}},
    {"LAGGED_MAX=1 BLOCK_N=160 PERSISTENT=1 STREAM_K=1 RESCALE_UNDER_QK=1",
     {3, 5, 5, 1500, 1300, 128, 0, 1}},
    {"LAGGED_MAX=1 NUM_CONSUMERS=3 BLOCK_N=64 PERSISTENT=1 TMA_STORE=0",
     {1, 9, 9, 1000, 777, 64, 1, 0}},
    {"LAGGED_MAX=1 NUM_CONSUMERS=1 PINGPONG=0 BLOCK_N=64 TMA_STORE=0",
     {1, 3, 3, 1000, 1000, 256, 1, 1}},
    {"LAGGED_MAX=1 PACK_GQA=1 SPLITS=4 TMA_STORE=0", {2, 8, 2, 3, 5000, 128, 0, 0}},
    {"LAGGED_MAX=1 KV_INTERLEAVE=1 PINGPONG=0 PACK_GQA=1", {2, 8, 2, 16, 1000, 128, 0, 1}},
    {"LAGGED_MAX=1 PERSISTENT=1 CAUSAL_PAIRS=1 STREAM_K=1", {1, 9, 9, 4200, 4200, 128, 1, 0}},
    {"LAGGED_MAX=1 CLUSTER_M=2 PERSISTENT=1", {3, 5, 5, 1400, 1300, 128, 0, 0}},
    {"LAGGED_MAX=1 NUM_CONSUMERS=1 PINGPONG=0 BLOCK_N=96 STAGES=3", {3, 2, 2, 500, 129, 64, 1, 1}},
};

// The problem a SplitCase is meant for.
Problem CaseProblem(const Manifest& manifest, const SplitCase& c) {
  const int64_t* p = c.problem;
  return GroupedProblem(manifest, p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]);
}

// Configurations in which every value of every knob appears, each with a problem (D, dtype,
// causal) that rotates, so that a few dozen compiles cover the space's axes.
struct SampledConfiguration {
  std::string settings;
  int64_t d;
  int64_t causal;
  int64_t bf16;
};

std::vector<SampledConfiguration> CoveringSample() {
  // Each setting with the two head dims it is tried at: most fit, the last one does not.
  const std::pair<const char*, std::pair<int64_t, int64_t>> settings[] = {
      {"", {64, 128}},
      {"NUM_CONSUMERS=1 PINGPONG=0 BLOCK_N=176 STAGES=1 RESCALE_UNDER_QK=1", {64, 128}},
      {"NUM_CONSUMERS=3 BLOCK_N=64 STAGES=3 INTRA_OVERLAP=0", {64, 128}},
      {"BLOCK_N=96 STAGES=3 FAST_EXP=0 PERSISTENT=1 RESCALE_UNDER_QK=1", {64, 128}},
      {"BLOCK_N=112 PRODUCER_REGS=40 PINGPONG=0 LAGGED_MAX=1", {128, 64}},
      {"BLOCK_N=144 PRODUCER_REGS=56 INTRA_OVERLAP=0 PERSISTENT=1", {128, 64}},
      {"BLOCK_N=80 STAGES=2 TMA_STORE=0", {256, 256}},
      {"BLOCK_N=64 PRODUCER_REGS=40 PERSISTENT=1 STAGES=1", {256, 256}},
      {"BLOCK_N=160 STAGES=2 TMA_STORE=0 RESCALE_UNDER_QK=1", {128, 64}},
      {"BLOCK_N=192 STAGES=1 FAST_EXP=0", {64, 64}},
      {"BLOCK_N=224 NUM_CONSUMERS=1 PINGPONG=0 STAGES=2", {64, 64}},
      {"BLOCK_N=64 NUM_CONSUMERS=3 PERSISTENT=1 STAGES=4", {128, 64}},
      {"NUM_CONSUMERS=3 PERSISTENT=1 TMA_STORE=0 CLUSTER_M=2", {64, 64}},
      {"KV_INTERLEAVE=1 PINGPONG=0 BLOCK_N=96 INTRA_OVERLAP=0", {128, 64}},
      {"BLOCK_N=160 PERSISTENT=1 STREAM_K=1 RESCALE_UNDER_QK=1 SOFTMAX_WARP_SYNC=1", {128, 64}},
      {"BLOCK_N=256 NUM_CONSUMERS=1 PINGPONG=0 INTRA_OVERLAP=0 STAGES=1", {64, 128}},
  };
  std::vector<SampledConfiguration> sample;
  int index = 0;
  for (const auto& [setting, heads] : settings) {
    for (const int64_t d : {heads.first, heads.second}) {
      sample.push_back({setting, d, (index / 2) % 2, index % 2});
      ++index;
    }
  }
  return sample;
}

TEST_CASE("sdpa_hopper compiles for sm_90a across its space, or a named constraint refuses",
          "[compile][nvrtc]") {
  const TemplateLibrary library = TemplateLibrary::Load({});
  const KernelTemplate& hopper = library.Find("sdpa_hopper");
  CHECK(hopper.manifest.arch_specific);
  NvrtcCompiler compiler;
  int compiled = 0;
  int spilled = 0;
  std::map<std::string, int> refused;
  for (const SampledConfiguration& sampled : CoveringSample()) {
    const Problem problem =
        HopperProblem(hopper.manifest, 2, 8, 1000, 777, sampled.d, sampled.causal, sampled.bf16);
    INFO(sampled.settings << " D=" << sampled.d << " causal=" << sampled.causal
                          << " bf16=" << sampled.bf16);
    const CompileOutcome outcome =
        RunCompileGate(hopper, test::GenomeFromSettings(hopper.manifest, sampled.settings), problem,
                       ArchByName("sm_90"), compiler, {});
    INFO(outcome.reason << "\n" << outcome.compiled.log);
    if (outcome.status == Status::kInvalid) {
      REQUIRE(outcome.violation.has_value());
      ++refused[outcome.violation->name];
      continue;
    }
    // The register constraint is a fit to ptxas: the few configurations it accepts that spill
    // anyway are refused by the compile gate.
    if (outcome.status == Status::kResourceReject && outcome.resources &&
        outcome.resources->spills()) {
      ++spilled;
      continue;
    }
    REQUIRE(outcome.status == Status::kCompiled);
    CHECK(outcome.target == "sm_90a");
    CHECK(outcome.resources->spill_stores == 0);
    // The launch allocation that setmaxnreg redistributes: 65536 registers over the CTA.
    CHECK(outcome.resources->registers * outcome.threads_per_block <= 65536);
    ++compiled;
  }
  WARN("sdpa_hopper sample: " << compiled << " compiled, " << spilled << " spilled, refused "
                              << refused.size() << " ways");
  CHECK(compiled >= 25);
  CHECK(spilled <= 1);
  // No value of BLOCK_N = 256 fits the registers, nor at D = 256 the O tile of TMA_STORE with
  // PRODUCER_REGS = 40: those two settings are refused at both head dims.
  CHECK(refused["accumulators_fit_registers"] == 4);

  // Each constraint, by name, where it alone fails.
  const struct {
    const char* settings;
    int64_t d;
    const char* constraint;
  } refusals[] = {
      {"NUM_CONSUMERS=1 PINGPONG=1", 128, "pingpong_needs_two_consumers"},
      {"NUM_CONSUMERS=1 PINGPONG=0 PRODUCER_REGS=40", 128, "register_split_needs_two_consumers"},
      {"BLOCK_N=256 STAGES=1", 128, "accumulators_fit_registers"},
      {"BLOCK_N=192 STAGES=1 FAST_EXP=0", 128, "accumulators_fit_registers"},
      {"NUM_CONSUMERS=1 PINGPONG=0 BLOCK_N=64 STAGES=4", 256, "smem_fits_block"},
  };
  for (const auto& [settings, d, constraint] : refusals) {
    INFO(settings << " D=" << d);
    const Problem problem = HopperProblem(hopper.manifest, 1, 1, 512, 512, d, 0, 0);
    const CompileOutcome outcome =
        RunCompileGate(hopper, test::GenomeFromSettings(hopper.manifest, settings), problem,
                       ArchByName("sm_90"), compiler, {});
    CHECK(outcome.status == Status::kInvalid);
    REQUIRE(outcome.violation.has_value());
    CHECK(outcome.violation->name == constraint);
  }
}

// A setting and whether its problem (2,8,1000,1000, D = 128, fp16) is causal.
struct CausalSetting {
  const char* settings;
  int64_t causal;
};

// Each setting is refused by the compile gate as invalid, by `constraint`.
void ExpectRefusedBy(std::span<const CausalSetting> refusals, const char* constraint) {
  const TemplateLibrary library = TemplateLibrary::Load({});
  const KernelTemplate& hopper = library.Find("sdpa_hopper");
  NvrtcCompiler compiler;
  for (const auto& [settings, causal] : refusals) {
    INFO(settings << " causal=" << causal);
    const Problem problem = HopperProblem(hopper.manifest, 2, 8, 1000, 1000, 128, causal, 0);
    const CompileOutcome outcome =
        RunCompileGate(hopper, test::GenomeFromSettings(hopper.manifest, settings), problem,
                       ArchByName("sm_90"), compiler, {});
    CHECK(outcome.status == Status::kInvalid);
    REQUIRE(outcome.violation.has_value());
    CHECK(outcome.violation->name == constraint);
  }
}

TEST_CASE("sdpa_hopper refuses CAUSAL_PAIRS without a persistent, unsplit causal walk",
          "[compile][nvrtc]") {
  const CausalSetting refusals[] = {
      {"CAUSAL_PAIRS=1 PERSISTENT=1", 0},
      {"CAUSAL_PAIRS=1", 1},
      {"CAUSAL_PAIRS=1 PERSISTENT=1 SPLITS=2 TMA_STORE=0", 1},
  };
  ExpectRefusedBy(refusals, "causal_pairs_need_persistent_causal");
}

TEST_CASE("sdpa_hopper refuses LAGGED_MAX outside the overlapped loop or without exp2",
          "[compile][nvrtc]") {
  const CausalSetting refusals[] = {
      {"LAGGED_MAX=1 INTRA_OVERLAP=0", 0},
      {"LAGGED_MAX=1 INTRA_OVERLAP=0 PINGPONG=0 KV_INTERLEAVE=1", 0},
      {"LAGGED_MAX=1 FAST_EXP=0 BLOCK_N=64", 1},
  };
  ExpectRefusedBy(refusals, "lagged_max_needs_intra_overlap_and_fast_exp");
}

TEST_CASE("sdpa_hopper refuses CLUSTER_M where the CTAs of a cluster would walk different KV tiles",
          "[compile][nvrtc]") {
  const CausalSetting refusals[] = {
      {"CLUSTER_M=2", 1},
      {"CLUSTER_M=2 PERSISTENT=1 CAUSAL_PAIRS=1", 1},
      {"CLUSTER_M=2 SPLITS=2 TMA_STORE=0", 0},
      {"CLUSTER_M=2 PERSISTENT=1 STREAM_K=1", 0},
      {"CLUSTER_M=2 KV_INTERLEAVE=1 PINGPONG=0", 0},
  };
  ExpectRefusedBy(refusals, "cluster_shares_whole_kv_ranges");
  const TemplateLibrary library = TemplateLibrary::Load({});
  const KernelTemplate& hopper = library.Find("sdpa_hopper");
  // Where it applies, the launch is a cluster of two along x over a grid padded to whole
  // clusters: 8 query tiles of 128 rows (1000 rows) per head, 9 of 128 (1100) padded to 10.
  const KernelSpec& kernel = hopper.manifest.main_kernel();
  for (const auto& [s_q, tiles] : {std::pair<int64_t, int64_t>{1000, 8}, {1100, 10}}) {
    const Problem problem = HopperProblem(hopper.manifest, 2, 8, s_q, 1000, 128, 0, 0);
    Bindings bindings =
        CompileBindings(hopper.manifest, test::GenomeFromSettings(hopper.manifest, "CLUSTER_M=2"),
                        problem, ArchByName("sm_90"));
    CHECK(kernel.cluster[0].Evaluate(bindings) == 2);
    CHECK(kernel.cluster[1].Evaluate(bindings) == 1);
    CHECK(kernel.grid[0].Evaluate(bindings) == tiles);
    bindings = CompileBindings(
        hopper.manifest, test::GenomeFromSettings(hopper.manifest, "CLUSTER_M=2 PERSISTENT=1"),
        problem, ArchByName("sm_90"));
    bindings["NUM_SMS"] = 131;  // an odd count: the grid stays a whole number of clusters
    bindings["CTAS_PER_SM"] = 1;
    CHECK(kernel.grid[0].Evaluate(bindings) == std::min<int64_t>(2 * 8 * tiles, 130));
  }
}

TEST_CASE("sdpa_hopper compiles its split-KV and grouped-head configurations without spilling",
          "[compile][nvrtc]") {
  const TemplateLibrary library = TemplateLibrary::Load({});
  const KernelTemplate& hopper = library.Find("sdpa_hopper");
  NvrtcCompiler compiler;
  for (const std::span<const SplitCase> cases :
       {std::span<const SplitCase>(kSplitCases), std::span<const SplitCase>(kStreamKCases),
        std::span<const SplitCase>(kCausalPairCases), std::span<const SplitCase>(kClusterCases)}) {
    for (const SplitCase& c : cases) {
      const Problem problem = CaseProblem(hopper.manifest, c);
      INFO(c.settings << " on " << FormatProblem(hopper.manifest, problem));
      const CompileOutcome outcome =
          RunCompileGate(hopper, test::GenomeFromSettings(hopper.manifest, c.settings), problem,
                         ArchByName("sm_90"), compiler, {});
      INFO(outcome.reason << "\n" << outcome.compiled.log);
      REQUIRE(outcome.status == Status::kCompiled);
      CHECK(outcome.resources->spill_stores == 0);
    }
  }
  // The constraints of the new knobs, by name.
  const struct {
    const char* settings;
    int64_t h_kv;
    int64_t s_kv;
    const char* constraint;
  } refusals[] = {
      {"LAST_CTA_COMBINES=1", 2, 4096, "last_cta_combines_needs_splits"},
      {"SPLITS=2", 2, 4096, "tma_store_needs_one_split"},
      {"PACK_GQA=1", 8, 4096, "pack_gqa_needs_shared_heads"},
      {"SPLITS=32 TMA_STORE=0", 2, 1000, "splits_have_keys"},
      {"STREAM_K=1", 2, 4096, "stream_k_needs_persistent"},
      {"STREAM_K=1 PERSISTENT=1 SPLITS=2 TMA_STORE=0", 2, 4096, "stream_k_needs_one_split"},
      {"RESCALE_UNDER_QK=1 INTRA_OVERLAP=0", 2, 4096, "rescale_under_qk_needs_intra_overlap"},
      {"SOFTMAX_WARP_SYNC=1 INTRA_OVERLAP=0", 2, 4096, "softmax_warp_sync_needs_intra_overlap"},
      {"KV_INTERLEAVE=1 NUM_CONSUMERS=1 PINGPONG=0", 2, 4096, "kv_interleave_needs_two_consumers"},
      {"KV_INTERLEAVE=1", 2, 4096, "kv_interleave_without_turns"},
      {"KV_INTERLEAVE=1 PINGPONG=0 PERSISTENT=1 STREAM_K=1", 2, 4096,
       "kv_interleave_without_turns"},
      {"KV_INTERLEAVE=1 PINGPONG=0 SPLITS=2 LAST_CTA_COMBINES=1 TMA_STORE=0", 2, 4096,
       "kv_interleave_without_turns"},
      {"KV_INTERLEAVE=1 PINGPONG=0 NUM_CONSUMERS=3 BLOCK_N=64", 2, 4096,
       "kv_interleave_stage_per_consumer"},
  };
  for (const auto& [settings, h_kv, s_kv, constraint] : refusals) {
    INFO(settings);
    const Problem problem = GroupedProblem(hopper.manifest, 1, 8, h_kv, 1, s_kv, 128, 0, 0);
    const CompileOutcome outcome =
        RunCompileGate(hopper, test::GenomeFromSettings(hopper.manifest, settings), problem,
                       ArchByName("sm_90"), compiler, {});
    REQUIRE(outcome.violation.has_value());
    CHECK(outcome.violation->name == constraint);
  }
  // Three heads per KV head do not split 64-row blocks evenly.
  const Problem three = GroupedProblem(hopper.manifest, 1, 6, 2, 1, 4096, 128, 0, 0);
  const CompileOutcome outcome =
      RunCompileGate(hopper, test::GenomeFromSettings(hopper.manifest, "PACK_GQA=1"), three,
                     ArchByName("sm_90"), compiler, {});
  REQUIRE(outcome.violation.has_value());
  CHECK(outcome.violation->name == "pack_gqa_whole_blocks");
}

TEST_CASE("sdpa_hopper's tensor maps follow Q, K, V and O in either dtype", "[manifest]") {
  const TemplateLibrary library = TemplateLibrary::Load({});
  const Manifest& manifest = library.Find("sdpa_hopper").manifest;
  const KernelSpec& kernel = manifest.main_kernel();
  const auto find_map = [&](const std::string& name) -> const KernelArgSpec& {
    for (const KernelArgSpec& arg : kernel.args) {
      if (arg.name == name && arg.map) return arg;
    }
    FAIL("no tensor map " << name);
    throw;
  };
  for (int64_t bf16 : {0, 1}) {
    const Problem problem = HopperProblem(manifest, 3, 5, 1000, 333, 128, 0, bf16);
    Genome genome = DefaultGenome(manifest);
    genome["NUM_CONSUMERS"] = 3;
    genome["BLOCK_N"] = 176;
    const Bindings bindings = CompileBindings(manifest, genome, problem, ArchByName("sm_90"));
    const TensorMapDescription q = DescribeTensorMap(find_map("Q_map"), kernel, bindings);
    CHECK(q.dtype == (bf16 ? "bf16" : "f16"));
    CHECK(q.dims == std::vector<uint64_t>{128, 1000, 5, 3});
    CHECK(q.strides == std::vector<uint64_t>{256, 256 * 1000, 256 * 1000 * 5});
    CHECK(q.box == std::vector<uint32_t>{64, 192, 1, 1});
    CHECK(q.swizzle == "128B");
    const TensorMapDescription v = DescribeTensorMap(find_map("V_map"), kernel, bindings);
    CHECK(v.dims == std::vector<uint64_t>{128, 333, 5, 3});
    CHECK(v.box == std::vector<uint32_t>{64, 176, 1, 1});
    // O leaves by 64-row tiles, one per consumer warpgroup, whatever BLOCK_M is.
    const TensorMapDescription o = DescribeTensorMap(find_map("O_map"), kernel, bindings);
    CHECK(o.dtype == q.dtype);
    CHECK(o.dims == std::vector<uint64_t>{128, 1000, 5, 3});
    CHECK(o.box == std::vector<uint32_t>{64, 64, 1, 1});
  }

  // A map without "when" over a tensor that exists only under one is refused; over a tensor
  // with alternatives it follows whichever is present.
  test::TempDir dir;
  test::WriteTemplateVariant(dir.path() / "one_dtype", "sdpa_hopper", "one_dtype", "", "");
  std::string text = ReadFile(dir.path() / "one_dtype" / "manifest.json");
  const std::string bf16_q =
      "\"name\": \"Q\",\n          \"kind\": \"input\",\n          \"dtype\": \"bf16\"";
  const size_t at = text.find(bf16_q);
  REQUIRE(at != std::string::npos);
  text.replace(at, bf16_q.size(),
               "\"name\": \"Q16\",\n          \"kind\": \"input\",\n          \"dtype\": \"bf16\"");
  test::WriteFile(dir.path() / "one_dtype" / "manifest.json", text);
  CHECK_THROWS_WITH(TemplateLibrary::Load({dir.path() / "one_dtype"}),
                    Catch::Contains("'Q' exists only where !BF16; give the map the same \"when\""));
}

// Evaluates configurations of sdpa_hopper and its broken variants in a worker process, so that a
// variant that hangs costs its deadline and nothing else.
class HopperBench {
 public:
  // `variants`: folders of broken copies, or none.
  explicit HopperBench(const std::vector<std::filesystem::path>& variants)
      : library_(TemplateLibrary::Load(variants)),
        arch_(QueryDevices().at(0).arch_info()),
        supervisor_(GpuWorkerCommand(Options(variants))) {}

  bool on_hopper() const { return arch_.name == "sm_90"; }

  // The status of `settings` of template `name` on the problem, or nullopt when the compile gate
  // refused the configuration. With `timing`, the performance gate runs too; else the correctness
  // gate only.
  std::optional<GpuVerdict> Evaluate(const std::string& name, const std::string& settings,
                                     const Problem& problem, std::chrono::milliseconds deadline,
                                     const std::optional<TimingOptions>& timing = std::nullopt) {
    const KernelTemplate& kernel_template = library_.Find(name);
    const Genome genome = test::GenomeFromSettings(kernel_template.manifest, settings);
    const CompileOutcome compiled =
        RunCompileGate(kernel_template, genome, problem, arch_, compiler_, {});
    if (compiled.status != Status::kCompiled) return std::nullopt;
    return VerdictFromWorker(
        supervisor_.Evaluate(
            MakeEvaluatePayload(kernel_template, genome, problem, compiled.compiled.cubin,
                                !timing.has_value(), timing.value_or(TimingOptions{})),
            deadline),
        deadline);
  }

  const Manifest& manifest(const std::string& name) const { return library_.Find(name).manifest; }

 private:
  static GpuWorkerOptions Options(const std::vector<std::filesystem::path>& variants) {
    GpuWorkerOptions options;
    options.executable = test::EvoBinary();
    options.template_folders = variants;
    return options;
  }

  TemplateLibrary library_;
  ArchInfo arch_;
  NvrtcCompiler compiler_;
  WorkerSupervisor supervisor_;
};

// A HopperBench on this machine's GPU, or null (the reason said) where there is no GPU driver or
// the GPU is not an sm_90 one.
std::unique_ptr<HopperBench> HopperBenchHere(
    const std::vector<std::filesystem::path>& variants = {}) {
  if (!test::HaveGpuDriver()) {
    WARN("skipped: no GPU driver (libcuda.so.1) on this machine");
    return nullptr;
  }
  auto bench = std::make_unique<HopperBench>(variants);
  if (!bench->on_hopper()) {
    WARN("skipped: sdpa_hopper needs an sm_90 GPU");
    return nullptr;
  }
  return bench;
}

// Runs each case through the gates, where each must be measured; returns how many were.
int MeasureCases(HopperBench& bench, std::span<const SplitCase> cases,
                 std::chrono::seconds deadline, const std::string& name = "sdpa_hopper") {
  const Manifest& manifest = bench.manifest(name);
  int measured = 0;
  for (const SplitCase& c : cases) {
    const Problem problem = CaseProblem(manifest, c);
    INFO(c.settings << " on " << FormatProblem(manifest, problem));
    const std::optional<GpuVerdict> verdict = bench.Evaluate(name, c.settings, problem, deadline);
    REQUIRE(verdict.has_value());
    INFO(ToString(verdict->status)
         << ": " << verdict->correctness.failure << verdict->error << " max abs error "
         << verdict->correctness.worst.max_abs_error);
    CHECK(verdict->status == Status::kMeasured);
    measured += verdict->status == Status::kMeasured;
  }
  return measured;
}

// Runs each case through the gates on an H100 (or says why it cannot) and expects it measured.
// `name`: sdpa_hopper, or a copy of it in one of `folders`.
void ExpectCasesMeasured(std::span<const SplitCase> cases, std::chrono::seconds deadline,
                         const char* what, const std::vector<std::filesystem::path>& folders = {},
                         const std::string& name = "sdpa_hopper") {
  const std::unique_ptr<HopperBench> here = HopperBenchHere(folders);
  if (!here) return;
  HopperBench& bench = *here;
  const int measured = MeasureCases(bench, cases, deadline, name);
  WARN(what << ": " << measured << " of " << cases.size() << " measured");
}

TEST_CASE("sdpa_hopper passes the gates across D, dtype, causal and odd lengths", "[gpu]") {
  const std::unique_ptr<HopperBench> here = HopperBenchHere();
  if (!here) return;
  HopperBench& bench = *here;
  const Manifest& manifest = bench.manifest("sdpa_hopper");
  const int64_t shapes[][4] = {{1, 2, 17, 33},   {2, 3, 509, 509}, {1, 4, 1000, 1000},
                               {2, 2, 300, 777}, {1, 1, 1, 4096},  {3, 2, 1500, 129}};
  int measured = 0;
  int refused = 0;
  size_t shape_index = 0;
  for (const SampledConfiguration& sampled : CoveringSample()) {
    const auto& shape = shapes[shape_index++ % std::size(shapes)];
    const Problem problem = HopperProblem(manifest, shape[0], shape[1], shape[2], shape[3],
                                          sampled.d, sampled.causal, sampled.bf16);
    INFO(sampled.settings << " D=" << sampled.d << " causal=" << sampled.causal
                          << " bf16=" << sampled.bf16 << " B,H,S_q,S_kv=" << shape[0] << ","
                          << shape[1] << "," << shape[2] << "," << shape[3]);
    const std::optional<GpuVerdict> verdict =
        bench.Evaluate("sdpa_hopper", sampled.settings, problem, std::chrono::seconds(30));
    if (!verdict) {
      ++refused;
      continue;
    }
    INFO(ToString(verdict->status)
         << ": " << verdict->correctness.failure << verdict->error << " max abs error "
         << verdict->correctness.worst.max_abs_error);
    CHECK(verdict->status == Status::kMeasured);
    measured += verdict->status == Status::kMeasured;
  }
  WARN("sdpa_hopper: " << measured << " configurations measured, " << refused
                       << " refused by the compile gate");
  CHECK(measured >= 16);
}

TEST_CASE("sdpa_hopper passes the gates with split KV and grouped heads", "[gpu]") {
  ExpectCasesMeasured(kSplitCases, std::chrono::seconds(30),
                      "sdpa_hopper split KV and grouped heads");
}

TEST_CASE("sdpa_hopper passes the gates with stream-K tails", "[gpu]") {
  ExpectCasesMeasured(kStreamKCases, std::chrono::seconds(60), "sdpa_hopper stream-K");
}

// A copy of sdpa_hopper named `name` in `folder` whose merge of two partial states
// (evo/tile_partial.cuh, shared by stream-K and KV_INTERLEAVE) adds the other state's
// accumulators without rescaling them to the common maximum.
void WriteUnweightedMergeVariant(const std::filesystem::path& folder, const std::string& name) {
  test::WriteTemplateVariantWithBrokenHeader(
      folder, "sdpa_hopper", name, "tile_partial.cuh",
      "acc[i + e] = fmaf(acc[i + e], mine_weight[h], o[e] * other_weight[h]);",
      "acc[i + e] += o[e];");
}

// A broken copy of sdpa_hopper (its folder name) and a case it must fail.
struct BrokenCase {
  const char* name;
  SplitCase run;
};

// Each case's copy compiles on any machine, so that a change to the code it breaks fails in CI
// too; on an H100 the gates must find each case incorrect.
void ExpectIncorrect(const std::vector<std::filesystem::path>& folders,
                     std::span<const BrokenCase> cases, std::chrono::seconds deadline) {
  {
    const TemplateLibrary library = TemplateLibrary::Load(folders);
    NvrtcCompiler compiler;
    for (const BrokenCase& c : cases) {
      const KernelTemplate& variant = library.Find(c.name);
      INFO(c.name << " " << c.run.settings);
      const CompileOutcome compiled =
          RunCompileGate(variant, test::GenomeFromSettings(variant.manifest, c.run.settings),
                         CaseProblem(variant.manifest, c.run), ArchByName("sm_90"), compiler, {});
      INFO(compiled.compiled.log);
      REQUIRE(compiled.status == Status::kCompiled);
    }
  }
  const std::unique_ptr<HopperBench> here = HopperBenchHere(folders);
  if (!here) return;
  HopperBench& bench = *here;
  for (const BrokenCase& c : cases) {
    const Problem problem = CaseProblem(bench.manifest(c.name), c.run);
    INFO(c.name << " " << c.run.settings << " on "
                << FormatProblem(bench.manifest(c.name), problem));
    const std::optional<GpuVerdict> verdict =
        bench.Evaluate(c.name, c.run.settings, problem, deadline);
    REQUIRE(verdict.has_value());
    INFO(ToString(verdict->status) << ": " << verdict->correctness.failure << verdict->error);
    CHECK(verdict->status == Status::kIncorrect);
    WARN(c.name << " " << c.run.settings << " S_kv=" << c.run.problem[4] << ": "
                << ToString(verdict->status) << " (" << verdict->correctness.failure << ")");
  }
}

TEST_CASE("sdpa_hopper passes the gates with causal pairs", "[gpu]") {
  ExpectCasesMeasured(kCausalPairCases, std::chrono::seconds(60), "sdpa_hopper causal pairs");
}

TEST_CASE("sdpa_hopper passes the gates with clusters", "[gpu]") {
  ExpectCasesMeasured(kClusterCases, std::chrono::seconds(60), "sdpa_hopper clusters");
}

TEST_CASE("sdpa_hopper passes the gates with lagged maxima", "[gpu]") {
  ExpectCasesMeasured(kLaggedCases, std::chrono::seconds(60), "sdpa_hopper lagged maxima");
}

// The lines of sdpa_hopper.cu that set LAGGED_MAX's bound and its rescale's limit. A copy with the
// bound 0 takes the rescale at every tile after a piece's first; with the limit 0 as well, it
// computes the scores again there. The gates' outlier keys reach either path in some warps only,
// N(0, 1) keys almost never.
constexpr const char* kLaggedBound = "#define LAGGED_SUM_BOUND evo::kLaggedSumBound";
constexpr const char* kLaggedBoundZero = "#define LAGGED_SUM_BOUND 0.f";
constexpr const char* kLaggedLimit = "#define LAGGED_RESCALE_LIMIT evo::kLaggedRescaleLimit";
constexpr const char* kLaggedLimitZero = "#define LAGGED_RESCALE_LIMIT 0.f";

void ForceLaggedRescale(const std::filesystem::path& folder) {
  test::ReplaceInVariant(folder / "sdpa_hopper.cu", folder.filename().string(), kLaggedBound,
                         kLaggedBoundZero);
}

void ForceLaggedScoresAgain(const std::filesystem::path& folder) {
  ForceLaggedRescale(folder);
  test::ReplaceInVariant(folder / "sdpa_hopper.cu", folder.filename().string(), kLaggedLimit,
                         kLaggedLimitZero);
}

// A copy of sdpa_hopper with one of LAGGED_MAX's slow paths forced, through the lagged cases.
void ExpectForcedLaggedPathMeasured(const std::string& name,
                                    void (*force)(const std::filesystem::path&), const char* what) {
  test::TempDir dir;
  const std::filesystem::path folder = dir.path() / name;
  test::WriteTemplateVariant(folder, "sdpa_hopper", name, "", "");
  force(folder);
  ExpectCasesMeasured(kLaggedCases, std::chrono::seconds(60), what, {folder}, name);
}

TEST_CASE("sdpa_hopper's rescale of lagged maxima passes the gates", "[gpu]") {
  ExpectForcedLaggedPathMeasured("hopper_lagged_rescale", ForceLaggedRescale,
                                 "sdpa_hopper lagged maxima, rescale forced");
}

TEST_CASE("sdpa_hopper's exact path of lagged maxima passes the gates", "[gpu]") {
  ExpectForcedLaggedPathMeasured("hopper_lagged_exact", ForceLaggedScoresAgain,
                                 "sdpa_hopper lagged maxima, scores again forced");
}

TEST_CASE("broken lagged maxima of sdpa_hopper are rejected", "[gpu]") {
  test::TempDir dir;
  // The lagged tiles' probabilities never reach the row sums.
  test::WriteTemplateVariant(dir.path() / "hopper_lagged_no_sum", "sdpa_hopper",
                             "hopper_lagged_no_sum", "        row_sum[0] += tile_sum[0];\n", "");
  // The exact path runs the softmax on the probabilities instead of computing the scores again.
  test::WriteTemplateVariant(
      dir.path() / "hopper_lagged_no_rescore", "sdpa_hopper", "hopper_lagged_no_rescore",
      "      evo::warp_attention_scores_sw128<BLOCK_N, HEAD_DIM, kBlockM, Elem>(",
      "      if (false) evo::warp_attention_scores_sw128<BLOCK_N, HEAD_DIM, "
      "kBlockM, Elem>(");
  ForceLaggedScoresAgain(dir.path() / "hopper_lagged_no_rescore");
  // The exact path reads K without its swizzle: keys of the wrong columns.
  test::WriteTemplateVariantWithBrokenHeader(
      dir.path() / "hopper_lagged_unswizzled_k", "sdpa_hopper", "hopper_lagged_unswizzled_k",
      "wgmma_attention.cuh", "swizzled(key, (kd % 4) * 2 + b.chunk)",
      "(static_cast<unsigned>((kd % 4) * 2 + b.chunk) << 4)");
  ForceLaggedScoresAgain(dir.path() / "hopper_lagged_unswizzled_k");
  // The rescale scales the probabilities and the sums but not what O accumulated.
  test::WriteTemplateVariantWithBrokenHeader(dir.path() / "hopper_lagged_rescale_no_alpha",
                                             "sdpa_hopper", "hopper_lagged_rescale_no_alpha",
                                             "wgmma_attention.cuh", "alpha[h] = factor;",
                                             "alpha[h] = 1.f;");
  ForceLaggedRescale(dir.path() / "hopper_lagged_rescale_no_alpha");
  // The rescale leaves the rows' maxima where they were: later tiles' probabilities are 2^e too
  // large against what came before.
  test::WriteTemplateVariantWithBrokenHeader(dir.path() / "hopper_lagged_rescale_same_max",
                                             "sdpa_hopper", "hopper_lagged_rescale_same_max",
                                             "wgmma_attention.cuh",
                                             "row_max[h] += static_cast<float>(e) / scale;", "");
  ForceLaggedRescale(dir.path() / "hopper_lagged_rescale_same_max");
  // The check never sends a warp to the exact path (but for rows with no maximum yet): exact
  // while no probability passes fp16's range, 2^16, which only the gates' outlier keys make a
  // score do (N(0, 1) keys never lift a row's maximum 16 log2 units in a tile). In bf16 P holds
  // 2^127: not broken there.
  test::WriteTemplateVariant(dir.path() / "hopper_lagged_no_check", "sdpa_hopper",
                             "hopper_lagged_no_check", kLaggedBound,
                             "#define LAGGED_SUM_BOUND __int_as_float(0x7f800000)");
  const BrokenCase cases[] = {
      {"hopper_lagged_no_check",
       {"LAGGED_MAX=1 PERSISTENT=1 RESCALE_UNDER_QK=1", {2, 8, 8, 2048, 2048, 128, 0, 0}}},
      {"hopper_lagged_no_check",
       {"LAGGED_MAX=1 BLOCK_N=64 NUM_CONSUMERS=3 TMA_STORE=0", {1, 4, 4, 700, 900, 64, 1, 0}}},
      {"hopper_lagged_no_check",
       {"LAGGED_MAX=1 STREAM_K=1 PERSISTENT=1 BLOCK_N=160", {1, 4, 2, 1000, 3000, 128, 0, 0}}},
      {"hopper_lagged_no_sum",
       {"LAGGED_MAX=1 PERSISTENT=1 RESCALE_UNDER_QK=1", {2, 8, 8, 2048, 2048, 128, 0, 0}}},
      {"hopper_lagged_no_sum",
       {"LAGGED_MAX=1 NUM_CONSUMERS=1 PINGPONG=0 BLOCK_N=64 TMA_STORE=0",
        {1, 3, 3, 1000, 1000, 256, 1, 1}}},
      {"hopper_lagged_no_rescore",
       {"LAGGED_MAX=1 PERSISTENT=1 RESCALE_UNDER_QK=1", {2, 8, 8, 2048, 2048, 128, 0, 0}}},
      {"hopper_lagged_no_rescore",
       {"LAGGED_MAX=1 KV_INTERLEAVE=1 PINGPONG=0 PACK_GQA=1", {2, 8, 2, 16, 1000, 128, 0, 1}}},
      {"hopper_lagged_unswizzled_k",
       {"LAGGED_MAX=1 PERSISTENT=1 RESCALE_UNDER_QK=1", {2, 8, 8, 2048, 2048, 128, 0, 0}}},
      {"hopper_lagged_unswizzled_k",
       {"LAGGED_MAX=1 NUM_CONSUMERS=3 BLOCK_N=64 PERSISTENT=1 TMA_STORE=0",
        {1, 9, 9, 1000, 777, 64, 1, 0}}},
      {"hopper_lagged_rescale_no_alpha",
       {"LAGGED_MAX=1 PERSISTENT=1 RESCALE_UNDER_QK=1", {2, 8, 8, 2048, 2048, 128, 0, 0}}},
      {"hopper_lagged_rescale_no_alpha",
       {"LAGGED_MAX=1 BLOCK_N=160 PERSISTENT=1 STREAM_K=1", {1, 4, 2, 1000, 3000, 128, 0, 1}}},
      {"hopper_lagged_rescale_same_max",
       {"LAGGED_MAX=1 PERSISTENT=1 RESCALE_UNDER_QK=1", {2, 8, 8, 2048, 2048, 128, 0, 0}}},
      {"hopper_lagged_rescale_same_max",
       {"LAGGED_MAX=1 NUM_CONSUMERS=1 PINGPONG=0 BLOCK_N=64 TMA_STORE=0",
        {1, 3, 3, 1000, 1000, 256, 1, 1}}},
  };
  ExpectIncorrect({dir.path() / "hopper_lagged_no_sum", dir.path() / "hopper_lagged_no_rescore",
                   dir.path() / "hopper_lagged_unswizzled_k", dir.path() / "hopper_lagged_no_check",
                   dir.path() / "hopper_lagged_rescale_no_alpha",
                   dir.path() / "hopper_lagged_rescale_same_max"},
                  cases, std::chrono::seconds(60));
}

TEST_CASE("broken clusters of sdpa_hopper are rejected", "[gpu]") {
  test::TempDir dir;
  // Both CTAs of a cluster load the first half of every K/V tile: the second half is never
  // written, though the full barrier still counts a whole tile's bytes.
  test::WriteTemplateVariant(
      dir.path() / "hopper_cluster_same_half", "sdpa_hopper", "hopper_cluster_same_half",
      "const int share = CLUSTER_M > 1 ? static_cast<int>(evo::cluster_rank()) : 0;",
      "const int share = 0;");
  // Each CTA writes its share into the right place but loads the first half's rows there.
  test::WriteTemplateVariant(
      dir.path() / "hopper_cluster_wrong_rows", "sdpa_hopper", "hopper_cluster_wrong_rows",
      "const int row = n_start + share * kKVRowsPerCta;", "const int row = n_start;");
  const BrokenCase cases[] = {
      {"hopper_cluster_same_half", {"CLUSTER_M=2 PERSISTENT=1", {2, 8, 8, 2048, 2048, 128, 0, 0}}},
      {"hopper_cluster_same_half",
       {"CLUSTER_M=2 NUM_CONSUMERS=1 PINGPONG=0 STAGES=1", {1, 4, 4, 300, 1000, 64, 0, 0}}},
      {"hopper_cluster_wrong_rows", {"CLUSTER_M=2", {3, 5, 5, 1400, 1300, 128, 0, 1}}},
      {"hopper_cluster_wrong_rows",
       {"CLUSTER_M=2 BLOCK_N=80 TMA_STORE=0", {1, 3, 3, 1000, 1000, 256, 0, 0}}},
  };
  ExpectIncorrect(
      {dir.path() / "hopper_cluster_same_half", dir.path() / "hopper_cluster_wrong_rows"}, cases,
      std::chrono::seconds(60));
}

TEST_CASE("broken causal pairs of sdpa_hopper are rejected", "[gpu]") {
  test::TempDir dir;
  // Both tiles of a pair are the heavy one: the light half of every head is never computed.
  test::WriteTemplateVariant(
      dir.path() / "hopper_pairs_heavy_twice", "sdpa_hopper", "hopper_pairs_heavy_twice",
      "m_tile = (j & 1) ? j / 2 : num_m_tiles - 1 - j / 2;", "m_tile = num_m_tiles - 1 - j / 2;");
  // A CTA steps from its pair to the next pair but one: half the pairs are never taken.
  test::WriteTemplateVariant(dir.path() / "hopper_pairs_skip", "sdpa_hopper", "hopper_pairs_skip",
                             "((tile & 1) ? tile - 1 + 2 * ctas : tile + 1)",
                             "((tile & 1) ? tile - 1 + 4 * ctas : tile + 1)");
  // Pairs alone and with a stream-K tail; for the skip, two rounds of pairs or more before the
  // tail (256 pairs; 297 pairs, two whole rounds), so that a second round exists to be skipped.
  const BrokenCase cases[] = {
      {"hopper_pairs_heavy_twice",
       {"PERSISTENT=1 CAUSAL_PAIRS=1", {2, 8, 8, 2048, 2048, 128, 1, 0}}},
      {"hopper_pairs_heavy_twice",
       {"PERSISTENT=1 CAUSAL_PAIRS=1 STREAM_K=1", {1, 9, 9, 4200, 4200, 128, 1, 0}}},
      {"hopper_pairs_skip", {"PERSISTENT=1 CAUSAL_PAIRS=1", {4, 8, 8, 2048, 2048, 128, 1, 0}}},
      {"hopper_pairs_skip",
       {"PERSISTENT=1 CAUSAL_PAIRS=1 STREAM_K=1", {2, 9, 9, 4200, 4200, 128, 1, 0}}},
  };
  ExpectIncorrect({dir.path() / "hopper_pairs_heavy_twice", dir.path() / "hopper_pairs_skip"},
                  cases, std::chrono::seconds(60));
}

TEST_CASE("broken stream-K merges of sdpa_hopper are rejected", "[gpu]") {
  test::TempDir dir;
  // The tile's last CTA leaves out the state of the CTA that holds the tile's end.
  test::WriteTemplateVariant(dir.path() / "hopper_stream_k_drops_part", "sdpa_hopper",
                             "hopper_stream_k_drops_part",
                             "other < piece.first_cta + piece.parts; ++other",
                             "other < piece.first_cta + piece.parts - 1; ++other");
  // The merge adds another CTA's accumulators without rescaling them to the common maximum.
  WriteUnweightedMergeVariant(dir.path() / "hopper_stream_k_unweighted",
                              "hopper_stream_k_unweighted");
  // Whole rounds and a tail, and a tail alone.
  const BrokenCase cases[] = {
      {"hopper_stream_k_drops_part", {"PERSISTENT=1 STREAM_K=1", {2, 8, 8, 2048, 2048, 128, 0, 0}}},
      {"hopper_stream_k_drops_part", {"PERSISTENT=1 STREAM_K=1", {2, 8, 8, 700, 700, 128, 0, 0}}},
      {"hopper_stream_k_unweighted", {"PERSISTENT=1 STREAM_K=1", {2, 8, 8, 2048, 2048, 128, 0, 0}}},
      {"hopper_stream_k_unweighted", {"PERSISTENT=1 STREAM_K=1", {2, 8, 8, 700, 700, 128, 0, 0}}},
  };
  ExpectIncorrect(
      {dir.path() / "hopper_stream_k_drops_part", dir.path() / "hopper_stream_k_unweighted"}, cases,
      std::chrono::seconds(60));
}

TEST_CASE("broken KV_INTERLEAVE merges of sdpa_hopper are rejected", "[gpu]") {
  test::TempDir dir;
  // Consumer 0 stores O without the other consumers' states: their KV tiles are lost.
  test::WriteTemplateVariant(dir.path() / "hopper_interleave_no_merge", "sdpa_hopper",
                             "hopper_interleave_no_merge",
                             "for (int other = 1; other < NUM_CONSUMERS; ++other) {",
                             "for (int other = 1; other < 1; ++other) {");
  // The merge adds the other consumer's accumulators without rescaling them.
  WriteUnweightedMergeVariant(dir.path() / "hopper_interleave_unweighted",
                              "hopper_interleave_unweighted");
  // Chunked prefill with packed heads, and decoding with splits.
  const char* chunked = "KV_INTERLEAVE=1 PINGPONG=0 PACK_GQA=1";
  const char* decoding = "KV_INTERLEAVE=1 PINGPONG=0 PACK_GQA=1 SPLITS=4 TMA_STORE=0 BLOCK_N=64";
  const BrokenCase cases[] = {
      {"hopper_interleave_no_merge", {chunked, {2, 8, 2, 16, 1000, 128, 0, 0}}},
      {"hopper_interleave_no_merge", {decoding, {1, 32, 8, 1, 3000, 128, 0, 1}}},
      {"hopper_interleave_unweighted", {chunked, {2, 8, 2, 16, 1000, 128, 0, 0}}},
      {"hopper_interleave_unweighted", {decoding, {1, 32, 8, 1, 3000, 128, 0, 1}}},
  };
  ExpectIncorrect(
      {dir.path() / "hopper_interleave_no_merge", dir.path() / "hopper_interleave_unweighted"},
      cases, std::chrono::seconds(60));
}

TEST_CASE("broken split-KV combines and a wrong KV head of sdpa_hopper are rejected", "[gpu]") {
  test::TempDir dir;
  // The combine (evo/split_kv.cuh, shared with sdpa_fp16) stops one split short.
  test::WriteTemplateVariantWithBrokenHeader(
      dir.path() / "hopper_drops_split", "sdpa_hopper", "hopper_drops_split", "split_kv.cuh",
      "for (int s = 0; s < Splits; ++s) {", "for (int s = 0; s < Splits - 1; ++s) {");
  // The combine averages the partial outputs instead of weighing them by their LSE.
  test::WriteTemplateVariantWithBrokenHeader(
      dir.path() / "hopper_unweighted_combine", "sdpa_hopper", "hopper_unweighted_combine",
      "split_kv.cuh", "const float w = __shfl_sync(0xffffffffu, weight, s);",
      "const float w = weight_sum / Splits;");
  // Query heads read the wrong KV head.
  test::WriteTemplateVariant(dir.path() / "hopper_wrong_kv_head", "sdpa_hopper",
                             "hopper_wrong_kv_head", "return PACK_GQA ? slot : slot / group;",
                             "return slot % 2;");
  // Each breakage where it matters: the combines with both ways of combining, the KV head
  // with and without packing.
  const BrokenCase cases[] = {
      {"hopper_drops_split", {"SPLITS=4 TMA_STORE=0", {2, 8, 4, 1, 4000, 128, 0, 0}}},
      {"hopper_drops_split",
       {"SPLITS=8 LAST_CTA_COMBINES=1 TMA_STORE=0 PACK_GQA=1", {2, 8, 4, 1, 4000, 128, 0, 0}}},
      {"hopper_unweighted_combine", {"SPLITS=4 TMA_STORE=0", {2, 8, 4, 1, 4000, 128, 0, 0}}},
      {"hopper_unweighted_combine",
       {"SPLITS=8 LAST_CTA_COMBINES=1 TMA_STORE=0 PACK_GQA=1", {2, 8, 4, 1, 4000, 128, 0, 0}}},
      {"hopper_wrong_kv_head", {"", {2, 8, 4, 1, 4000, 128, 0, 0}}},
      {"hopper_wrong_kv_head", {"PACK_GQA=1 SPLITS=2 TMA_STORE=0", {2, 8, 4, 1, 4000, 128, 0, 0}}},
  };
  ExpectIncorrect({dir.path() / "hopper_drops_split", dir.path() / "hopper_unweighted_combine",
                   dir.path() / "hopper_wrong_kv_head"},
                  cases, std::chrono::seconds(30));
}

// A broken copy of sdpa_hopper; `manifest_find` / `manifest_replace` change its manifest too,
// at the first match after `manifest_after`.
struct HopperBreakage {
  const char* name;
  const char* find;
  const char* replace;
  const char* manifest_after;
  const char* manifest_find;
  const char* manifest_replace;
};

const HopperBreakage kHopperBreakages[] = {
    // The consumers read K tiles without waiting for the copy to land.
    {"skips_full_wait", "      evo::mbar_wait_sleep(smem.k_full(stage_of(j)), full_parity(j));\n",
     "", "", "", ""},
    // The producer overwrites a K buffer while the consumers may still be reading it.
    {"refills_before_release", "      evo::mbar_wait_sleep(smem.k_empty(stage), free_parity);\n",
     "", "", "", ""},
    // K lands unswizzled while the MMAs read it as swizzled.
    {"wrong_swizzle", "", "", "\"name\": \"K_map\"", "\"swizzle\": \"128B\"",
     "\"swizzle\": \"none\""},
    // The second consumer never passes its turn: the first waits forever.
    {"pingpong_missing_arrive",
     "if (PINGPONG) evo::named_barrier_arrive<kTurnThreads>(1 + (consumer + 1) % NUM_CONSUMERS);",
     "if (PINGPONG && consumer != 1)\n"
     "      evo::named_barrier_arrive<kTurnThreads>(1 + (consumer + 1) % NUM_CONSUMERS);",
     "", "", ""},
};

TEST_CASE("broken variants of sdpa_hopper's pipeline are rejected", "[gpu]") {
  test::TempDir dir;
  for (const HopperBreakage& breakage : kHopperBreakages) {
    const std::string name = std::string("sdpa_hopper_") + breakage.name;
    test::WriteTemplateVariant(dir.path() / name, "sdpa_hopper", name, breakage.find,
                               breakage.replace);
    if (*breakage.manifest_find != '\0') {
      const auto path = dir.path() / name / "manifest.json";
      std::string manifest = ReadFile(path);
      const size_t after = manifest.find(breakage.manifest_after);
      REQUIRE(after != std::string::npos);
      const size_t at = manifest.find(breakage.manifest_find, after);
      REQUIRE(at != std::string::npos);
      manifest.replace(at, std::string(breakage.manifest_find).size(), breakage.manifest_replace);
      test::WriteFile(path, manifest);
    }
  }
  const std::unique_ptr<HopperBench> here = HopperBenchHere({dir.path()});
  if (!here) return;
  HopperBench& bench = *here;
  // Few stages and many KV tiles, so that a missing wait is seen.
  const char* configs[] = {"STAGES=1", "STAGES=2 INTRA_OVERLAP=0", "STAGES=2 PERSISTENT=1"};
  for (const HopperBreakage& breakage : kHopperBreakages) {
    const std::string name = std::string("sdpa_hopper_") + breakage.name;
    std::map<Status, int> statuses;
    for (const char* settings : configs) {
      for (int64_t d : {64, 128}) {
        const Problem problem =
            HopperProblem(bench.manifest(name), 2, 4, 1000, 2000, d, d == 128, 0);
        INFO(name << " " << settings << " D=" << d);
        const std::optional<GpuVerdict> verdict =
            bench.Evaluate(name, settings, problem, std::chrono::seconds(10));
        REQUIRE(verdict.has_value());
        INFO(ToString(verdict->status) << ": " << verdict->correctness.failure << verdict->error);
        CHECK(verdict->status != Status::kMeasured);
        ++statuses[verdict->status];
      }
    }
    std::string summary;
    for (const auto& [status, count] : statuses) {
      summary += " " + std::string(ToString(status)) + " x" + std::to_string(count);
    }
    WARN(name << ":" << summary);
  }
  // And the real one passes on the same cases.
  for (const char* settings : configs) {
    const Problem problem =
        HopperProblem(bench.manifest("sdpa_hopper"), 2, 4, 1000, 2000, 128, 1, 0);
    const std::optional<GpuVerdict> verdict =
        bench.Evaluate("sdpa_hopper", settings, problem, std::chrono::seconds(30));
    REQUIRE(verdict.has_value());
    INFO(settings << ": " << verdict->correctness.failure << verdict->error);
    CHECK(verdict->status == Status::kMeasured);
  }
}

// Every consumer lane arrives on q_empty (racecheck cannot follow a warp's __syncwarp and one
// lane's arrive), so its count is the consumer threads. A copy that still counts warps lets the
// first warp to finish release Q: the producer of a persistent CTA then loads the next tile's Q
// over the one the other warps still read. Persistent only: elsewhere Q is loaded once per CTA.
TEST_CASE("sdpa_hopper: a Q barrier counting warps while every lane arrives is rejected", "[gpu]") {
  test::TempDir dir;
  const std::string name = "sdpa_hopper_q_empty_counts_warps";
  test::WriteTemplateVariant(dir.path() / name, "sdpa_hopper", name,
                             "evo::mbar_init(smem.q_empty(), hopper::kConsumerWarps * 32);",
                             "evo::mbar_init(smem.q_empty(), hopper::kConsumerWarps);");
  const std::unique_ptr<HopperBench> here = HopperBenchHere({dir.path()});
  if (!here) return;
  HopperBench& bench = *here;
  // About eight tiles per CTA on 132 SMs.
  const char* configs[] = {"PERSISTENT=1", "PERSISTENT=1 NUM_CONSUMERS=1 PINGPONG=0",
                           "PERSISTENT=1 STREAM_K=1 BLOCK_N=160 LAGGED_MAX=1",
                           "PERSISTENT=1 KV_INTERLEAVE=1 PINGPONG=0 TMA_STORE=0"};
  std::map<Status, int> statuses;
  for (const char* settings : configs) {
    for (const char* template_name : {"sdpa_hopper", name.c_str()}) {
      const Problem problem =
          HopperProblem(bench.manifest(template_name), 4, 16, 2000, 1000, 128, 0, 0);
      INFO(template_name << " " << settings);
      const std::optional<GpuVerdict> verdict =
          bench.Evaluate(template_name, settings, problem, std::chrono::seconds(10));
      REQUIRE(verdict.has_value());
      INFO(ToString(verdict->status) << ": " << verdict->correctness.failure << verdict->error);
      if (template_name == name) {
        CHECK(verdict->status != Status::kMeasured);
        ++statuses[verdict->status];
      } else {
        CHECK(verdict->status == Status::kMeasured);
      }
    }
  }
  std::string summary;
  for (const auto& [status, count] : statuses) {
    summary += " " + std::string(ToString(status)) + " x" + std::to_string(count);
  }
  WARN(name << ":" << summary);
}

// --time-on-outliers: one more correctness seed, drawn with the outlier rows, whose inputs the
// timed calls read and whose reference the performance gate's recheck compares with. A wrong
// pairing of the two (timing plain inputs against the outlier seed's reference) fails the recheck.
TEST_CASE("sdpa_hopper timed on outlier inputs checks one more seed and rechecks it", "[gpu]") {
  const std::unique_ptr<HopperBench> here = HopperBenchHere();
  if (!here) return;
  HopperBench& bench = *here;
  const Problem problem = HopperProblem(bench.manifest("sdpa_hopper"), 2, 8, 1500, 1500, 128, 0, 1);
  for (const char* settings : {"LAGGED_MAX=1 BLOCK_N=160", "LAGGED_MAX=0", "PERSISTENT=1"}) {
    int checks[2] = {0, 0};
    for (const bool outliers : {false, true}) {
      TimingOptions timing;
      timing.outlier_inputs = outliers;
      const std::optional<GpuVerdict> verdict =
          bench.Evaluate("sdpa_hopper", settings, problem, std::chrono::seconds(60), timing);
      INFO(settings << (outliers ? " on outlier inputs" : " on plain inputs"));
      REQUIRE(verdict.has_value());
      INFO(ToString(verdict->status) << ": " << verdict->correctness.failure << verdict->error);
      REQUIRE(verdict->status == Status::kMeasured);
      REQUIRE(verdict->timing.has_value());
      CHECK(verdict->timing->recheck_passed);
      CHECK(verdict->timing->median_us > 0);
      checks[outliers] = verdict->correctness.checks;
      WARN(settings << (outliers ? " outlier inputs: " : " plain inputs: ")
                    << verdict->timing->median_us << " us, " << verdict->correctness.checks
                    << " checks");
    }
    // One more seed per check problem.
    CHECK(checks[1] > checks[0]);
    CHECK((checks[1] - checks[0]) * bench.manifest("sdpa_hopper").correctness.seeds == checks[0]);
  }

  // A run timed on outlier inputs names it, and is not resumed with plain timings.
  test::TempDir dir;
  const std::string db = (dir.path() / "evo.db").string();
  const std::vector<std::string> run = {"run",  "-t", "sdpa_hopper", "--shape", "1,4,512,64",
                                        "--db", db,   "--seed",      "3",       "--no-retime"};
  std::vector<std::string> outlier_run = run;
  for (const char* arg : {"--budget", "3", "--time-on-outliers"}) outlier_run.push_back(arg);
  const auto first = test::RunEvo(outlier_run, dir.path());
  INFO(first.err);
  REQUIRE(first.exit_code == 0);
  CHECK(first.err.find("gpu, timed on inputs with outlier rows") != std::string::npos);
  std::vector<std::string> plain_run = run;
  for (const char* arg : {"--budget", "6"}) plain_run.push_back(arg);
  const auto plain = test::RunEvo(plain_run, dir.path());
  CHECK(plain.exit_code == 2);
  CHECK(plain.err.find("was evaluated by gpu, timed on inputs with outlier rows, this is gpu;") !=
        std::string::npos);
  outlier_run[outlier_run.size() - 2] = "6";
  const auto resumed = test::RunEvo(outlier_run, dir.path());
  INFO(resumed.err);
  CHECK(resumed.exit_code == 0);
  CHECK(resumed.err.find("resuming run 1: 3 of 6 evaluated") != std::string::npos);
}

}  // namespace
}  // namespace evo
