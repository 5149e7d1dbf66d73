#include "evaluator/cuda_errors.h"

#include <algorithm>
#include <array>

namespace evo {

bool PoisonsContext(CUresult result) {
  // Errors that are about the request, not the context's state.
  static constexpr std::array kRecoverable = {
      CUDA_SUCCESS,
      CUDA_ERROR_INVALID_VALUE,
      CUDA_ERROR_OUT_OF_MEMORY,
      CUDA_ERROR_NOT_INITIALIZED,
      CUDA_ERROR_DEINITIALIZED,
      CUDA_ERROR_NO_DEVICE,
      CUDA_ERROR_INVALID_DEVICE,
      CUDA_ERROR_INVALID_IMAGE,
      CUDA_ERROR_INVALID_CONTEXT,
      CUDA_ERROR_NO_BINARY_FOR_GPU,
      CUDA_ERROR_INVALID_PTX,
      CUDA_ERROR_UNSUPPORTED_PTX_VERSION,
      CUDA_ERROR_INVALID_SOURCE,
      CUDA_ERROR_FILE_NOT_FOUND,
      CUDA_ERROR_INVALID_HANDLE,
      CUDA_ERROR_NOT_FOUND,
      CUDA_ERROR_NOT_READY,
      CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES,
      CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE,
      CUDA_ERROR_NOT_PERMITTED,
      CUDA_ERROR_NOT_SUPPORTED,
  };
  return std::find(kRecoverable.begin(), kRecoverable.end(), result) == kRecoverable.end();
}

}  // namespace evo
