#pragma once

#include <vector>

namespace evo {

// The q-quantile (q in [0, 1]) of ascending `sorted` samples, interpolated between the two
// nearest ranks. It stays between those two samples and never decreases with q, so p10 <= median
// <= p90 holds exactly, even when neighbouring samples are equal.
double Percentile(const std::vector<double>& sorted, double q);

}  // namespace evo
