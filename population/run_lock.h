#pragma once

#include <filesystem>

namespace evo {

// Only one `evo run` searches a database at a time: the lock is an flock(2) on "<db>.lock",
// which the kernel releases when the process ends however it ends (kill -9 included), so a
// crashed run never blocks its own resume. Readers (`evo show`) take no lock.
class RunLock {
 public:
  // Throws evo::Error naming the database and the holder's pid when another process holds it.
  explicit RunLock(const std::filesystem::path& database);
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;
  ~RunLock();

 private:
  int fd_ = -1;
};

}  // namespace evo
