#include "population/run_lock.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <optional>
#include <string>

#include "common/error.h"
#include "common/files.h"
#include "tests/test_support.h"

namespace evo {
namespace {

namespace fs = std::filesystem;

std::string InUseMessage(const fs::path& database, pid_t pid) {
  return "database '" + database.string() + "' is in use by another evo run (pid " +
         std::to_string(pid) + ")";
}

// Exit codes of the child that tries the lock.
constexpr int kRefused = 10;
constexpr int kTaken = 11;
constexpr int kOtherError = 12;

// Forks a child that tries the lock and exits with one of the codes above; it returns without
// running anything of the parent's (no destructors, no Catch).
int TryLockInChild(const fs::path& database, const std::string& expected_message) {
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    int code = kOtherError;
    try {
      RunLock lock(database);
      code = kTaken;
    } catch (const Error& e) {
      code = e.what() == expected_message ? kRefused : kOtherError;
    } catch (...) {
    }
    ::_exit(code);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  return WEXITSTATUS(status);
}

// A child that takes the lock, says so through a pipe and waits to be told how to end.
class LockHolder {
 public:
  explicit LockHolder(const fs::path& database) {
    int ready[2];
    int go[2];
    REQUIRE(::pipe(ready) == 0);
    REQUIRE(::pipe(go) == 0);
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::close(ready[0]);
      ::close(go[1]);
      char answer = 'x';
      try {
        // Deliberately never destroyed: the child ends by _exit or a signal, as a crash would.
        new RunLock(database);
        answer = 'y';
      } catch (...) {
      }
      if (::write(ready[1], &answer, 1) != 1) ::_exit(2);
      char command = 0;
      if (::read(go[0], &command, 1) != 1) ::_exit(3);
      ::_exit(0);
    }
    ::close(ready[1]);
    ::close(go[0]);
    go_ = go[1];
    char answer = 0;
    REQUIRE(::read(ready[0], &answer, 1) == 1);
    ::close(ready[0]);
    REQUIRE(answer == 'y');
  }
  LockHolder(const LockHolder&) = delete;
  LockHolder& operator=(const LockHolder&) = delete;
  ~LockHolder() {
    if (go_ >= 0) ::close(go_);
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  pid_t pid() const { return pid_; }

  // Ends the child by _exit() without releasing anything itself.
  void Exit() {
    const char command = 'q';
    REQUIRE(::write(go_, &command, 1) == 1);
    Reap();
  }
  void Kill() {
    REQUIRE(::kill(pid_, SIGKILL) == 0);
    Reap();
  }

 private:
  void Reap() {
    int status = 0;
    REQUIRE(::waitpid(pid_, &status, 0) == pid_);
    pid_ = -1;
  }

  pid_t pid_ = -1;
  int go_ = -1;
};

TEST_CASE("run lock: a second lock in the same process is refused, naming the holder",
          "[run_lock]") {
  test::TempDir dir;
  const fs::path database = dir.path() / "runs" / "population.db";
  std::optional<RunLock> first(std::in_place, database);
  CHECK(fs::exists(dir.path() / "runs" / "population.db.lock"));
  CHECK(ReadFile(dir.path() / "runs" / "population.db.lock") == std::to_string(::getpid()) + "\n");
  // flock belongs to the open file description, so a second open conflicts even here.
  CHECK_THROWS_WITH(RunLock(database), InUseMessage(database, ::getpid()));
  first.reset();
  RunLock again(database);
  CHECK_THROWS_AS(RunLock(database), Error);
}

TEST_CASE("run lock: a symbolic link to the database takes the database's own lock", "[run_lock]") {
  test::TempDir dir;
  const fs::path database = dir.path() / "population.db";
  test::WriteFile(database, "");
  const fs::path link = dir.path() / "link.db";
  fs::create_symlink(database, link);
  const RunLock first(database);
  CHECK_THROWS_WITH(RunLock(link), InUseMessage(link, ::getpid()));
  CHECK_FALSE(fs::exists(dir.path() / "link.db.lock"));
}

TEST_CASE(
    "run lock: a hard link to the database, another name of the same file, finds it locked; "
    "doctor names the holder through either name",
    "[run_lock]") {
  test::TempDir dir;
  const fs::path database = dir.path() / "runs" / "population.db";
  fs::create_directories(database.parent_path());
  test::WriteFile(database, "");
  const fs::path other_name = dir.path() / "elsewhere" / "same.db";
  fs::create_directories(other_name.parent_path());
  fs::create_hard_link(database, other_name);
  {
    const RunLock first(database);
    CHECK(RunLockHolder(other_name) == ::getpid());
    CHECK(TryLockInChild(other_name, InUseMessage(other_name, ::getpid())) == kRefused);
  }
  {
    const RunLock through_link(other_name);
    CHECK(RunLockHolder(database) == ::getpid());
    CHECK(TryLockInChild(database, InUseMessage(database, ::getpid())) == kRefused);
  }
  CHECK_FALSE(RunLockHolder(database).has_value());
  CHECK(TryLockInChild(other_name, "") == kTaken);
}

TEST_CASE("run lock: a new database is created empty and locked", "[run_lock]") {
  test::TempDir dir;
  const fs::path database = dir.path() / "new" / "population.db";
  {
    const RunLock lock(database);
    REQUIRE(fs::exists(database));
    CHECK(fs::file_size(database) == 0);
    CHECK(RunLockHolder(database) == ::getpid());
  }
  CHECK_FALSE(RunLockHolder(database).has_value());
}

TEST_CASE("run lock: another process is refused while the lock is held", "[run_lock]") {
  test::TempDir dir;
  const fs::path database = dir.path() / "population.db";
  {
    RunLock lock(database);
    CHECK(TryLockInChild(database, InUseMessage(database, ::getpid())) == kRefused);
  }
  CHECK(TryLockInChild(database, "") == kTaken);
}

TEST_CASE("run lock: released when the holding process ends however it ends", "[run_lock]") {
  test::TempDir dir;
  const fs::path database = dir.path() / "population.db";
  LockHolder holder(database);
  CHECK_THROWS_WITH(RunLock(database), InUseMessage(database, holder.pid()));
  SECTION("it exits without releasing") { holder.Exit(); }
  SECTION("it is killed") { holder.Kill(); }
  RunLock lock(database);
  CHECK(ReadFile(database.string() + ".lock") == std::to_string(::getpid()) + "\n");
}

}  // namespace
}  // namespace evo
