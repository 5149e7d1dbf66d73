#!/usr/bin/env python3
"""Copies of sdpa_hopper for `evo --templates OUT` that ask what caps the tensor pipe near 80 % at
4,16,4096,128 (issue 15): OUT/ref is the template with its tolerance opened; OUT/mmaonly keeps
the pipeline, the turns, the MMAs and the epilogue but replaces the online softmax by two ALU
operations per score (a clamp and a scale, so that P and O stay finite) and drops O's rescale:
wrong on purpose, what the loop costs with almost no softmax. Usage: skeleton.py OUT"""
import json, os, shutil, sys
here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "kernel_templates",
                    "sdpa_hopper")
out = sys.argv[1]
SOFTMAX = "evo::wgmma_attention_softmax<BLOCK_N, FAST_EXP>(s, row_max, row_sum, kSoftmaxScale, alpha);"
CHEAP = ("{\n#pragma unroll\n for (int i = 0; i < BLOCK_N / 2; ++i) s[i] = fmaxf(s[i], -8.f) * 0.015625f;\n"
         " alpha[0] = alpha[1] = 1.f; row_sum[0] = row_sum[1] = 1.f; row_max[0] = row_max[1] = 0.f; }")
RESCALE = "evo::wgmma_attention_rescale<HEAD_DIM>(acc, alpha);"
for name in ("ref", "mmaonly"):
    folder = os.path.join(out, name, "sdpa_hopper")
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(here, folder)
    os.remove(os.path.join(folder, "starting_points.json"))
    path = os.path.join(folder, "sdpa_hopper.cu")
    src = open(path).read()
    if name == "mmaonly":
        assert src.count(SOFTMAX) == 1 and src.count(RESCALE) == 1
        src = src.replace(SOFTMAX, CHEAP).replace(RESCALE, "(void)alpha;")
    open(path, "w").write(src)
    mpath = os.path.join(folder, "manifest.json")
    m = json.load(open(mpath))
    m["correctness"]["atol"] = 1e6
    m["correctness"]["rtol"] = 1e6
    for o in m["correctness"].get("overrides", []):
        o["atol"], o["rtol"] = 1e6, 1e6
    json.dump(m, open(mpath, "w"), indent=2)
