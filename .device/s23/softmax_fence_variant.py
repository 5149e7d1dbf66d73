#!/usr/bin/env python3
"""A copy of sdpa_hopper whose overlapped loop puts a scheduling fence between the softmax of tile j
and the wait for P_{j-1} V. ptxas hoists that wait above the softmax (the tenth session's SASS:
the packing of P_j, which must follow the wait, is interleaved with the exponentials), so the
softmax runs only after the warpgroup's own P V, never under it. A fence that ptxas does not
schedule across keeps the maximum, the exponentials and the sums before the wait; only the packing
follows it.

OUT KNOB=VALUE...; FENCE=bar (a named barrier of the warpgroup's 128 threads, the epilogue's) or
FENCE=warp (__syncwarp); FENCE=none: the template itself, copied the same way."""
import os, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from template_copy import TemplateCopy

FENCES = {
    "none": None,
    "bar": "evo::named_barrier_sync<128>(kEpilogueBarrier + consumer);",
    "warp": "__syncwarp();",
}
fence = FENCES[os.environ.get("FENCE", "bar")]
copy = TemplateCopy.from_argv()
if fence:
    copy.patch("""          softmax(j, alpha);
          evo::wgmma_wait<0>();""", f"""          softmax(j, alpha);
          {fence}  // the softmax stays before the wait for P V
          evo::wgmma_wait<0>();""")
copy.write()
