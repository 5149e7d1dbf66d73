#include "evaluator/worker_supervisor.h"

#include <fcntl.h>
#include <signal.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "common/error.h"
#include "common/files.h"
#include "evaluator/subprocess.h"
#include "evaluator/worker_protocol.h"
#include "tests/test_support.h"

namespace evo {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string FakeWorker() {
  return (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "evo_fake_worker")
      .string();
}

// Quick restarts and a short grace keep the whole file to a few seconds.
WorkerSupervisorOptions FastOptions() {
  WorkerSupervisorOptions options;
  options.health_timeout = 5s;
  options.restart_delay = 10ms;
  options.exit_grace = 300ms;
  return options;
}

json Payload(const std::string& behave, int marker = 0) {
  return {{"behave", behave}, {"marker", marker}};
}

bool ProcessExists(pid_t pid) { return ::kill(pid, 0) == 0 || errno != ESRCH; }

// Runs `fn`, which must throw evo::Error, and returns its message.
template <typename Fn>
std::string ErrorOf(Fn&& fn) {
  try {
    fn();
  } catch (const Error& error) {
    return error.what();
  }
  FAIL("no evo::Error was thrown");
  return "";
}

// The signals (SIGINT, SIGTERM, ...) `pid` ignores, from /proc: a mask of bit (signal - 1).
uint64_t IgnoredSignals(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("SigIgn:", 0) == 0) return std::stoull(line.substr(7), nullptr, 16);
  }
  return 0;
}

TEST_CASE("evo worker outlives a stop sent to its process group and ends when evo closes its stdin",
          "[supervisor]") {
  // `timeout` and Ctrl-C signal evo's whole process group, the worker with it. evo stores the
  // candidate in flight before it stops the worker; a worker dead of the signal first made that
  // candidate a runtime error. No GPU is needed: the worker opens its context on a request.
  Subprocess worker({test::EvoBinary().string(), "worker", "--device", "0"});
  const uint64_t sigint = uint64_t{1} << (SIGINT - 1);
  const auto started = Clock::now();
  while ((IgnoredSignals(worker.pid()) & sigint) == 0 && Clock::now() - started < 20s) {
    REQUIRE_FALSE(worker.TryWait().has_value());
    std::this_thread::sleep_for(5ms);
  }
  // Its signal set-up is done: evo worker ignores SIGINT after SIGTERM, so waiting for the
  // SIGINT bit leaves no moment in which SIGTERM could still end it.
  REQUIRE((IgnoredSignals(worker.pid()) & sigint) != 0);
  for (const int signal : {SIGTERM, SIGINT}) {
    INFO("signal " << signal);
    REQUIRE(::kill(worker.pid(), signal) == 0);
    const std::optional<ExitStatus> ended = worker.WaitFor(300ms);
    REQUIRE_FALSE(ended.has_value());
  }
  worker.CloseStdin();
  const std::optional<ExitStatus> ended = worker.WaitFor(10s);
  REQUIRE(ended.has_value());
  CHECK(ended->Describe() == "exited with code 0");
}

TEST_CASE("a subprocess hands back whole lines, buffers partial ones and reports EOF",
          "[supervisor]") {
  Subprocess child({"/bin/sh", "-c", R"(printf 'one\ntw'; sleep 0.3; printf 'o\nthree'; exit 3)"});
  ReadResult read = child.ReadLine(5s);
  CHECK(read.status == ReadStatus::kLine);
  CHECK(read.text == "one");
  read = child.ReadLine(50ms);
  CHECK(read.status == ReadStatus::kTimeout);
  read = child.ReadLine(5s);
  CHECK(read.status == ReadStatus::kLine);
  CHECK(read.text == "two");
  read = child.ReadLine(5s);
  CHECK(read.status == ReadStatus::kEof);
  CHECK(read.text == "three");
  CHECK(child.ReadLine(5s).status == ReadStatus::kEof);
  const ExitStatus status = child.Wait();
  CHECK(status.exited());
  CHECK(status.code == 3);
  CHECK(status.Describe() == "exited with code 3");
}

TEST_CASE("a subprocess reads what it is written and ends on closed stdin", "[supervisor]") {
  Subprocess cat({"cat"});
  REQUIRE(cat.WriteLine("hello", 1s) == WriteStatus::kWritten);
  REQUIRE(cat.WriteLine(R"({"id":1})") == WriteStatus::kWritten);
  CHECK(cat.ReadLine(5s).text == "hello");
  CHECK(cat.ReadLine(5s).text == R"({"id":1})");
  cat.CloseStdin();
  CHECK(cat.ReadLine(5s).status == ReadStatus::kEof);
  CHECK(cat.Wait().Describe() == "exited with code 0");
}

TEST_CASE("a subprocess says which signal killed it", "[supervisor]") {
  Subprocess child({"/bin/sh", "-c", "ulimit -c 0; kill -SEGV $$"});
  CHECK(child.Wait().Describe() == "killed by signal 11 (Segmentation fault)");

  Subprocess sleeper({"sleep", "100"});
  const ExitStatus killed = sleeper.Kill();
  CHECK(killed.signaled());
  CHECK(killed.Describe() == "killed by signal 9 (Killed)");
}

TEST_CASE("writing to a dead subprocess fails instead of raising SIGPIPE", "[supervisor]") {
  Subprocess child({"true"});
  child.Wait();
  // A SIGPIPE here would end the test executable itself.
  for (int i = 0; i < 3; ++i) CHECK(child.WriteLine("anyone there?") == WriteStatus::kClosed);
}

TEST_CASE("a subprocess that cannot start is an evo::Error naming it", "[supervisor]") {
  const std::string message = ErrorOf([] { Subprocess child({"/nonexistent/worker"}); });
  CHECK_THAT(message, Catch::Contains("/nonexistent/worker") &&
                          Catch::Contains("No such file or directory"));
  CHECK_THROWS_AS(Subprocess({}), Error);
}

TEST_CASE("destroying a subprocess kills and reaps it", "[supervisor]") {
  pid_t pid = -1;
  {
    Subprocess sleeper({"sleep", "100"});
    pid = sleeper.pid();
    REQUIRE(ProcessExists(pid));
  }
  CHECK_FALSE(ProcessExists(pid));  // reaped, not a zombie
}

TEST_CASE("a subprocess inherits none of evo's pipes and sockets", "[supervisor]") {
  // Descriptors that the test process itself lets children inherit (a harness may pass some
  // down) are not ours to judge.
  std::set<std::string> inheritable;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    const int fd = std::stoi(entry.path().filename().string());
    const int flags = ::fcntl(fd, F_GETFD);
    std::error_code error;
    const auto target = std::filesystem::read_symlink(entry.path(), error);
    if (flags >= 0 && (flags & FD_CLOEXEC) == 0 && !error) inheritable.insert(target.string());
  }

  Subprocess sibling({"cat"});  // its pipe ends must not leak into the next child either
  Subprocess child({"/bin/sh", "-c", "ls -l /proc/$$/fd"});
  int leaked = 0;
  int seen = 0;
  for (ReadResult read = child.ReadLine(5s); read.status == ReadStatus::kLine;
       read = child.ReadLine(5s)) {
    const size_t arrow = read.text.find(" -> ");
    if (arrow == std::string::npos) continue;
    const size_t space = read.text.rfind(' ', arrow - 1);
    const int fd = std::stoi(read.text.substr(space + 1, arrow - space - 1));
    const std::string target = read.text.substr(arrow + 4);
    ++seen;
    const bool channel = target.rfind("pipe:", 0) == 0 || target.rfind("socket:", 0) == 0;
    if (fd > 2 && channel && inheritable.count(target) == 0) {
      UNSCOPED_INFO("leaked: " << read.text);
      ++leaked;
    }
  }
  CHECK(seen >= 3);
  CHECK(leaked == 0);
}

TEST_CASE("a subprocess's stderr can go to a file", "[supervisor]") {
  test::TempDir dir;
  SubprocessOptions options;
  options.stderr_path = dir.path() / "worker.log";
  Subprocess child({"/bin/sh", "-c", "echo oops >&2"}, options);
  child.Wait();
  CHECK(ReadFile(dir.path() / "worker.log") == "oops\n");
}

TEST_CASE("a subprocess cuts a line that never ends", "[supervisor]") {
  Subprocess child({"/bin/sh", "-c", "printf aaaaaaaaaa"});
  const ReadResult read = child.ReadLine(5s, 4);
  CHECK(read.status == ReadStatus::kTooLong);
  CHECK(read.text == "aaaa");
}

TEST_CASE("worker protocol messages round-trip", "[supervisor]") {
  const json payload = {{"knobs", {{"TILE", 4}}}, {"text", "a\nb"}};
  const std::string request = EncodeEvaluateRequest(7, payload);
  CHECK(request.find('\n') == std::string::npos);
  const Decoded<WorkerRequest> decoded = DecodeRequest(request);
  REQUIRE(decoded.ok());
  CHECK(decoded.message->type == RequestType::kEvaluate);
  CHECK(decoded.message->id == 7);
  CHECK(decoded.message->payload == payload);
  const Decoded<WorkerRequest> health = DecodeRequest(EncodeHealthRequest(8));
  REQUIRE(health.ok());
  CHECK(health.message->type == RequestType::kHealth);
  CHECK(health.message->id == 8);

  WorkerReply ok_reply;
  ok_reply.id = 7;
  ok_reply.ok = true;
  ok_reply.result = {{"ms", 1.5}};
  const Decoded<WorkerReply> ok = DecodeReply(EncodeReply(ok_reply), 7);
  REQUIRE(ok.ok());
  CHECK(ok.message->ok);
  CHECK(ok.message->result == ok_reply.result);

  WorkerReply error_reply;
  error_reply.id = 9;
  error_reply.error = std::string("bad \xff byte");  // invalid UTF-8 must not break encoding
  error_reply.poisoned = true;
  const Decoded<WorkerReply> error = DecodeReply(EncodeReply(error_reply), 9);
  REQUIRE(error.ok());
  CHECK_FALSE(error.message->ok);
  CHECK(error.message->poisoned);
  CHECK_THAT(error.message->error, Catch::StartsWith("bad "));
}

TEST_CASE("worker protocol replies that are garbage say why", "[supervisor]") {
  const auto problem = [](const std::string& line) { return DecodeReply(line, 5).problem; };
  CHECK(problem("Segmentation fault") == "not JSON");
  CHECK(problem("") == "not JSON");
  CHECK(problem("[1,2]") == "not a JSON object");
  CHECK(problem(R"({"ok":true,"result":1})") == "no unsigned integer \"id\"");
  CHECK(problem(R"({"id":-5,"ok":true,"result":1})") == "no unsigned integer \"id\"");
  CHECK(problem(R"({"id":5.0,"ok":true,"result":1})") == "no unsigned integer \"id\"");
  CHECK(problem(R"({"id":4,"ok":true,"result":1})") == "reply to request 4, expected 5");
  CHECK(problem(R"({"id":5,"ok":"yes","result":1})") == "no boolean \"ok\"");
  CHECK(problem(R"({"id":5,"ok":true})") == "ok reply without \"result\"");
  CHECK(problem(R"({"id":5,"ok":false,"poisoned":false})") ==
        "error reply without a string \"error\"");
  CHECK(problem(R"({"id":5,"ok":false,"error":"x"})") ==
        "error reply without a boolean \"poisoned\"");
  CHECK(DecodeReply(R"({"id":5,"ok":true,"result":null})", 5).ok());
  CHECK(DecodeRequest(R"({"type":"evaluate","id":1})").problem ==
        "evaluate request without \"payload\"");
  CHECK(DecodeRequest(R"({"type":"launch","id":1})").problem == "unknown request type \"launch\"");
}

TEST_CASE("garbage is quoted short, on one line, whole characters only", "[supervisor]") {
  CHECK(QuoteForMessage("a\"b\n\x01") == R"("a\"b\n\x01")");
  CHECK(QuoteForMessage(std::string(300, 'x')) ==
        "\"" + std::string(200, 'x') + "\"... (300 bytes in all)");
  // "é" is two bytes; a cut between them backs up to before it.
  CHECK(QuoteForMessage("ab\xc3\xa9z", 3) == "\"ab\"... (5 bytes in all)");
}

TEST_CASE("every misbehaviour gets its verdict and the next evaluation works", "[supervisor]") {
  WorkerSupervisor supervisor({FakeWorker()}, FastOptions());
  REQUIRE(supervisor.worker_pid() > 0);
  CHECK(supervisor.respawns() == 0);

  struct Case {
    std::string behave;
    std::chrono::milliseconds deadline;
    VerdictKind kind;
    bool replaced;
    std::string message;
  };
  const Case cases[] = {
      {"crash", 5s, VerdictKind::kCrashed, true,
       "worker killed by signal 11 (Segmentation fault) before replying"},
      {"exit", 5s, VerdictKind::kCrashed, true, "worker exited with code 3 before replying"},
      {"partial_crash", 5s, VerdictKind::kCrashed, true,
       "after an unterminated line: \"{\\\"id\\\":"},
      {"close_stdout", 5s, VerdictKind::kCrashed, true, "closed its output but kept running"},
      {"hang", 300ms, VerdictKind::kTimeout, true, "no reply within 300 ms"},
      {"slow_ok", 50ms, VerdictKind::kTimeout, true, "no reply within 50 ms"},
      {"garbage", 5s, VerdictKind::kGarbage, true,
       "garbage reply (not JSON): \"this is not json {\""},
      {"wrong_id", 5s, VerdictKind::kGarbage, true, "garbage reply (reply to request"},
      {"cuda_error", 5s, VerdictKind::kCudaError, false, "CUDA_ERROR_INVALID_VALUE"},
      {"poisoned", 5s, VerdictKind::kCudaError, true, "CUDA_ERROR_ILLEGAL_ADDRESS"},
      {"slow_ok", 5s, VerdictKind::kOk, false, ""},
  };
  uint64_t evaluations = 0;
  int marker = 0;
  for (const Case& c : cases) {
    INFO("behave " << c.behave << ", deadline " << c.deadline.count() << " ms");
    const pid_t pid_before = supervisor.worker_pid();
    const uint64_t respawns_before = supervisor.respawns();
    const auto start = Clock::now();
    const WorkerVerdict verdict = supervisor.Evaluate(Payload(c.behave, ++marker), c.deadline);
    const auto wall = Clock::now() - start;
    ++evaluations;
    CHECK(verdict.kind == c.kind);
    CHECK_THAT(verdict.message, Catch::Contains(c.message));
    CHECK(verdict.worker_replaced == c.replaced);
    CHECK(supervisor.respawns() == respawns_before + (c.replaced ? 1 : 0));
    CHECK((supervisor.worker_pid() != pid_before) == c.replaced);
    CHECK(verdict.poisoned == (c.behave == "poisoned"));
    CHECK(verdict.elapsed <= verdict.total);
    CHECK(wall < 2s);
    if (c.kind == VerdictKind::kTimeout) {
      CHECK(verdict.elapsed >= c.deadline);
      CHECK(verdict.elapsed < c.deadline + 500ms);
    }
    if (c.kind == VerdictKind::kOk) CHECK(verdict.result == Payload(c.behave, marker));

    // Right after: a normal evaluation on the same supervisor gets its own reply, never a late
    // one from the worker that was replaced (slow_ok would answer 200 ms after its request).
    const pid_t pid_after = supervisor.worker_pid();
    const WorkerVerdict next = supervisor.Evaluate(Payload("ok", ++marker), 5s);
    ++evaluations;
    CHECK(next.kind == VerdictKind::kOk);
    CHECK(next.message.empty());
    CHECK(next.result == Payload("ok", marker));
    CHECK_FALSE(next.worker_replaced);
    CHECK(supervisor.worker_pid() == pid_after);
  }
  CHECK(supervisor.evaluations() == evaluations);
  CHECK(supervisor.respawns() == 9);
}

TEST_CASE(
    "a worker that dies while idle or speaks out of turn is replaced before the next "
    "request",
    "[supervisor]") {
  WorkerSupervisor supervisor({FakeWorker()}, FastOptions());

  SECTION("it was killed") {
    const pid_t pid = supervisor.worker_pid();
    REQUIRE(::kill(pid, SIGKILL) == 0);
    // Until it is a zombie its pipes may still be open.
    const auto give_up = Clock::now() + 5s;
    while (Clock::now() < give_up) {
      const std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
      if (stat.find(") Z ") != std::string::npos) break;
    }
  }
  SECTION("it wrote a line nobody asked for") {
    const WorkerVerdict verdict = supervisor.Evaluate(Payload("extra_line", 1), 5s);
    CHECK(verdict.kind == VerdictKind::kOk);
    CHECK(verdict.result == Payload("extra_line", 1));
    CHECK(supervisor.respawns() == 0);
  }
  const pid_t pid_before = supervisor.worker_pid();
  const WorkerVerdict verdict = supervisor.Evaluate(Payload("ok", 2), 5s);
  CHECK(verdict.kind == VerdictKind::kOk);
  CHECK(verdict.result == Payload("ok", 2));
  CHECK(supervisor.respawns() == 1);
  CHECK(supervisor.worker_pid() != pid_before);
}

TEST_CASE("a worker that fails its first health check is an evo::Error", "[supervisor]") {
  SECTION("it exits at once") {
    const std::string message = ErrorOf([] { WorkerSupervisor supervisor({"/bin/false"}); });
    CHECK(message ==
          "worker '/bin/false' failed its first health check: exited with code 1 before "
          "answering the health check");
  }
  SECTION("it cannot be started") {
    const std::string message = ErrorOf([] {
      WorkerSupervisor supervisor({"/nonexistent/worker", "--gpu", "0"});
    });
    CHECK_THAT(message, Catch::StartsWith("worker '/nonexistent/worker' failed its first health "
                                          "check: cannot start") &&
                            Catch::Contains("No such file or directory"));
  }
  SECTION("it reports an error") {
    const std::string message = ErrorOf([] {
      WorkerSupervisor supervisor({FakeWorker(), "--health-error", "no CUDA device"});
    });
    CHECK_THAT(message, Catch::EndsWith("answered the health check with an error: no CUDA device"));
  }
  SECTION("it does not answer in time") {
    WorkerSupervisorOptions options = FastOptions();
    options.health_timeout = 200ms;
    const auto start = Clock::now();
    const std::string message = ErrorOf([&] {
      WorkerSupervisor supervisor({FakeWorker(), "--hang-on-health"}, options);
    });
    CHECK(Clock::now() - start < 2s);
    CHECK_THAT(message, Catch::EndsWith("did not answer the health check within 200 ms"));
  }
  SECTION("its command line is empty") { CHECK_THROWS_AS(WorkerSupervisor({}), Error); }
}

TEST_CASE("a worker that keeps dying is an evo::Error, not an endless loop", "[supervisor]") {
  test::TempDir dir;
  const std::string count_file = (dir.path() / "starts").string();
  WorkerSupervisorOptions options = FastOptions();
  options.max_failed_starts = 3;
  // Only the first start is healthy: every replacement dies at its health check.
  WorkerSupervisor supervisor(
      {FakeWorker(), "--start-count-file", count_file, "--healthy-starts", "1"}, options);
  const std::string message = ErrorOf([&] { supervisor.Evaluate(Payload("crash"), 5s); });
  CHECK_THAT(message, Catch::Contains("failed its health check 3 times in a row") &&
                          Catch::Contains("exited with code 4 before answering the health check"));
  CHECK(supervisor.respawns() == 3);
  CHECK(supervisor.worker_pid() == -1);
  CHECK(ReadFile(count_file) == "4");

  // Each later call tries again, and again gives up.
  CHECK_THROWS_AS(supervisor.Evaluate(Payload("ok"), 5s), Error);
  CHECK(supervisor.respawns() == 6);
}

TEST_CASE("the supervisor kills its worker when destroyed", "[supervisor]") {
  pid_t pid = -1;
  {
    WorkerSupervisor supervisor({FakeWorker()}, FastOptions());
    pid = supervisor.worker_pid();
    REQUIRE(ProcessExists(pid));
  }
  CHECK_FALSE(ProcessExists(pid));
}

TEST_CASE("workers' stderr can go to a log file", "[supervisor]") {
  test::TempDir dir;
  WorkerSupervisorOptions options = FastOptions();
  options.stderr_path = dir.path() / "workers.log";
  WorkerSupervisor supervisor({FakeWorker()}, options);
  const WorkerVerdict verdict =
      supervisor.Evaluate({{"behave", "log"}, {"text", "launching kernel"}}, 5s);
  CHECK(verdict.kind == VerdictKind::kOk);
  CHECK(ReadFile(dir.path() / "workers.log") == "launching kernel\n");
}

}  // namespace
}  // namespace evo
