#include "kernel_templates/manifest.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "common/error.h"

namespace evo {
namespace {

using Json = nlohmann::json;

// Why a device figure is an unknown name where it was used: it is bound at launch only.
std::string LaunchBindingHint(std::string_view name) {
  const auto among = [name](const auto& names) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  if (!among(kLaunchBindings)) return "";
  return " (" + std::string(name) + " is the device's, known at launch only: " +
         (among(kScratchBindings) ? "grids and scratch shapes may use it"
                                  : "only grids may use it") +
         ")";
}

// Reads one manifest, carrying the origin and the path of the field being read for messages.
class ManifestReader {
 public:
  explicit ManifestReader(std::string_view origin) : origin_(origin) {}

  [[noreturn]] void Fail(const std::string& field, const std::string& what) const {
    throw Error("manifest '" + origin_ + "': " + field + ": " + what);
  }

  const Json& Member(const Json& object, const std::string& field, const std::string& key) const {
    const auto it = object.find(key);
    if (it == object.end()) Fail(field, "missing \"" + key + "\"");
    return *it;
  }

  // A key given twice in one object is refused: JSON readers keep one of the two silently, so a
  // field edited in one place would be overridden by its forgotten twin.
  Json Parse(std::string_view json_text) const {
    std::vector<std::set<std::string>> keys_by_object;
    std::string duplicate;
    const Json::parser_callback_t track_keys = [&](int /*depth*/, Json::parse_event_t event,
                                                   Json& parsed) {
      if (event == Json::parse_event_t::object_start) {
        keys_by_object.emplace_back();
      } else if (event == Json::parse_event_t::object_end) {
        keys_by_object.pop_back();
      } else if (event == Json::parse_event_t::key && !keys_by_object.empty() &&
                 !keys_by_object.back().insert(parsed.get<std::string>()).second &&
                 duplicate.empty()) {
        duplicate = parsed.get<std::string>();
      }
      return true;
    };
    Json json;
    try {
      json = Json::parse(json_text, track_keys);
    } catch (const Json::exception& error) {
      // A syntax error, or a number past a double's range (1e400).
      Fail("JSON", JsonMessage(error));
    }
    if (!duplicate.empty()) {
      Fail("JSON", "key \"" + duplicate + "\" appears twice in one object");
    }
    return json;
  }

  void CheckKeys(const Json& object, const std::string& field,
                 std::initializer_list<std::string_view> allowed) const {
    if (!object.is_object()) Fail(field, "expected an object");
    for (const auto& [key, value] : object.items()) {
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
        Fail(field, "unknown key \"" + key + "\"");
      }
    }
  }

  std::string String(const Json& object, const std::string& field, const std::string& key,
                     bool required = true) const {
    if (!required && !object.contains(key)) return "";
    const Json& value = Member(object, field, key);
    if (!value.is_string()) Fail(field + "." + key, "expected a string");
    return value.get<std::string>();
  }

  std::string Identifier(const Json& object, const std::string& field,
                         const std::string& key) const {
    std::string name = String(object, field, key);
    const bool valid = !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0])) &&
                       std::all_of(name.begin(), name.end(), [](char c) {
                         return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
                       });
    if (!valid) Fail(field + "." + key, "'" + name + "' is not an identifier");
    return name;
  }

  int64_t Integer(const Json& object, const std::string& field, const std::string& key) const {
    const Json& value = Member(object, field, key);
    if (!value.is_number_integer()) Fail(field + "." + key, "expected an integer");
    return value.get<int64_t>();
  }

  double Number(const Json& object, const std::string& field, const std::string& key) const {
    const Json& value = Member(object, field, key);
    if (!value.is_number()) Fail(field + "." + key, "expected a number");
    return value.get<double>();
  }

  const Json& Array(const Json& object, const std::string& field, const std::string& key) const {
    const Json& value = Member(object, field, key);
    if (!value.is_array()) Fail(field + "." + key, "expected an array");
    return value;
  }

  std::vector<int64_t> IntegerSet(const Json& object, const std::string& field,
                                  const std::string& key) const {
    const Json& array = Array(object, field, key);
    std::vector<int64_t> values;
    for (const Json& value : array) {
      if (!value.is_number_integer()) Fail(field + "." + key, "expected integers");
      const int64_t v = value.get<int64_t>();
      if (std::find(values.begin(), values.end(), v) != values.end()) {
        Fail(field + "." + key, "value " + std::to_string(v) + " appears twice");
      }
      values.push_back(v);
    }
    if (values.empty()) Fail(field + "." + key, "expected at least one value");
    return values;
  }

  // An expression may be written as a JSON string or, for constants, a number.
  Expression Expr(const Json& value, const std::string& field,
                  const std::set<std::string, std::less<>>& scope) const {
    std::string text;
    if (value.is_string()) {
      text = value.get<std::string>();
    } else if (value.is_number_integer()) {
      text = std::to_string(value.get<int64_t>());
    } else {
      Fail(field, "expected an expression (a string)");
    }
    try {
      Expression expr = Expression::Parse(text);
      for (const std::string& name : expr.Identifiers()) {
        if (!scope.contains(name)) {
          Fail(field, "unknown name '" + name + "' in '" + text + "'" + LaunchBindingHint(name));
        }
      }
      return expr;
    } catch (const Error& error) {
      if (std::string_view(error.what()).starts_with("manifest '")) throw;
      Fail(field, error.what());
    }
  }

 private:
  std::string origin_;
};

std::string Join(const std::vector<int64_t>& values) {
  std::string text;
  for (int64_t v : values) text += (text.empty() ? "" : ", ") + std::to_string(v);
  return "[" + text + "]";
}

std::vector<KnobSpec> ReadKnobs(const ManifestReader& reader, const Json& root) {
  std::vector<KnobSpec> knobs;
  const Json& array = reader.Array(root, "manifest", "knobs");
  if (array.empty()) reader.Fail("knobs", "a template needs at least one knob");
  for (size_t i = 0; i < array.size(); ++i) {
    const std::string field = "knobs[" + std::to_string(i) + "]";
    reader.CheckKeys(array[i], field, {"name", "values", "default", "doc"});
    KnobSpec knob;
    knob.name = reader.Identifier(array[i], field, "name");
    knob.values = reader.IntegerSet(array[i], field, "values");
    knob.default_value = reader.Integer(array[i], field, "default");
    knob.doc = reader.String(array[i], field, "doc", false);
    if (std::find(knob.values.begin(), knob.values.end(), knob.default_value) ==
        knob.values.end()) {
      reader.Fail(field + ".default", std::to_string(knob.default_value) +
                                          " is not one of its values " + Join(knob.values));
    }
    knobs.push_back(std::move(knob));
  }
  return knobs;
}

std::vector<KnobSettings> ReadStartingPoints(const ManifestReader& reader, const Json& root,
                                             const Manifest& manifest) {
  std::vector<KnobSettings> points;
  reader.CheckKeys(root, "starting points", {"doc", "starting_points"});
  const Json& array = reader.Array(root, "starting points", "starting_points");
  for (size_t i = 0; i < array.size(); ++i) {
    const std::string field = "starting_points[" + std::to_string(i) + "]";
    if (!array[i].is_object() || array[i].empty()) {
      reader.Fail(field, "expected an object of knob settings");
    }
    KnobSettings point;
    for (const auto& [name, value] : array[i].items()) {
      const KnobSpec* knob = manifest.FindKnob(name);
      if (knob == nullptr) reader.Fail(field, "unknown knob \"" + name + "\"");
      const int64_t setting = reader.Integer(array[i], field, name);
      if (std::find(knob->values.begin(), knob->values.end(), setting) == knob->values.end()) {
        reader.Fail(field + "." + name,
                    std::to_string(setting) + " is not one of its values " + Join(knob->values));
      }
      point[name] = setting;
    }
    points.push_back(std::move(point));
  }
  return points;
}

std::vector<ProblemParamSpec> ReadProblem(const ManifestReader& reader, const Json& root) {
  std::vector<ProblemParamSpec> params;
  std::set<std::string, std::less<>> earlier;  // names a default or check may use
  Bindings defaults;
  const Json& array = reader.Array(root, "manifest", "problem");
  for (size_t i = 0; i < array.size(); ++i) {
    const std::string field = "problem[" + std::to_string(i) + "]";
    reader.CheckKeys(array[i], field,
                     {"name", "values", "min", "default", "check", "check_doc", "define", "doc"});
    ProblemParamSpec param;
    param.name = reader.Identifier(array[i], field, "name");
    if (array[i].contains("values")) param.values = reader.IntegerSet(array[i], field, "values");
    if (array[i].contains("min")) param.min = reader.Integer(array[i], field, "min");
    if (array[i].contains("define")) param.define = reader.Identifier(array[i], field, "define");
    // A default that is an expression follows the parameters before it (H_kv defaults to H).
    const Json& default_json = reader.Member(array[i], field, "default");
    if (default_json.is_string()) {
      if (param.compile_time()) {
        reader.Fail(field + ".default", "a compile-time parameter has a constant default");
      }
      param.default_expr = reader.Expr(default_json, field + ".default", earlier);
      param.default_value = param.default_expr->Evaluate(defaults);
    } else {
      param.default_value = reader.Integer(array[i], field, "default");
    }
    earlier.insert(param.name);
    if (array[i].contains("check")) {
      param.check = reader.Expr(array[i]["check"], field + ".check", earlier);
      param.check_doc = reader.String(array[i], field, "check_doc", false);
    } else if (array[i].contains("check_doc")) {
      reader.Fail(field + ".check_doc", "documents a \"check\", which is missing");
    }
    param.doc = reader.String(array[i], field, "doc", false);
    if (param.compile_time() && param.values.empty()) {
      reader.Fail(field, "a compile-time parameter (with a define) needs a list of values");
    }
    const bool default_ok = param.values.empty()
                                ? param.default_value >= param.min
                                : std::find(param.values.begin(), param.values.end(),
                                            param.default_value) != param.values.end();
    if (!default_ok) reader.Fail(field + ".default", "outside the parameter's domain");
    defaults[param.name] = param.default_value;
    bool default_checks = true;
    try {
      default_checks = !param.check || param.check->Evaluate(defaults) != 0;
    } catch (const Error& error) {
      reader.Fail(field + ".check",
                  std::string("cannot be evaluated for the default problem: ") + error.what());
    }
    if (!default_checks) reader.Fail(field + ".check", "the default problem breaks it");
    params.push_back(std::move(param));
  }
  return params;
}

// Where a kernel is read: the names its expressions may use, and what it may have.
struct KernelScopes {
  const std::set<std::string, std::less<>>& scope;
  const std::set<std::string, std::less<>>& launch_scope;   // grids
  const std::set<std::string, std::less<>>& scratch_scope;  // scratch shapes
  const std::set<std::string, std::less<>>& signature_scope;
  bool candidate;  // a candidate's kernel (scratch and `when` allowed), or the reference
};

KernelSpec ReadKernel(const ManifestReader& reader, const Json& object, const std::string& key,
                      const KernelScopes& scopes,
                      const std::function<std::string(const std::string&)>& read_source) {
  const auto& scope = scopes.scope;
  const auto& launch_scope = scopes.launch_scope;
  const auto& signature_scope = scopes.signature_scope;
  reader.CheckKeys(object, key,
                   {"source", "entry", "grid", "block", "cluster", "dynamic_smem", "args", "when"});
  KernelSpec kernel;
  kernel.source_path = reader.String(object, key, "source");
  kernel.entry = reader.Identifier(object, key, "entry");
  if (object.contains("when")) {
    if (!scopes.candidate) reader.Fail(key + ".when", "the reference kernel always runs");
    kernel.when = reader.Expr(object["when"], key + ".when", scope);
  }
  for (const char* dims : {"grid", "block"}) {
    const Json& array = reader.Array(object, key, dims);
    if (array.size() != 3) reader.Fail(key + "." + dims, "expected three expressions (x, y, z)");
    // Only the grid may depend on the device (SM count, occupancy); block size and shared
    // memory are checked by the compile gate before any device is involved.
    const bool grid = std::string_view(dims) == "grid";
    auto& target = grid ? kernel.grid : kernel.block;
    for (size_t d = 0; d < 3; ++d) {
      target[d] = reader.Expr(array[d], key + "." + dims + "[" + std::to_string(d) + "]",
                              grid ? launch_scope : scope);
    }
  }
  if (object.contains("cluster")) {
    const Json& array = reader.Array(object, key, "cluster");
    if (array.size() != 3) reader.Fail(key + ".cluster", "expected three expressions (x, y, z)");
    // Like the block, fixed by the configuration: exports write it as constants.
    for (size_t d = 0; d < 3; ++d) {
      kernel.cluster[d] = reader.Expr(array[d], key + ".cluster[" + std::to_string(d) + "]", scope);
    }
  }
  kernel.dynamic_smem =
      reader.Expr(reader.Member(object, key, "dynamic_smem"), key + ".dynamic_smem", scope);
  const Json& args = reader.Array(object, key, "args");
  std::set<std::string> arg_names;
  std::set<std::string> unconditional;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string field = key + ".args[" + std::to_string(i) + "]";
    reader.CheckKeys(
        args[i], field,
        {"name", "kind", "dtype", "shape", "value", "uniform", "outlier_rows", "when", "define",
         "tensor", "box", "swizzle", "interleave", "l2_promotion", "fill", "zero"});
    KernelArgSpec arg;
    arg.name = reader.Identifier(args[i], field, "name");
    if (args[i].contains("when")) {
      arg.when = reader.Expr(args[i]["when"], field + ".when", signature_scope);
    }
    // One name may stand for alternatives (Q as f16 or as e4m3), each under its own `when`.
    if (!arg_names.insert(arg.name).second && (!arg.when || unconditional.contains(arg.name))) {
      reader.Fail(field, "'" + arg.name + "' appears twice, not each under its own \"when\"");
    }
    if (!arg.when) unconditional.insert(arg.name);
    const std::string kind = reader.String(args[i], field, "kind");
    static const std::set<std::string> kTensorTypes = {"f16", "bf16", "f32", "fp8e4m3", "fp8e5m2"};
    static const std::set<std::string> kScalarTypes = {"i32", "i64", "f32"};
    static const std::set<std::string> kScratchTypes = {"f16", "bf16", "f32", "i32"};
    if (kind != "scratch" && args[i].contains("zero")) {
      reader.Fail(field + ".zero", "only a scratch argument is zeroed");
    }
    if (args[i].contains("outlier_rows") && kind != "input") {
      reader.Fail(field + ".outlier_rows", "only an input is filled with outlier rows");
    }
    if (kind != "tensor_map") {
      for (const char* map_key :
           {"tensor", "box", "swizzle", "interleave", "l2_promotion", "fill"}) {
        if (args[i].contains(map_key)) {
          reader.Fail(field + "." + map_key, "only a tensor_map argument has this field");
        }
      }
    }
    if (kind == "tensor_map") {
      arg.kind = KernelArgSpec::Kind::kTensorMap;
      for (const char* tensor_key : {"dtype", "shape", "value", "uniform", "define"}) {
        if (args[i].contains(tensor_key)) {
          reader.Fail(field + "." + tensor_key,
                      "a tensor_map takes this from the tensor it describes, or has none");
        }
      }
      TensorMapSpec map;
      map.tensor = reader.Identifier(args[i], field, "tensor");
      const Json& box = reader.Array(args[i], field, "box");
      if (box.empty() || box.size() > 5) {
        reader.Fail(field + ".box", "expected one to five extents, innermost first");
      }
      for (size_t d = 0; d < box.size(); ++d) {
        map.box.push_back(reader.Expr(box[d], field + ".box[" + std::to_string(d) + "]", scope));
      }
      const auto choice = [&](const char* option_key, std::string& value,
                              std::initializer_list<const char*> allowed) {
        if (!args[i].contains(option_key)) return;
        value = reader.String(args[i], field, option_key);
        std::string known;
        for (const char* option : allowed) {
          if (value == option) return;
          known += (known.empty() ? "" : ", ") + std::string(option);
        }
        reader.Fail(field + "." + option_key, "'" + value + "' is not one of " + known);
      };
      choice("swizzle", map.swizzle, {"none", "32B", "64B", "128B"});
      choice("interleave", map.interleave, {"none", "16B", "32B"});
      choice("l2_promotion", map.l2_promotion, {"none", "64B", "128B", "256B"});
      choice("fill", map.fill, {"zero", "nan"});
      arg.map = std::move(map);
      kernel.args.push_back(std::move(arg));
      continue;
    }
    arg.dtype = reader.String(args[i], field, "dtype");
    if (kind == "input" || kind == "output") {
      arg.kind = kind == "input" ? KernelArgSpec::Kind::kInput : KernelArgSpec::Kind::kOutput;
      if (!kTensorTypes.contains(arg.dtype))
        reader.Fail(field, "unknown tensor dtype " + arg.dtype);
      const Json& shape = reader.Array(args[i], field, "shape");
      if (shape.empty()) reader.Fail(field + ".shape", "expected at least one dimension");
      for (size_t d = 0; d < shape.size(); ++d) {
        arg.shape.push_back(
            reader.Expr(shape[d], field + ".shape[" + std::to_string(d) + "]", scope));
      }
      if (args[i].contains("uniform")) {
        const Json& range = args[i]["uniform"];
        const bool numbers =
            range.is_array() && range.size() == 2 && range[0].is_number() && range[1].is_number();
        if (!numbers || range[0].get<double>() >= range[1].get<double>()) {
          reader.Fail(field + ".uniform", "expected [lo, hi] with lo < hi");
        }
        if (arg.kind != KernelArgSpec::Kind::kInput || arg.dtype != "f32") {
          reader.Fail(field + ".uniform", "only f32 inputs can be filled uniformly");
        }
        arg.uniform = std::make_pair(range[0].get<double>(), range[1].get<double>());
      }
      if (args[i].contains("outlier_rows")) {
        const std::string outlier_field = field + ".outlier_rows";
        const Json& outliers = args[i]["outlier_rows"];
        if (!outliers.is_object())
          reader.Fail(outlier_field, "expected {\"every\": N, \"scale\": S}");
        reader.CheckKeys(outliers, outlier_field, {"every", "scale"});
        if (!scopes.candidate) {
          reader.Fail(outlier_field,
                      "the reference reads the candidate's inputs; declare outlier rows there");
        }
        if (arg.uniform) reader.Fail(outlier_field, "a uniform fill has no outlier rows");
        OutlierRows rows;
        rows.every = reader.Integer(outliers, outlier_field, "every");
        rows.scale = reader.Number(outliers, outlier_field, "scale");
        if (rows.every < 2) {
          reader.Fail(outlier_field + ".every", "expected at least 2 (one row in `every`)");
        }
        if (!std::isfinite(rows.scale) || rows.scale <= 1) {
          reader.Fail(outlier_field + ".scale", "expected a finite factor above 1");
        }
        arg.outlier_rows = rows;
      }
      if (args[i].contains("define")) arg.define = reader.Identifier(args[i], field, "define");
    } else if (kind == "scratch") {
      if (!scopes.candidate) {
        reader.Fail(field + ".kind", "the reference kernel takes inputs and outputs, no scratch");
      }
      for (const char* tensor_key : {"uniform", "define"}) {
        if (args[i].contains(tensor_key)) {
          reader.Fail(field + "." + tensor_key,
                      "scratch is neither filled nor read by the reference");
        }
      }
      arg.kind = KernelArgSpec::Kind::kScratch;
      if (!kScratchTypes.contains(arg.dtype)) {
        reader.Fail(field, "unknown scratch dtype " + arg.dtype + " (f16, bf16, f32 or i32)");
      }
      // Unlike other tensors, scratch may be sized by the device (a row per CTA of a persistent
      // grid): nothing outside the call sees it, so only its allocation needs the figure.
      const Json& shape = reader.Array(args[i], field, "shape");
      if (shape.empty()) reader.Fail(field + ".shape", "expected at least one dimension");
      for (size_t d = 0; d < shape.size(); ++d) {
        arg.shape.push_back(reader.Expr(shape[d], field + ".shape[" + std::to_string(d) + "]",
                                        scopes.scratch_scope));
      }
      if (args[i].contains("zero")) {
        const std::string zero = reader.String(args[i], field, "zero");
        if (zero == "never") {
          arg.zero = ScratchZero::kNever;
        } else if (zero == "once") {
          arg.zero = ScratchZero::kOnce;
        } else if (zero == "each_call") {
          arg.zero = ScratchZero::kEachCall;
        } else {
          reader.Fail(field + ".zero", "'" + zero + "' is not one of never, once, each_call");
        }
      }
    } else if (kind == "scalar") {
      if (args[i].contains("uniform")) reader.Fail(field + ".uniform", "a scalar is not filled");
      if (args[i].contains("define")) {
        reader.Fail(field + ".define", "only a tensor's dtype is defined for the source");
      }
      arg.kind = KernelArgSpec::Kind::kScalar;
      if (!kScalarTypes.contains(arg.dtype))
        reader.Fail(field, "unknown scalar dtype " + arg.dtype);
      arg.value = reader.Expr(reader.Member(args[i], field, "value"), field + ".value", scope);
    } else {
      reader.Fail(field + ".kind",
                  "expected input, output, scratch, scalar or tensor_map, not '" + kind + "'");
    }
    kernel.args.push_back(std::move(arg));
  }
  // A tensor map describes a tensor of the same kernel, of the same rank, present wherever the
  // map is: the same `when`, or none on the tensor, or (a map without `when`) a tensor that has
  // alternatives (Q as f16 or as bf16), whichever is present.
  for (size_t i = 0; i < kernel.args.size(); ++i) {
    const KernelArgSpec& arg = kernel.args[i];
    if (!arg.map) continue;
    const std::string field = key + ".args[" + std::to_string(i) + "].tensor";
    bool found = false;
    int alternatives = 0;
    for (const KernelArgSpec& tensor : kernel.args) {
      if (tensor.is_tensor() && tensor.name == arg.map->tensor) ++alternatives;
    }
    for (const KernelArgSpec& tensor : kernel.args) {
      if (!tensor.is_tensor() || tensor.name != arg.map->tensor) continue;
      found = true;
      const bool follows_alternatives = !arg.when && alternatives > 1;
      if (tensor.when && !follows_alternatives &&
          (!arg.when || tensor.when->text() != arg.when->text())) {
        reader.Fail(field, "'" + tensor.name + "' exists only where " + tensor.when->text() +
                               "; give the map the same \"when\"");
      }
      // The compile gate checks a map's layout before any device is involved.
      for (const Expression& dim : tensor.shape) {
        for (const std::string& name : dim.Identifiers()) {
          if (std::find(kScratchBindings.begin(), kScratchBindings.end(), name) !=
              kScratchBindings.end()) {
            reader.Fail(field, "'" + tensor.name + "' is sized by " + name +
                                   ", known at launch only; a tensor map's layout is checked "
                                   "before any device is involved");
          }
        }
      }
      if (tensor.shape.size() != arg.map->box.size()) {
        reader.Fail(key + ".args[" + std::to_string(i) + "].box",
                    "'" + tensor.name + "' has " + std::to_string(tensor.shape.size()) +
                        " dimensions, the box " + std::to_string(arg.map->box.size()));
      }
    }
    if (!found)
      reader.Fail(field, "'" + arg.map->tensor + "' is no tensor argument of this kernel");
  }
  try {
    kernel.source = read_source(kernel.source_path);
  } catch (const Error& error) {
    reader.Fail(key + ".source", error.what());
  }
  return kernel;
}

// "kernel" where the manifest gives one kernel, "kernels[k]" where it gives a list.
std::string KernelField(const Json& root, size_t k) {
  return root.contains("kernels") ? "kernels[" + std::to_string(k) + "]" : "kernel";
}

std::string ShapeText(const KernelArgSpec& arg) {
  std::string text;
  for (const Expression& dim : arg.shape) text += (text.empty() ? "" : ", ") + dim.text();
  return "[" + text + "]";
}

// A candidate's kernels: "kernel" (one) or "kernels" (launched in order), never both. They are
// entries of one source, compiled once, and an argument of one name is one thing in all of them.
void ReadCandidateKernels(const ManifestReader& reader, const Json& root,
                          const KernelScopes& scopes,
                          const std::function<std::string(const std::string&)>& read_source,
                          Manifest& manifest) {
  if (root.contains("kernel") == root.contains("kernels")) {
    reader.Fail("manifest", root.contains("kernel")
                                ? "give \"kernel\" (one kernel) or \"kernels\" (several), not both"
                                : "missing \"kernel\" (or \"kernels\", several launched in order)");
  }
  if (root.contains("kernel")) {
    manifest.kernels.push_back(ReadKernel(reader, root["kernel"], "kernel", scopes, read_source));
    if (manifest.kernels.front().when) {
      reader.Fail("kernel.when", "the first kernel of a template always runs");
    }
    return;
  }
  const Json& array = reader.Array(root, "manifest", "kernels");
  if (array.empty()) reader.Fail("kernels", "expected at least one kernel");
  std::set<std::string> entries;
  for (size_t k = 0; k < array.size(); ++k) {
    const std::string field = KernelField(root, k);
    KernelSpec kernel = ReadKernel(reader, array[k], field, scopes, read_source);
    if (k == 0 && kernel.when) {
      reader.Fail(field + ".when", "the first kernel of a template always runs");
    }
    if (k > 0 && kernel.source_path != manifest.kernels.front().source_path) {
      reader.Fail(field + ".source", "the kernels of a template are entries of one source ('" +
                                         manifest.kernels.front().source_path +
                                         "'), compiled once");
    }
    if (!entries.insert(kernel.entry).second) {
      reader.Fail(field + ".entry", "'" + kernel.entry + "' is launched twice in one call");
    }
    // An argument of one name is the same memory in every kernel of the call: the same kind,
    // dtype, shape and presence.
    for (size_t i = 0; i < kernel.args.size(); ++i) {
      const KernelArgSpec& arg = kernel.args[i];
      if (!arg.is_tensor()) continue;
      for (size_t other_k = 0; other_k < manifest.kernels.size(); ++other_k) {
        for (const KernelArgSpec& other : manifest.kernels[other_k].args) {
          if (!other.is_tensor() || other.name != arg.name) continue;
          const bool same_when = arg.when.has_value() == other.when.has_value() &&
                                 (!arg.when || arg.when->text() == other.when->text());
          if (!same_when) continue;  // an alternative (Q as f16 or bf16) of the name
          if (other.kind != arg.kind || other.dtype != arg.dtype ||
              ShapeText(other) != ShapeText(arg) || other.zero != arg.zero) {
            reader.Fail(field + ".args[" + std::to_string(i) + "]",
                        "'" + arg.name + "' differs from the argument of that name in " +
                            KernelField(root, other_k) +
                            " (kind, dtype, shape and zeroing must agree: it is the same memory)");
          }
          if (other.uniform != arg.uniform || other.outlier_rows != arg.outlier_rows) {
            reader.Fail(field + ".args[" + std::to_string(i) + "]",
                        "'" + arg.name + "' differs from the argument of that name in " +
                            KernelField(root, other_k) +
                            " in how the gates fill it (uniform, outlier_rows): it is one input");
          }
        }
      }
    }
    manifest.kernels.push_back(std::move(kernel));
  }
}

void CheckDefine(const ManifestReader& reader, const std::string& field, const KernelArgSpec& arg,
                 const std::set<std::string>& defines,
                 std::map<std::string, std::string>& argument_of_define) {
  if (arg.define.empty()) return;
  if (defines.contains(arg.define)) {
    reader.Fail(field, "'" + arg.define + "' is a knob or problem define");
  }
  const auto [it, inserted] = argument_of_define.emplace(arg.define, arg.name);
  if (!inserted && it->second != arg.name) {
    reader.Fail(field, "'" + arg.define + "' is the define of " + it->second + " already");
  }
}

Tolerance ReadTolerance(const ManifestReader& reader, const Json& object,
                        const std::string& field) {
  Tolerance tolerance;
  tolerance.atol = reader.Number(object, field, "atol");
  tolerance.rtol = reader.Number(object, field, "rtol");
  if (!(tolerance.atol >= 0) || !(tolerance.rtol >= 0) || !(tolerance.atol + tolerance.rtol > 0)) {
    reader.Fail(field, "atol and rtol must be non-negative and not both zero");
  }
  return tolerance;
}

}  // namespace

const char* ScratchZeroName(ScratchZero zero) {
  switch (zero) {
    case ScratchZero::kNever:
      return "never";
    case ScratchZero::kOnce:
      return "once";
    case ScratchZero::kEachCall:
      return "each_call";
  }
  return "never";
}

const char* KernelArgSpec::KindName(Kind kind) {
  switch (kind) {
    case Kind::kInput:
      return "input";
    case Kind::kOutput:
      return "output";
    case Kind::kScratch:
      return "scratch";
    case Kind::kScalar:
      return "scalar";
    case Kind::kTensorMap:
      return "tensor_map";
  }
  return "argument";
}

const Tolerance& CorrectnessSpec::ToleranceFor(const Bindings& bindings) const {
  for (const ToleranceOverride& entry : overrides) {
    if (entry.when.Evaluate(bindings) != 0) return entry.tolerance;
  }
  return tolerance;
}

const KnobSpec* Manifest::FindKnob(std::string_view knob) const {
  for (const KnobSpec& spec : knobs) {
    if (spec.name == knob) return &spec;
  }
  return nullptr;
}

const ProblemParamSpec* Manifest::FindProblemParam(std::string_view param) const {
  for (const ProblemParamSpec& spec : problem) {
    if (spec.name == param) return &spec;
  }
  return nullptr;
}

Manifest ParseManifest(std::string_view json_text, std::string_view origin,
                       const std::function<std::string(const std::string&)>& read_source) {
  const ManifestReader reader(origin);
  const Json root = reader.Parse(json_text);
  if (root.is_object() && root.contains("starting_points")) {
    reader.Fail("starting_points",
                "starting points belong in the template folder's starting_points.json, outside "
                "the template's version");
  }
  reader.CheckKeys(root, "manifest",
                   {"name", "version", "description", "min_sm", "max_sm", "arch_specific", "knobs",
                    "problem", "derived", "constraints", "kernel", "kernels", "reference",
                    "correctness", "flops", "bytes"});
  Manifest manifest;
  manifest.name = reader.Identifier(root, "manifest", "name");
  manifest.version = static_cast<int>(reader.Integer(root, "manifest", "version"));
  if (manifest.version < 1) reader.Fail("version", "expected a positive integer");
  manifest.description = reader.String(root, "manifest", "description", false);
  manifest.min_sm = static_cast<int>(reader.Integer(root, "manifest", "min_sm"));
  if (root.contains("max_sm")) {
    manifest.max_sm = static_cast<int>(reader.Integer(root, "manifest", "max_sm"));
    if (manifest.max_sm < manifest.min_sm) reader.Fail("max_sm", "expected at least min_sm");
  }
  if (root.contains("arch_specific")) {
    if (!root["arch_specific"].is_boolean()) reader.Fail("arch_specific", "expected true or false");
    manifest.arch_specific = root["arch_specific"].get<bool>();
  }
  manifest.knobs = ReadKnobs(reader, root);
  manifest.problem = ReadProblem(reader, root);

  // Every name an expression may use, checked for clashes as it grows.
  std::set<std::string, std::less<>> problem_scope;
  std::set<std::string, std::less<>> all_names;
  auto declare = [&](const std::string& name, const std::string& field) {
    if (!all_names.insert(name).second) reader.Fail(field, "the name '" + name + "' is taken");
  };
  for (std::string_view name : kArchBindings) declare(std::string(name), "arch bindings");
  for (std::string_view name : kLaunchBindings) declare(std::string(name), "launch bindings");
  for (const ProblemParamSpec& param : manifest.problem) {
    declare(param.name, "problem");
    problem_scope.insert(param.name);
  }
  std::set<std::string> defines;
  for (const KnobSpec& knob : manifest.knobs) {
    declare(knob.name, "knobs");
    defines.insert(knob.name);
  }
  for (const ProblemParamSpec& param : manifest.problem) {
    if (param.compile_time() && !defines.insert(param.define).second) {
      reader.Fail("problem", "the define '" + param.define + "' is taken");
    }
  }

  std::set<std::string, std::less<>> scope(all_names.begin(), all_names.end());
  for (std::string_view name : kLaunchBindings) scope.erase(std::string(name));
  if (root.contains("derived")) {
    const Json& array = reader.Array(root, "manifest", "derived");
    for (size_t i = 0; i < array.size(); ++i) {
      const std::string field = "derived[" + std::to_string(i) + "]";
      reader.CheckKeys(array[i], field, {"name", "expr"});
      DerivedSpec derived{reader.Identifier(array[i], field, "name"), {}};
      derived.expr = reader.Expr(reader.Member(array[i], field, "expr"), field + ".expr", scope);
      declare(derived.name, field);
      scope.insert(derived.name);
      manifest.derived.push_back(std::move(derived));
    }
  }
  const Json& constraints = reader.Array(root, "manifest", "constraints");
  std::set<std::string> constraint_names;
  for (size_t i = 0; i < constraints.size(); ++i) {
    const std::string field = "constraints[" + std::to_string(i) + "]";
    reader.CheckKeys(constraints[i], field, {"name", "expr", "doc"});
    ConstraintSpec constraint;
    constraint.name = reader.Identifier(constraints[i], field, "name");
    if (!constraint_names.insert(constraint.name).second) {
      reader.Fail(field, "constraint '" + constraint.name + "' appears twice");
    }
    constraint.expr =
        reader.Expr(reader.Member(constraints[i], field, "expr"), field + ".expr", scope);
    constraint.doc = reader.String(constraints[i], field, "doc", false);
    manifest.constraints.push_back(std::move(constraint));
  }

  std::set<std::string, std::less<>> launch_scope = scope;
  for (std::string_view name : kLaunchBindings) launch_scope.insert(std::string(name));
  std::set<std::string, std::less<>> signature_scope;
  for (const ProblemParamSpec& param : manifest.problem) {
    if (param.compile_time()) signature_scope.insert(param.name);
  }
  std::set<std::string, std::less<>> scratch_scope = scope;
  for (std::string_view name : kScratchBindings) scratch_scope.insert(std::string(name));
  ReadCandidateKernels(reader, root, {scope, launch_scope, scratch_scope, signature_scope, true},
                       read_source, manifest);
  // The reference is specialized on the problem only, never on knobs.
  std::set<std::string, std::less<>> reference_scope = problem_scope;
  for (std::string_view name : kArchBindings) reference_scope.insert(std::string(name));
  std::set<std::string, std::less<>> reference_launch_scope = reference_scope;
  for (std::string_view name : kLaunchBindings) reference_launch_scope.insert(std::string(name));
  manifest.reference =
      ReadKernel(reader, reader.Member(root, "manifest", "reference"), "reference",
                 {reference_scope, reference_launch_scope, reference_scope, signature_scope, false},
                 read_source);
  // An argument's dtype macro must not redefine a knob or problem define, nor stand for two
  // arguments (alternatives of one name share theirs). The candidate's kernels are one source,
  // so their macros are checked together.
  std::vector<std::pair<std::string, const KernelSpec*>> kernel_fields;
  for (size_t k = 0; k < manifest.kernels.size(); ++k) {
    kernel_fields.emplace_back(KernelField(root, k), &manifest.kernels[k]);
  }
  std::map<std::string, std::string> argument_of_define;
  for (const auto& [key, kernel] : kernel_fields) {
    for (size_t i = 0; i < kernel->args.size(); ++i) {
      CheckDefine(reader, key + ".args[" + std::to_string(i) + "].define", kernel->args[i], defines,
                  argument_of_define);
    }
  }
  std::map<std::string, std::string> reference_define_of;
  for (size_t i = 0; i < manifest.reference.args.size(); ++i) {
    CheckDefine(reader, "reference.args[" + std::to_string(i) + "].define",
                manifest.reference.args[i], defines, reference_define_of);
  }

  const Json& correctness = reader.Member(root, "manifest", "correctness");
  reader.CheckKeys(correctness, "correctness",
                   {"seeds", "atol", "rtol", "overrides", "problems", "deterministic"});
  CorrectnessSpec& spec = manifest.correctness;
  spec.seeds = static_cast<int>(reader.Integer(correctness, "correctness", "seeds"));
  if (spec.seeds < 1) reader.Fail("correctness.seeds", "expected at least 1");
  for (const KernelSpec& kernel : manifest.kernels) {
    for (const KernelArgSpec& arg : kernel.args) {
      if (arg.outlier_rows && spec.seeds < 2) {
        reader.Fail("correctness.seeds",
                    "input " + arg.name +
                        " has outlier rows, which every seed but the last gets (the timing "
                        "reads the last, plain N(0,1)): expected at least 2");
      }
    }
  }
  if (correctness.contains("deterministic")) {
    if (!correctness["deterministic"].is_boolean()) {
      reader.Fail("correctness.deterministic", "expected true or false");
    }
    spec.deterministic = correctness["deterministic"].get<bool>();
  }
  spec.tolerance = ReadTolerance(reader, correctness, "correctness");
  if (correctness.contains("overrides")) {
    const Json& overrides = reader.Array(correctness, "correctness", "overrides");
    for (size_t i = 0; i < overrides.size(); ++i) {
      const std::string field = "correctness.overrides[" + std::to_string(i) + "]";
      if (!overrides[i].is_object()) reader.Fail(field, "expected an object");
      reader.CheckKeys(overrides[i], field, {"when", "atol", "rtol", "doc"});
      ToleranceOverride entry;
      entry.when = reader.Expr(reader.Member(overrides[i], field, "when"), field + ".when", scope);
      entry.tolerance = ReadTolerance(reader, overrides[i], field);
      entry.doc = reader.String(overrides[i], field, "doc", false);
      spec.overrides.push_back(std::move(entry));
    }
  }
  if (correctness.contains("problems")) {
    const Json& problems = reader.Array(correctness, "correctness", "problems");
    for (size_t i = 0; i < problems.size(); ++i) {
      const std::string field = "correctness.problems[" + std::to_string(i) + "]";
      if (!problems[i].is_object()) reader.Fail(field, "expected an object");
      std::vector<std::pair<std::string, Expression>> overrides;
      for (const auto& [name, value] : problems[i].items()) {
        const ProblemParamSpec* param = manifest.FindProblemParam(name);
        if (param == nullptr) reader.Fail(field, "'" + name + "' is not a problem parameter");
        if (param->compile_time()) {
          reader.Fail(field, "'" + name + "' is compile-time; the candidate is specialized on it");
        }
        overrides.emplace_back(name, reader.Expr(value, field + "." + name, problem_scope));
      }
      spec.problems.push_back(std::move(overrides));
    }
  }
  if (root.contains("flops")) {
    manifest.flops = reader.Expr(root["flops"], "flops", problem_scope);
  }
  if (root.contains("bytes")) {
    manifest.bytes = reader.Expr(root["bytes"], "bytes", problem_scope);
  }
  return manifest;
}

std::vector<KnobSettings> ParseStartingPoints(std::string_view json_text, std::string_view origin,
                                              const Manifest& manifest) {
  const ManifestReader reader(origin);
  const Json root = reader.Parse(json_text);
  return ReadStartingPoints(reader, root, manifest);
}

Manifest WithKnobsFixed(Manifest manifest, const KnobSettings& fixed) {
  for (const auto& [name, value] : fixed) {
    KnobSpec* knob = nullptr;
    for (KnobSpec& k : manifest.knobs) {
      if (k.name == name) knob = &k;
    }
    if (knob == nullptr) {
      throw Error("template " + manifest.name + " has no knob '" + name + "' to fix");
    }
    if (std::find(knob->values.begin(), knob->values.end(), value) == knob->values.end()) {
      throw Error("knob " + name + " of template " + manifest.name + " cannot be fixed at " +
                  std::to_string(value) + ": it is not among its values");
    }
    knob->values = {value};
    knob->default_value = value;
  }
  std::vector<KnobSettings> points;
  for (KnobSettings point : manifest.starting_points) {
    for (const auto& [name, value] : fixed) {
      if (point.count(name) > 0) point[name] = value;
    }
    if (std::find(points.begin(), points.end(), point) == points.end()) {
      points.push_back(std::move(point));
    }
  }
  manifest.starting_points = std::move(points);
  return manifest;
}

}  // namespace evo
