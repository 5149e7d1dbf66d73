// The shared attention reference (kernel_templates/include/evo/attention_reference.cu) on the
// GPU against float64 attention on the CPU, across the parameters that templates differ in:
// dtypes, dequantization scales, layouts, grouped KV heads and KV lengths of any size.

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "common/half.h"
#include "evaluator/compile_gate.h"
#include "evaluator/cuda_driver.h"
#include "evaluator/device_kernels.h"
#include "evaluator/fp8_e4m3.h"
#include "evaluator/kernel_arguments.h"
#include "evaluator/nvrtc_compiler.h"
#include "kernel_templates/configuration.h"
#include "kernel_templates/template_library.h"
#include "tests/attention_reference.h"
#include "tests/test_support.h"

namespace evo {
namespace {

using Json = nlohmann::json;

struct ReferenceCase {
  const char* q_dtype;
  const char* kv_dtype;
  bool scaled;  // per-(batch, head) scales for Q, K and V
  bool bshd;    // [B, S, H, D] instead of [B, H, S, D]
  int64_t heads;
  int64_t kv_heads;
  int64_t head_dim;
  int64_t causal;
};

// Element strides (batch, head, row) of a tensor of `heads` heads and `rows` rows as names of
// the manifest's problem.
std::vector<std::string> Strides(bool bshd, const std::string& heads, const std::string& rows) {
  if (bshd) return {rows + " * " + heads + " * D", "D", heads + " * D"};
  return {heads + " * " + rows + " * D", rows + " * D", "D"};
}

Json Tensor(const std::string& name, const std::string& kind, const std::string& dtype, bool bshd,
            const std::string& heads, const std::string& rows, const std::string& define) {
  const Json shape =
      bshd ? Json::array({"B", rows, heads, "D"}) : Json::array({"B", heads, rows, "D"});
  return {{"name", name}, {"kind", kind}, {"dtype", dtype}, {"shape", shape}, {"define", define}};
}

// A template whose reference is the shared one with this case's parameters; its kernel is the
// same, so that the manifest is complete.
std::string ReferenceManifest(const ReferenceCase& c) {
  Json args = Json::array();
  const auto add_scale = [&](const std::string& name, const std::string& heads,
                             const std::string& define) {
    if (!c.scaled) return;
    args.push_back({{"name", name},
                    {"kind", "input"},
                    {"dtype", "f32"},
                    {"shape", {"B", heads}},
                    {"uniform", {0.5, 2.0}},
                    {"define", define}});
  };
  args.push_back(Tensor("Q", "input", c.q_dtype, c.bshd, "H", "S_q", "REF_Q"));
  add_scale("Q_scale", "H", "REF_Q_SCALE");
  args.push_back(Tensor("K", "input", c.kv_dtype, c.bshd, "H_KV", "S_kv", "REF_K"));
  add_scale("K_scale", "H_KV", "REF_K_SCALE");
  args.push_back(Tensor("V", "input", c.kv_dtype, c.bshd, "H_KV", "S_kv", "REF_V"));
  add_scale("V_scale", "H_KV", "REF_V_SCALE");
  args.push_back(Tensor("O", "output", "f32", c.bshd, "H", "S_q", "REF_O"));
  for (const char* name : {"B", "H", "H_KV", "S_q", "S_kv"}) {
    args.push_back({{"name", name}, {"kind", "scalar"}, {"dtype", "i32"}, {"value", name}});
  }
  const std::pair<const char*, std::vector<std::string>> strides[] = {
      {"q", Strides(c.bshd, "H", "S_q")},
      {"k", Strides(c.bshd, "H_KV", "S_kv")},
      {"v", Strides(c.bshd, "H_KV", "S_kv")},
      {"o", Strides(c.bshd, "H", "S_q")}};
  for (const auto& [tensor, values] : strides) {
    const char* dims[] = {"b", "h", "s"};
    for (int i = 0; i < 3; ++i) {
      args.push_back({{"name", std::string(tensor) + "_stride_" + dims[i]},
                      {"kind", "scalar"},
                      {"dtype", "i64"},
                      {"value", values[static_cast<size_t>(i)]}});
    }
  }
  const Json kernel = {{"source", "evo/attention_reference.cu"},
                       {"entry", "attention_reference_f32"},
                       {"grid", {"S_q", "H", "B"}},
                       {"block", {"128", "1", "1"}},
                       {"dynamic_smem", "0"},
                       {"args", args}};
  const Json manifest = {
      {"name", "reference_case"},
      {"version", 1},
      {"description", "the shared attention reference under test"},
      {"min_sm", 89},
      {"knobs", {{{"name", "NONE"}, {"values", {0}}, {"default", 0}}}},
      {"problem",
       {{{"name", "B"}, {"min", 1}, {"default", 2}},
        {{"name", "H"}, {"min", 1}, {"default", 4}},
        {{"name", "H_KV"}, {"min", 1}, {"default", 4}},
        {{"name", "S_q"}, {"min", 1}, {"default", 64}},
        {{"name", "S_kv"}, {"min", 1}, {"default", 64}},
        {{"name", "D"}, {"values", {64, 128}}, {"default", 64}, {"define", "HEAD_DIM"}},
        {{"name", "CAUSAL"}, {"values", {0, 1}}, {"default", 0}, {"define", "IS_CAUSAL"}}}},
      {"constraints", Json::array()},
      {"kernel", kernel},
      {"reference", kernel},
      {"correctness", {{"seeds", 1}, {"atol", 0.01}, {"rtol", 0.01}}}};
  return manifest.dump(2);
}

// Bits of `value` in `dtype`, and the value those bits hold.
std::pair<uint32_t, float> Encode(const std::string& dtype, float value) {
  if (dtype == "f16") {
    const uint16_t bits = FloatToHalf(value);
    return {bits, HalfToFloat(bits)};
  }
  if (dtype == "bf16") {
    uint32_t u;
    std::memcpy(&u, &value, 4);
    u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
    const uint32_t bits = u >> 16;
    const uint32_t back = bits << 16;
    float decoded;
    std::memcpy(&decoded, &back, 4);
    return {bits, decoded};
  }
  const uint8_t bits = FloatToE4M3(value);
  return {bits, E4M3ToFloat(bits)};
}

// Random values for `tensor`, uploaded in its dtype; returns the values the GPU reads.
std::vector<float> UploadRandom(DeviceTensor& tensor, std::mt19937& rng, float lo, float hi,
                                bool uniform) {
  std::normal_distribution<float> normal(0.f, 1.f);
  std::uniform_real_distribution<float> flat(lo, hi);
  const auto n = static_cast<size_t>(tensor.elements);
  std::vector<float> decoded(n);
  const int64_t bytes = DtypeBytes(tensor.dtype);
  std::vector<unsigned char> raw(n * static_cast<size_t>(bytes));
  for (size_t i = 0; i < n; ++i) {
    const float value = uniform ? flat(rng) : normal(rng);
    if (tensor.dtype == "f32") {
      decoded[i] = value;
      std::memcpy(&raw[i * 4], &value, 4);
      continue;
    }
    const auto [bits, back] = Encode(tensor.dtype, value);
    decoded[i] = back;
    std::memcpy(&raw[i * static_cast<size_t>(bytes)], &bits, static_cast<size_t>(bytes));
  }
  tensor.data().Upload(raw.data(), raw.size());
  return decoded;
}

// Element (b, h, s, d) of a tensor stored [B, H, S, D] or [B, S, H, D].
size_t At(bool bshd, int64_t heads, int64_t rows, int64_t d_size, int64_t b, int64_t h, int64_t s,
          int64_t d) {
  const int64_t index =
      bshd ? ((b * rows + s) * heads + h) * d_size + d : ((b * heads + h) * rows + s) * d_size + d;
  return static_cast<size_t>(index);
}

const ReferenceCase kCases[] = {
    {"f16", "f16", false, false, 4, 4, 64, 0},
    {"bf16", "bf16", false, true, 4, 2, 64, 1},
    {"fp8e4m3", "fp8e4m3", true, false, 4, 1, 128, 0},
    {"f16", "fp8e4m3", true, true, 6, 3, 128, 1},
};

bool ReadsFp8(const ReferenceCase& c) {
  return std::string(c.q_dtype) == "fp8e4m3" || std::string(c.kv_dtype) == "fp8e4m3";
}

TEST_CASE("the shared attention reference compiles for each dtype, layout and head grouping",
          "[nvrtc]") {
  NvrtcCompiler compiler;
  for (const ReferenceCase& c : kCases) {
    // fp8 needs sm_89; the others compile for sm_80 too, without the fp8 conversions.
    for (const char* arch : {"sm_80", "sm_89", "sm_90"}) {
      if (ReadsFp8(c) && std::string(arch) == "sm_80") continue;
      INFO(c.q_dtype << "/" << c.kv_dtype << " " << arch);
      test::TempDir dir;
      test::WriteFile(dir.path() / "manifest.json", ReferenceManifest(c));
      const TemplateLibrary library = TemplateLibrary::Load({dir.path()});
      const KernelTemplate& reference = library.Find("reference_case");
      const Problem problem = DefaultProblem(reference.manifest);
      const CompileResult compiled = compiler.Compile(
          TemplateCompileRequest(reference, reference.manifest.reference, nullptr, problem, arch));
      INFO(compiled.log);
      CHECK(compiled.ok);
    }
  }
}

TEST_CASE("the shared attention reference follows its dtypes, scales, layout and KV head groups",
          "[gpu]") {
  if (!test::HaveGpuDriver()) {
    WARN("skipped: no GPU driver (libcuda.so.1) on this machine");
    return;
  }
  Context context(0);
  const DeviceInfo device = QueryDevices().at(0);
  if (device.arch_info().sm < 89) {
    WARN("skipped: the e4m3 cases need sm_89 or newer");
    return;
  }
  NvrtcCompiler compiler;
  const DeviceKernels kernels(compiler, device.arch());
  Stream stream;
  std::mt19937 rng(11);
  for (const ReferenceCase& c : kCases) {
    INFO("Q " << c.q_dtype << ", K/V " << c.kv_dtype << (c.scaled ? ", scaled" : "")
              << (c.bshd ? ", BSHD" : ", BHSD") << ", H=" << c.heads << " H_kv=" << c.kv_heads
              << " D=" << c.head_dim << " causal=" << c.causal);
    test::TempDir dir;
    test::WriteFile(dir.path() / "manifest.json", ReferenceManifest(c));
    const TemplateLibrary library = TemplateLibrary::Load({dir.path()});
    const KernelTemplate& reference = library.Find("reference_case");
    const Manifest& manifest = reference.manifest;
    const int64_t batch = 2;
    // Short lengths, and a KV length past what shared memory could hold for one row's scores.
    for (const auto& [s_q, s_kv] : {std::pair<int64_t, int64_t>{37, 53}, {5, 70001}}) {
      INFO("S_q=" << s_q << " S_kv=" << s_kv);
      const Problem problem = {{"B", batch},        {"H", c.heads}, {"H_KV", c.kv_heads},
                               {"S_q", s_q},        {"S_kv", s_kv}, {"D", c.head_dim},
                               {"CAUSAL", c.causal}};
      const CompileResult compiled = compiler.Compile(
          TemplateCompileRequest(reference, manifest.reference, nullptr, problem, device.arch()));
      INFO(compiled.log);
      REQUIRE(compiled.ok);
      const Module module(compiled.cubin);
      const CUfunction function = module.Function(manifest.reference.entry);
      const Bindings bindings =
          CompileBindings(manifest, DefaultGenome(manifest), problem, device.arch_info());
      KernelArguments args(manifest.reference, bindings, device.sm_count);
      const std::vector<float> q = UploadRandom(args.Tensor("Q"), rng, 0, 0, false);
      const std::vector<float> k = UploadRandom(args.Tensor("K"), rng, 0, 0, false);
      const std::vector<float> v = UploadRandom(args.Tensor("V"), rng, 0, 0, false);
      std::vector<float> q_scale(static_cast<size_t>(batch * c.heads), 1.f);
      std::vector<float> k_scale(static_cast<size_t>(batch * c.kv_heads), 1.f);
      std::vector<float> v_scale = k_scale;
      if (c.scaled) {
        q_scale = UploadRandom(args.Tensor("Q_scale"), rng, 0.5f, 2.f, true);
        k_scale = UploadRandom(args.Tensor("K_scale"), rng, 0.5f, 2.f, true);
        v_scale = UploadRandom(args.Tensor("V_scale"), rng, 0.5f, 2.f, true);
      }
      DeviceTensor& out = args.Tensor("O");
      kernels.PoisonWithNaN(out.data(), out.dtype, out.elements, stream);
      Launch(function, ResolveLaunch(manifest.reference, bindings, function, device.sm_count),
             stream, args.pointers());
      stream.Synchronize();
      std::vector<float> gpu(static_cast<size_t>(out.elements));
      out.data().Download(gpu.data(), gpu.size() * 4);

      // The same attention in float64 over [B, H, S, D], K and V heads shared by their groups.
      const int64_t d_size = c.head_dim;
      const int64_t group = c.heads / c.kv_heads;
      std::vector<float> q_bhsd(q.size());
      std::vector<float> k_bhsd(static_cast<size_t>(batch * c.heads * s_kv * d_size));
      std::vector<float> v_bhsd(k_bhsd.size());
      for (int64_t b = 0; b < batch; ++b) {
        for (int64_t h = 0; h < c.heads; ++h) {
          const int64_t hk = h / group;
          const float qs = q_scale[static_cast<size_t>(b * c.heads + h)];
          const float ks = k_scale[static_cast<size_t>(b * c.kv_heads + hk)];
          const float vs = v_scale[static_cast<size_t>(b * c.kv_heads + hk)];
          for (int64_t d = 0; d < d_size; ++d) {
            for (int64_t s = 0; s < s_q; ++s) {
              q_bhsd[At(false, c.heads, s_q, d_size, b, h, s, d)] =
                  q[At(c.bshd, c.heads, s_q, d_size, b, h, s, d)] * qs;
            }
            for (int64_t s = 0; s < s_kv; ++s) {
              const size_t from = At(c.bshd, c.kv_heads, s_kv, d_size, b, hk, s, d);
              const size_t to = At(false, c.heads, s_kv, d_size, b, h, s, d);
              k_bhsd[to] = k[from] * ks;
              v_bhsd[to] = v[from] * vs;
            }
          }
        }
      }
      const std::vector<double> expected = test::AttentionForwardFloat64(
          q_bhsd, k_bhsd, v_bhsd, {batch, c.heads, s_q, s_kv, d_size, c.causal == 1});
      double max_error = 0;
      for (int64_t b = 0; b < batch; ++b) {
        for (int64_t h = 0; h < c.heads; ++h) {
          for (int64_t s = 0; s < s_q; ++s) {
            for (int64_t d = 0; d < d_size; ++d) {
              const float got = gpu[At(c.bshd, c.heads, s_q, d_size, b, h, s, d)];
              REQUIRE(std::isfinite(got));
              const double want = expected[At(false, c.heads, s_q, d_size, b, h, s, d)];
              max_error = std::max(max_error, std::abs(got - want) / (1.0 + std::abs(want)));
            }
          }
        }
      }
      CHECK(max_error < 2e-5);
    }
  }
}

}  // namespace
}  // namespace evo
