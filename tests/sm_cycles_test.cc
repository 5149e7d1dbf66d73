// The SM clock averaged over a timing, the cycles it gives, and what they choose: the candidates
// re-timed side by side beside the elite.
#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include "evaluator/device_kernels.h"
#include "evaluator/gpu_verdict_json.h"
#include "population/candidate.h"
#include "population/retiming.h"

namespace evo {
namespace {

TimingFigures Timed(double median_us, double mean_mhz) {
  TimingFigures t;
  t.median_us = median_us;
  t.p10_us = median_us * 0.99;
  t.p90_us = median_us * 1.01;
  t.mean_sm_clock_mhz = mean_mhz;
  return t;
}

// A measured candidate whose first timing and confirmation are as given.
CandidateRecord Measured(int64_t id, const TimingFigures& first, const TimingFigures& second) {
  CandidateRecord c;
  c.id = id;
  c.state = CandidateState::kFinished;
  c.outcome.status = Status::kMeasured;
  c.outcome.gpu = GpuVerdict{};
  c.outcome.gpu->timing = first;
  c.confirmation = second;
  return c;
}

CandidateRecord Measured(int64_t id, double us, double mhz) {
  return Measured(id, Timed(us, mhz), Timed(us, mhz));
}

std::vector<int64_t> Ids(const std::vector<CandidateRecord>& candidates) {
  std::vector<int64_t> ids;
  for (const CandidateRecord& c : candidates) ids.push_back(c.id);
  return ids;
}

TEST_CASE("the mean SM clock from two stamps: the median over the SMs stamped in both",
          "[cycles]") {
  // Slots of (cycles, ns): SM 0 ran at 1500 MHz, SM 1 at 1600, SM 2 at 1900 (a median of 1600,
  // a mean of 1666.7); SM 3 was stamped only after, SM 4 only before, SM 5 in neither.
  std::vector<uint64_t> before(12, 0);
  std::vector<uint64_t> after(12, 0);
  const auto stamp = [](std::vector<uint64_t>& s, int sm, uint64_t cycles, uint64_t ns) {
    s[2 * sm] = cycles;
    s[2 * sm + 1] = ns;
  };
  stamp(before, 0, 1000, 5000);
  stamp(after, 0, 1000 + 1500 * 2000, 5000 + 2000 * 1000);
  stamp(before, 1, 7, 5001);
  stamp(after, 1, 7 + 1600 * 2000, 5001 + 2000 * 1000);
  stamp(before, 2, 99, 4999);
  stamp(after, 2, 99 + 1900 * 2000, 4999 + 2000 * 1000);
  stamp(after, 3, 1, 1);
  stamp(before, 4, 1, 1);
  CHECK(MeanClockMhz(before, after) == Approx(1600));
  // No SM stamped in both, or no time between the stamps: no figure.
  CHECK(MeanClockMhz(std::vector<uint64_t>(12, 0), after) == 0);
  CHECK(MeanClockMhz(before, before) == 0);
}

TEST_CASE("a timing's cycles; a candidate's are the more of its two timings'", "[cycles]") {
  CHECK(*Timed(900, 1600).median_cycles() == Approx(900 * 1600));
  CHECK(!Timed(900, 0).median_cycles());
  // 900 us at 1800 MHz is 1.62 M cycles, 920 at 1600 is 1.472 M.
  const CandidateRecord c = Measured(1, Timed(900, 1800), Timed(920, 1600));
  CHECK(*c.score_us() == 920);  // the slower time
  CHECK(*c.score_cycles() == Approx(1.62e6));
  // One timing without its clock (a record from before the gate measured it): no cycles.
  CHECK(!Measured(2, Timed(900, 1800), Timed(920, 0)).score_cycles());
  CandidateRecord unconfirmed = Measured(3, Timed(900, 1800), Timed(920, 1600));
  unconfirmed.confirmation.reset();
  CHECK(!unconfirmed.score_cycles());
}

TEST_CASE("a timing's mean clock survives the verdict's JSON; a verdict without one is unchanged",
          "[cycles]") {
  GpuVerdict verdict;
  verdict.timing = Timed(12.5, 1712.5);
  CHECK(GpuVerdictFromJson(GpuVerdictToJson(verdict)).timing->mean_sm_clock_mhz == 1712.5);
  verdict.timing->mean_sm_clock_mhz = 0;
  const nlohmann::json json = GpuVerdictToJson(verdict);
  CHECK(!json.at("timing").contains("mean_sm_clock_mhz"));
  CHECK(GpuVerdictFromJson(json).timing->mean_sm_clock_mhz == 0);
}

TEST_CASE(
    "the contenders re-timed beside the elite include, of the rest, up to K with fewer SM cycles "
    "than a member of the elite, best first by score",
    "[cycles][retime]") {
  // By time 1 < 2 < 3 < 4 < 5 < 6, each well outside the margin of the one before; by cycles
  // 6 and 5 come first: timed when the GPU's clock had fallen.
  const std::vector<CandidateRecord> candidates = {
      Measured(1, 800, 1800),   // 1.44 M cycles
      Measured(2, 850, 1800),   // 1.53 M
      Measured(3, 900, 1800),   // 1.62 M
      Measured(4, 950, 1800),   // 1.71 M
      Measured(5, 1000, 1400),  // 1.40 M
      Measured(6, 1100, 1250),  // 1.375 M
  };
  CHECK(Ids(SelectContenders(candidates, 2)) == std::vector<int64_t>{1, 2, 5, 6});
  CHECK(Ids(SelectContenders(candidates, 1)) == std::vector<int64_t>{1, 6});
  // Without clocks (older records) the contenders are the score's alone.
  std::vector<CandidateRecord> older = candidates;
  for (CandidateRecord& c : older) c.confirmation->mean_sm_clock_mhz = 0;
  CHECK(Ids(SelectContenders(older, 2)) == std::vector<int64_t>{1, 2});
  // None of the rest has fewer cycles than a member: none added.
  CHECK(Ids(SelectContenders(
            {Measured(1, 800, 1800), Measured(2, 850, 1800), Measured(3, 1000, 1800)}, 2)) ==
        std::vector<int64_t>{1, 2});
  // Already among them by score: not added twice.
  CHECK(Ids(SelectContenders({Measured(1, 800, 1800), Measured(2, 810, 1800)}, 2)) ==
        std::vector<int64_t>{1, 2});
}

}  // namespace
}  // namespace evo
