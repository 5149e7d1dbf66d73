#pragma once

#include <cstdint>

namespace evo {

// IEEE binary16 <-> binary32 on the host, rounding to nearest even, with subnormals, infinities
// and NaN; the GPU's cvt.rn.f16.f32 rounds the same way.
uint16_t FloatToHalf(float value);
float HalfToFloat(uint16_t half);

}  // namespace evo
