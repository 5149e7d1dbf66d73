#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "evaluator/compiler.h"

namespace evo {

// Compile results on disk, one entry per key: <key>.cubin then <key>.json, each written
// atomically; the JSON names the cubin's hash, so an entry is used only when both are whole.
// Failed compiles are kept too: NVRTC refuses the same source the same way every time.
class CompileCache {
 public:
  // Creates the folder if needed; throws evo::Error when it cannot.
  explicit CompileCache(std::filesystem::path folder);

  std::optional<CompileResult> Lookup(const std::string& key) const;
  void Store(const std::string& key, const CompileResult& result) const;

  const std::filesystem::path& folder() const { return folder_; }

 private:
  std::filesystem::path folder_;
};

// Serves compiles from a CompileCache and fills it on a miss. The key hashes the source, the
// headers it is given, every option (the arch among them) and the compiler's version.
class CachingCompiler final : public Compiler {
 public:
  CachingCompiler(Compiler& inner, const CompileCache& cache) : inner_(inner), cache_(cache) {}

  CompileResult Compile(const CompileRequest& request) override;
  std::string Version() const override { return inner_.Version(); }
  std::vector<std::string> Options(const CompileRequest& request) const override {
    return inner_.Options(request);
  }

  std::string Key(const CompileRequest& request) const;

 private:
  Compiler& inner_;
  const CompileCache& cache_;
};

}  // namespace evo
