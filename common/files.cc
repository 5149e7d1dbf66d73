#include "common/files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include "common/error.h"

namespace evo {

std::string ReadFile(const std::filesystem::path& path) {
  // A folder opens as a stream and reads as nothing: said as what it is, not as an empty file
  // (a manifest.json that is a folder was reported as a JSON parse error).
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    throw Error("cannot read '" + path.string() + "': it is a folder");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw Error("cannot read '" + path.string() + "': " + std::strerror(errno));
  }
  std::ostringstream content;
  content << in.rdbuf();
  if (in.bad()) throw Error("error while reading '" + path.string() + "'");
  return std::move(content).str();
}

std::optional<std::string> TryReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream content;
  content << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return std::move(content).str();
}

void WriteFileAtomically(const std::filesystem::path& path, std::string_view content) {
  std::random_device entropy;
  const std::filesystem::path temporary =
      path.string() + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(entropy());
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw Error("cannot create '" + temporary.string() + "': " + std::strerror(errno));
  }
  size_t written = 0;
  while (written < content.size()) {
    const ssize_t n = ::write(fd, content.data() + written, content.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int saved = errno;
      ::close(fd);
      ::unlink(temporary.c_str());
      throw Error("cannot write '" + temporary.string() + "': " + std::strerror(saved));
    }
    written += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const int saved = errno;
    ::unlink(temporary.c_str());
    throw Error("cannot flush '" + temporary.string() + "': " + std::strerror(saved));
  }
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    const int saved = errno;
    ::unlink(temporary.c_str());
    throw Error("cannot rename into '" + path.string() + "': " + std::strerror(saved));
  }
}

}  // namespace evo
