#pragma once

#include <stdexcept>
#include <string>

namespace evo {

// Bad input or a broken environment; the message is shown to the user as is.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The JSON library's message without its exception id ("[json.exception.type_error.302] "): the
// file and line around it say where, and the rest says what.
inline std::string JsonMessage(const std::exception& error) {
  std::string what = error.what();
  if (what.starts_with("[json.exception.")) {
    const size_t end = what.find("] ");
    if (end != std::string::npos) what.erase(0, end + 2);
  }
  return what;
}

}  // namespace evo
