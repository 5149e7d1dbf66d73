"""Attention kernels tuned by evo, with a dispatch table over shapes (written by `evo export
--python`; evo is not needed to use it).

    import evo_attention
    out = evo_attention.attention(q, k, v, causal=True)  # q [B, H, S_q, D], k, v [B, H_kv, S_kv, D]

q, k and v are contiguous CUDA tensors in float16 or bfloat16 (or float8_e4m3fn for a table of
sdpa_fp8 kernels, with q_scale, k_scale, v_scale), the softmax scale is 1/sqrt(D). The call
picks a kernel from table.json (pick() shows which, without a GPU), computes its grid and scratch
for these sizes (both may follow the GPU's multiprocessor count) and launches it on the current
PyTorch stream through the CUDA driver, so it can be captured in a CUDA graph; it is also the
custom op torch.ops.<package>.attention, which torch.compile calls. The kernels of a GPU are
loaded at its first call, or by load().
"""

from . import _rule
from ._rule import DispatchError, ExpressionError

table = _rule.load_table()

try:
    import torch as _torch  # noqa: F401
except ImportError:
    _torch = None

if _torch is not None:
    from . import _torch_op

    attention = _torch_op.register(table)

    def load(device=None):
        """Loads every kernel that runs on the device (default: the current one)."""
        _torch_op.load(table, device)
else:
    def attention(q, k, v, causal=False, q_scale=None, k_scale=None, v_scale=None):
        raise ImportError(f"{__name__}.attention needs PyTorch, which is not installed here "
                          "(pip install torch); pick() and the table work without it")

    def load(device=None):
        raise ImportError(f"{__name__}.load needs PyTorch, which is not installed here")


def pick(B, H, S_q, S_kv, D, causal=False, H_kv=None, dtype="f16", kv_dtype=None, sm=90):
    """Which entry of the table a call would use, without a GPU: a dict with the entry (its
    tuned shape, template, run, candidate and score) and whether the shape is the tuned one.
    Raises DispatchError with the reason when no kernel serves the call."""
    call = {"B": B, "H": H, "H_kv": H if H_kv is None else H_kv, "S_q": S_q, "S_kv": S_kv,
            "D": D, "causal": 1 if causal else 0, "q_dtype": dtype,
            "kv_dtype": dtype if kv_dtype is None else kv_dtype}
    index, exact = _rule.pick(table, call, sm)
    entry = dict(table["entries"][index])
    entry["index"] = index
    entry["exact"] = exact
    entry["target"] = table["kernels"][entry["kernel"]]["target"]
    return entry


def use_driver(name):
    """The CUDA driver binding: "cuda-python" (cuda.bindings.driver), "ctypes" (libcuda.so.1),
    or None for CUDA Python where installed. Call before the first attention."""
    from . import _driver

    _driver.use(name)
