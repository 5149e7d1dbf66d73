#include "evaluator/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <thread>

#include "common/error.h"

extern char** environ;

namespace evo {
namespace {

using Clock = std::chrono::steady_clock;

std::string ErrnoText(int error) { return std::strerror(error); }

// The child's ends must not sit on 0, 1 or 2 (possible when evo itself runs with a closed stdin
// or stdout): the dup2 onto one stdio slot would then clobber the end meant for another.
UniqueFd AboveStdio(UniqueFd fd) {
  if (fd.get() > STDERR_FILENO) return fd;
  const int moved = ::fcntl(fd.get(), F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
  if (moved < 0) throw Error("cannot duplicate a pipe descriptor: " + ErrnoText(errno));
  return UniqueFd(moved);
}

class SpawnFileActions {
 public:
  SpawnFileActions() {
    if (const int rc = ::posix_spawn_file_actions_init(&actions_); rc != 0) {
      throw Error("posix_spawn_file_actions_init failed: " + ErrnoText(rc));
    }
  }
  SpawnFileActions(const SpawnFileActions&) = delete;
  SpawnFileActions& operator=(const SpawnFileActions&) = delete;
  ~SpawnFileActions() { ::posix_spawn_file_actions_destroy(&actions_); }

  void Dup2(int from, int to) {
    if (const int rc = ::posix_spawn_file_actions_adddup2(&actions_, from, to); rc != 0) {
      throw Error("posix_spawn_file_actions_adddup2 failed: " + ErrnoText(rc));
    }
  }
  const posix_spawn_file_actions_t* get() const { return &actions_; }

 private:
  posix_spawn_file_actions_t actions_;
};

class SpawnAttributes {
 public:
  SpawnAttributes() {
    if (const int rc = ::posix_spawnattr_init(&attributes_); rc != 0) {
      throw Error("posix_spawnattr_init failed: " + ErrnoText(rc));
    }
  }
  SpawnAttributes(const SpawnAttributes&) = delete;
  SpawnAttributes& operator=(const SpawnAttributes&) = delete;
  ~SpawnAttributes() { ::posix_spawnattr_destroy(&attributes_); }

  posix_spawnattr_t* get() { return &attributes_; }

 private:
  posix_spawnattr_t attributes_;
};

// Milliseconds left until `deadline` for poll(): -1 waits forever, and a partial millisecond
// rounds up so that poll does not spin on a zero timeout just before the deadline.
int PollTimeout(const std::optional<Clock::time_point>& deadline) {
  if (!deadline) return -1;
  const auto left = *deadline - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return static_cast<int>(std::min<decltype(ms)>(ms, INT_MAX));
}

std::optional<Clock::time_point> DeadlineAfter(std::chrono::milliseconds timeout) {
  if (timeout < std::chrono::milliseconds::zero()) return std::nullopt;
  return Clock::now() + timeout;
}

}  // namespace

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    Reset();
    fd_ = other.Release();
  }
  return *this;
}

int UniqueFd::Release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

void UniqueFd::Reset() {
  // No retry on EINTR: on Linux the descriptor is released even when close is interrupted.
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

ExitStatus ExitStatus::FromWaitStatus(int wait_status) {
  if (WIFEXITED(wait_status)) return {Kind::kExited, WEXITSTATUS(wait_status)};
  if (WIFSIGNALED(wait_status)) return {Kind::kSignaled, WTERMSIG(wait_status)};
  return {};
}

std::string SignalName(int signal_number) {
  switch (signal_number) {
    case SIGHUP:
      return "Hangup";
    case SIGINT:
      return "Interrupt";
    case SIGQUIT:
      return "Quit";
    case SIGILL:
      return "Illegal instruction";
    case SIGTRAP:
      return "Trace/breakpoint trap";
    case SIGABRT:
      return "Aborted";
    case SIGBUS:
      return "Bus error";
    case SIGFPE:
      return "Floating point exception";
    case SIGKILL:
      return "Killed";
    case SIGUSR1:
      return "User defined signal 1";
    case SIGSEGV:
      return "Segmentation fault";
    case SIGUSR2:
      return "User defined signal 2";
    case SIGPIPE:
      return "Broken pipe";
    case SIGALRM:
      return "Alarm clock";
    case SIGTERM:
      return "Terminated";
    case SIGXCPU:
      return "CPU time limit exceeded";
    case SIGXFSZ:
      return "File size limit exceeded";
    case SIGSYS:
      return "Bad system call";
    default:
      return "";
  }
}

std::string ExitStatus::Describe() const {
  switch (kind) {
    case Kind::kExited:
      return "exited with code " + std::to_string(code);
    case Kind::kSignaled: {
      const std::string name = SignalName(code);
      return "killed by signal " + std::to_string(code) + (name.empty() ? "" : " (" + name + ")");
    }
    case Kind::kUnknown:
      break;
  }
  return "ended (exit status unavailable)";
}

Subprocess::Subprocess(const std::vector<std::string>& argv, const SubprocessOptions& options) {
  if (argv.empty() || argv[0].empty()) throw Error("cannot start a process: empty command line");

  // stdin is a socket pair rather than a pipe so that WriteLine can use send(MSG_NOSIGNAL): a
  // write to a child that has died then fails with EPIPE instead of raising SIGPIPE, without
  // ignoring SIGPIPE process-wide (which would change how evo behaves in a shell pipeline).
  // Every descriptor is created close-on-exec, so no child, this one or a sibling spawned by
  // another thread, inherits any end but the ones dup2'd onto its own stdio.
  int to_child[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, to_child) != 0) {
    throw Error("cannot create a socket pair for '" + argv[0] + "': " + ErrnoText(errno));
  }
  UniqueFd parent_in(to_child[0]);
  UniqueFd child_in(to_child[1]);
  int from_child[2];
  if (::pipe2(from_child, O_CLOEXEC) != 0) {
    throw Error("cannot create a pipe for '" + argv[0] + "': " + ErrnoText(errno));
  }
  UniqueFd parent_out(from_child[0]);
  UniqueFd child_out(from_child[1]);
  // The child only reads one end of the pair; shutting our read side makes the pair one-way.
  ::shutdown(parent_in.get(), SHUT_RD);

  child_in = AboveStdio(std::move(child_in));
  child_out = AboveStdio(std::move(child_out));
  UniqueFd child_err;
  if (options.stderr_path) {
    child_err = UniqueFd(
        ::open(options.stderr_path->c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
    if (!child_err.valid()) {
      throw Error("cannot open '" + options.stderr_path->string() + "' for the stderr of '" +
                  argv[0] + "': " + ErrnoText(errno));
    }
    child_err = AboveStdio(std::move(child_err));
  }

  SpawnFileActions actions;
  actions.Dup2(child_in.get(), STDIN_FILENO);
  actions.Dup2(child_out.get(), STDOUT_FILENO);
  if (child_err.valid()) actions.Dup2(child_err.get(), STDERR_FILENO);

  // The child starts with no blocked signals and the default SIGPIPE whatever evo's threads
  // block or ignore, so it dies as any program would.
  SpawnAttributes attributes;
  sigset_t no_signals;
  sigemptyset(&no_signals);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  ::posix_spawnattr_setsigmask(attributes.get(), &no_signals);
  ::posix_spawnattr_setsigdefault(attributes.get(), &defaults);
  ::posix_spawnattr_setflags(attributes.get(), POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  std::vector<char*> raw_argv;
  raw_argv.reserve(argv.size() + 1);
  for (const std::string& arg : argv) raw_argv.push_back(const_cast<char*>(arg.c_str()));
  raw_argv.push_back(nullptr);

  // glibc's posix_spawn reports a failed exec (missing file, no permission) as its return value.
  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, argv[0].c_str(), actions.get(), attributes.get(),
                                raw_argv.data(), environ);
  if (rc != 0) throw Error("cannot start '" + argv[0] + "': " + ErrnoText(rc));
  pid_ = pid;
  stdin_ = std::move(parent_in);
  stdout_ = std::move(parent_out);
}

Subprocess::~Subprocess() {
  if (pid_ > 0 && !exit_status_) Kill();
}

WriteStatus Subprocess::WriteLine(std::string_view line, std::chrono::milliseconds timeout) {
  if (!stdin_.valid()) return WriteStatus::kClosed;
  const auto deadline = DeadlineAfter(timeout);
  std::string data(line);
  data += '\n';
  size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t n =
        ::send(stdin_.get(), data.data() + sent, data.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return WriteStatus::kClosed;
    pollfd waiting{stdin_.get(), POLLOUT, 0};
    const int ready = ::poll(&waiting, 1, PollTimeout(deadline));
    if (ready == 0) return WriteStatus::kTimeout;
    if (ready < 0 && errno != EINTR) return WriteStatus::kClosed;
    // Ready (or hung up: the next send says EPIPE) or interrupted: try again.
  }
  return WriteStatus::kWritten;
}

ReadResult Subprocess::ReadLine(std::chrono::milliseconds timeout, size_t max_line_bytes) {
  const auto deadline = DeadlineAfter(timeout);
  for (;;) {
    const size_t newline = buffer_.find('\n', scanned_);
    if (newline != std::string::npos) {
      ReadResult result{ReadStatus::kLine, buffer_.substr(0, newline)};
      buffer_.erase(0, newline + 1);
      scanned_ = 0;
      return result;
    }
    scanned_ = buffer_.size();
    if (buffer_.size() >= max_line_bytes) {
      ReadResult result{ReadStatus::kTooLong, buffer_.substr(0, max_line_bytes)};
      buffer_.erase(0, max_line_bytes);
      scanned_ = 0;
      return result;
    }
    if (eof_ || !stdout_.valid()) {
      ReadResult result{ReadStatus::kEof, std::move(buffer_)};
      buffer_.clear();
      scanned_ = 0;
      return result;
    }

    pollfd waiting{stdout_.get(), POLLIN, 0};
    const int ready = ::poll(&waiting, 1, PollTimeout(deadline));
    if (ready == 0) return {ReadStatus::kTimeout, {}};
    if (ready < 0) {
      if (errno == EINTR) continue;
      eof_ = true;  // poll cannot fail on a valid descriptor; treat the stream as gone
      continue;
    }
    char chunk[64 * 1024];
    const ssize_t n = ::read(stdout_.get(), chunk, sizeof chunk);
    if (n > 0) {
      buffer_.append(chunk, static_cast<size_t>(n));
    } else if (n == 0) {
      eof_ = true;
    } else if (errno != EINTR && errno != EAGAIN) {
      eof_ = true;
    }
  }
}

void Subprocess::CloseStdin() { stdin_.Reset(); }

std::optional<ExitStatus> Subprocess::TryWait() {
  if (exit_status_) return exit_status_;
  for (;;) {
    int status = 0;
    const pid_t reaped = ::waitpid(pid_, &status, WNOHANG);
    if (reaped == pid_) {
      exit_status_ = ExitStatus::FromWaitStatus(status);
      return exit_status_;
    }
    if (reaped == 0) return std::nullopt;
    if (errno == EINTR) continue;
    // ECHILD: someone else reaped it (or SIGCHLD is ignored); it has ended, how is unknown.
    exit_status_ = ExitStatus{};
    return exit_status_;
  }
}

std::optional<ExitStatus> Subprocess::WaitFor(std::chrono::milliseconds timeout) {
  if (timeout < std::chrono::milliseconds::zero()) return Wait();
  // Polling with a short, growing sleep: no SIGCHLD handler (process-wide state) and no pidfd
  // (not on every kernel evo meets) needed, and the wait is short in practice.
  const auto deadline = Clock::now() + timeout;
  auto step = std::chrono::milliseconds(1);
  for (;;) {
    if (auto status = TryWait()) return status;
    const auto now = Clock::now();
    if (now >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::min<Clock::duration>(step, deadline - now));
    step = std::min(step * 2, std::chrono::milliseconds(10));
  }
}

ExitStatus Subprocess::Wait() {
  if (exit_status_) return *exit_status_;
  for (;;) {
    int status = 0;
    const pid_t reaped = ::waitpid(pid_, &status, 0);
    if (reaped == pid_) {
      exit_status_ = ExitStatus::FromWaitStatus(status);
      break;
    }
    if (reaped < 0 && errno == EINTR) continue;
    exit_status_ = ExitStatus{};
    break;
  }
  return *exit_status_;
}

ExitStatus Subprocess::Kill() {
  if (exit_status_) return *exit_status_;
  // Until it is reaped the pid cannot be reused, so this never hits an unrelated process.
  ::kill(pid_, SIGKILL);
  return Wait();
}

}  // namespace evo
