#include "cli/commands.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <string_view>

#include "cli/command_support.h"
#include "cli/inspect_commands.h"
#include "cli/output.h"
#include "cli/search_commands.h"
#include "common/error.h"
#include "common/files.h"
#include "evaluator/compile_cache.h"
#include "evaluator/compile_gate.h"
#include "evaluator/cuda_driver.h"
#include "evaluator/gpu_gates.h"
#include "evaluator/gpu_verdict_json.h"
#include "evaluator/gpu_worker.h"
#include "evaluator/nvrtc_compiler.h"
#include "population/sqlite.h"

namespace evo::cli {
namespace {

struct CompileOptions {
  std::string template_name = "sdpa_fp16";
  std::vector<std::string> settings;
  std::string shape;
  bool causal = false;
  std::vector<std::string> problem_settings;
  std::string arch;
  int device = 0;
  std::string cache_dir = "runs/cache";
  bool no_cache = false;
  bool allow_spills = false;
  bool json = false;
  bool show_log = false;
  bool show_source = false;
  std::string cubin_path;
};

// The arch to compile for: the one named, or the one of the GPU that is here.
ArchOrigin ResolveArch(const CompileOptions& options, ArchInfo& arch) {
  if (!options.arch.empty()) {
    arch = ArchByName(options.arch);
    const auto supported = NvrtcCompiler::SupportedArchs();
    const std::string base = "sm_" + std::to_string(arch.sm);
    if (std::find(supported.begin(), supported.end(), base) == supported.end()) {
      throw Error("this NVRTC cannot compile for " + options.arch);
    }
    return {arch.name, ""};
  }
  std::vector<DeviceInfo> devices;
  try {
    devices = QueryDevices();
  } catch (const NoGpuError& error) {
    throw Error(std::string(error.what()) +
                "; pass --arch (e.g. --arch sm_90) to compile for a GPU that is not here");
  }
  if (options.device < 0 || options.device >= static_cast<int>(devices.size())) {
    throw Error("there is no GPU " + std::to_string(options.device) + " (found " +
                std::to_string(devices.size()) + ")");
  }
  const DeviceInfo& device = devices[static_cast<size_t>(options.device)];
  arch = device.arch_info();
  return {arch.name, device.name};
}

std::function<int()> SetupTemplates(CLI::App& app, const GlobalOptions& global) {
  auto json = std::make_shared<bool>(false);
  app.add_flag("--json", *json, "print JSON");
  return [&global, json] {
    const TemplateLibrary library = LoadLibrary(global);
    if (*json) {
      nlohmann::json all = nlohmann::json::array();
      for (const KernelTemplate& t : library.templates()) all.push_back(TemplateToJson(t));
      std::cout << all.dump(2) << "\n";
    } else {
      for (const KernelTemplate& t : library.templates()) std::cout << TemplateToText(t);
    }
    return kExitOk;
  };
}

// `evo compile` takes a target (--arch, or --device whose arch to use); `evo bench` compiles
// for the GPU it runs on, so `on_this_gpu` leaves both out.
void AddCompileOptions(CLI::App& app, CompileOptions& options, bool on_this_gpu = false) {
  app.add_option("--template,-t", options.template_name, "template name")->capture_default_str();
  app.add_option("--set,-s", options.settings,
                 "KNOB=VALUE (repeatable); unset knobs keep their defaults");
  app.add_option("--shape", options.shape,
                 "B,H,S,D or B,H,S_q,S_kv,D (default: the template's default problem)");
  app.add_flag("--causal", options.causal, "causal attention");
  app.add_option("--problem", options.problem_settings,
                 "PARAM=VALUE (repeatable): another problem parameter, e.g. Q_FP8=1");
  // Kept out of bench's help, but still read there, so that it is refused by name.
  app.add_option("--arch", options.arch, "target, e.g. sm_90 (default: the GPU that is here)")
      ->group(on_this_gpu ? "" : "Options");
  if (!on_this_gpu) {
    app.add_option("--device", options.device, "the GPU whose arch to use when --arch is not given")
        ->capture_default_str();
  }
  app.add_option("--cache-dir", options.cache_dir, "compile cache folder")->capture_default_str();
  app.add_flag("--no-cache", options.no_cache, "neither read nor fill the compile cache");
  app.add_flag("--allow-spills", options.allow_spills, "let register spills pass the gate");
  app.add_flag("--json", options.json, "print JSON");
  app.add_flag("--log", options.show_log, "print NVRTC's whole log");
}

// Everything one configuration's compile needs, read from the command line.
class CompileSession {
 public:
  CompileSession(const GlobalOptions& global, const CompileOptions& options)
      : library_(LoadLibrary(global)),
        kernel_template_(library_.Find(options.template_name)),
        genome_(DefaultGenome(kernel_template_.manifest)),
        problem_(CommandLineProblem(kernel_template_.manifest, options.shape, options.causal,
                                    options.problem_settings)) {
    const Manifest& manifest = kernel_template_.manifest;
    ApplyKnobSettings(manifest, options.settings, "--set", genome_);
    origin_ = ResolveArch(options, arch_);
    RequireSupportedArch(manifest, arch_);
    if (!options.no_cache) {
      cache_ = std::make_unique<CompileCache>(options.cache_dir);
      caching_ = std::make_unique<CachingCompiler>(nvrtc_, *cache_);
    }
  }

  const KernelTemplate& kernel_template() const { return kernel_template_; }
  const Genome& genome() const { return genome_; }
  const Problem& problem() const { return problem_; }
  const ArchInfo& arch() const { return arch_; }
  const ArchOrigin& origin() const { return origin_; }
  Compiler& compiler() { return caching_ ? static_cast<Compiler&>(*caching_) : nvrtc_; }

  CompileOutcome RunGate(bool allow_spills) {
    return RunCompileGate(kernel_template_, genome_, problem_, arch_, compiler(), {allow_spills});
  }
  CompileOutcome CompileTheReference() {
    return CompileReference(kernel_template_, problem_, arch_, compiler());
  }

 private:
  TemplateLibrary library_;
  const KernelTemplate& kernel_template_;
  Genome genome_;
  Problem problem_;
  ArchInfo arch_;
  ArchOrigin origin_;
  NvrtcCompiler nvrtc_;
  std::unique_ptr<CompileCache> cache_;
  std::unique_ptr<CachingCompiler> caching_;
};

std::function<int()> SetupCompile(CLI::App& app, const GlobalOptions& global) {
  auto options = std::make_shared<CompileOptions>();
  AddCompileOptions(app, *options);
  app.add_flag("--source", options->show_source, "print the instantiated source");
  app.add_option("--cubin", options->cubin_path,
                 "also write the cubin to this file (for cuobjdump / nvdisasm)");
  return [&global, options] {
    if (!options->cubin_path.empty()) RefuseToOverwriteButACubin(options->cubin_path, "--cubin");
    CompileSession session(global, *options);
    const CompileOutcome outcome = session.RunGate(options->allow_spills);
    // The GPU gates need the reference as much as the candidate: a template whose reference
    // cannot be built is found here, not when a run starts on a GPU.
    const CompileOutcome reference = session.CompileTheReference();
    if (!options->cubin_path.empty()) {
      if (outcome.compiled.cubin.empty()) {
        throw Error("no cubin to write: " + outcome.reason);
      }
      WriteFileAtomically(options->cubin_path, outcome.compiled.cubin);
    }
    const CompileReport report{
        session.kernel_template(), session.genome(), session.problem(), session.origin(), outcome,
        options->show_log,         &reference};
    if (options->json) {
      nlohmann::json json = CompileReportToJson(report);
      if (options->show_source) json["source"] = outcome.source;
      std::cout << json.dump(2) << "\n";
    } else {
      std::cout << CompileReportToText(report);
      if (options->show_source) std::cout << "source:\n" << outcome.source;
    }
    if (reference.status != Status::kCompiled) {
      std::cout.flush();
      throw Error("the reference kernel " + session.kernel_template().manifest.reference.entry +
                  " of template " + session.kernel_template().manifest.name +
                  " cannot be used on this problem (" + std::string(ToString(reference.status)) +
                  (reference.reason.empty() ? "" : ": " + reference.reason) +
                  "); evo run and evo bench need it to check every candidate");
    }
    return outcome.status == Status::kCompiled ? kExitOk : kExitRejected;
  };
}

struct BenchOptions {
  CompileOptions compile;
  std::string gpus = "all";
  bool verify_only = false;
  bool flush_l2 = false;
  bool time_on_outliers = false;
  int64_t deadline_ms = 0;  // 0: from the reference kernel's time on the task
};

std::function<int()> SetupBench(CLI::App& app, const GlobalOptions& global) {
  auto options = std::make_shared<BenchOptions>();
  AddCompileOptions(app, options->compile, true);
  app.add_option("--gpus", options->gpus,
                 "the GPUs to run on, e.g. 0,1, each through its own worker (default: all)")
      ->capture_default_str();
  app.add_flag("--verify-only", options->verify_only, "run the correctness gate only");
  app.add_flag("--flush-l2", options->flush_l2, "flush the L2 cache before every timed launch");
  app.add_flag("--time-on-outliers", options->time_on_outliers, kTimeOnOutliersHelp);
  app.add_option("--deadline-ms", options->deadline_ms, kDeadlineHelp)->transform(PositiveNumber());
  return [&global, options] {
    if (!options->compile.arch.empty()) {
      throw Error("evo bench runs on the GPU that is here and compiles for its arch; drop --arch");
    }
    // The command line is checked before the GPU is looked for, so that it can be checked
    // without one.
    {
      const TemplateLibrary library = LoadLibrary(global);
      const KernelTemplate& kernel_template = library.Find(options->compile.template_name);
      Genome genome = DefaultGenome(kernel_template.manifest);
      ApplyKnobSettings(kernel_template.manifest, options->compile.settings, "--set", genome);
      CommandLineProblem(kernel_template.manifest, options->compile.shape, options->compile.causal,
                         options->compile.problem_settings);
      if (options->time_on_outliers) RequireOutlierRows(kernel_template.manifest);
    }
    const std::vector<DeviceInfo> devices = QueryDevices();  // says plainly when there is none
    const std::vector<int> gpus = SelectGpus(options->gpus, static_cast<int>(devices.size()));
    for (int gpu : gpus) {
      if (devices[static_cast<size_t>(gpu)].arch() !=
          devices[static_cast<size_t>(gpus[0])].arch()) {
        throw Error("GPUs " + std::to_string(gpus[0]) + " and " + std::to_string(gpu) +
                    " differ in arch; bench them one --gpus at a time");
      }
    }
    options->compile.device = gpus.front();
    CompileSession session(global, options->compile);
    const CompileOutcome outcome = session.RunGate(options->compile.allow_spills);
    const CompileReport report{
        session.kernel_template(), session.genome(), session.problem(),
        session.origin(),          outcome,          options->compile.show_log};
    // One verdict per GPU, each from that GPU's own worker, and the deadline it had.
    std::vector<std::pair<int, GpuVerdict>> verdicts;
    std::vector<std::chrono::milliseconds> deadlines;
    if (outcome.status == Status::kCompiled) {
      TimingOptions timing;
      timing.flush_l2 = options->flush_l2;
      timing.outlier_inputs = options->time_on_outliers;
      for (int gpu : gpus) {
        GpuWorkerOptions worker;
        worker.device = gpu;
        worker.template_folders.assign(global.template_folders.begin(),
                                       global.template_folders.end());
        if (!options->compile.no_cache) worker.cache_dir = options->compile.cache_dir;
        WorkerSupervisor supervisor(GpuWorkerCommand(worker));
        const std::chrono::milliseconds deadline =
            options->deadline_ms > 0
                ? std::chrono::milliseconds(options->deadline_ms)
                : TaskDeadline(supervisor, session.kernel_template(), session.problem(), timing,
                               std::chrono::minutes(10), nullptr);
        deadlines.push_back(deadline);
        verdicts.emplace_back(
            gpu,
            VerdictFromWorker(
                supervisor.Evaluate(MakeEvaluatePayload(session.kernel_template(), session.genome(),
                                                        session.problem(), outcome.compiled.cubin,
                                                        options->verify_only, timing),
                                    deadline),
                deadline));
      }
    }
    bool all_measured = !verdicts.empty();
    for (const auto& [gpu, verdict] : verdicts) {
      all_measured = all_measured && verdict.status == Status::kMeasured;
    }
    if (options->compile.json) {
      nlohmann::json json = CompileReportToJson(report);
      json["gpus"] = nlohmann::json::array();
      for (size_t i = 0; i < verdicts.size(); ++i) {
        const auto& [gpu, verdict] = verdicts[i];
        nlohmann::json entry = GpuVerdictToJson(verdict);
        entry["gpu"] = gpu;
        entry["deadline_ms"] = deadlines[i].count();
        entry["device"] = devices[static_cast<size_t>(gpu)].name;
        json["gpus"].push_back(entry);
      }
      std::cout << json.dump(2) << "\n";
    } else {
      std::cout << CompileReportToText(report);
      for (size_t i = 0; i < verdicts.size(); ++i) {
        const auto& [gpu, verdict] = verdicts[i];
        if (verdicts.size() > 1) {
          std::cout << "gpu " << gpu << " (" << devices[static_cast<size_t>(gpu)].name << ")\n";
        }
        std::cout << VerdictToText(verdict);
        std::cout << "deadline    " << deadlines[i].count() << " ms for gates 2 and 3\n";
      }
    }
    return all_measured ? kExitOk : kExitRejected;
  };
}

std::function<int()> SetupWorker(CLI::App& app, const GlobalOptions& global) {
  auto options = std::make_shared<GpuWorkerOptions>();
  auto cache_dir = std::make_shared<std::string>("runs/cache");
  auto no_cache = std::make_shared<bool>(false);
  app.add_option("--device", options->device, "the GPU this worker owns")->capture_default_str();
  app.add_option("--cache-dir", *cache_dir, "compile cache folder")->capture_default_str();
  app.add_flag("--no-cache", *no_cache, "no compile cache");
  return [&global, options, cache_dir, no_cache] {
    options->template_folders.assign(global.template_folders.begin(),
                                     global.template_folders.end());
    if (!*no_cache) options->cache_dir = *cache_dir;
    // A stop reaches the whole process group: Ctrl-C (SIGINT) from a terminal, SIGTERM from
    // `timeout`, `kill -- -PGID` or a job scheduler. evo stops the worker itself once the
    // candidate it is measuring is stored (closing its stdin, SIGKILL past a grace), so the
    // worker must not die of the signal first: its candidate would be stored as a runtime
    // error of a worker "killed by signal 15", a kernel that did nothing wrong (two sweeps of
    // the twenty-sixth session, stopped by `timeout`, recorded one each).
    // SIGINT last: a worker that ignores it has ignored SIGTERM too (the test reads SigIgn).
    std::signal(SIGTERM, SIG_IGN);
    std::signal(SIGINT, SIG_IGN);
    return RunGpuWorker(*options, std::cin, std::cout);
  };
}

std::function<int()> SetupInfo(CLI::App& app, const GlobalOptions&) {
  (void)app;
  return [] {
    std::cout << "evo        " << EVO_VERSION << "\n";
    std::cout << "nvrtc      " << NvrtcCompiler().Version().substr(6) << " (archs:";
    for (const std::string& arch : NvrtcCompiler::SupportedArchs()) std::cout << " " << arch;
    std::cout << ")\n";
    std::cout << "sqlite     " << sqlite::LibraryVersion() << "\n";
    try {
      const int version = DriverVersion();
      std::cout << "driver     CUDA " << version / 1000 << "." << version % 1000 / 10 << "\n";
      for (const DeviceInfo& device : QueryDevices()) {
        std::cout << "gpu " << device.ordinal << "      " << device.name << ", " << device.arch()
                  << ", " << device.sm_count << " SMs, "
                  << device.global_memory_bytes / (1024 * 1024) << " MiB, "
                  << device.max_smem_per_block_optin << " bytes shared memory per block, "
                  << device.sm_clock_khz / 1000 << " MHz\n";
      }
    } catch (const NoGpuError& error) {
      std::cout << "driver     none: " << error.what() << "\n";
    }
    return kExitOk;
  };
}

const Command kCommands[] = {
    {"templates", "List the kernel templates with their knobs and domains", SetupTemplates},
    {"compile", "Compile one configuration and print its resources (gate 1)", SetupCompile},
    {"bench", "Compile one configuration and run it through the correctness and performance gates",
     SetupBench},
    {"run", "Search a template's configurations on the GPU (or resume a search) into SQLite",
     SetupRun},
    {"tune", "Search a list of shapes (one run each, seeded by the ones before) into one database",
     SetupTune},
    {"show", "Show stored runs, a run's elite, or one candidate", SetupShow},
    {"export",
     "Write a candidate's cubin, source and launch description, or the tuned runs as a Python "
     "package or C++ library with a dispatch table",
     SetupExport},
    {"sweep", "Measure every valid configuration of a task into a recording for replays",
     SetupSweep},
    {"report", "Write one self-contained HTML page of stored runs: charts, elite, peers",
     SetupReport},
    {"info", "Print versions, the GPU driver and the GPUs found", SetupInfo},
    {"doctor", "Check what this machine (and a database) can do for evo; each problem with its fix",
     SetupDoctor},
    {"worker", "Serve GPU evaluations for evo on stdin/stdout (started by evo itself)",
     SetupWorker},
};

}  // namespace

int Main(int argc, char** argv) {
  auto logger = spdlog::stderr_color_mt("evo");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("%^%l%$: %v");
  spdlog::set_level(spdlog::level::warn);

  CLI::App app{"evo: evolutionary autotuner for CUDA kernel templates"};
  app.set_version_flag("--version", EVO_VERSION);
  app.require_subcommand(1);
  app.fallthrough();
  GlobalOptions global;
  // One folder per --templates, so that `--templates DIR 1` does not take the 1 as a folder.
  app.add_option("--templates", global.template_folders,
                 "a folder of the user's templates (repeatable)")
      ->allow_extra_args(false);
  app.add_flag("--verbose,-v", global.verbose, "log more");

  std::function<int()> selected;
  for (const Command& command : kCommands) {
    CLI::App* sub = app.add_subcommand(command.name, command.description);
    auto run = command.setup(*sub, global);
    sub->callback([&selected, run] { selected = run; });
  }
  // CLI11 reports a mistyped command as a missing one; name it instead.
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--templates") {
      ++i;
      continue;
    }
    if (arg.starts_with("-")) continue;
    const bool known = std::any_of(std::begin(kCommands), std::end(kCommands),
                                   [&](const Command& command) { return arg == command.name; });
    if (!known) {
      std::string names;
      for (const Command& command : kCommands)
        names += (names.empty() ? "" : ", ") + std::string(command.name);
      std::cerr << "evo: error: unknown command '" << arg << "' (commands: " << names << ")\n";
      return kExitError;
    }
    break;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    const int code = app.exit(error);
    return code == 0 ? kExitOk : kExitError;
  }
  if (global.verbose) spdlog::set_level(spdlog::level::debug);
  try {
    return selected();
  } catch (const Error& error) {
    std::cerr << "evo: error: " << error.what() << "\n";
    return kExitError;
  } catch (const std::filesystem::filesystem_error& error) {
    // A path the user gave that cannot be read or made (a file where a folder must be, no
    // permission): the machine's answer, not a fault of evo's.
    std::string what = error.what();
    constexpr std::string_view kPrefix = "filesystem error: ";
    if (what.starts_with(kPrefix)) what.erase(0, kPrefix.size());
    std::cerr << "evo: error: " << what << "\n";
    return kExitError;
  } catch (const std::exception& error) {
    std::cerr << "evo: internal error: " << error.what() << "\n";
    return kExitError;
  }
}

}  // namespace evo::cli
