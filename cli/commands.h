#pragma once

namespace evo::cli {

// Exit codes of every evo command.
inline constexpr int kExitOk = 0;
inline constexpr int kExitRejected = 1;  // the configuration did not pass a gate
inline constexpr int kExitError = 2;     // bad input or a broken environment

int Main(int argc, char** argv);

}  // namespace evo::cli
