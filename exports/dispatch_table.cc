#include "exports/dispatch_table.h"

#include <algorithm>
#include <map>
#include <set>
#include <span>
#include <tuple>

#include "common/error.h"
#include "common/sha256.h"
#include "evaluator/candidate_outcome.h"
#include "kernel_templates/configuration.h"

namespace evo {
namespace {

using Json = nlohmann::json;

// The tensors of attention(q, k, v, ...) and the manifest arguments that stand for them.
const std::map<std::string, std::string, std::less<>> kRoles = {{"Q", "q"},
                                                                {"K", "k"},
                                                                {"K8", "k"},
                                                                {"V", "v"},
                                                                {"V8", "v"},
                                                                {"O", "out"},
                                                                {"Q_scale", "q_scale"},
                                                                {"K_scale", "k_scale"},
                                                                {"V_scale", "v_scale"}};

// Folds expressions over what the compile fixed and checks that only run-time names remain.
class Folder {
 public:
  Folder(std::string kernel_name, Bindings constants, std::set<std::string> runtime_names)
      : kernel_name_(std::move(kernel_name)),
        constants_(std::move(constants)),
        runtime_names_(std::move(runtime_names)) {}

  const Bindings& constants() const { return constants_; }
  void AddConstant(const std::string& name, int64_t value) { constants_[name] = value; }
  void AddRuntimeName(const std::string& name) { runtime_names_.insert(name); }
  bool DependsOnRuntime(const Expression& expr) const {
    for (const std::string& name : expr.Identifiers()) {
      if (runtime_names_.count(name) > 0) return true;
    }
    return false;
  }

  // An integer where nothing run-time remains, else the folded text. `device` names the device's
  // figures it may keep besides (kLaunchBindings for a grid, kScratchBindings for scratch).
  Json Fold(const Expression& expr, const std::string& field,
            std::span<const std::string_view> device = {}) const {
    const std::string text = expr.Fold(constants_);
    const Expression folded = Expression::Parse(text);
    // A folded guard such as "(1 || (GROUP > 1))" is constant too: && and || evaluate only the
    // operand that decides, so an evaluation without any run-time name succeeds.
    try {
      return folded.Evaluate({});
    } catch (const Error&) {
    }
    const std::set<std::string> names = folded.Identifiers();
    if (names.empty()) return folded.Evaluate({});  // throws the reason it cannot be evaluated
    for (const std::string& name : names) {
      const bool of_device = std::find(device.begin(), device.end(), name) != device.end();
      if (runtime_names_.count(name) == 0 && !of_device) {
        throw Error(kernel_name_ + ": " + field + " '" + expr.text() + "' needs " + name +
                    ", which is known neither when the kernel is compiled nor from the call");
      }
    }
    return text;
  }

  int64_t Constant(const Expression& expr, const std::string& field) const {
    const Json folded = Fold(expr, field);
    if (!folded.is_number_integer()) {
      throw Error(kernel_name_ + ": " + field + " '" + expr.text() +
                  "' depends on the call's sizes; an export needs it fixed by the compile");
    }
    return folded.get<int64_t>();
  }

 private:
  std::string kernel_name_;
  Bindings constants_;
  std::set<std::string> runtime_names_;
};

Json ArgToJson(const KernelArgSpec& arg, const KernelSpec& kernel, const Folder& folder) {
  const std::string field = kernel.entry + " argument " + arg.name;
  Json param = {{"name", arg.name}, {"kind", KernelArgSpec::KindName(arg.kind)}};
  if (arg.kind == KernelArgSpec::Kind::kScalar) {
    param["dtype"] = arg.dtype;
    param["value"] = folder.Fold(*arg.value, field);
    return param;
  }
  if (arg.map) {
    const KernelArgSpec* tensor = nullptr;
    for (const KernelArgSpec& other : kernel.args) {
      if (other.is_tensor() && other.name == arg.map->tensor &&
          other.PresentFor(folder.constants()))
        tensor = &other;
    }
    if (tensor == nullptr) throw Error(field + ": its tensor " + arg.map->tensor + " is absent");
    param["tensor"] = tensor->name;
    param["dtype"] = tensor->dtype;
    Json box = Json::array();
    for (const Expression& extent : arg.map->box) box.push_back(folder.Fold(extent, field));
    param["box"] = box;
    param["swizzle"] = arg.map->swizzle;
    param["interleave"] = arg.map->interleave;
    param["l2_promotion"] = arg.map->l2_promotion;
    param["fill"] = arg.map->fill;
    return param;
  }
  param["dtype"] = arg.dtype;
  Json shape = Json::array();
  if (arg.kind == KernelArgSpec::Kind::kScratch) {
    // Scratch may be sized by the device it runs on, which the runtime binds as for the grid.
    bool needs_device = false;
    for (const Expression& extent : arg.shape) {
      shape.push_back(folder.Fold(extent, field, kScratchBindings));
      needs_device =
          needs_device ||
          (shape.back().is_string() &&
           Expression::Parse(shape.back().get<std::string>()).Identifiers().contains("NUM_SMS"));
    }
    param["shape"] = shape;
    param["zero"] = ScratchZeroName(arg.zero);
    if (needs_device) param["shape_bindings"] = {{"NUM_SMS", kNumSmsDoc}};
  } else {
    for (const Expression& extent : arg.shape) shape.push_back(folder.Fold(extent, field));
    param["shape"] = shape;
    const auto role = kRoles.find(arg.name);
    if (role == kRoles.end()) {
      throw Error(field + " has no place in attention(q, k, v, ...): the export knows " +
                  "Q, K, V, O and the scales Q_scale, K_scale, V_scale");
    }
    param["role"] = role->second;
  }
  return param;
}

}  // namespace

Json KernelPlan(const KernelTemplate& kernel_template, const Genome& genome,
                const Problem& tuned_problem, const ArchInfo& arch, const CompileResult& compiled) {
  const Manifest& manifest = kernel_template.manifest;
  for (const char* needed : {"D", "CAUSAL"}) {
    const ProblemParamSpec* param = manifest.FindProblemParam(needed);
    if (param == nullptr || !param->compile_time()) {
      throw Error(manifest.name + " has no compile-time problem parameter " + needed +
                  "; the export serves attention templates");
    }
  }
  std::set<std::string> runtime;
  for (const ProblemParamSpec& param : manifest.problem) {
    if (!param.compile_time()) runtime.insert(param.name);
  }
  for (const std::string& name : runtime) {
    if (std::find(std::begin(kRuntimeParams), std::end(kRuntimeParams), name) ==
        std::end(kRuntimeParams)) {
      throw Error(manifest.name + "'s run-time problem parameter " + name +
                  " is not one of attention's B, H, H_kv, S_q, S_kv");
    }
  }
  // Everything a compile fixes: the arch's limits, the knobs and the compile-time problem.
  const Bindings all = CompileBindings(manifest, genome, tuned_problem, arch);
  Bindings constants(genome.begin(), genome.end());
  for (const ProblemParamSpec& param : manifest.problem) {
    if (param.compile_time()) constants[param.name] = tuned_problem.at(param.name);
  }
  for (const char* name : {"SM", "MAX_SMEM_PER_BLOCK", "MAX_THREADS_PER_BLOCK", "REGS_PER_BLOCK"}) {
    constants[name] = all.at(name);
  }
  Folder folder(manifest.name, constants, runtime);

  // Derived values: those of the compile become constants, those that follow the call's sizes
  // are evaluated per call, in the manifest's order.
  Json derived = Json::array();
  for (const DerivedSpec& spec : manifest.derived) {
    if (folder.DependsOnRuntime(spec.expr)) {
      derived.push_back({spec.name, folder.Fold(spec.expr, "derived " + spec.name)});
      folder.AddRuntimeName(spec.name);
    } else {
      folder.AddConstant(spec.name, all.at(spec.name));
    }
  }

  // What the call's sizes must satisfy: the problem's own checks and the constraints that read
  // them (the others held when the kernel was compiled).
  Json constraints = Json::array();
  if (runtime.count("H_kv") == 0) {
    constraints.push_back({{"name", "same_kv_heads"},
                           {"expr", "H_kv == H"},
                           {"doc", manifest.name + " has no grouped key/value heads: k and v " +
                                       "have as many heads as q"}});
  }
  for (const ProblemParamSpec& param : manifest.problem) {
    if (param.compile_time()) continue;
    if (param.min > 1) {
      constraints.push_back({{"name", param.name + "_min"},
                             {"expr", param.name + " >= " + std::to_string(param.min)},
                             {"doc", param.doc}});
    }
    if (param.check) {
      constraints.push_back({{"name", param.name + "_check"},
                             {"expr", folder.Fold(*param.check, param.name + "'s check")},
                             {"doc", param.check_doc}});
    }
  }
  for (const ConstraintSpec& constraint : manifest.constraints) {
    const Json folded = folder.Fold(constraint.expr, "constraint " + constraint.name);
    if (folded.is_number_integer()) {
      if (folded.get<int64_t>() == 0) {
        throw Error(manifest.name + " configuration breaks its constraint " + constraint.name);
      }
      continue;
    }
    constraints.push_back({{"name", constraint.name}, {"expr", folded}, {"doc", constraint.doc}});
  }

  Json launches = Json::array();
  Json scratch = Json::array();
  Json call = Json::array();
  Json key = {{"D", tuned_problem.at("D")}, {"causal", tuned_problem.at("CAUSAL") != 0 ? 1 : 0}};
  std::map<std::string, std::string> role_dtypes;
  std::vector<std::string> memsets;
  for (const KernelSpec& kernel : manifest.kernels) {
    Json when;
    if (kernel.when) {
      when = folder.Fold(*kernel.when, kernel.entry + " when");
      if (when.is_number_integer()) {
        if (when.get<int64_t>() == 0) continue;
        when = Json();
      }
    }
    Json params = Json::array();
    for (const KernelArgSpec& arg : kernel.args) {
      if (!arg.PresentFor(folder.constants())) continue;
      Json param = ArgToJson(arg, kernel, folder);
      if (param.contains("role")) {
        const std::string role = param["role"];
        const auto known = role_dtypes.find(role);
        if (known != role_dtypes.end() && known->second != param["dtype"]) {
          throw Error(manifest.name + ": " + role + " is " + known->second + " in one kernel and " +
                      param["dtype"].get<std::string>() + " in another");
        }
        role_dtypes[role] = param["dtype"];
      }
      if (arg.kind == KernelArgSpec::Kind::kScratch) {
        const bool seen = std::any_of(scratch.begin(), scratch.end(),
                                      [&](const Json& known) { return known["name"] == arg.name; });
        if (!seen) {
          scratch.push_back({{"name", arg.name},
                             {"dtype", arg.dtype},
                             {"shape", param["shape"]},
                             {"zero", param["zero"]}});
          if (param.contains("shape_bindings")) {
            scratch.back()["shape_bindings"] = param["shape_bindings"];
          }
          if (arg.zero == ScratchZero::kEachCall) memsets.push_back(arg.name);
        }
      }
      params.push_back(param);
    }
    const std::string field = kernel.entry;
    Json grid = Json::array();
    for (const Expression& extent : kernel.grid) {
      grid.push_back(folder.Fold(extent, field + " grid", kLaunchBindings));
    }
    Json block = Json::array();
    for (const Expression& extent : kernel.block) {
      block.push_back(folder.Constant(extent, field + " block"));
    }
    Json cluster = Json::array();
    for (const Expression& extent : kernel.cluster) {
      cluster.push_back(folder.Constant(extent, field + " cluster"));
    }
    const int64_t dynamic_smem = folder.Constant(kernel.dynamic_smem, field + " dynamic_smem");
    const KernelResources* resources = FindKernel(compiled.kernels, kernel.entry);
    Json launch = {{"entry", kernel.entry},
                   {"grid", grid},
                   {"block", block},
                   // Thread-block cluster extents: [1, 1, 1] is a plain launch.
                   {"cluster", cluster},
                   {"dynamic_smem_bytes", dynamic_smem},
                   // Static plus dynamic over 48 KiB needs the opt-in attribute set first.
                   {"needs_dynamic_smem_opt_in",
                    dynamic_smem + (resources != nullptr ? resources->smem_static : 0) > 48 * 1024},
                   {"params", params}};
    if (!when.is_null()) launch["when"] = when;
    if (resources != nullptr) launch["resources"] = KernelResourcesToJson(*resources);
    launches.push_back(launch);
  }
  for (const std::string& name : memsets) call.push_back({{"memset", name}});
  for (const Json& launch : launches) call.push_back({{"launch", launch["entry"]}});
  for (const char* role : {"q", "k", "v", "out"}) {
    if (role_dtypes.count(role) == 0) {
      throw Error(manifest.name + " takes no " + std::string(role) + " tensor");
    }
  }
  if (role_dtypes.at("k") != role_dtypes.at("v")) {
    throw Error(manifest.name + " takes k as " + role_dtypes.at("k") + " and v as " +
                role_dtypes.at("v") + "; attention(q, k, v) needs one dtype for both");
  }
  key["q_dtype"] = role_dtypes.at("q");
  key["kv_dtype"] = role_dtypes.at("k");
  key["out_dtype"] = role_dtypes.at("out");
  Json scales = Json::array();
  for (const char* role : {"q_scale", "k_scale", "v_scale"}) {
    if (role_dtypes.count(role) > 0) scales.push_back(role);
  }

  Json defines = Json::object();
  for (const ProblemParamSpec& param : manifest.problem) {
    if (param.compile_time()) defines[param.name] = tuned_problem.at(param.name);
  }
  const ArchInfo& target = CompileTarget(arch, manifest.arch_specific);
  return {{"template", manifest.name},
          {"template_hash", kernel_template.source_hash},
          {"genome", genome},
          {"defines", defines},
          {"target", target.name},
          {"sm", arch.sm},
          {"arch_specific", manifest.arch_specific},
          {"key", key},
          {"scales", scales},
          {"derived", derived},
          {"constraints", constraints},
          {"launches", launches},
          {"scratch", scratch},
          {"call", call}};
}

namespace {

Json ShapeOf(const Problem& problem) {
  Json shape = Json::object();
  for (const char* name : kRuntimeParams) {
    const auto value = problem.find(name);
    // A template without grouped heads has as many KV heads as query heads.
    shape[name] = value != problem.end() ? value->second : problem.at("H");
  }
  return shape;
}

// The order of the table's entries: key, the arch the run measured on, then the tuned shape,
// smallest first. Runs of one arch are comparable, so one entry per (key, arch, shape) stays.
using EntryOrder = std::tuple<int64_t, int64_t, std::string, std::string, int64_t, int64_t, int64_t,
                              int64_t, int64_t, int64_t>;

EntryOrder OrderOf(const Json& kernel, const Json& shape) {
  const Json& key = kernel["key"];
  return {key["D"].get<int64_t>(),           key["causal"].get<int64_t>(),
          key["q_dtype"].get<std::string>(), key["kv_dtype"].get<std::string>(),
          kernel["sm"].get<int64_t>(),       shape["B"].get<int64_t>(),
          shape["H"].get<int64_t>(),         shape["H_kv"].get<int64_t>(),
          shape["S_q"].get<int64_t>(),       shape["S_kv"].get<int64_t>()};
}

}  // namespace

DispatchPackage BuildDispatchPackage(const std::vector<TunedKernel>& tuned,
                                     const std::string& generated_by) {
  if (tuned.empty()) throw Error("no tuned runs to export");
  struct Chosen {
    const TunedKernel* tuned;
    Json plan;
    Json shape;
    double score;
  };
  // The fastest kernel per (key, arch measured on, shape).
  std::map<EntryOrder, Chosen> chosen;
  for (const TunedKernel& t : tuned) {
    const std::optional<double> score = t.best.score_us();
    if (!score) {
      throw Error("candidate " + std::to_string(t.best.id) + " of run " + std::to_string(t.run.id) +
                  " has no confirmed measurement");
    }
    Json plan;
    try {
      plan = KernelPlan(*t.kernel_template, t.best.proposal.genome, t.run.spec.problem,
                        ArchByName(t.run.spec.arch), t.compiled);
    } catch (const Error& error) {
      throw Error("run " + std::to_string(t.run.id) + ": " + error.what());
    }
    Json shape = ShapeOf(t.run.spec.problem);
    const EntryOrder order = OrderOf(plan, shape);
    const auto known = chosen.find(order);
    if (known == chosen.end() || *score < known->second.score ||
        (*score == known->second.score && t.run.id < known->second.tuned->run.id)) {
      chosen[order] = Chosen{&t, std::move(plan), std::move(shape), *score};
    }
  }

  DispatchPackage package;
  Json kernels = Json::array();
  Json entries = Json::array();
  std::map<std::string, size_t> kernel_index;  // plan + cubin hash -> index
  for (const auto& [order, c] : chosen) {
    const std::string cubin_hash = Sha256Hex(c.tuned->compiled.cubin);
    const std::string identity = c.plan.dump() + cubin_hash;
    auto found = kernel_index.find(identity);
    if (found == kernel_index.end()) {
      const size_t index = kernels.size();
      Json kernel = c.plan;
      const std::string file = "kernels/k" + std::to_string(index) + "_" +
                               kernel["template"].get<std::string>() + ".cubin";
      kernel["cubin"] = file;
      kernel["cubin_sha256"] = cubin_hash;
      kernels.push_back(kernel);
      package.cubins.emplace_back(file, c.tuned->compiled.cubin);
      found = kernel_index.emplace(identity, index).first;
    }
    const RunRecord& run = c.tuned->run;
    entries.push_back({{"shape", c.shape},
                       {"kernel", found->second},
                       {"template", run.spec.template_name},
                       {"run", run.id},
                       {"candidate", c.tuned->best.id},
                       {"config_id", c.tuned->best.config_id},
                       {"score_us", c.score},
                       {"device", run.spec.device},
                       {"evaluator", run.spec.evaluator}});
  }
  package.table = {
      {"format", kDispatchTableFormat},
      {"generated_by", generated_by},
      {"runtime_params",
       Json(std::vector<std::string>(std::begin(kRuntimeParams), std::end(kRuntimeParams)))},
      {"rule",
       "kernels whose cubin runs on the GPU, whose key (D, causal, dtypes of q and k/v) is the "
       "call's and whose constraints hold for the call's sizes; among their entries the tuned "
       "shape itself, else the least sum over S_q, S_kv, B*H and H/H_kv of |L(call) - "
       "L(tuned)| with L(x) = floor(log2(x*x)), ties to the earlier entry"},
      {"kernels", kernels},
      {"entries", entries}};
  return package;
}

}  // namespace evo
