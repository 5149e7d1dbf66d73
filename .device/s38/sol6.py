#!/usr/bin/env python3
"""Is sol4.py's membarboth slower for its order (the softmax before the wait for the warpgroup's
own P V) or for the fence? OUT/membarafter: the template with the same __threadfence_block()
right after that wait, where it changes no order. Usage: sol6.py OUT"""
import os, shutil, sys
here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "kernel_templates",
                    "sdpa_hopper")
folder = os.path.join(sys.argv[1], "membarafter", "sdpa_hopper")
shutil.rmtree(folder, ignore_errors=True)
shutil.copytree(here, folder)
os.remove(os.path.join(folder, "starting_points.json"))
path = os.path.join(folder, "sdpa_hopper.cu")
src = open(path).read()
wait = "          if (SOFTMAX_WARP_SYNC) __syncwarp();\n          evo::wgmma_wait<0>();\n"
assert src.count(wait) == 1
src = src.replace(wait, wait + "          __threadfence_block();\n")
open(path, "w").write(src)
