import numpy as np, cupy as cp, os
here = os.path.dirname(os.path.abspath(__file__))
f = cp.RawModule(path=os.path.join(here, "wgmma_probe2.cubin")).get_function("probe2")
rng = np.random.default_rng(2)
A, B, V = (rng.standard_normal((64, 128)).astype(np.float16) for _ in range(3))
ref3 = A.astype(np.float32) @ B.astype(np.float32).T
ref4 = A[:, :64].astype(np.float32) @ V.astype(np.float32)
dA, dB, dV = (cp.asarray(x.view(np.uint16)) for x in (A, B, V))
D3 = cp.zeros((64, 64), cp.float32); D4 = cp.zeros((64, 128), cp.float32)
f((1,), (128,), (dA, dB, dV, D3, D4))
cp.cuda.runtime.deviceSynchronize()
print("test3 (SS, K=128 over two K-atoms) max err %.3g" % np.abs(cp.asnumpy(D3) - ref3).max())
e4 = np.abs(cp.asnumpy(D4) - ref4)
print("test4 (RS, N=128 over two MN-atoms, LBO 8192) max err %.3g; left half %.3g right half %.3g" % (e4.max(), e4[:, :64].max(), e4[:, 64:].max()))
