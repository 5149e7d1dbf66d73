// Runs the exported attention on the GPU here: every tuned shape of the table (fp16 and bf16)
// and the same shape with lengths that leave partial tiles (S_q - 3, S_kv - 5), or the shapes
// given as arguments (B,H,S_q,S_kv,D or B,H:H_kv,S_q,S_kv,D, ",causal" appended). Each call is
// checked against a float64 reference on the CPU (a sample of rows), timed with CUDA events,
// and captured into a CUDA graph whose replay must write the same bytes. Exits 1 on a mismatch.
//
//   ./evo_attention_example                      # the table's shapes
//   ./evo_attention_example 2,8,1000,1000,64 1,16,1,4096,128,causal
#include <cuda.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "evo_attention.h"

namespace {

void Check(CUresult result, const char* what) {
  if (result != CUDA_SUCCESS) {
    const char* name = nullptr;
    cuGetErrorName(result, &name);
    throw std::runtime_error(std::string(what) + " failed: " + (name ? name : "?"));
  }
}

uint16_t ToHalf(float value) {
  // Round to nearest even; the inputs are N(0,1), far from overflow and subnormals matter little.
  uint32_t bits = 0;
  std::memcpy(&bits, &value, 4);
  const uint32_t sign = (bits >> 16) & 0x8000;
  const int exponent = static_cast<int>((bits >> 23) & 0xff) - 127 + 15;
  uint32_t mantissa = bits & 0x7fffff;
  if (exponent <= 0) return static_cast<uint16_t>(sign);
  if (exponent >= 31) return static_cast<uint16_t>(sign | 0x7c00);
  uint32_t half = sign | (static_cast<uint32_t>(exponent) << 10) | (mantissa >> 13);
  const uint32_t rest = mantissa & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (half & 1))) ++half;
  return static_cast<uint16_t>(half);
}

float FromHalf(uint16_t half) {
  const uint32_t sign = static_cast<uint32_t>(half & 0x8000) << 16;
  const int exponent = (half >> 10) & 0x1f;
  const uint32_t mantissa = half & 0x3ff;
  float value = 0;
  if (exponent == 0) {
    value = std::ldexp(static_cast<float>(mantissa), -24);
  } else if (exponent == 31) {
    value = mantissa ? NAN : INFINITY;
  } else {
    value = std::ldexp(static_cast<float>(mantissa | 0x400), exponent - 25);
  }
  uint32_t bits = 0;
  std::memcpy(&bits, &value, 4);
  bits |= sign;
  std::memcpy(&value, &bits, 4);
  return value;
}

uint16_t ToBf16(float value) {
  uint32_t bits = 0;
  std::memcpy(&bits, &value, 4);
  bits += 0x7fff + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}

float FromBf16(uint16_t value) {
  const uint32_t bits = static_cast<uint32_t>(value) << 16;
  float out = 0;
  std::memcpy(&out, &bits, 4);
  return out;
}

struct DeviceArray {
  CUdeviceptr pointer = 0;
  explicit DeviceArray(size_t bytes) { Check(cuMemAlloc(&pointer, bytes), "cuMemAlloc"); }
  ~DeviceArray() { cuMemFree(pointer); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
};

evo_attention::Shape ParseShape(const std::string& text) {
  evo_attention::Shape shape;
  std::vector<std::string> fields;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    fields.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  if (!fields.empty() && fields.back() == "causal") {
    shape.causal = true;
    fields.pop_back();
  }
  if (!fields.empty() && fields.back() == "bf16") {
    shape.q_dtype = shape.kv_dtype = evo_attention::DType::kBF16;
    fields.pop_back();
  }
  if (fields.size() != 5) {
    throw std::invalid_argument("malformed shape '" + text +
                                "': B,H[:H_kv],S_q,S_kv,D[,bf16][,causal]");
  }
  shape.B = std::stoll(fields[0]);
  const size_t colon = fields[1].find(':');
  shape.H = std::stoll(fields[1].substr(0, colon));
  shape.H_kv = colon == std::string::npos ? shape.H : std::stoll(fields[1].substr(colon + 1));
  shape.S_q = std::stoll(fields[2]);
  shape.S_kv = std::stoll(fields[3]);
  shape.D = std::stoll(fields[4]);
  return shape;
}

std::string Describe(const evo_attention::Shape& s) {
  return std::to_string(s.B) + "," + std::to_string(s.H) + ":" + std::to_string(s.H_kv) + "," +
         std::to_string(s.S_q) + "," + std::to_string(s.S_kv) + "," + std::to_string(s.D) +
         (s.q_dtype == evo_attention::DType::kBF16 ? ",bf16" : "") + (s.causal ? ",causal" : "");
}

// The median time of one batch (`enqueue` puts it on `stream`), timed with events after 100 ms
// of batches as warm-up, over batches for at least 100 ms (at least 5).
template <typename Enqueue>
float SustainedBatchMs(CUstream stream, const Enqueue& enqueue) {
  CUevent start = nullptr;
  CUevent stop = nullptr;
  Check(cuEventCreate(&start, CU_EVENT_DEFAULT), "cuEventCreate");
  Check(cuEventCreate(&stop, CU_EVENT_DEFAULT), "cuEventCreate");
  const auto batch_ms = [&] {
    Check(cuEventRecord(start, stream), "cuEventRecord");
    enqueue();
    Check(cuEventRecord(stop, stream), "cuEventRecord");
    Check(cuEventSynchronize(stop), "cuEventSynchronize");
    float ms = 0;
    Check(cuEventElapsedTime(&ms, start, stop), "cuEventElapsedTime");
    return ms;
  };
  for (float warm = 0; warm < 100;) warm += batch_ms();
  std::vector<float> batches;
  for (float spent = 0; spent < 100 || batches.size() < 5;) {
    batches.push_back(batch_ms());
    spent += batches.back();
  }
  cuEventDestroy(start);
  cuEventDestroy(stop);
  std::sort(batches.begin(), batches.end());
  return batches[batches.size() / 2];
}

// One call: returns false when the output is off the reference or the graph replay differs.
bool RunShape(evo_attention::Attention& attention, const evo_attention::Shape& shape,
              CUstream stream) {
  const bool bf16 = shape.q_dtype == evo_attention::DType::kBF16;
  const size_t q_elements = static_cast<size_t>(shape.B * shape.H * shape.S_q * shape.D);
  const size_t kv_elements = static_cast<size_t>(shape.B * shape.H_kv * shape.S_kv * shape.D);
  // Close to a standard normal (the sum of four uniforms, scaled to variance 1), as torch.randn
  // gives: tensor cores draw power by the bits they multiply, so the data shapes the clock the
  // timing runs at. Cheaper than a normal generator for the long shapes.
  std::vector<uint16_t> q(q_elements);
  std::vector<uint16_t> k(kv_elements);
  std::vector<uint16_t> v(kv_elements);
  uint64_t state = 0x9e3779b97f4a7c15ull;
  for (auto* array : {&q, &k, &v}) {
    for (uint16_t& x : *array) {
      state ^= state << 13;
      state ^= state >> 7;
      state ^= state << 17;
      float sum = 0;
      for (int part = 0; part < 4; ++part) {
        sum += static_cast<float>((state >> (16 * part)) & 0xffff) / 65536.0f - 0.5f;
      }
      const float value = sum * 1.7320508f;  // sqrt(12 / 4)
      x = bf16 ? ToBf16(value) : ToHalf(value);
    }
  }
  DeviceArray dq(q_elements * 2);
  DeviceArray dk(kv_elements * 2);
  DeviceArray dv(kv_elements * 2);
  DeviceArray dout(q_elements * 2);
  DeviceArray dgraph(q_elements * 2);
  Check(cuMemcpyHtoD(dq.pointer, q.data(), q_elements * 2), "cuMemcpyHtoD");
  Check(cuMemcpyHtoD(dk.pointer, k.data(), kv_elements * 2), "cuMemcpyHtoD");
  Check(cuMemcpyHtoD(dv.pointer, v.data(), kv_elements * 2), "cuMemcpyHtoD");
  Check(cuMemsetD8(dout.pointer, 0xff, q_elements * 2), "cuMemsetD8");  // NaN: unwritten shows

  const evo_attention::Choice choice =
      attention.Run(shape, {dq.pointer, dk.pointer, dv.pointer, dout.pointer}, stream);
  Check(cuStreamSynchronize(stream), "the call");
  std::vector<uint16_t> out(q_elements);
  Check(cuMemcpyDtoH(out.data(), dout.pointer, q_elements * 2), "cuMemcpyDtoH");

  // The reference on a sample of rows: the first and last query rows of every (b, h) pair
  // among the first few, and some in between.
  const auto load = [&](uint16_t x) { return bf16 ? FromBf16(x) : FromHalf(x); };
  const double scale = 1.0 / std::sqrt(static_cast<double>(shape.D));
  double max_error = 0;
  bool bad = false;
  const int64_t group = shape.H / shape.H_kv;
  for (int64_t b = 0; b < std::min<int64_t>(shape.B, 2); ++b) {
    for (int64_t h = 0; h < std::min<int64_t>(shape.H, 3); ++h) {
      for (int64_t i : {int64_t{0}, shape.S_q / 3, shape.S_q / 2, shape.S_q - 1}) {
        const int64_t keys = shape.causal ? std::min(shape.S_kv, i + 1) : shape.S_kv;
        std::vector<double> scores(static_cast<size_t>(keys));
        double maximum = -INFINITY;
        const size_t q_row = static_cast<size_t>(((b * shape.H + h) * shape.S_q + i) * shape.D);
        const int64_t kv_head = h / group;
        for (int64_t j = 0; j < keys; ++j) {
          const size_t k_row =
              static_cast<size_t>(((b * shape.H_kv + kv_head) * shape.S_kv + j) * shape.D);
          double dot = 0;
          for (int64_t d = 0; d < shape.D; ++d) {
            dot += static_cast<double>(load(q[q_row + static_cast<size_t>(d)])) *
                   load(k[k_row + static_cast<size_t>(d)]);
          }
          scores[static_cast<size_t>(j)] = dot * scale;
          maximum = std::max(maximum, dot * scale);
        }
        double sum = 0;
        for (double& s : scores) sum += (s = std::exp(s - maximum));
        for (int64_t d = 0; d < shape.D; ++d) {
          double expected = 0;
          for (int64_t j = 0; j < keys; ++j) {
            const size_t v_at =
                static_cast<size_t>(((b * shape.H_kv + kv_head) * shape.S_kv + j) * shape.D + d);
            expected += scores[static_cast<size_t>(j)] * load(v[v_at]);
          }
          expected /= sum;
          const double got = load(out[q_row + static_cast<size_t>(d)]);
          const double error = std::fabs(got - expected);
          const double tolerance =
              (bf16 ? 0.008 : 0.002) + (bf16 ? 0.02 : 0.01) * std::fabs(expected);
          if (!(error <= tolerance)) bad = true;
          if (!(error <= max_error)) max_error = std::isnan(error) ? INFINITY : error;
        }
      }
    }
  }

  // The same call captured into a CUDA graph, replayed into another output.
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  Check(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), "cuStreamBeginCapture");
  attention.Run(shape, {dq.pointer, dk.pointer, dv.pointer, dgraph.pointer}, stream);
  Check(cuStreamEndCapture(stream, &graph), "cuStreamEndCapture");
  Check(cuGraphInstantiate(&exec, graph, 0), "cuGraphInstantiate");
  Check(cuGraphLaunch(exec, stream), "cuGraphLaunch");
  Check(cuStreamSynchronize(stream), "the graph");
  std::vector<uint16_t> replayed(q_elements);
  Check(cuMemcpyDtoH(replayed.data(), dgraph.pointer, q_elements * 2), "cuMemcpyDtoH");
  cuGraphExecDestroy(exec);
  cuGraphDestroy(graph);
  const bool same = replayed == out;

  // Timing at the clock a sustained load runs at, not the boost of an idle GPU: batches of 20
  // calls between events, batches for 100 ms of warm-up, then for at least 100 ms more; the
  // median batch over 20. Eager calls (what a call costs a program that launches it directly,
  // host work included) and a CUDA graph of 20 calls (the kernels alone, as export-check.py and
  // bench-attention time them); host: the CPU time of one Run().
  const evo_attention::Tensors tensors{dq.pointer, dk.pointer, dv.pointer, dout.pointer};
  double host_us = 0;
  const float eager_ms = SustainedBatchMs(stream, [&] {
    const auto begin = std::chrono::steady_clock::now();
    for (int i = 0; i < 20; ++i) attention.Run(shape, tensors, stream);
    host_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - begin)
                  .count() /
              20;
  });
  Check(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), "cuStreamBeginCapture");
  for (int i = 0; i < 20; ++i) attention.Run(shape, tensors, stream);
  Check(cuStreamEndCapture(stream, &graph), "cuStreamEndCapture");
  Check(cuGraphInstantiate(&exec, graph, 0), "cuGraphInstantiate");
  const float graph_ms =
      SustainedBatchMs(stream, [&] { Check(cuGraphLaunch(exec, stream), "cuGraphLaunch"); });
  cuGraphExecDestroy(exec);
  cuGraphDestroy(graph);

  std::printf("%-30s %-5s max|err| %.2e  eager %9.2f us  graph %9.2f us  host %6.1f us  %s  %s\n",
              Describe(shape).c_str(), bad ? "WRONG" : "ok", max_error, eager_ms * 1000 / 20,
              graph_ms * 1000 / 20, host_us, same ? "graph output same" : "GRAPH OUTPUT DIFFERS",
              choice.description.c_str());
  return !bad && same;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Check(cuInit(0), "cuInit");
    CUdevice device = 0;
    Check(cuDeviceGet(&device, 0), "cuDeviceGet");
    CUcontext context = nullptr;
    Check(cuDevicePrimaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain");
    Check(cuCtxSetCurrent(context), "cuCtxSetCurrent");
    CUstream stream = nullptr;
    Check(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    bool ok = true;
    {
      evo_attention::Attention attention;
      std::vector<evo_attention::Shape> shapes;
      for (int i = 1; i < argc; ++i) shapes.push_back(ParseShape(argv[i]));
      if (shapes.empty()) {
        for (const evo_attention::TunedEntry& entry : evo_attention::Entries()) {
          if (entry.shape.q_dtype == evo_attention::DType::kE4M3 ||
              entry.shape.kv_dtype == evo_attention::DType::kE4M3) {
            std::printf("%s: fp8 entries are not run by this example\n",
                        Describe(entry.shape).c_str());
            continue;
          }
          try {
            evo_attention::Pick(entry.shape, attention.sm());
          } catch (const evo_attention::DispatchError&) {
            continue;  // compiled for another GPU
          }
          shapes.push_back(entry.shape);
          evo_attention::Shape partial = entry.shape;
          partial.S_q = std::max<int64_t>(1, partial.S_q - 3);
          partial.S_kv = std::max<int64_t>(1, partial.S_kv - 5);
          shapes.push_back(partial);
        }
      }
      std::printf("sm_%d, %zu calls\n", attention.sm(), shapes.size());
      for (const evo_attention::Shape& shape : shapes) {
        try {
          ok = RunShape(attention, shape, stream) && ok;
        } catch (const evo_attention::DispatchError& error) {
          std::printf("%-28s refused: %s\n", Describe(shape).c_str(), error.what());
          ok = false;
        }
      }
    }
    cuStreamDestroy(stream);
    cuDevicePrimaryCtxRelease(device);
    std::printf("%s\n", ok ? "all calls match the reference" : "SOME CALLS FAILED");
    return ok ? 0 : 1;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "evo_attention_example: %s\n", error.what());
    return 2;
  }
}
