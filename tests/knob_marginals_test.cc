#include "engine/knob_marginals.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <optional>

#include "engine/random.h"
#include "engine/search_space.h"
#include "tests/sdpa_variants.h"

namespace evo {
namespace {

const Manifest& SdpaManifest() { return test::SdpaManifestWithoutSplitKnobs(); }

// A landscape where each knob's best value alone points at the best configuration (BLOCK_M
// position 3, BLOCK_N 2, NUM_WARPS 2, FAST_EXP=1, PERSISTENT=0), as on sdpa_fp8's recording.
double Separable(const Genome& g) {
  const auto square = [](int64_t x) { return static_cast<double>(x * x); };
  return 20 + 3 * square(test::SdpaKnobPosition("BLOCK_M", g) - 3) +
         2 * square(test::SdpaKnobPosition("BLOCK_N", g) - 2) +
         2 * square(test::SdpaKnobPosition("NUM_WARPS", g) - 2) +
         4.0 * static_cast<double>(1 - g.at("FAST_EXP")) +
         1.5 * static_cast<double>(g.at("PERSISTENT"));
}

// A finished candidate, measured at `us`, or a resource reject when `us` is empty.
CandidateRecord Finished(int64_t id, const Genome& genome, std::optional<double> us) {
  CandidateRecord record;
  record.id = id;
  record.proposal.genome = genome;
  record.state = CandidateState::kFinished;
  if (us) {
    record.outcome.status = Status::kMeasured;
    record.outcome.gpu = GpuVerdict{};
    record.outcome.gpu->timing = TimingFigures{};
    record.outcome.gpu->timing->median_us = *us;
  } else {
    record.outcome.status = Status::kResourceReject;
    record.outcome.reason = "spills registers";
  }
  return record;
}

TEST_CASE("per-knob marginals rank the configuration that combines each knob's best value first",
          "[engine][model]") {
  std::vector<Genome> all = test::SdpaSpaceWithoutSplitKnobs().Enumerate();
  REQUIRE(all.size() > 500);
  Random random(5);
  for (size_t i = all.size(); i > 1; --i)
    std::swap(all[i - 1], all[static_cast<size_t>(random.Below(static_cast<int64_t>(i)))]);
  // 60 random configurations are the history; the rest are to be ranked.
  constexpr size_t kHistory = 60;
  std::vector<CandidateRecord> history;
  for (size_t i = 0; i < kHistory; ++i)
    history.push_back(Finished(static_cast<int64_t>(i) + 1, all[i], Separable(all[i])));
  const KnobMarginals marginals(SdpaManifest(), history);
  CHECK(marginals.good() == 9);  // 15 % of 60
  CHECK(marginals.others() == 51);

  CHECK(marginals.LogRatio("FAST_EXP", 1) > marginals.LogRatio("FAST_EXP", 0));
  CHECK(marginals.LogRatio("BLOCK_M", SdpaManifest().FindKnob("BLOCK_M")->values[3]) >
        marginals.LogRatio("BLOCK_M", SdpaManifest().FindKnob("BLOCK_M")->values[0]));

  // The unexplored configuration ranked first takes each knob's best value: the best there is.
  const Genome* first = &all[kHistory];
  for (size_t i = kHistory; i < all.size(); ++i) {
    if (marginals.LogRatio(all[i]) > marginals.LogRatio(*first)) first = &all[i];
  }
  INFO(FormatGenome(SdpaManifest(), *first));
  CHECK(Separable(*first) == 20);
}

TEST_CASE("per-knob marginals: failures are among the others, an untried value is neutral",
          "[engine][model]") {
  const Genome base = DefaultGenome(SdpaManifest());
  const auto with = [&](int64_t fast_exp, int64_t persistent) {
    Genome genome = base;
    genome["FAST_EXP"] = fast_exp;
    genome["PERSISTENT"] = persistent;
    return genome;
  };
  // Nothing timed yet: every value reads 0.
  CHECK(KnobMarginals(SdpaManifest(), {Finished(1, with(1, 0), std::nullopt)}).LogRatio(base) == 0);

  // The two fastest have FAST_EXP=1; the failures have FAST_EXP=0, as do the slow ones.
  std::vector<CandidateRecord> history = {
      Finished(1, with(1, 0), 10.0),         Finished(2, with(1, 0), 11.0),
      Finished(3, with(0, 0), 30.0),         Finished(4, with(0, 0), 31.0),
      Finished(5, with(0, 0), std::nullopt), Finished(6, with(0, 0), std::nullopt)};
  const KnobMarginals marginals(SdpaManifest(), history);
  CHECK(marginals.good() == 2);
  CHECK(marginals.LogRatio("FAST_EXP", 1) > 0);
  CHECK(marginals.LogRatio("FAST_EXP", 0) < 0);
  // PERSISTENT=1 was never tried: no evidence either way. PERSISTENT=0 is every candidate's.
  CHECK(marginals.LogRatio("PERSISTENT", 1) == Approx(0).margin(1e-12));
  CHECK(marginals.LogRatio("PERSISTENT", 0) == Approx(0).margin(1e-12));
  // A knob the manifest does not name reads 0.
  CHECK(marginals.LogRatio("NO_SUCH_KNOB", 1) == 0);

  // A failure is never among the good, even when there are fewer timed candidates than
  // min_good.
  const KnobMarginals one_timed(
      SdpaManifest(), {Finished(1, with(1, 0), 10.0), Finished(2, with(0, 0), std::nullopt),
                       Finished(3, with(0, 0), std::nullopt)});
  CHECK(one_timed.good() == 1);
  CHECK(one_timed.LogRatio("FAST_EXP", 1) > 0);
}

}  // namespace
}  // namespace evo
