// Prints what the exported C++ library would launch for each call of a file, one call per line:
// "B H H_kv S_q S_kv D causal q_dtype kv_dtype sm". The export test compares the output with
// describe_calls.py's over the Python package of the same table (a GPU of 132 SMs unless the
// second argument gives another count, one CTA of every kernel per SM). Built by the test with
// g++ against the exported sources.
#include <exception>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "evo_attention.h"

namespace {

evo_attention::DType Dtype(const std::string& name) {
  if (name == "bf16") return evo_attention::DType::kBF16;
  if (name == "fp8e4m3") return evo_attention::DType::kE4M3;
  return evo_attention::DType::kF16;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    std::cerr << "usage: describe_calls CALLS_FILE [NUM_SMS]\n";
    return 2;
  }
  const int num_sms = argc == 3 ? std::stoi(argv[2]) : 132;
  std::ifstream in(argv[1]);
  std::string line;
  // The table is read at the first call: one the library refuses is said once, as Python's
  // import says it.
  try {
    evo_attention::Entries();
  } catch (const std::exception& error) {
    std::cerr << error.what() << "\n";
    return 1;
  }
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::istringstream fields(line);
    evo_attention::Shape shape;
    int causal = 0;
    std::string q;
    std::string kv;
    int sm = 0;
    fields >> shape.B >> shape.H >> shape.H_kv >> shape.S_q >> shape.S_kv >> shape.D >> causal >>
        q >> kv >> sm;
    shape.causal = causal != 0;
    shape.q_dtype = Dtype(q);
    shape.kv_dtype = Dtype(kv);
    std::cout << "call " << line << "\n" << evo_attention::DescribeCall(shape, sm, num_sms, 1);
  }
  return 0;
}
