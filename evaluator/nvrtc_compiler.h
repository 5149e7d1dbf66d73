#pragma once

#include "evaluator/compiler.h"

namespace evo {

class NvrtcCompiler final : public Compiler {
 public:
  NvrtcCompiler();

  CompileResult Compile(const CompileRequest& request) override;
  std::string Version() const override;  // "nvrtc 13.0"
  std::vector<std::string> Options(const CompileRequest& request) const override;

  // The archs this NVRTC can target, as "sm_XX".
  static std::vector<std::string> SupportedArchs();
};

}  // namespace evo
