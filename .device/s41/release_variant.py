#!/usr/bin/env python3
"""OUT MODE: a copy of sdpa_hopper (OUT/sdpa_hopper, by .device/template_copy.py) whose consumer
warps release their buffers otherwise, for `evo --templates OUT`:
  lane0       the Q tile as before the forty-first session: __syncwarp, then lane 0's arrive, and
              q_empty counting warps (the A/B of .device/s41/ab.sh);
  every_lane  the K/V stages too released by every lane, as the Q tile is now (the fortieth
              session's racecheck probe, .device/s40/race.sh; CLUSTER_M=1 only)."""
import os, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from template_copy import TemplateCopy

out, mode = sys.argv[1], sys.argv[2]
if mode not in ("lane0", "every_lane"):
    sys.exit(f"release_variant: no mode {mode} (lane0, every_lane)")
copy = TemplateCopy(out, [])
if mode == "lane0":
    copy.patch("release_q(smem.q_empty())", "release(smem.q_empty(), lane)", count=5)
    copy.patch("mbar_init(smem.q_empty(), hopper::kConsumerWarps * 32);",
               "mbar_init(smem.q_empty(), hopper::kConsumerWarps);")
else:
    copy.patch("  __syncwarp();\n  if (lane == 0) evo::mbar_arrive(bar);", "  evo::mbar_arrive(bar);")
    for stage in ("k_empty", "v_empty"):
        copy.patch(f"mbar_init(smem.{stage}(s), hopper::kStageReleasers);",
                   f"mbar_init(smem.{stage}(s), hopper::kStageReleasers * 32);")
copy.write()
