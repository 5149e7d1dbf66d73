#include "evaluator/cuda_errors.h"

#include <catch2/catch.hpp>

namespace evo {
namespace {

TEST_CASE("CUDA errors that poison the context are told from those that do not", "[cuda]") {
  for (CUresult poisoning :
       {CUDA_ERROR_ILLEGAL_ADDRESS, CUDA_ERROR_MISALIGNED_ADDRESS, CUDA_ERROR_ILLEGAL_INSTRUCTION,
        CUDA_ERROR_LAUNCH_FAILED, CUDA_ERROR_ASSERT, CUDA_ERROR_LAUNCH_TIMEOUT,
        CUDA_ERROR_HARDWARE_STACK_ERROR, CUDA_ERROR_INVALID_PC, CUDA_ERROR_INVALID_ADDRESS_SPACE,
        CUDA_ERROR_CONTEXT_IS_DESTROYED, CUDA_ERROR_ECC_UNCORRECTABLE, CUDA_ERROR_UNKNOWN}) {
    INFO(static_cast<int>(poisoning));
    CHECK(PoisonsContext(poisoning));
  }
  for (CUresult recoverable :
       {CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_OUT_OF_MEMORY,
        CUDA_ERROR_NO_BINARY_FOR_GPU, CUDA_ERROR_NOT_FOUND, CUDA_ERROR_INVALID_IMAGE,
        CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE}) {
    INFO(static_cast<int>(recoverable));
    CHECK_FALSE(PoisonsContext(recoverable));
  }
  // A code this build of evo has never heard of is treated as the worst case.
  CHECK(PoisonsContext(static_cast<CUresult>(123456)));
}

}  // namespace
}  // namespace evo
