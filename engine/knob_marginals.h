#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "kernel_templates/genome.h"
#include "kernel_templates/manifest.h"
#include "population/candidate.h"

namespace evo {

struct KnobMarginalOptions {
  // The fastest this share of the finished candidates (at least min_good, timed ones only) are
  // the good ones; the rest, failures included, are the others.
  double good_share = 0.15;
  int min_good = 2;
  // Candidates' worth of the base rate (good ones / all) each value's rate is drawn towards: a
  // value seen once among few candidates does not decide alone, and one never tried reads as
  // neither good nor bad.
  double prior = 1.0;
};

// Knob by knob, how much more often each value is found among the fastest finished candidates
// than among all of them, and a configuration's sum of those log ratios (a naive Bayes score:
// each knob read alone). The cost model reads the knobs jointly, and with a few dozen candidates
// its forecasts near the best are pessimistic, the failures around it counting as slow; per-knob
// counts settle sooner on which value of each knob the fast configurations share, and where each
// knob's fastest value alone points at the best (sdpa_fp8: BLOCK_M=256, BLOCK_N=32, NUM_WARPS=8,
// FAST_EXP=1) the sum ranks the configuration that combines them first, as TPE's per-knob
// densities do. Failures count among the others: a value that mostly fails is not one the fast
// configurations share. A pure function of the history, so a resumed search reads the same.
class KnobMarginals {
 public:
  KnobMarginals(const Manifest& manifest, const std::vector<CandidateRecord>& history,
                const KnobMarginalOptions& options = {});

  // log(P(good | knob = value) / P(good)), the rate drawn towards P(good) by options.prior; 0
  // before anything was timed, and for a knob or value the manifest does not name.
  double LogRatio(const std::string& knob, int64_t value) const;
  // The sum of LogRatio over the configuration's knobs.
  double LogRatio(const Genome& genome) const;

  int good() const { return good_; }
  int others() const { return others_; }

 private:
  std::map<std::string, std::map<int64_t, double>, std::less<>> log_ratio_;
  int good_ = 0;
  int others_ = 0;
};

}  // namespace evo
