#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace evo {

// Owns one file descriptor and closes it on destruction.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.Release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  ~UniqueFd() { Reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int Release();
  void Reset();

 private:
  int fd_ = -1;
};

// How a child process ended.
struct ExitStatus {
  enum class Kind { kExited, kSignaled, kUnknown };
  Kind kind = Kind::kUnknown;
  int code = 0;  // the exit code (kExited) or the signal number (kSignaled)

  static ExitStatus FromWaitStatus(int wait_status);
  bool exited() const { return kind == Kind::kExited; }
  bool signaled() const { return kind == Kind::kSignaled; }
  // "exited with code 3", "killed by signal 11 (Segmentation fault)".
  std::string Describe() const;
};

// The English name of a signal ("Segmentation fault"); not localized, unlike strsignal, so that
// messages stored in the database read the same on every machine.
std::string SignalName(int signal_number);

struct SubprocessOptions {
  // The child's stderr is appended to this file; when empty it inherits evo's stderr.
  std::optional<std::filesystem::path> stderr_path;
};

enum class ReadStatus {
  kLine,     // `text` holds one line without its '\n'
  kTimeout,  // no whole line within the timeout; what arrived so far stays buffered
  kEof,      // the child closed its stdout; `text` holds any unterminated trailing bytes
  kTooLong,  // no '\n' within max_line_bytes; `text` holds the start of the line
};

struct ReadResult {
  ReadStatus status = ReadStatus::kTimeout;
  std::string text;
};

enum class WriteStatus {
  kWritten,
  kTimeout,
  kClosed,  // the child no longer reads its stdin (it exited or closed it)
};

// A child process with a pipe to its stdin and one from its stdout. Not thread-safe.
//
// The destructor kills (SIGKILL) and reaps the child if it is still running, so a Subprocess
// never leaves a zombie or an orphan behind.
class Subprocess {
 public:
  static constexpr size_t kDefaultMaxLineBytes = 16 << 20;
  static constexpr std::chrono::milliseconds kNoTimeout{-1};

  // Starts argv[0] (looked up on PATH when it has no '/'); throws evo::Error when it cannot be
  // started (empty argv, missing or non-executable file, no resources).
  explicit Subprocess(const std::vector<std::string>& argv, const SubprocessOptions& options = {});
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;
  ~Subprocess();

  pid_t pid() const { return pid_; }

  // Writes `line` and a '\n'. A child that has died yields kClosed, never SIGPIPE.
  WriteStatus WriteLine(std::string_view line, std::chrono::milliseconds timeout = kNoTimeout);

  // The next line from the child's stdout, waiting at most `timeout` (kNoTimeout: forever).
  ReadResult ReadLine(std::chrono::milliseconds timeout,
                      size_t max_line_bytes = kDefaultMaxLineBytes);

  // Closes the child's stdin, which a well-behaved child takes as the request to exit.
  void CloseStdin();

  // The exit status if the child has ended (reaping it), without waiting.
  std::optional<ExitStatus> TryWait();
  // Waits at most `timeout` for the child to end.
  std::optional<ExitStatus> WaitFor(std::chrono::milliseconds timeout);
  // Waits for the child to end.
  ExitStatus Wait();
  // SIGKILL, then reaps. Returns how the child ended, which is its own exit status when it had
  // already ended before the signal.
  ExitStatus Kill();

 private:
  pid_t pid_ = -1;
  std::optional<ExitStatus> exit_status_;  // set once reaped
  UniqueFd stdin_;                         // our end of a socket pair (see WriteLine)
  UniqueFd stdout_;                        // read end of a pipe
  std::string buffer_;                     // bytes read but not yet returned
  size_t scanned_ = 0;                     // buffer_[0, scanned_) holds no '\n'
  bool eof_ = false;
};

}  // namespace evo
