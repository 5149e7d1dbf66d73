"""attention() over PyTorch tensors: checks, dispatch, launch on the current stream, and the
torch.library custom op (with a fake implementation) that lets torch.compile call it.

Imported by the package only where PyTorch is installed. No CUDA call happens at import: the
kernels of a device are loaded at its first call (or by load()), all of them at once, so that a
later call inside a CUDA graph capture finds them loaded; loading during a capture is refused.
"""

import ctypes
import hashlib
import os
import threading
from typing import Optional

import torch

from . import _driver, _rule

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_NAMESPACE = __package__.rsplit(".", 1)[-1]

_TORCH_DTYPES = {torch.float16: "f16", torch.bfloat16: "bf16"}
if hasattr(torch, "float8_e4m3fn"):
    _TORCH_DTYPES[torch.float8_e4m3fn] = "fp8e4m3"
_DTYPE_TORCH = {name: dtype for dtype, name in _TORCH_DTYPES.items()}
_DTYPE_TORCH.update({"f32": torch.float32, "i32": torch.int32, "i64": torch.int64})
_SCALAR_TYPES = {"i32": ctypes.c_int32, "i64": ctypes.c_int64}
_CACHE_LIMIT = 4096


def _describe(tensor):
    return f"{list(tensor.shape)} {str(tensor.dtype).replace('torch.', '')}"


def _check_structure(table, q, k, v, scales):
    """Ranks, dtypes, shapes and layout (what a fake tensor has too). Returns the call."""
    for name, tensor in (("q", q), ("k", k), ("v", v)):
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, not {type(tensor).__name__}")
        if tensor.dim() != 4:
            raise ValueError(f"{name} is {_describe(tensor)}: attention takes 4-d tensors, q "
                             "[B, H, S_q, D], k and v [B, H_kv, S_kv, D]")
        if tensor.dtype not in _TORCH_DTYPES:
            raise TypeError(f"{name} is {tensor.dtype}; the kernels take float16, bfloat16 or "
                            "float8_e4m3fn tensors")
    if k.dtype != v.dtype:
        raise TypeError(f"k is {k.dtype} and v is {v.dtype}: they must have one dtype")
    if k.shape != v.shape:
        raise ValueError(f"k is {_describe(k)} and v is {_describe(v)}: they must have one shape")
    B, H, S_q, D = q.shape
    if k.shape[0] != B or k.shape[3] != D:
        raise ValueError(f"q is {_describe(q)} and k is {_describe(k)}: batch and head "
                         "dimension must agree")
    if k.shape[1] == 0 or H % k.shape[1] != 0:
        raise ValueError(f"q has {H} heads and k {k.shape[1]}: the query heads must be a "
                         "multiple of the key/value heads")
    for name, tensor in (("q", q), ("k", k), ("v", v)):
        if not tensor.is_contiguous():
            raise ValueError(f"{name} is not contiguous (strides {list(tensor.stride())}): the "
                             f"kernels read the [B, H, S, D] layout densely; pass "
                             f"{name}.contiguous()")
    for name, tensor in scales.items():
        if tensor is None:
            continue
        if not isinstance(tensor, torch.Tensor) or tensor.dtype != torch.float32:
            raise TypeError(f"{name} must be a float32 tensor")
        if not tensor.is_contiguous():
            raise ValueError(f"{name} is not contiguous")
    return {"B": int(B), "H": int(H), "H_kv": int(k.shape[1]), "S_q": int(S_q),
            "S_kv": int(k.shape[2]), "D": int(D), "q_dtype": _TORCH_DTYPES[q.dtype],
            "kv_dtype": _TORCH_DTYPES[k.dtype]}


def _check_memory(q, k, v, scales):
    """Device and alignment: what only real tensors have."""
    device = q.device
    if device.type != "cuda":
        raise ValueError(f"q is on {device}: the kernels run on CUDA tensors")
    for name, tensor in (("k", k), ("v", v)) + tuple(scales.items()):
        if tensor is not None and tensor.device != device:
            raise ValueError(f"{name} is on {tensor.device} and q on {device}: all tensors must "
                             "be on one GPU")
    for name, tensor in (("q", q), ("k", k), ("v", v)):
        if tensor.data_ptr() % 16 != 0:
            raise ValueError(f"{name} starts at an address that is not 16-byte aligned (a view "
                             f"into another tensor?); pass {name}.clone()")
    return device


class _DeviceKernels:
    """The table's kernels loaded into one device's context: functions, occupancy, SM count."""

    def __init__(self, table, device_index, sm):
        driver = _driver.get()
        self.driver = driver
        self.context = driver.current_context()
        if self.context == 0:
            raise RuntimeError(f"no CUDA context is current for cuda:{device_index}")
        self.sm = sm
        self.num_sms = driver.sm_count(driver.current_device())
        self.modules = {}
        self.functions = {}   # (kernel index, entry) -> function
        self.ctas_per_sm = {}  # kernel index -> {entry: CTAs per SM}
        for index, kernel in enumerate(table["kernels"]):
            if not _rule.runs_on(kernel, sm):
                continue
            path = os.path.join(_PACKAGE_DIR, kernel["cubin"])
            with open(path, "rb") as f:
                image = f.read()
            if hashlib.sha256(image).hexdigest() != kernel["cubin_sha256"]:
                raise RuntimeError(f"{path} is not the cubin the table was exported with")
            module = driver.load_module(image)
            self.modules[index] = module
            occupancy = {}
            for launch in kernel["launches"]:
                function = driver.get_function(module, launch["entry"])
                smem = launch["dynamic_smem_bytes"]
                if launch["needs_dynamic_smem_opt_in"]:
                    driver.set_max_dynamic_smem(function, smem)
                block = launch["block"]
                ctas = driver.occupancy(function, block[0] * block[1] * block[2], smem)
                if ctas < 1:
                    raise RuntimeError(f"{launch['entry']} of {kernel['cubin']} does not fit on an"
                                       " SM of this GPU")
                self.functions[(index, launch["entry"])] = function
                occupancy[launch["entry"]] = ctas
            self.ctas_per_sm[index] = occupancy


_STATE = threading.Lock()
_LOADED = {}  # device index -> _DeviceKernels
_PICKS = {}   # (call, sm) -> (entry index, exact)
_PLANS = {}   # (kernel index, call, device index) -> launch plan


def _bounded(cache):
    if len(cache) > _CACHE_LIMIT:
        cache.clear()
    return cache


def _sm_of(device):
    major, minor = torch.cuda.get_device_capability(device)
    return major * 10 + minor


def load(table, device=None):
    """Loads every kernel of the table that runs on the device (default: the current one) into
    its context. A call does this itself the first time; do it before capturing a CUDA graph
    whose first call of the module is inside the capture."""
    device = torch.device("cuda", torch.cuda.current_device()) if device is None else (
        torch.device(device))
    index = device.index if device.index is not None else torch.cuda.current_device()
    kernels = _LOADED.get(index)  # every call after the first: no lock
    if kernels is not None:
        return kernels
    with _STATE:
        kernels = _LOADED.get(index)
        if kernels is not None:
            return kernels
        if torch.cuda.is_current_stream_capturing():
            raise RuntimeError(f"{_NAMESPACE}: the kernels are loaded at a device's first call, "
                               "and this first call is inside a CUDA graph capture; call "
                               f"{_NAMESPACE}.load() (or attention once) before capturing")
        with torch.cuda.device(index):
            torch.cuda.current_stream()  # makes the device's primary context current
            kernels = _DeviceKernels(table, index, _sm_of(index))
        _LOADED[index] = kernels
        return kernels


def choose(table, call, sm):
    key = (tuple(sorted(call.items())), sm)
    found = _PICKS.get(key)
    if found is None:
        found = _rule.pick(table, call, sm)
        _bounded(_PICKS)[key] = found
    return found


def _encode(kernels, arg, tensor):
    dims, strides, box = _rule.encode_layout(arg, list(tensor.shape), arg["dtype"])
    return kernels.driver.encode_tensor_map(arg["dtype"], tensor.data_ptr(), dims, strides, box,
                                            arg["interleave"], arg["swizzle"],
                                            arg["l2_promotion"], arg["fill"])


def run(table, q, k, v, causal, scales):
    call = _check_structure(table, q, k, v, scales)
    call["causal"] = 1 if causal else 0
    device = _check_memory(q, k, v, scales)
    kernels = load(table, device)
    entry_index, _ = choose(table, call, kernels.sm)
    kernel_index = table["entries"][entry_index]["kernel"]
    kernel = table["kernels"][kernel_index]
    plan_key = (kernel_index, tuple(sorted(call.items())), device.index)
    plan = _PLANS.get(plan_key)
    if plan is None:
        plan = _rule.launch_plan(kernel, call, {"NUM_SMS": kernels.num_sms,
                                                "CTAS_PER_SM": kernels.ctas_per_sm[kernel_index]})
        _bounded(_PLANS)[plan_key] = plan
    for role in kernel["scales"]:
        if scales.get(role) is None:
            raise ValueError(f"the kernel for {_rule.describe_key(call)} takes {role}: pass it")

    with torch.cuda.device(device):
        if kernels.driver.current_context() != kernels.context:
            raise RuntimeError(f"the current CUDA context of {device} is not the one the kernels "
                               "were loaded into (torch uses the primary context)")
        tensors = {"q": q, "k": k, "v": v}
        tensors.update({role: t for role, t in scales.items() if t is not None})
        out = None
        scratch = {}
        for spec in plan["scratch"]:
            allocate = torch.empty if spec["zero"] == "never" else torch.zeros
            scratch[spec["name"]] = allocate(spec["shape"], dtype=_DTYPE_TORCH[spec["dtype"]],
                                             device=device)
        stream = torch.cuda.current_stream(device).cuda_stream
        for step in plan["steps"]:
            if "memset" in step:
                scratch[step["memset"]].zero_()
                continue
            # Tensors first (a tensor map may precede the tensor it describes), then values.
            named = {}
            for arg in step["args"]:
                if arg["kind"] in ("scalar", "tensor_map"):
                    continue
                if arg["kind"] == "scratch":
                    tensor = scratch[arg["name"]]
                elif arg["role"] == "out":
                    if out is None:
                        out = torch.empty(arg["shape"], dtype=_DTYPE_TORCH[arg["dtype"]],
                                          device=device)
                    tensor = out
                else:
                    tensor = tensors[arg["role"]]
                    if list(tensor.shape) != arg["shape"]:
                        raise ValueError(f"{arg['role']} is {_describe(tensor)}; the kernel "
                                         f"takes {arg['shape']}")
                named[arg["name"]] = tensor
            values = []
            for arg in step["args"]:
                if arg["kind"] == "scalar":
                    if arg["dtype"] not in _SCALAR_TYPES:
                        raise RuntimeError(f"scalar {arg['name']} of dtype {arg['dtype']}")
                    values.append(_SCALAR_TYPES[arg["dtype"]](arg["value"]))
                elif arg["kind"] == "tensor_map":
                    values.append(_encode(kernels, arg, named[arg["tensor"]]))
                else:
                    values.append(ctypes.c_void_p(named[arg["name"]].data_ptr()))
            pointers = (ctypes.c_void_p * len(values))(
                *[ctypes.cast(ctypes.byref(value), ctypes.c_void_p) for value in values])
            function = kernels.functions[(kernel_index, step["launch"])]
            kernels.driver.launch(function, step["grid"], step["block"],
                                  step["dynamic_smem_bytes"], stream, ctypes.addressof(pointers),
                                  step["launch"], step.get("cluster", [1, 1, 1]))
        return out


def output_dtype(table, call):
    """The dtype attention returns for a call of this key (without dispatching on sizes)."""
    for kernel in table["kernels"]:
        key = kernel["key"]
        if (key["D"] == call["D"] and key["causal"] == call["causal"] and
                key["q_dtype"] == call["q_dtype"] and key["kv_dtype"] == call["kv_dtype"]):
            return _DTYPE_TORCH[key["out_dtype"]]
    raise _rule.DispatchError(f"no tuned kernel for {_rule.describe_key(call)}")


def register(table):
    """The custom op {package}::attention and a Python function calling it."""

    def eager(q, k, v, causal=False, q_scale=None, k_scale=None, v_scale=None):
        return run(table, q, k, v, causal,
                   {"q_scale": q_scale, "k_scale": k_scale, "v_scale": v_scale})

    if not hasattr(torch.library, "custom_op"):  # PyTorch before 2.4: eager only
        return eager

    @torch.library.custom_op(f"{_NAMESPACE}::attention", mutates_args=())
    def attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                     q_scale: Optional[torch.Tensor] = None,
                     k_scale: Optional[torch.Tensor] = None,
                     v_scale: Optional[torch.Tensor] = None) -> torch.Tensor:
        return eager(q, k, v, causal, q_scale, k_scale, v_scale)

    @attention_op.register_fake
    def _(q, k, v, causal=False, q_scale=None, k_scale=None, v_scale=None):
        call = _check_structure(table, q, k, v,
                                {"q_scale": q_scale, "k_scale": k_scale, "v_scale": v_scale})
        call["causal"] = 1 if causal else 0
        return q.new_empty(q.shape, dtype=output_dtype(table, call))

    def attention(q, k, v, causal=False, q_scale=None, k_scale=None, v_scale=None):
        return attention_op(q, k, v, causal, q_scale, k_scale, v_scale)

    attention.op = attention_op
    return attention
