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
#include <optional>
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

// The process holding an flock on the file `fd` or `path` names, from /proc/locks: lines such as
// "1: FLOCK  ADVISORY  WRITE 15307 fe:00:10953226 0 EOF" give the lock's kind, the holder's pid,
// and the file as device major:minor (hex) and inode; waiters carry a "->".
std::optional<int64_t> FlockHolder(const struct stat& file) {
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

std::optional<int64_t> FlockHolder(const std::filesystem::path& path) {
  struct stat file {};
  if (::stat(path.c_str(), &file) != 0) return std::nullopt;
  return FlockHolder(file);
}

// Takes an exclusive flock on `fd` without waiting; returns errno, or 0 once held.
int TryFlock(int fd) {
  int result = 0;
  do {
    result = ::flock(fd, LOCK_EX | LOCK_NB);
  } while (result != 0 && errno == EINTR);
  return result == 0 ? 0 : errno;
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
  const auto in_use = [&](const std::string& holder) {
    return Error("database '" + database.string() + "' is in use by another evo run (pid " +
                 holder + ")");
  };
  // Close-on-exec: a worker process started by this run must not inherit the lock and keep it
  // after the run itself has died.
  const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw Error("cannot open lock file '" + lock_path.string() + "': " + ErrnoText(errno));
  }
  if (const int error = TryFlock(fd); error != 0) {
    const std::string holder = error == EWOULDBLOCK ? HolderPid(fd) : "";
    ::close(fd);
    if (error == EWOULDBLOCK) throw in_use(holder);
    throw Error("cannot lock '" + lock_path.string() + "': " + ErrnoText(error));
  }
  fd_ = fd;
  // Best effort: the pid serves only the message another run shows, and the lock holds anyway.
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) == 0) {
    [[maybe_unused]] const ssize_t written = ::pwrite(fd_, pid.data(), pid.size(), 0);
  }
  // The lock file goes by the database's name, and a hard link is another name of the same file:
  // the database itself is locked too. It is created here if new (SQLite takes an empty file as
  // an empty database), so that no name of it is ever unlocked during a run. SQLite locks with
  // fcntl(2), which flock(2) does not touch on Linux.
  const int database_fd = ::open(database.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0644);
  if (database_fd < 0) {
    const int error = errno;
    ::close(fd_);
    fd_ = -1;
    throw Error("cannot open database '" + database.string() + "': " + ErrnoText(error));
  }
  if (const int error = TryFlock(database_fd); error != 0) {
    struct stat file {};
    const bool known = ::fstat(database_fd, &file) == 0;
    const std::optional<int64_t> holder = known ? FlockHolder(file) : std::nullopt;
    ::close(database_fd);
    ::close(fd_);
    fd_ = -1;
    if (error == EWOULDBLOCK) throw in_use(holder ? std::to_string(*holder) : "unknown");
    throw Error("cannot lock '" + database.string() + "': " + ErrnoText(error));
  }
  database_fd_ = database_fd;
}

RunLock::~RunLock() {
  // Closing the last descriptor of the open file releases the flock. Closing a descriptor of the
  // database also drops every fcntl lock this process holds on it, SQLite's included: a RunLock
  // is made before the store's connection and outlives it.
  if (database_fd_ >= 0) ::close(database_fd_);
  if (fd_ >= 0) ::close(fd_);
}

std::optional<int64_t> RunLockHolder(const std::filesystem::path& database) {
  if (auto holder = FlockHolder(LockPath(database))) return holder;
  // A run through another name of the same file (a hard link) holds the database's own flock.
  return FlockHolder(database);
}

}  // namespace evo
