#pragma once

#include <stdexcept>

namespace evo {

// Bad input or a broken environment; the message is shown to the user as is.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace evo
