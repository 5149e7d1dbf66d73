#include "population/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "common/error.h"

namespace evo {
namespace {

std::string ErrnoText(int error) { return std::strerror(error); }

std::filesystem::path LockPath(const std::filesystem::path& database) {
  // The database's own name, through any symbolic link to it: two paths to one database take
  // one lock.
  std::error_code error;
  std::filesystem::path resolved = std::filesystem::weakly_canonical(database, error);
  std::filesystem::path lock_path = error ? database : resolved;
  lock_path += ".lock";
  return lock_path;
}

// The holder writes its pid after locking; a reader may catch it in between, or a file left by
// an older holder, so this is for the message only.
std::string HolderPid(int fd) {
  char text[32] = {};
  const ssize_t read = ::pread(fd, text, sizeof(text) - 1, 0);
  std::string pid;
  for (ssize_t i = 0; i < read && text[i] >= '0' && text[i] <= '9'; ++i) pid += text[i];
  return pid.empty() ? "unknown" : pid;
}

}  // namespace

RunLock::RunLock(const std::filesystem::path& database) {
  const std::filesystem::path lock_path = LockPath(database);
  if (!lock_path.parent_path().empty()) {
    std::error_code error;
    std::filesystem::create_directories(lock_path.parent_path(), error);
    if (error) {
      throw Error("cannot create the folder of '" + lock_path.string() + "': " + error.message());
    }
  }
  // Close-on-exec: a worker process started by this run must not inherit the lock and keep it
  // after the run itself has died.
  const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw Error("cannot open lock file '" + lock_path.string() + "': " + ErrnoText(errno));
  }
  int result = 0;
  do {
    result = ::flock(fd, LOCK_EX | LOCK_NB);
  } while (result != 0 && errno == EINTR);
  if (result != 0) {
    const int error = errno;
    const std::string holder = error == EWOULDBLOCK ? HolderPid(fd) : "";
    ::close(fd);
    if (error == EWOULDBLOCK) {
      throw Error("database '" + database.string() + "' is in use by another evo run (pid " +
                  holder + ")");
    }
    throw Error("cannot lock '" + lock_path.string() + "': " + ErrnoText(error));
  }
  fd_ = fd;
  // Best effort: the pid serves only the message another run shows, and the lock holds anyway.
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) == 0) {
    [[maybe_unused]] const ssize_t written = ::pwrite(fd_, pid.data(), pid.size(), 0);
  }
}

RunLock::~RunLock() {
  // Closing the last descriptor of the open file releases the flock.
  if (fd_ >= 0) ::close(fd_);
}

std::optional<int64_t> RunLockHolder(const std::filesystem::path& database) {
  struct stat file {};
  if (::stat(LockPath(database).c_str(), &file) != 0) return std::nullopt;
  // Lines such as "1: FLOCK  ADVISORY  WRITE 15307 fe:00:10953226 0 EOF": the lock's kind, the
  // holder's pid, and the file as device major:minor (hex) and inode; waiters carry a "->".
  std::ifstream locks("/proc/locks");
  std::string line;
  while (std::getline(locks, line)) {
    std::istringstream fields(line);
    std::string id, kind, mode, access, file_id;
    int64_t pid = 0;
    fields >> id >> kind;
    if (kind == "->") continue;
    fields >> mode >> access >> pid >> file_id;
    unsigned major_id = 0, minor_id = 0;
    unsigned long long inode = 0;
    if (kind != "FLOCK" || !fields ||
        std::sscanf(file_id.c_str(), "%x:%x:%llu", &major_id, &minor_id, &inode) != 3) {
      continue;
    }
    if (major_id == major(file.st_dev) && minor_id == minor(file.st_dev) &&
        inode == static_cast<unsigned long long>(file.st_ino)) {
      return pid;
    }
  }
  return std::nullopt;
}

}  // namespace evo
