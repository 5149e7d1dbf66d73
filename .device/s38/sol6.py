#!/usr/bin/env python3
"""Is sol4.py's membarboth slower for its order (the softmax before the wait for the warpgroup's
own P V) or for the fence? OUT/membarafter: the template with the same __threadfence_block()
right after that wait, where it changes no order. Usage: sol6.py OUT"""
import sys

import sol_copy

template = sol_copy.copy(sys.argv[1], "membarafter")
template.patch("          if (SOFTMAX_WARP_SYNC) __syncwarp();\n          evo::wgmma_wait<0>();\n",
               "          if (SOFTMAX_WARP_SYNC) __syncwarp();\n          evo::wgmma_wait<0>();\n"
               "          __threadfence_block();\n")
template.write()
