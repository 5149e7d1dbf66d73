#pragma once

#include <cuda.h>

namespace evo {

// True for the errors after which the CUDA context is unusable (cuda.h: "the process must be
// terminated and relaunched", "the context cannot be used anymore"): the worker that saw one is
// replaced. Errors that leave the context usable (out of resources, an invalid launch
// configuration, a module that does not load) are recorded on the candidate and the worker
// carries on. An error evo does not know is treated as poisoning: a needless respawn costs a
// second, a poisoned context would fail every later candidate.
bool PoisonsContext(CUresult result);

}  // namespace evo
