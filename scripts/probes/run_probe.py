import numpy as np, cupy as cp, os
here = os.path.dirname(os.path.abspath(__file__))
mod = cp.RawModule(path=os.path.join(here, "wgmma_probe.cubin"))
f = mod.get_function("probe")
rng = np.random.default_rng(1)
A = rng.standard_normal((64, 64)).astype(np.float16)
B = rng.standard_normal((64, 64)).astype(np.float16)
V = rng.standard_normal((64, 64)).astype(np.float16)
ref1 = A.astype(np.float32) @ B.astype(np.float32).T
ref2 = A.astype(np.float32) @ V.astype(np.float32)
dA, dB, dV = (cp.asarray(x.view(np.uint16)) for x in (A, B, V))
for lbo in (16, 1024, 8192):
    D1 = cp.zeros((64, 64), cp.float32); D2 = cp.zeros((64, 64), cp.float32)
    f((1,), (128,), (dA, dB, dV, D1, D2, cp.int32(lbo)))
    cp.cuda.runtime.deviceSynchronize()
    e1 = np.abs(cp.asnumpy(D1) - ref1).max(); e2 = np.abs(cp.asnumpy(D2) - ref2).max()
    print(f"lbo_v={lbo}: test1 (SS, K-major both) max err {e1:.3g}; test2 (RS, V MN-major transposed) max err {e2:.3g}")
    if e2 > 1e-2:
        d2 = cp.asnumpy(D2)
        # is it A @ V.T or a permutation?
        print("   vs A@V.T", np.abs(d2 - A.astype(np.float32) @ V.astype(np.float32).T).max())
