#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>

namespace evo {

// Only one `evo run` searches a database at a time: the lock is an flock(2) on "<db>.lock" (whose
// file names the holder's pid) and one on the database file itself (so that a hard link, another
// name of it, finds it locked too), which the kernel releases when the process ends however it
// ends (kill -9 included), so a crashed run never blocks its own resume. Readers (`evo show`)
// take no lock. Take it before opening the database for writing, and keep it until that
// connection is closed: closing the database's descriptor releases this process's fcntl locks on
// it, SQLite's included. A database that does not exist yet is created empty.
class RunLock {
 public:
  // Throws evo::Error naming the database and the holder's pid when another process holds it.
  explicit RunLock(const std::filesystem::path& database);
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;
  ~RunLock();

 private:
  int fd_ = -1;
  int database_fd_ = -1;
};

// The pid of the process that holds the run lock of `database` now, or nothing when none does.
// Reads /proc/locks rather than trying the lock, so that asking can never make an `evo run`
// starting at that moment find the database in use (`evo doctor` asks).
std::optional<int64_t> RunLockHolder(const std::filesystem::path& database);

}  // namespace evo
