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
//
// With --gates it stands in for `evo worker` on a GPU instead, for the search's tests over
// several GPUs: an evaluate request (the payload evo sends a GPU worker) is answered with a
// verdict of the payload's genome, measured (a median from a hash of the genome, so every worker
// answers alike) or, for a few genomes, incorrect; a reference request with a reference timing.
//   --device N               the GPU it stands for (what `evo worker --device N` is given)
//   --sleep-ms N             the time each evaluation takes
//   --crash-when K=V[,K=V]   crash on genomes with these knob values (repeatable: any of them)
//   --hang-when K=V[,K=V]    hang on them (repeatable)
//   --crash-every N          crash on every Nth evaluation of this process
//   --hang-every N           hang on every Nth evaluation of this process
//   --log PATH               append "DEVICE GENOME" for every evaluation, before it behaves
//   --drift-us X             a GPU that warms: every evaluation of this process measures X us
//                            more than the one before it (the Nth adds N * X to the median), at
//                            an unchanged clock (a drift that cycles do not explain)
//   --clock-drift-mhz X      a GPU whose clock falls: the Nth evaluation of this process runs
//                            at 1755 - N * X MHz, its median scaled by 1755 over that clock (the
//                            same cycles at any clock); the timing carries the clock

#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

using nlohmann::json;

struct Flags {
  std::string health_error;
  bool hang_on_health = false;
  std::string start_count_file;
  long healthy_starts = -1;
  // --gates
  bool gates = false;
  long device = 0;
  long sleep_ms = 0;
  // Each a conjunction of knob values.
  std::vector<std::vector<std::pair<std::string, long>>> crash_when;
  std::vector<std::vector<std::pair<std::string, long>>> hang_when;
  long crash_every = 0;
  long hang_every = 0;
  std::string log;
  double drift_us = 0;
  double clock_drift_mhz = 0;
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

// FNV-1a: the same figures in every process and on every machine.
uint64_t Hash(const std::string& text) {
  uint64_t hash = 14695981039346656037ull;
  for (const char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ull;
  }
  return hash;
}

bool Matches(const json& genome,
             const std::vector<std::vector<std::pair<std::string, long>>>& conditions) {
  for (const auto& settings : conditions) {
    bool all = true;
    for (const auto& [knob, value] : settings) {
      all = all && genome.contains(knob) && genome[knob].get<long>() == value;
    }
    if (all) return true;
  }
  return false;
}

// As evo's GpuVerdictToJson writes one.
json Verdict(const json& genome, double drift_us, double clock_mhz) {
  const uint64_t hash = Hash(genome.dump());
  const bool correct = hash % 13 != 0;
  const double median =
      (20.0 + static_cast<double>(hash % 1000) / 10.0) * 1755.0 / clock_mhz + drift_us;
  json verdict = {{"status", correct ? "measured" : "incorrect"},
                  {"error", ""},
                  {"poisoned", false},
                  {"correctness",
                   {{"passed", correct},
                    {"checks", 3},
                    {"max_abs_error", correct ? 0.001 : 0.5},
                    {"mean_abs_error", 0.0001},
                    {"fraction_over_tolerance", correct ? 0.0 : 0.1},
                    {"elements", 1000},
                    {"over_tolerance", correct ? 0 : 100},
                    {"non_finite", 0},
                    {"max_abs_reference", 1.0},
                    {"failure", correct ? "" : "100 elements over tolerance"},
                    {"atol", 0.001},
                    {"rtol", 0.01}}}};
  if (correct) {
    verdict["timing"] = {
        {"median_us", median},     {"p10_us", median * 0.99},   {"p90_us", median * 1.01},
        {"min_us", median * 0.98}, {"repetitions", 10},         {"launches_per_repetition", 1},
        {"settled", true},         {"l2_flushed", false},       {"tflops", 100.0},
        {"recheck_passed", true},  {"sm_clock_mhz", clock_mhz}, {"mean_sm_clock_mhz", clock_mhz}};
  }
  return verdict;
}

void EvaluateAsGates(uint64_t id, const json& payload, const Flags& flags, long evaluation) {
  if (payload.value("reference_only", false)) {
    Ok(id, {{"task_ms", 1.0}, {"all_ms", 5.0}, {"runs", 3}});
    return;
  }
  const json genome = payload.value("genome", json::object());
  if (!flags.log.empty()) {
    std::ofstream(flags.log, std::ios::app) << flags.device << " " << genome.dump() << "\n";
  }
  if (flags.sleep_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(flags.sleep_ms));
  if (Matches(genome, flags.crash_when) ||
      (flags.crash_every > 0 && evaluation % flags.crash_every == 0)) {
    Crash();
  }
  if (Matches(genome, flags.hang_when) ||
      (flags.hang_every > 0 && evaluation % flags.hang_every == 0)) {
    HangForever();
  }
  Ok(id, Verdict(genome, flags.drift_us * static_cast<double>(evaluation),
                 1755.0 - flags.clock_drift_mhz * static_cast<double>(evaluation)));
}

// "K=V,K=V" as one more condition.
bool ParseSettings(const std::string& text,
                   std::vector<std::vector<std::pair<std::string, long>>>& conditions) {
  std::vector<std::pair<std::string, long>> settings;
  size_t start = 0;
  while (start < text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string setting = text.substr(start, comma - start);
    const size_t equals = setting.find('=');
    if (equals == std::string::npos) return false;
    settings.emplace_back(setting.substr(0, equals), std::atol(setting.c_str() + equals + 1));
    start = comma + 1;
  }
  if (settings.empty()) return false;
  conditions.push_back(std::move(settings));
  return true;
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
    } else if (flag == "--gates") {
      flags.gates = true;
    } else if (flag == "--device" && has_value) {
      flags.device = std::atol(argv[++i]);
    } else if (flag == "--sleep-ms" && has_value) {
      flags.sleep_ms = std::atol(argv[++i]);
    } else if (flag == "--crash-when" && has_value &&
               ParseSettings(argv[i + 1], flags.crash_when)) {
      ++i;
    } else if (flag == "--hang-when" && has_value && ParseSettings(argv[i + 1], flags.hang_when)) {
      ++i;
    } else if (flag == "--crash-every" && has_value) {
      flags.crash_every = std::atol(argv[++i]);
    } else if (flag == "--hang-every" && has_value) {
      flags.hang_every = std::atol(argv[++i]);
    } else if (flag == "--log" && has_value) {
      flags.log = argv[++i];
    } else if (flag == "--drift-us" && has_value) {
      flags.drift_us = std::atof(argv[++i]);
    } else if (flag == "--clock-drift-mhz" && has_value) {
      flags.clock_drift_mhz = std::atof(argv[++i]);
    } else {
      std::cerr << "fake worker: bad argument '" << flag << "'\n";
      return 2;
    }
  }
  const long start = flags.start_count_file.empty() ? 1 : CountStart(flags.start_count_file);

  long evaluations = 0;
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
        Ok(id, {{"pid", ::getpid()}, {"device", "Fake GPU " + std::to_string(flags.device)}});
      }
    } else if (type == "evaluate" && flags.gates) {
      EvaluateAsGates(id, request.value("payload", json::object()), flags, ++evaluations);
    } else if (type == "evaluate") {
      Evaluate(id, request.value("payload", json::object()));
    } else {
      Fail(id, "unknown request type '" + type + "'", false);
    }
  }
  return 0;
}
