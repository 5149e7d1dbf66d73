#include <algorithm>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/package_export.h"
#include "cli/search_commands.h"
#include "cli/search_output.h"
#include "common/error.h"
#include "common/files.h"
#include "evaluator/compile_cache.h"
#include "evaluator/compile_gate.h"
#include "evaluator/kernel_arguments.h"
#include "evaluator/nvrtc_compiler.h"
#include "exports/package_writer.h"
#include "kernel_templates/configuration.h"
#include "kernel_templates/tensor_map.h"
#include "population/store.h"

namespace evo::cli {
namespace {

using Json = nlohmann::json;

struct ShowOptions {
  std::string db = "runs/evo.db";
  int64_t run = 0;  // 0: the latest
  int64_t candidate = 0;
  bool json = false;
  bool source = false;
  bool log = false;
};

PopulationStore OpenForReading(const std::string& db) {
  if (!std::filesystem::exists(db)) {
    throw Error("there is no database " + db + " (evo run creates it; --db names another)");
  }
  return PopulationStore(db, PopulationStore::Access::kReadOnly);
}

RunRecord SelectRun(PopulationStore& store, int64_t id) {
  if (id > 0) {
    std::optional<RunRecord> run = store.FindRun(id);
    if (!run) throw Error("there is no run " + std::to_string(id) + " in " + store.path().string());
    return *run;
  }
  const std::vector<RunRecord> runs = store.Runs();
  if (runs.empty()) throw Error("there are no runs in " + store.path().string());
  return runs.back();
}

CandidateRecord SelectCandidate(PopulationStore& store, int64_t id) {
  std::optional<CandidateRecord> candidate = store.FindCandidate(id);
  if (!candidate) {
    throw Error("there is no candidate " + std::to_string(id) + " in " + store.path().string());
  }
  return *candidate;
}

void AddDbOption(CLI::App& app, ShowOptions& options) {
  app.add_option("--db", options.db, "the population database")->capture_default_str();
  app.add_flag("--json", options.json, "print JSON");
}

// A tensor's shape and bytes for these bindings. A scratch shape sized by the device (NUM_SMS)
// keeps it, as a grid does: its extents that need it, and its bytes, are expressions, and
// "shape_bindings" says what NUM_SMS stands for.
void TensorToJson(const KernelArgSpec& arg, const Bindings& bindings, Json& param) {
  param["shape"] = Json::array();
  std::string product;
  bool needs_device = false;
  int64_t elements = 1;
  for (const Expression& dim : arg.shape) {
    product += "(" + dim.text() + ") * ";
    try {
      const int64_t extent = dim.Evaluate(bindings);
      param["shape"].push_back(extent);
      elements *= extent;
    } catch (const Error&) {
      if (arg.kind != KernelArgSpec::Kind::kScratch) throw;
      param["shape"].push_back(dim.Fold(bindings));  // throws unless NUM_SMS is what is missing
      needs_device = true;
    }
  }
  const int64_t element_bytes = DtypeBytes(arg.dtype);
  if (!needs_device) {
    param["bytes"] = elements * element_bytes;
    return;
  }
  param["bytes"] = Expression::Parse(product + std::to_string(element_bytes)).Fold(bindings);
  param["shape_bindings"] = {{"NUM_SMS", kNumSmsDoc}};
}

// How to launch one kernel of a call for these bindings: its entry, arguments (tensors with
// their shapes and bytes, scalars with their values, tensor maps described completely), grid,
// block, shared memory and ptxas figures.
Json LaunchToJson(const KernelSpec& kernel, const Bindings& bindings,
                  const CompileResult& compiled) {
  Json params = Json::array();
  for (const KernelArgSpec& arg : kernel.args) {
    if (!arg.PresentFor(bindings)) continue;
    if (arg.map) {
      params.push_back(TensorMapToJson(DescribeTensorMap(arg, kernel, bindings)));
      continue;
    }
    Json param = {{"name", arg.name}, {"dtype", arg.dtype}};
    if (arg.kind == KernelArgSpec::Kind::kScalar) {
      param["kind"] = "scalar";
      param["value"] = arg.value->Evaluate(bindings);
    } else {
      param["kind"] = KernelArgSpec::KindName(arg.kind);
      TensorToJson(arg, bindings, param);
      if (arg.kind == KernelArgSpec::Kind::kScratch) param["zero"] = ScratchZeroName(arg.zero);
    }
    params.push_back(param);
  }
  Json grid = Json::array();
  bool grid_needs_device = false;
  for (const Expression& dim : kernel.grid) {
    try {
      grid.push_back(dim.Evaluate(bindings));
    } catch (const Error&) {
      grid.push_back(dim.Fold(bindings));  // still needs the device's NUM_SMS / CTAS_PER_SM
      grid_needs_device = true;
    }
  }
  Json block = Json::array();
  for (const Expression& dim : kernel.block) block.push_back(dim.Evaluate(bindings));
  Json cluster = Json::array();
  for (const Expression& dim : kernel.cluster) cluster.push_back(dim.Evaluate(bindings));
  const int64_t dynamic_smem = kernel.dynamic_smem.Evaluate(bindings);
  const KernelResources* resources = FindKernel(compiled.kernels, kernel.entry);
  Json launch = {{"entry", kernel.entry},
                 {"params", params},
                 {"grid", grid},
                 {"block", block},
                 // Thread-block cluster extents: [1, 1, 1] is a plain launch; others need
                 // cuLaunchKernelEx with CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION.
                 {"cluster", cluster},
                 {"dynamic_smem_bytes", dynamic_smem},
                 // Static plus dynamic over 48 KiB: cuFuncSetAttribute(
                 // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, dynamic_smem_bytes) first.
                 {"needs_dynamic_smem_opt_in",
                  dynamic_smem + (resources != nullptr ? resources->smem_static : 0) > 48 * 1024},
                 {"resources", resources != nullptr ? KernelResourcesToJson(*resources) : Json()}};
  if (grid_needs_device) {
    launch["grid_bindings"] = {{"NUM_SMS", kNumSmsDoc}, {"CTAS_PER_SM", kCtasPerSmDoc}};
  }
  return launch;
}

}  // namespace

std::function<int()> SetupShow(CLI::App& app, const GlobalOptions& global) {
  auto options = std::make_shared<ShowOptions>();
  auto what = std::make_shared<std::string>();
  app.require_subcommand(1);
  CLI::App* runs = app.add_subcommand("runs", "every run: state, progress, task");
  CLI::App* elite = app.add_subcommand("elite", "a run's Top-K elite with its figures");
  CLI::App* candidate =
      app.add_subcommand("candidate", "one candidate: genome, status, every figure, parents");
  // --db and --json may come before what is shown (show's own) or after it (the subcommand's).
  AddDbOption(app, *options);
  for (CLI::App* sub : {runs, elite, candidate}) {
    AddDbOption(*sub, *options);
    sub->callback([what, sub] { *what = sub->get_name(); });
  }
  elite->add_option("--run", options->run, "run id (default: the latest)")->transform(DecimalId());
  candidate->add_option("id", options->candidate, "candidate id")
      ->required()
      ->transform(DecimalId());
  candidate->add_flag("--source", options->source, "print the instantiated source");
  candidate->add_flag("--log", options->log, "print NVRTC's log");
  return [&global, options, what, elite] {
    // Run ids start at 1; 0 and below name no run (left out, --run shows the latest).
    if (elite->count("--run") > 0 && options->run < 1) {
      throw Error("--run " + std::to_string(options->run) + " names no run: run ids start at 1");
    }
    PopulationStore store = OpenForReading(options->db);
    if (*what == "runs") {
      const std::vector<RunRecord> all = store.Runs();
      if (options->json) {
        Json json = Json::array();
        for (const RunRecord& run : all) json.push_back(RunToJson(run));
        std::cout << json.dump(2) << "\n";
      } else {
        std::cout << RunsToText(all);
      }
      return kExitOk;
    }
    if (*what == "elite") {
      const RunRecord run = SelectRun(store, options->run);
      const std::vector<CandidateRecord> members = store.Elite(run.id);
      if (options->json) {
        Json json = {{"run", RunToJson(run)}, {"elite", Json::array()}};
        for (const CandidateRecord& c : members) json["elite"].push_back(CandidateToJson(c));
        std::cout << json.dump(2) << "\n";
      } else {
        std::cout << EliteToText(run, members);
      }
      return kExitOk;
    }
    const CandidateRecord c = SelectCandidate(store, options->candidate);
    std::string source;
    if (options->source) {
      const RunRecord run = SelectRun(store, c.run_id);
      const TemplateLibrary library = LoadLibrary(global);
      const KernelTemplate& kernel_template = TemplateOfRun(library, run.spec);
      source = InstantiateSource(kernel_template, kernel_template.manifest.main_kernel(),
                                 &c.proposal.genome, run.spec.problem);
    }
    // The re-timings that timed it, and the one that orders its run's elite now (if any).
    const std::vector<Retiming> retimings = store.Retimings(c.run_id);
    std::optional<int64_t> ordering;
    bool in_elite = false;
    for (const CandidateRecord& member : store.Elite(c.run_id)) {
      if (member.side_by_side) ordering = member.side_by_side->retiming_id;
      if (member.id == c.id) in_elite = true;
    }
    if (options->json) {
      Json json = CandidateToJson(c);
      json["side_by_side"] = RetimingsToJson(c.id, retimings, ordering, in_elite);
      if (options->log) json["compile_log"] = c.outcome.compile_log;
      if (options->source) json["source"] = source;
      std::cout << json.dump(2) << "\n";
    } else {
      std::cout << CandidateToText(c) << RetimingsToText(c.id, retimings, ordering, in_elite);
      if (options->log) std::cout << "log:\n" << c.outcome.compile_log;
      if (options->source) std::cout << "source:\n" << source;
    }
    return kExitOk;
  };
}

std::function<int()> SetupExport(CLI::App& app, const GlobalOptions& global) {
  auto options = std::make_shared<ShowOptions>();
  auto out = std::make_shared<std::string>();
  auto cache_dir = std::make_shared<std::string>("runs/cache");
  auto package = std::make_shared<PackageExportOptions>();
  app.add_option("id", options->candidate, "candidate id (with --out)")->transform(DecimalId());
  app.add_option("--out", *out, "folder to write the candidate's cubin, source and launch.json");
  auto force = std::make_shared<bool>(false);
  app.add_flag("--force", *force,
               "with --out, export a candidate that did not pass the gates (to look into it)");
  app.add_option("--python", package->python_dir,
                 "folder to write a Python package into: the tuned runs' best kernels, their "
                 "dispatch table and attention(q, k, v) over PyTorch tensors");
  app.add_option("--cpp", package->cpp_dir,
                 "folder to write a C++ library into: the same kernels and dispatch over the CUDA "
                 "driver, a CMakeLists.txt and an example program");
  app.add_option("--run", package->runs,
                 "a run to export with --python/--cpp (repeatable; default: every run of the "
                 "database with a measured kernel)")
      ->transform(DecimalId());
  app.add_option("--name", package->name, "the Python package's name")->capture_default_str();
  app.add_option("--db", options->db, "the population database")->capture_default_str();
  app.add_option("--cache-dir", *cache_dir, "compile cache folder")->capture_default_str();
  return [&global, options, out, cache_dir, package, force] {
    const bool packages = !package->python_dir.empty() || !package->cpp_dir.empty();
    if (packages) {
      if (options->candidate != 0 || !out->empty()) {
        throw Error(
            "a candidate id exports one kernel (with --out); --python and --cpp export "
            "the tuned runs (--run selects them)");
      }
      package->db = options->db;
      package->cache_dir = *cache_dir;
      return ExportPackages(global, *package);
    }
    if (options->candidate == 0 || out->empty()) {
      throw Error(
          "evo export ID --out DIR writes one candidate; evo export --python DIR or "
          "--cpp DIR writes the tuned runs of --db as a package");
    }
    PopulationStore store = OpenForReading(options->db);
    const CandidateRecord c = SelectCandidate(store, options->candidate);
    const RunRecord run = SelectRun(store, c.run_id);
    // A kernel taken into a program is trusted to be right: one the gates did not pass (or
    // never saw) is exported only when asked for by name.
    const bool pending = c.state == CandidateState::kPending;
    const bool passed = !pending && PassedCorrectness(c.outcome.status);
    if (!passed && !*force) {
      throw Error("candidate " + std::to_string(c.id) +
                  (pending
                       ? " was never evaluated (pending: its run stopped while it was in flight; "
                         "resuming the run evaluates it)"
                       : " did not pass the gates (" + std::string(ToString(c.outcome.status)) +
                             (c.outcome.reason.empty() ? "" : ": " + c.outcome.reason) + ")") +
                  "; pass --force to export it anyway");
    }
    const TemplateLibrary library = LoadLibrary(global);
    const KernelTemplate& kernel_template = TemplateOfRun(library, run.spec);
    const Manifest& manifest = kernel_template.manifest;

    // The cubin is rebuilt from the stored configuration: NVRTC is deterministic, and the
    // compile cache usually has it.
    NvrtcCompiler nvrtc;
    CompileCache cache(*cache_dir);
    CachingCompiler compiler(nvrtc, cache);
    const ArchInfo& arch = ArchByName(run.spec.arch);
    const CompileOutcome compiled = RunCompileGate(kernel_template, c.proposal.genome,
                                                   run.spec.problem, arch, compiler, {true});
    if (!compiled.compiled.ok) {
      throw Error("candidate " + std::to_string(c.id) + " does not compile: " + compiled.reason);
    }

    const std::filesystem::path folder(*out);
    CheckExportFolder(folder, "--out", "launch.json", "candidate");
    std::filesystem::create_directories(folder);
    const std::string stem = manifest.name;
    WriteFileAtomically(folder / (stem + ".cubin"), compiled.compiled.cubin);
    WriteFileAtomically(folder / (stem + ".cu"), compiled.source);
    // The headers the source includes, under their include names: `nvcc -I DIR` (or NVRTC with
    // DIR's files as headers) compiles the exported source as evo did.
    Json headers = Json::array();
    for (const HeaderFile& header : kernel_template.headers) {
      std::filesystem::create_directories((folder / header.name).parent_path());
      WriteFileAtomically(folder / header.name, header.content);
      headers.push_back(header.name);
    }

    const Bindings bindings = CompileBindings(manifest, c.proposal.genome, run.spec.problem, arch);
    const std::vector<const KernelSpec*> launched = LaunchedKernels(manifest, bindings);
    Json kernels = Json::array();
    for (const KernelSpec* kernel : launched) {
      kernels.push_back(LaunchToJson(*kernel, bindings, compiled.compiled));
    }
    // Scratch of the call, each once (kernels of one call share it by name), and the steps of
    // one call: the memsets that zero scratch every call, then the kernels.
    Json scratch = Json::array();
    Json call = Json::array();
    for (const Json& kernel : kernels) {
      for (const Json& param : kernel["params"]) {
        if (param["kind"] != "scratch") continue;
        const bool seen = std::any_of(scratch.begin(), scratch.end(), [&](const Json& known) {
          return known["name"] == param["name"];
        });
        if (seen) continue;
        scratch.push_back({{"name", param["name"]},
                           {"dtype", param["dtype"]},
                           {"shape", param["shape"]},
                           {"bytes", param["bytes"]},
                           {"zero", param["zero"]}});
        if (param.contains("shape_bindings")) {
          scratch.back()["shape_bindings"] = param["shape_bindings"];
        }
        if (param["zero"] == "each_call") call.push_back({{"memset", param["name"]}});
      }
    }
    for (const KernelSpec* kernel : launched) call.push_back({{"launch", kernel->entry}});
    // The first kernel's launch is also given at the top level, as exports of one kernel were.
    const Json& main = kernels.front();
    Json launch = {{"template", manifest.name},
                   {"template_hash", run.spec.template_hash},
                   {"run", run.id},
                   {"candidate", c.id},
                   {"config_id", c.config_id},
                   {"arch", run.spec.arch},
                   {"cubin", stem + ".cubin"},
                   {"source", stem + ".cu"},
                   {"headers", headers},
                   {"entry", main["entry"]},
                   {"genome", c.proposal.genome},
                   {"problem", run.spec.problem},
                   {"params", main["params"]},
                   {"grid", main["grid"]},
                   {"block", main["block"]},
                   {"cluster", main["cluster"]},
                   {"dynamic_smem_bytes", main["dynamic_smem_bytes"]},
                   {"needs_dynamic_smem_opt_in", main["needs_dynamic_smem_opt_in"]},
                   {"resources", main["resources"]},
                   {"kernels", kernels},
                   {"scratch", scratch},
                   {"call", call},
                   {"status", pending ? "pending" : ToString(c.outcome.status)}};
    if (main.contains("grid_bindings")) launch["grid_bindings"] = main["grid_bindings"];
    if (c.confirmation) launch["confirmed_median_us"] = c.confirmation->median_us;
    WriteFileAtomically(folder / "launch.json", launch.dump(2) + "\n");
    std::cout << "exported candidate " << c.id << " of run " << run.id << " to " << folder.string()
              << ": " << stem << ".cubin, " << stem << ".cu"
              << (headers.empty() ? "" : ", its " + std::to_string(headers.size()) + " headers")
              << ", launch.json\n";
    return kExitOk;
  };
}

}  // namespace evo::cli
