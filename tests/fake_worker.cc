// A stand-in for the GPU worker that misbehaves on request, for the supervisor's tests. It speaks
// the wire format directly (not through evaluator/worker_protocol) so that the tests also check
// that the protocol works with a worker written independently of evo.
//
// Flags (all optional):
//   --health-error TEXT      answer health checks with ok:false and TEXT
//   --hang-on-health         never answer a health check
//   --start-count-file PATH  count this start in PATH (a decimal number) ...
//   --healthy-starts N       ... and exit(4) at the health check once the count exceeds N
//
// An evaluate request obeys payload.behave: "ok" (the result is the payload), "crash"
// (SIGSEGV), "hang", "garbage", "wrong_id", "cuda_error", "poisoned", "exit" (code 3),
// "slow_ok" (200 ms, then ok), "partial_crash" (half a reply, then SIGSEGV), "close_stdout"
// (close stdout, then hang), "extra_line" (ok, then a line nobody asked for), "log"
// (payload.text to stderr, then ok).

#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

namespace {

using nlohmann::json;

struct Flags {
  std::string health_error;
  bool hang_on_health = false;
  std::string start_count_file;
  long healthy_starts = -1;
};

[[noreturn]] void HangForever() {
  for (;;) ::pause();
}

[[noreturn]] void Crash() {
  // A crash is the test's intent; a core file for each would only litter the working folder.
  ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  const rlimit no_core{0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);
  ::signal(SIGSEGV, SIG_DFL);
  ::raise(SIGSEGV);
  std::abort();
}

void Send(const json& reply) { std::cout << reply.dump() << std::endl; }

void Ok(uint64_t id, const json& result) { Send({{"id", id}, {"ok", true}, {"result", result}}); }

void Fail(uint64_t id, const std::string& error, bool poisoned) {
  Send({{"id", id}, {"ok", false}, {"error", error}, {"poisoned", poisoned}});
}

long CountStart(const std::string& path) {
  long count = 0;
  if (std::ifstream in(path); in) in >> count;
  ++count;
  std::ofstream(path, std::ios::trunc) << count;
  return count;
}

void Evaluate(uint64_t id, const json& payload) {
  const std::string behave = payload.value("behave", "ok");
  if (behave == "ok") {
    Ok(id, payload);
  } else if (behave == "crash") {
    Crash();
  } else if (behave == "hang") {
    HangForever();
  } else if (behave == "garbage") {
    std::cout << "this is not json {" << std::endl;
  } else if (behave == "wrong_id") {
    Ok(id + 1000, payload);
  } else if (behave == "cuda_error") {
    Fail(id, "CUDA_ERROR_INVALID_VALUE: invalid argument", false);
  } else if (behave == "poisoned") {
    Fail(id, "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered", true);
  } else if (behave == "exit") {
    std::exit(3);
  } else if (behave == "slow_ok") {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    Ok(id, payload);
  } else if (behave == "partial_crash") {
    std::cout << R"({"id":)" << id << R"(,"ok":tr)" << std::flush;
    Crash();
  } else if (behave == "close_stdout") {
    std::cout.flush();
    ::close(STDOUT_FILENO);
    HangForever();
  } else if (behave == "extra_line") {
    // One write, so that the stray line is already there when the next request is due.
    std::cout << json({{"id", id}, {"ok", true}, {"result", payload}}).dump() << "\nstray output"
              << std::endl;
  } else if (behave == "log") {
    std::cerr << payload.value("text", "") << std::endl;
    Ok(id, payload);
  } else {
    Fail(id, "unknown behave '" + behave + "'", false);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    const bool has_value = i + 1 < argc;
    if (flag == "--health-error" && has_value) {
      flags.health_error = argv[++i];
    } else if (flag == "--hang-on-health") {
      flags.hang_on_health = true;
    } else if (flag == "--start-count-file" && has_value) {
      flags.start_count_file = argv[++i];
    } else if (flag == "--healthy-starts" && has_value) {
      flags.healthy_starts = std::atol(argv[++i]);
    } else {
      std::cerr << "fake worker: bad argument '" << flag << "'\n";
      return 2;
    }
  }
  const long start = flags.start_count_file.empty() ? 1 : CountStart(flags.start_count_file);

  std::string line;
  while (std::getline(std::cin, line)) {
    const json request = json::parse(line, nullptr, false);
    if (request.is_discarded() || !request.is_object()) {
      std::cerr << "fake worker: unparseable request '" << line << "'\n";
      return 2;
    }
    const uint64_t id = request.value("id", uint64_t{0});
    const std::string type = request.value("type", "");
    if (type == "health") {
      if (flags.hang_on_health) HangForever();
      if (flags.healthy_starts >= 0 && start > flags.healthy_starts) return 4;
      if (!flags.health_error.empty()) {
        Fail(id, flags.health_error, false);
      } else {
        Ok(id, {{"pid", ::getpid()}});
      }
    } else if (type == "evaluate") {
      Evaluate(id, request.value("payload", json::object()));
    } else {
      Fail(id, "unknown request type '" + type + "'", false);
    }
  }
  return 0;
}
