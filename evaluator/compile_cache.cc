#include "evaluator/compile_cache.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <system_error>

#include "common/error.h"
#include "common/files.h"
#include "common/sha256.h"
#include "evaluator/candidate_outcome.h"
#include "evaluator/ptxas_report.h"

namespace evo {
namespace {

using Json = nlohmann::json;

constexpr int kEntryFormat = 1;

}  // namespace

CompileCache::CompileCache(std::filesystem::path folder) : folder_(std::move(folder)) {
  std::error_code error;
  std::filesystem::create_directories(folder_, error);
  if (error || !std::filesystem::is_directory(folder_)) {
    throw Error("cannot use compile cache folder '" + folder_.string() +
                "': " + (error ? error.message() : "not a folder"));
  }
}

std::optional<CompileResult> CompileCache::Lookup(const std::string& key) const {
  const std::optional<std::string> text = TryReadFile(folder_ / (key + ".json"));
  if (!text) return std::nullopt;
  try {
    const Json entry = Json::parse(*text);
    if (entry.at("format").get<int>() != kEntryFormat) return std::nullopt;
    CompileResult result;
    result.ok = entry.at("ok").get<bool>();
    result.log = entry.at("log").get<std::string>();
    result.compile_ms = entry.at("compile_ms").get<double>();
    // The figures are read from the log, as the compiler does, rather than from the entry's
    // copy of them: entries written before ptxas's performance notes were read give them too.
    result.kernels = ParsePtxasReport(result.log);
    if (result.ok) {
      const std::optional<std::string> cubin = TryReadFile(folder_ / (key + ".cubin"));
      if (!cubin || Sha256Hex(*cubin) != entry.at("cubin_sha256").get<std::string>()) {
        spdlog::warn("compile cache entry {} has a missing or damaged cubin; compiling again", key);
        return std::nullopt;
      }
      result.cubin = *cubin;
    }
    result.cache_hit = true;
    return result;
  } catch (const Json::exception& error) {
    spdlog::warn("compile cache entry {} is unreadable ({}); compiling again", key, error.what());
    return std::nullopt;
  }
}

void CompileCache::Store(const std::string& key, const CompileResult& result) const {
  // The parsed figures are derivable from the log; they are still written for older evo
  // versions that read them from a shared cache folder.
  Json kernels = Json::array();
  for (const KernelResources& kernel : result.kernels)
    kernels.push_back(KernelResourcesToJson(kernel));
  const Json entry = {{"format", kEntryFormat}, {"ok", result.ok},
                      {"log", result.log},      {"compile_ms", result.compile_ms},
                      {"kernels", kernels},     {"cubin_sha256", Sha256Hex(result.cubin)}};
  if (result.ok) WriteFileAtomically(folder_ / (key + ".cubin"), result.cubin);
  WriteFileAtomically(folder_ / (key + ".json"), entry.dump(1));
}

std::string CachingCompiler::Key(const CompileRequest& request) const {
  Sha256 hash;
  auto add = [&hash](std::string_view part) {
    hash.Update(std::to_string(part.size()) + ":");
    hash.Update(part);
  };
  add("evo compile cache");
  add(inner_.Version());
  add(request.program_name);
  for (const std::string& option : inner_.Options(request)) add(option);
  add(request.source);
  for (const auto& [include_name, content] : request.headers) {
    add(include_name);
    add(content);
  }
  return hash.HexDigest();
}

CompileResult CachingCompiler::Compile(const CompileRequest& request) {
  const auto start = std::chrono::steady_clock::now();
  const std::string key = Key(request);
  if (std::optional<CompileResult> cached = cache_.Lookup(key)) {
    cached->elapsed_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return *std::move(cached);
  }
  CompileResult result = inner_.Compile(request);
  try {
    cache_.Store(key, result);
  } catch (const Error& error) {
    // A full disk loses the cache entry, not the compile.
    spdlog::warn("could not store compile cache entry: {}", error.what());
  }
  return result;
}

}  // namespace evo
