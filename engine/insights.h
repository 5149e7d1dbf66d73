#pragma once

#include <map>
#include <string>
#include <vector>

#include "kernel_templates/manifest.h"
#include "population/candidate.h"

namespace evo {

// How mutations should treat one knob, as the figures so far suggest.
struct KnobBias {
  double weight = 1;  // relative chance that a mutation picks this knob
  // Chance that a mutation of it moves toward the start of its domain: smaller values, as
  // domains are listed in ascending order.
  double down = 0.5;
  std::vector<int64_t> avoid;  // values whose candidates only ever failed
};

// Rules read from the stored candidates' compile and timing figures, which bias the next
// generation's mutations. Each rule that fires says why in one line.
struct Insights {
  std::map<std::string, KnobBias, std::less<>> knobs;  // every knob of the manifest
  std::vector<std::string> fired;  // e.g. "spills in 4 of 16: smaller BLOCK_N, fewer STAGES"
};

// `history`: the run's finished candidates, by id. Rules:
//  - spills, or registers over the limit -> knobs whose larger values cost registers move down;
//  - shared memory over the budget -> knobs whose larger values cost shared memory move down;
//  - low occupancy of the best candidates -> knobs that raise registers per CTA move down;
//  - values that only ever ended in runtime_error, timeout or incorrect are avoided;
//  - a knob whose change made a child faster than its parent keeps moving that way.
// Which knobs cost registers or shared memory is itself read from the figures: how the
// registers (shared memory) of compiled candidates rise along each knob's domain, fitted over
// all knobs at once so that knobs the constraints tie together are told apart.
Insights DeriveInsights(const Manifest& manifest, const std::vector<CandidateRecord>& history);

}  // namespace evo
