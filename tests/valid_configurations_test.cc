#include "engine/valid_configurations.h"

#include <catch2/catch.hpp>
#include <set>

#include "common/error.h"
#include "engine/search_space.h"
#include "kernel_templates/configuration.h"
#include "kernel_templates/template_library.h"
#include "tests/test_support.h"

namespace evo {
namespace {

const Manifest& FullHopperManifest() {
  static const TemplateLibrary library = TemplateLibrary::Load({});
  return library.Find("sdpa_hopper").manifest;
}

// sdpa_hopper with CLUSTER_M at 1 and LAGGED_MAX at 0 only. The spaces tested one configuration
// at a time below visit every knob combination, which SearchSpace allows up to kMaxEnumerated;
// CLUSTER_M's second value took sdpa_hopper past it.
const Manifest& HopperManifest() {
  static const Manifest manifest = [] {
    Manifest cut = FullHopperManifest();
    for (KnobSpec& knob : cut.knobs) {
      if (knob.name == "CLUSTER_M") knob.values = {1};
      if (knob.name == "LAGGED_MAX") knob.values = {0};
    }
    return cut;
  }();
  return manifest;
}

// Spaces where few combinations are valid: decode with grouped heads (the split-KV knobs
// matter) and a short causal square (they are mostly fixed by the problem).
std::vector<Problem> SparseHopperProblems() {
  const Manifest& manifest = HopperManifest();
  Problem decode = test::AttentionProblem(manifest, 1, 32, 1, 8192, 128, 0);
  decode["H_kv"] = 8;
  return {decode, test::AttentionProblem(manifest, 2, 8, 512, 512, 64, 1)};
}

// A configuration drawn from the knobs' domains, valid or not.
Genome AnyGenome(const Manifest& manifest, Random& random) {
  Genome genome;
  for (const KnobSpec& knob : manifest.knobs) genome[knob.name] = random.Pick(knob.values);
  return genome;
}

TEST_CASE("A listed space answers as one that tests each configuration alone", "[engine]") {
  const Manifest& manifest = HopperManifest();
  for (const Problem& problem : SparseHopperProblems()) {
    const ArchInfo arch = ArchByName("sm_90");
    // The space lists itself under its own limits, so what follows compares the list with the
    // tests one at a time, not the slow way with itself.
    REQUIRE(ValidConfigurations::List(
        manifest, problem, arch,
        [&](const Genome& genome) {
          return !FirstViolatedConstraint(manifest,
                                          CompileBindings(manifest, genome, problem, arch));
        },
        SearchSpace::kMaxListed, SearchSpace::kMaxListingVisits));
    const SearchSpace listed(manifest, problem, arch);
    const SearchSpace alone(manifest, problem, arch, 0);
    const std::vector<Genome> valid = listed.Enumerate();
    // Few valid configurations among many: the case the list is for.
    REQUIRE(valid.size() > 100);
    CHECK(valid == alone.Enumerate());

    Random draws(5);
    int valid_drawn = 0;
    for (int i = 0; i < 5000; ++i) {
      const Genome genome = AnyGenome(manifest, draws);
      const bool is_valid = alone.IsValid(genome);
      valid_drawn += is_valid ? 1 : 0;
      REQUIRE(listed.IsValid(genome) == is_valid);
    }
    CHECK(valid_drawn < 500);

    // The same repairs from the same seed. A draw is valid either way; after 64 invalid draws
    // the listed space takes a listed configuration where the other repairs the last draw, so
    // there the two differ.
    Random listed_random(11);
    Random alone_random(11);
    std::set<Genome> sampled;
    for (int i = 0; i < 200; ++i) {
      const Genome genome = listed.Sample(listed_random).value();
      REQUIRE(alone.IsValid(genome));
      REQUIRE(alone.IsValid(alone.Sample(alone_random).value()));
      sampled.insert(genome);
    }
    CHECK(sampled.size() > 50);
    Random listed_repairs(12);
    Random alone_repairs(12);
    for (int i = 0; i < 100; ++i) {
      const Genome genome = AnyGenome(manifest, draws);
      REQUIRE(listed.Repair(genome, listed_repairs) == alone.Repair(genome, alone_repairs));
    }
    CHECK(listed_repairs.Next() == alone_repairs.Next());
  }
}

TEST_CASE("A space too large to list or enumerate says so, and the listed one enumerates",
          "[engine]") {
  const Manifest& manifest = FullHopperManifest();
  const Problem problem = SparseHopperProblems().front();
  const ArchInfo arch = ArchByName("sm_90");
  uint64_t combinations = 1;
  for (const KnobSpec& knob : manifest.knobs) combinations *= knob.values.size();
  REQUIRE(combinations > SearchSpace::kMaxEnumerated);
  const SearchSpace unlisted(manifest, problem, arch, 0);
  CHECK_FALSE(unlisted.Enumerable());
  CHECK_THROWS_WITH(unlisted.Enumerate(), Catch::Contains("fix knobs (evo sweep --fix"));
  // Sampling does not need the list.
  Random random(1);
  CHECK(unlisted.IsValid(unlisted.Sample(random).value()));
  const SearchSpace listed(manifest, problem, arch);
  CHECK(listed.Enumerable());
  const std::vector<Genome> valid = listed.Enumerate();
  CHECK(valid.size() > 100);
  // Both values of CLUSTER_M are among them: the decode problem is not causal, one split.
  std::set<int64_t> clusters;
  for (const Genome& genome : valid) clusters.insert(genome.at("CLUSTER_M"));
  CHECK(clusters == std::set<int64_t>{1, 2});
  // The cut space is small enough to enumerate without its list.
  CHECK(SearchSpace(HopperManifest(), problem, arch, 0).Enumerable());
}

TEST_CASE("A space over the listing limit is tested one configuration at a time", "[engine]") {
  const Manifest& manifest = HopperManifest();
  const Problem problem = SparseHopperProblems().front();
  const ArchInfo arch = ArchByName("sm_90");
  const auto is_valid = [&](const Genome& genome) {
    return !FirstViolatedConstraint(manifest, CompileBindings(manifest, genome, problem, arch));
  };
  const std::optional<ValidConfigurations> all = ValidConfigurations::List(
      manifest, problem, arch, is_valid, SearchSpace::kMaxListed, size_t{1} << 30);
  REQUIRE(all);
  const size_t valid = all->size();
  CHECK_FALSE(
      ValidConfigurations::List(manifest, problem, arch, is_valid, valid - 1, size_t{1} << 30));
  CHECK_FALSE(ValidConfigurations::List(manifest, problem, arch, is_valid, valid, 1000));

  // Too large to list: the same answers, found the slow way.
  const SearchSpace unlisted(manifest, problem, arch, valid - 1);
  const SearchSpace listed(manifest, problem, arch);
  CHECK(unlisted.Enumerate() == listed.Enumerate());
  Random a(3);
  for (int i = 0; i < 20; ++i) REQUIRE(listed.IsValid(unlisted.Sample(a).value()));
}

TEST_CASE("The list keeps a configuration whose constraints only fail to evaluate early",
          "[engine]") {
  // "12 / A" cannot be evaluated at A = 0, but the full test never gets there: the constraint
  // before it, which also needs B, already fails for A = 0.
  Manifest manifest;
  manifest.name = "early";
  manifest.knobs = {KnobSpec{"A", {0, 1, 2, 3}, 1, ""}, KnobSpec{"B", {0, 1}, 0, ""}};
  manifest.constraints = {ConstraintSpec{"a_positive", Expression::Parse("A > 0 && B >= 0"), ""},
                          ConstraintSpec{"a_small", Expression::Parse("12 / A >= 6"), ""}};
  const ArchInfo arch = ArchByName("sm_90");
  const SearchSpace listed(manifest, {}, arch);
  const SearchSpace alone(manifest, {}, arch, 0);
  const std::vector<Genome> expected = {
      {{"A", 1}, {"B", 0}}, {{"A", 1}, {"B", 1}}, {{"A", 2}, {"B", 0}}, {{"A", 2}, {"B", 1}}};
  // The walk itself lists them (the space would fall back to testing one at a time if it threw).
  const std::optional<ValidConfigurations> list = ValidConfigurations::List(
      manifest, {}, arch, [&](const Genome& genome) { return alone.IsValid(genome); },
      SearchSpace::kMaxListed, SearchSpace::kMaxListingVisits);
  REQUIRE(list);
  REQUIRE(list->size() == expected.size());
  for (size_t i = 0; i < expected.size(); ++i) CHECK(list->GenomeAt(manifest, i) == expected[i]);
  CHECK(alone.Enumerate() == expected);
  CHECK(listed.Enumerate() == expected);
  CHECK_FALSE(listed.IsValid({{"A", 0}, {"B", 1}}));
  CHECK(listed.IsValid({{"A", 2}, {"B", 1}}));
  // Outside the domains the list has no row; the test alone answers.
  CHECK_FALSE(listed.IsValid({{"A", 5}, {"B", 1}}));
  CHECK(listed.IsValid({{"A", 1}, {"B", 7}}));
}

TEST_CASE("DomainIndices names each knob's position, or nothing for a foreign genome", "[engine]") {
  Manifest manifest;
  manifest.knobs = {KnobSpec{"A", {4, 8, 16}, 4, ""}, KnobSpec{"B", {1, 0}, 1, ""}};
  CHECK(DomainIndices(manifest, {{"A", 16}, {"B", 0}}) == std::vector<uint16_t>{2, 1});
  CHECK_FALSE(DomainIndices(manifest, {{"A", 12}, {"B", 0}}));
  CHECK_FALSE(DomainIndices(manifest, {{"A", 16}}));
  CHECK_FALSE(DomainIndices(manifest, {{"A", 16}, {"B", 0}, {"C", 1}}));
  CHECK_FALSE(DomainIndices(manifest, {{"A", 16}, {"C", 0}}));
}

}  // namespace
}  // namespace evo
