#include "cli/report_peers.h"

#include <utility>

#include "common/error.h"
#include "common/files.h"

namespace evo::cli {
namespace {

using Json = nlohmann::json;

// The peers scripts/bench-attention.py times, by the key of their time in its rows.
const std::pair<const char*, const char*> kBenchAttentionPeers[] = {
    {"flash_us", "torch flash"},
    {"cudnn_us", "cuDNN"},
    {"flex_us", "FlexAttention"},
};

std::string Where(const std::filesystem::path& path, size_t row) {
  return "peers file '" + path.string() + "', row " + std::to_string(row + 1);
}

// A time in microseconds, or nothing for null (the peer refused the shape).
std::optional<double> PeerMicroseconds(const Json& value, const std::string& where,
                                       const std::string& name) {
  if (value.is_null()) return std::nullopt;
  if (!value.is_number() || !(value.get<double>() > 0)) {
    throw Error(where + ": the time of " + name + " must be a positive number of microseconds " +
                "or null, not " + value.dump());
  }
  return value.get<double>();
}

}  // namespace

PeerTable PeerTable::Load(const std::filesystem::path& path) {
  const std::optional<std::string> text = TryReadFile(path);
  if (!text) throw Error("cannot read peers file '" + path.string() + "'");
  Json rows;
  try {
    rows = Json::parse(*text);
  } catch (const Json::exception& e) {
    // A syntax error, or a number past a double's range (1e400).
    throw Error("peers file '" + path.string() + "' is not JSON evo can read: " + JsonMessage(e));
  }
  if (!rows.is_array()) {
    throw Error("peers file '" + path.string() +
                "' must hold an array of rows (as scripts/bench-attention.py --json writes)");
  }
  PeerTable table;
  table.path_ = path;
  for (size_t i = 0; i < rows.size(); ++i) {
    const Json& json = rows[i];
    const std::string where = Where(path, i);
    if (!json.is_object() || !json.contains("problem") || !json["problem"].is_object()) {
      throw Error(where + ": a row is an object with a \"problem\" object");
    }
    Row row;
    for (const auto& [name, value] : json["problem"].items()) {
      if (!value.is_number_integer()) {
        throw Error(where + ": problem parameter " + name + " must be an integer");
      }
      row.problem[name] = value.get<int64_t>();
    }
    if (json.contains("causal")) {
      if (!json["causal"].is_boolean()) throw Error(where + ": \"causal\" must be true or false");
      row.problem["CAUSAL"] = json["causal"].get<bool>() ? 1 : 0;
    }
    if (json.contains("device")) {
      if (!json["device"].is_string()) throw Error(where + ": \"device\" must be a string");
      row.device = json["device"].get<std::string>();
    }
    if (json.contains("peers")) {
      if (!json["peers"].is_object()) throw Error(where + ": \"peers\" must be an object");
      for (const auto& [name, value] : json["peers"].items()) {
        if (const auto us = PeerMicroseconds(value, where, name)) row.peers.push_back({name, *us});
      }
    } else {
      for (const auto& [key, name] : kBenchAttentionPeers) {
        if (!json.contains(key)) continue;
        if (const auto us = PeerMicroseconds(json[key], where, name)) {
          row.peers.push_back({name, *us});
        }
      }
    }
    table.rows_.push_back(std::move(row));
  }
  return table;
}

std::vector<PeerTime> PeerTable::Match(const RunSpec& spec, const TemplateLibrary* library) const {
  const KernelTemplate* kernel_template = nullptr;
  if (library != nullptr) {
    for (const KernelTemplate& t : library->templates()) {
      if (t.manifest.name == spec.template_name) kernel_template = &t;
    }
  }
  for (const Row& row : rows_) {
    if (!row.device.empty() && row.device != spec.device) continue;
    bool matches = true;
    if (kernel_template != nullptr) {
      // The row's problem completed as the template completes a command line's, so that a
      // parameter the row leaves out (BF16, H_kv following H) must be at its default.
      try {
        matches = CompleteProblem(kernel_template->manifest, row.problem) == spec.problem;
      } catch (const Error&) {
        matches = false;  // a parameter this template does not have
      }
    } else {
      for (const auto& [name, value] : row.problem) {
        const auto it = spec.problem.find(name);
        matches = matches && it != spec.problem.end() && it->second == value;
      }
    }
    if (matches) return row.peers;
  }
  return {};
}

}  // namespace evo::cli
