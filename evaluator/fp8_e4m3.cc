#include "evaluator/fp8_e4m3.h"

// <math.h>: the float functions by their C names, as NVRTC knows them (GCC 12's <cmath> has no
// std::fabsf).
#include <math.h>

namespace evo {
namespace {

EVO_FP8_E4M3_FUNCTIONS(inline)

#define EVO_STRINGIZE(...) #__VA_ARGS__
#define EVO_EXPAND_AND_STRINGIZE(...) EVO_STRINGIZE(__VA_ARGS__)

}  // namespace

uint8_t FloatToE4M3(float value) { return evo_f32_to_e4m3(value); }

float E4M3ToFloat(uint8_t value) { return evo_e4m3_to_f32(value); }

const std::string& E4M3DeviceSource() {
  static const std::string source =
      std::string(EVO_EXPAND_AND_STRINGIZE(EVO_FP8_E4M3_FUNCTIONS(__device__ __forceinline__))) +
      "\n";
  return source;
}

}  // namespace evo
