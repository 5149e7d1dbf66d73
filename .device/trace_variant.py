#!/usr/bin/env python3
"""A copy of sdpa_hopper (fixed_template.py's, knobs KNOB=VALUE fixed) that records clock64() at
the events of each tile into the global evo_trace, for the first 4 CTAs and 64 tiles each: per
consumer warpgroup (thread 0 of it) 0 tile start, 7 K_0 landed, 1 first Q K^T issued, 6 first
softmax done, 2 loop done, 3 last P V issued, 4 last P V done, 5 epilogue done; the producer
0 Q load issued, 1 last K/V copy issued. Read by trace_read.py. Usage: trace_variant.py OUT KNOB=V..."""
import os, subprocess, sys
here = os.path.dirname(os.path.abspath(__file__))
out = sys.argv[1]
subprocess.run([sys.executable, os.path.join(here, "fixed_template.py")] + sys.argv[1:], check=True)
path = os.path.join(out, "sdpa_hopper", "sdpa_hopper.cu")
src = open(path).read()

def patch(anchor, new):
    global src
    assert src.count(anchor) == 1, anchor
    src = src.replace(anchor, new)

patch("namespace hopper {\n", """__device__ unsigned long long evo_trace[4][3][64][8];
#define EVO_TRACE(e)                                                              \\
  do {                                                                            \\
    if (blockIdx.x < 4 && tid % 128 == 0 && piece_round < 64)                     \\
      evo_trace[blockIdx.x][1 + consumer][piece_round][e] = clock64();            \\
  } while (0)
namespace hopper {
""")
patch("    const int first_position = m_tile * rows.positions;\n",
      "    const int first_position = m_tile * rows.positions;\n    EVO_TRACE(0);\n")
patch("        wait_keys(0);\n        turns.wait();\n        issue_scores(stage_of(0));\n",
      "        wait_keys(0);\n        EVO_TRACE(7);\n        turns.wait();\n        issue_scores(stage_of(0));\n        EVO_TRACE(1);\n")
patch("        softmax(0, alpha);\n        pack_probabilities();\n",
      "        softmax(0, alpha);\n        pack_probabilities();\n        EVO_TRACE(6);\n")
patch("        const int last = num_kv_tiles - 1;\n",
      "        const int last = num_kv_tiles - 1;\n        EVO_TRACE(2);\n")
patch("        issue_values(stage_of(last));\n        turns.pass();\n",
      "        issue_values(stage_of(last));\n        EVO_TRACE(3);\n        turns.pass();\n")
patch("        release(smem.v_empty(stage_of(last)), lane);\n      } else {",
      "        EVO_TRACE(4);\n        release(smem.v_empty(stage_of(last)), lane);\n      } else {")
patch("    }\n  }\n  // Shared memory must outlive", "    }\n    EVO_TRACE(5);\n  }\n  // Shared memory must outlive")
patch("    evo::mbar_wait_sleep(smem.q_empty(), (round & 1) ^ 1);\n    if (STREAM_K) publish_piece",
      "    evo::mbar_wait_sleep(smem.q_empty(), (round & 1) ^ 1);\n"
      "    if (blockIdx.x < 4 && round < 64) evo_trace[blockIdx.x][0][round][0] = clock64();\n"
      "    if (STREAM_K) publish_piece")
patch("    ++round;\n  }\n  if (STREAM_K) {",
      "    if (blockIdx.x < 4 && round < 64) evo_trace[blockIdx.x][0][round][1] = clock64();\n"
      "    ++round;\n  }\n  if (STREAM_K) {")
open(path, "w").write(src)
