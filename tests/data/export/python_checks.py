"""Checks of an exported Python package that need no GPU: it imports (without a GPU, and
without PyTorch only to say that attention needs it), its rule refuses what it cannot serve, and
where PyTorch is installed attention() refuses bad tensors with clear errors before any CUDA
call, and its custom op's fake implementation gives torch.compile the output's shape and dtype.

    python3 python_checks.py PACKAGE_PARENT PACKAGE_NAME
Prints one line per check and PASSED (or SKIPPED-TORCH after the checks without PyTorch).
"""
import importlib
import sys

from expectations import expect

sys.path.insert(0, sys.argv[1])
name = sys.argv[2]
package = importlib.import_module(name)
entry = package.table["entries"][0]
kernel = package.table["kernels"][entry["kernel"]]
key = kernel["key"]
shape = entry["shape"]
dtype = key["q_dtype"]


tuned = package.pick(B=shape["B"], H=shape["H"], H_kv=shape["H_kv"], S_q=shape["S_q"],
                     S_kv=shape["S_kv"], D=key["D"], causal=bool(key["causal"]), dtype=dtype,
                     kv_dtype=key["kv_dtype"], sm=kernel["sm"])
assert tuned["exact"] and tuned["index"] == 0, tuned
print("ok: the first entry's own shape picks it, exactly")
expect(package.DispatchError, "no tuned kernel for D=96", package.pick, B=1, H=1, S_q=64,
       S_kv=64, D=96, dtype=dtype, kv_dtype=key["kv_dtype"], sm=kernel["sm"])
expect(package.DispatchError, "runs on sm_70", package.pick, B=1, H=1, S_q=64, S_kv=64,
       D=key["D"], sm=70)
expect(package.DispatchError, "S_q=0 is outside", package.pick, B=1, H=1, S_q=0, S_kv=64,
       D=key["D"], sm=kernel["sm"])

try:
    import torch
except ImportError:
    expect(ImportError, "needs PyTorch", package.attention, None, None, None)
    print("SKIPPED-TORCH: PyTorch is not installed, so the tensor checks did not run")
    sys.exit(0)

torch_dtype = {"f16": torch.float16, "bf16": torch.bfloat16}.get(dtype)
if torch_dtype is None:
    print(f"SKIPPED-TORCH: the first entry's dtype {dtype} is not fp16 or bf16")
    sys.exit(0)
B, H, H_kv, S_q, S_kv, D = (shape["B"], shape["H"], shape["H_kv"], shape["S_q"], shape["S_kv"],
                            key["D"])
q = torch.randn(B, H, S_q, D, dtype=torch_dtype)
k = torch.randn(B, H_kv, S_kv, D, dtype=torch_dtype)
v = torch.randn(B, H_kv, S_kv, D, dtype=torch_dtype)
causal = bool(key["causal"])
attention = package.attention
expect(ValueError, "4-d tensors", attention, q[0], k, v, causal)
expect(TypeError, "float16, bfloat16", attention, q.float(), k, v, causal)
other = torch.bfloat16 if torch_dtype == torch.float16 else torch.float16
expect(TypeError, "one dtype", attention, q, k, v.to(other), causal)
expect(ValueError, "one shape", attention, q, k, v[:, :, :-1], causal)
if H % 3 != 0:
    expect(ValueError, "multiple of the key/value heads", attention, q,
           torch.randn(B, 3, S_kv, D, dtype=torch_dtype),
           torch.randn(B, 3, S_kv, D, dtype=torch_dtype), causal)
strided = q.transpose(1, 2).contiguous().transpose(1, 2)
expect(ValueError, "not contiguous", attention, strided, k, v, causal)
expect(ValueError, "CUDA tensors", attention, q, k, v, causal)

# The fake implementation (what torch.compile traces with), on meta tensors.
op = getattr(getattr(torch.ops, name), "attention")
out = op(q.to("meta"), k.to("meta"), v.to("meta"), causal)
assert out.shape == q.shape and out.device.type == "meta", out
print(f"ok: torch.ops.{name}.attention on meta tensors gives {list(out.shape)} {out.dtype}")
expect(package.DispatchError, "no tuned kernel for D=96", op,
       torch.empty(1, 1, 8, 96, dtype=torch_dtype, device="meta"),
       torch.empty(1, 1, 8, 96, dtype=torch_dtype, device="meta"),
       torch.empty(1, 1, 8, 96, dtype=torch_dtype, device="meta"), causal)
print("PASSED")
