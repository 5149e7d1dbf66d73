#include "engine/search_space.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <set>

#include "common/error.h"
#include "tests/sdpa_variants.h"
#include "tests/test_support.h"

namespace evo {
namespace {

// Without the split-KV knobs, whose values only matter for grouped heads and short queries.
const Manifest& SdpaManifest() { return test::SdpaManifestWithoutSplitKnobs(); }

Problem SdpaProblem(int64_t head_dim) {
  Problem problem = DefaultProblem(SdpaManifest());
  problem["D"] = head_dim;
  return problem;
}

// Every combination of the domains, valid or not, by nested counting.
std::vector<Genome> AllGenomes(const Manifest& manifest) {
  std::vector<Genome> all = {Genome{}};
  for (const KnobSpec& knob : manifest.knobs) {
    std::vector<Genome> next;
    for (const Genome& partial : all) {
      for (int64_t value : knob.values) {
        Genome genome = partial;
        genome[knob.name] = value;
        next.push_back(std::move(genome));
      }
    }
    all = std::move(next);
  }
  return all;
}

// The two sdpa_fp16 constraints written out by hand, independent of the expression evaluator.
bool SdpaValidByHand(const Genome& g, int64_t head_dim, int64_t smem_limit) {
  const int64_t smem =
      (g.at("BLOCK_M") * head_dim + g.at("STAGES") * 2 * g.at("BLOCK_N") * head_dim) * 2;
  const int64_t accumulators =
      g.at("BLOCK_M") / g.at("NUM_WARPS") / 16 * (head_dim + g.at("BLOCK_N")) / 2;
  return g.at("BLOCK_M") % (16 * g.at("NUM_WARPS")) == 0 && smem <= smem_limit &&
         accumulators <= 192 && (g.at("WARP_SPECIALIZED") == 0 || g.at("STAGES") >= 2);
}

size_t DomainIndex(const KnobSpec& knob, int64_t value) {
  return static_cast<size_t>(std::find(knob.values.begin(), knob.values.end(), value) -
                             knob.values.begin());
}

// (knobs changed, steps along the domains) from `from` to `to`.
std::pair<int, int64_t> Distance(const Manifest& manifest, const Genome& from, const Genome& to) {
  int changed = 0;
  int64_t steps = 0;
  for (const KnobSpec& knob : manifest.knobs) {
    const auto a = static_cast<int64_t>(DomainIndex(knob, from.at(knob.name)));
    const auto b = static_cast<int64_t>(DomainIndex(knob, to.at(knob.name)));
    changed += a != b ? 1 : 0;
    steps += std::abs(a - b);
  }
  return {changed, steps};
}

TEST_CASE("Enumerate lists exactly the valid configurations, first knob slowest", "[engine]") {
  const Manifest& manifest = SdpaManifest();
  const ArchInfo& arch = ArchByName("sm_90");
  const std::vector<Genome> all = AllGenomes(manifest);
  REQUIRE(all.size() == 5120);

  for (int64_t head_dim : {64, 128}) {
    const SearchSpace space(manifest, SdpaProblem(head_dim), arch);
    size_t by_hand = 0;
    for (const Genome& genome : all) {
      const bool valid = SdpaValidByHand(genome, head_dim, arch.max_smem_per_block_optin);
      REQUIRE(space.IsValid(genome) == valid);
      by_hand += valid ? 1 : 0;
    }
    const std::vector<Genome> valid = space.Enumerate();
    CHECK(valid.size() == by_hand);
    if (head_dim == 64) CHECK(valid.size() == 2128);
    if (head_dim == 128) CHECK(valid.size() < 1792);

    // `all` is built with the first knob slowest too, so its valid subsequence is the order.
    std::vector<Genome> expected;
    for (const Genome& genome : all) {
      if (SdpaValidByHand(genome, head_dim, arch.max_smem_per_block_optin)) {
        expected.push_back(genome);
      }
    }
    CHECK(valid == expected);
  }
}

TEST_CASE("Enumerate refuses a space too large to list or to count, naming --fix", "[engine]") {
  Manifest manifest = SdpaManifest();
  for (int i = 0; i < 20; ++i) {
    KnobSpec knob;
    knob.name = "EXTRA_" + std::to_string(i);
    knob.values = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    knob.default_value = 0;
    manifest.knobs.push_back(knob);
  }
  const SearchSpace space(manifest, SdpaProblem(64), ArchByName("sm_90"));
  CHECK_THROWS_WITH(space.Enumerate(),
                    "the space of " + manifest.name +
                        " holds more than 16777216 knob combinations and too many valid ones to "
                        "list; fix knobs (evo sweep --fix KNOB=VALUE) to cut it");
  // Draws still work there.
  Random random(3);
  CHECK(space.Sample(random).has_value());
}

TEST_CASE("Violation names the first broken constraint", "[engine]") {
  const Manifest& manifest = SdpaManifest();
  const SearchSpace space(manifest, SdpaProblem(128), ArchByName("sm_90"));
  CHECK_FALSE(space.Violation(DefaultGenome(manifest)));
  const auto rows = space.Violation(test::GenomeFromSettings(manifest, "BLOCK_M=16 NUM_WARPS=4"));
  REQUIRE(rows);
  CHECK(rows->name == "warp_rows_multiple_of_16");
  const auto smem =
      space.Violation(test::GenomeFromSettings(manifest, "BLOCK_M=256 BLOCK_N=128 STAGES=4"));
  REQUIRE(smem);
  CHECK(smem->name == "smem_fits_block");
}

TEST_CASE("Sample draws only valid configurations, and many of them", "[engine]") {
  const Manifest& manifest = SdpaManifest();
  const SearchSpace space(manifest, SdpaProblem(128), ArchByName("sm_90"));
  Random random(5);
  std::set<Genome> seen;
  for (int i = 0; i < 4000; ++i) {
    const std::optional<Genome> genome = space.Sample(random);
    REQUIRE(genome);
    REQUIRE(space.IsValid(*genome));
    seen.insert(*genome);
  }
  CHECK(seen.size() > space.Enumerate().size() * 3 / 4);
}

TEST_CASE("Repair keeps a valid configuration as it is", "[engine]") {
  const Manifest& manifest = SdpaManifest();
  const SearchSpace space(manifest, SdpaProblem(128), ArchByName("sm_90"));
  Random random(1);
  for (const Genome& genome : space.Enumerate()) REQUIRE(space.Repair(genome, random) == genome);
}

TEST_CASE("Repair finds the nearest valid configuration", "[engine]") {
  const Manifest& manifest = SdpaManifest();
  for (int64_t head_dim : {64, 128}) {
    const SearchSpace space(manifest, SdpaProblem(head_dim), ArchByName("sm_90"));
    const std::vector<Genome> valid = space.Enumerate();
    Random random(static_cast<uint64_t>(head_dim));
    int checked = 0;
    for (const Genome& genome : AllGenomes(manifest)) {
      if (space.IsValid(genome)) continue;
      // Every invalid configuration at D=64, a third of them at D=128, to stay quick.
      if (head_dim == 128 && random.Below(3) != 0) continue;
      std::pair<int, int64_t> best = {1000, 0};
      for (const Genome& candidate : valid)
        best = std::min(best, Distance(manifest, genome, candidate));
      const std::optional<Genome> repaired = space.Repair(genome, random);
      REQUIRE(repaired);
      REQUIRE(space.IsValid(*repaired));
      INFO(FormatGenome(manifest, genome) << " -> " << FormatGenome(manifest, *repaired));
      REQUIRE(Distance(manifest, genome, *repaired) == best);
      ++checked;
    }
    CHECK(checked > 100);
  }
}

TEST_CASE("Repair picks among equally near configurations at random", "[engine]") {
  const Manifest& manifest = SdpaManifest();
  const SearchSpace space(manifest, SdpaProblem(64), ArchByName("sm_90"));
  // BLOCK_M=32 with 4 warps: BLOCK_M=64 and NUM_WARPS=2 are both one knob and one step away.
  const Genome genome = test::GenomeFromSettings(manifest, "BLOCK_M=32 NUM_WARPS=4");
  std::set<Genome> repairs;
  for (uint64_t seed = 0; seed < 32; ++seed) {
    Random random(seed);
    const std::optional<Genome> repaired = space.Repair(genome, random);
    REQUIRE(repaired);
    repairs.insert(*repaired);
  }
  CHECK(repairs == std::set<Genome>{test::GenomeFromSettings(manifest, "BLOCK_M=64 NUM_WARPS=4"),
                                    test::GenomeFromSettings(manifest, "BLOCK_M=32 NUM_WARPS=2")});
}

TEST_CASE("A space without valid configurations samples and repairs to nothing", "[engine]") {
  const Manifest& manifest = SdpaManifest();
  ArchInfo tiny = ArchByName("sm_90");
  tiny.max_smem_per_block_optin = 1024;  // not even the smallest tiles fit
  const SearchSpace space(manifest, SdpaProblem(64), tiny);
  Random random(2);
  CHECK(space.Enumerate().empty());
  CHECK_FALSE(space.Sample(random));
  CHECK_FALSE(space.Repair(DefaultGenome(manifest), random));
}

TEST_CASE("Repair refuses a genome outside the knobs' domains", "[engine]") {
  const Manifest& manifest = SdpaManifest();
  const SearchSpace space(manifest, SdpaProblem(64), ArchByName("sm_90"));
  Random random(2);
  Genome genome = DefaultGenome(manifest);
  genome["BLOCK_M"] = 48;
  CHECK_THROWS_AS(space.Repair(genome, random), Error);
}

}  // namespace
}  // namespace evo
