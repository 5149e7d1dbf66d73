"""Launches a kernel that `evo export` wrote, on PyTorch tensors, through the CUDA driver (ctypes
on libcuda): the cubin loaded into the current context, the dynamic shared memory opted in, the
grid computed from launch.json (NUM_SMS, CTAS_PER_SM from the device), tensor maps encoded with
cuTensorMapEncodeTiled from the tensors they describe, and the launch on PyTorch's current stream
(so it can be captured in a CUDA graph).

A kernel whose launch.json names a "cluster" other than [1, 1, 1] is launched in thread-block
clusters of that extent (cuLaunchKernelEx with CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION).

An export whose call is several kernels (launch.json's "kernels", run in the order of its
"call") is launched the same way: each kernel with its own grid, block and shared memory, one
after the other on the current stream. Its scratch tensors ("scratch") are allocated by bind on
the tensors' device, once per bind, with NUM_SMS in a shape (see its "shape_bindings") bound to
the device's multiprocessor count as in the grid: zeroed where the export says "once" (the
kernels leave them zero again) or "each_call" (launch() then zeroes them with cuMemsetD8Async
before the kernels, as part of the call), left as allocated where it says "never". The caller
passes only the inputs and outputs.

    from evo_launch import ExportedKernel
    kernel = ExportedKernel("runs/bench/4x16x4096x128")
    launch = kernel.bind({"Q": q, "K": k, "V": v, "O": o})
    launch()
"""

import ctypes
import json
import os

_CUDA = None

# cuTensorMapEncodeTiled's enums (cuda.h).
_MAP_DTYPES = {"f16": 6, "f32": 7, "bf16": 9, "fp8e4m3": 0, "fp8e5m2": 0}
_SWIZZLE = {"none": 0, "32B": 1, "64B": 2, "128B": 3}
_INTERLEAVE = {"none": 0, "16B": 1, "32B": 2}
_L2_PROMOTION = {"none": 0, "64B": 1, "128B": 2, "256B": 3}
_FILL = {"zero": 0, "nan": 1}
_TORCH_DTYPES = {"f16": "float16", "bf16": "bfloat16", "f32": "float32", "i32": "int32",
                 "fp8e4m3": "float8_e4m3fn", "fp8e5m2": "float8_e5m2"}
_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16
_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4


class _ClusterDim(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]


class _LaunchAttributeValue(ctypes.Union):
    """CUlaunchAttributeValue: 64 bytes, 8-byte aligned (one member holds a pointer)."""
    _fields_ = [("pad", ctypes.c_uint64 * 8), ("clusterDim", _ClusterDim)]


class _LaunchAttribute(ctypes.Structure):
    """CUlaunchAttribute: the id, padding to 8 bytes, the value."""
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4),
                ("value", _LaunchAttributeValue)]


class _LaunchConfig(ctypes.Structure):
    """CUlaunchConfig."""
    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint),
                ("gridDimZ", ctypes.c_uint), ("blockDimX", ctypes.c_uint),
                ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p),
                ("attrs", ctypes.POINTER(_LaunchAttribute)), ("numAttrs", ctypes.c_uint)]


def _cuda():
    global _CUDA
    if _CUDA is None:
        _CUDA = ctypes.CDLL("libcuda.so.1")
    return _CUDA


def _check(result, what):
    if result != 0:
        name = ctypes.c_char_p()
        _cuda().cuGetErrorName(result, ctypes.byref(name))
        raise RuntimeError(f"{what} failed: {name.value.decode() if name.value else result}")


class _TensorMap(ctypes.Structure):
    _fields_ = [("opaque", ctypes.c_uint64 * 16)]


def _evaluate(expr, bindings):
    """One of evo's integer expressions (as launch.json keeps the device-dependent ones)."""
    if isinstance(expr, int):
        return expr

    def ceil_div(a, b):
        return -(-a // b)

    text = expr.replace("/", "//").replace("&&", " and ").replace("||", " or ")
    # The ternary a ? b : c of evo's expressions, for the simple forms grids use.
    if "?" in text:
        condition, rest = text.split("?", 1)
        then, otherwise = rest.split(":", 1)
        return _evaluate(then, bindings) if _evaluate(condition, bindings) else _evaluate(
            otherwise, bindings)
    return int(eval(text, {"__builtins__": {}},  # noqa: S307 (evo's own expression)
                    {"min": min, "max": max, "ceil_div": ceil_div, **bindings}))


def _num_sms():
    """The multiprocessor count of the current context's device."""
    cuda = _cuda()
    device = ctypes.c_int()
    _check(cuda.cuCtxGetDevice(ctypes.byref(device)), "cuCtxGetDevice")
    num_sms = ctypes.c_int()
    _check(cuda.cuDeviceGetAttribute(ctypes.byref(num_sms), _DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                                     device), "cuDeviceGetAttribute")
    return num_sms.value


def _launch_cluster(spec, grid, folder):
    """The thread-block cluster of a kernel of launch.json over its evaluated grid, refused
    where CUDA could not launch it. Exports from before clusters have none: plain launches."""
    cluster = spec.get("cluster", [1, 1, 1])
    if (not isinstance(cluster, list) or len(cluster) != 3
            or not all(type(c) is int and c >= 1 for c in cluster)
            or cluster[0] * cluster[1] * cluster[2] > 8):
        raise RuntimeError(f"{folder}: {spec['entry']}'s cluster {cluster} is not 1 to 8 CTAs "
                           "of extents >= 1")
    if any(g % c != 0 for g, c in zip(grid, cluster)):
        raise RuntimeError(f"{folder}: {spec['entry']}'s grid {list(grid)} is not a multiple of "
                           f"its cluster {cluster}")
    return tuple(cluster)


class _Kernel:
    """One entry of the cubin, ready to launch: its function, shared memory opt-in and grid."""

    def __init__(self, module, spec, folder, num_sms):
        cuda = _cuda()
        self.spec = spec
        self.function = ctypes.c_void_p()
        _check(cuda.cuModuleGetFunction(ctypes.byref(self.function), module,
                                        spec["entry"].encode()),
               f"cuModuleGetFunction of {spec['entry']}")
        self.smem = spec["dynamic_smem_bytes"]
        if spec["needs_dynamic_smem_opt_in"]:
            _check(cuda.cuFuncSetAttribute(self.function,
                                           _FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                           ctypes.c_int(self.smem)),
                   f"cuFuncSetAttribute of {spec['entry']}")
        self.block = tuple(spec["block"])
        ctas_per_sm = ctypes.c_int(0)
        if any(isinstance(dim, str) for dim in spec["grid"]):
            _check(cuda.cuOccupancyMaxActiveBlocksPerMultiprocessor(
                ctypes.byref(ctas_per_sm), self.function,
                ctypes.c_int(self.block[0] * self.block[1] * self.block[2]),
                ctypes.c_size_t(self.smem)), "cuOccupancyMaxActiveBlocksPerMultiprocessor")
            if ctas_per_sm.value < 1:
                raise RuntimeError(f"{folder}: {spec['entry']} does not fit on an SM")
        bindings = {"NUM_SMS": num_sms, "CTAS_PER_SM": ctas_per_sm.value}
        self.grid = tuple(_evaluate(dim, bindings) for dim in spec["grid"])
        self.cluster = _launch_cluster(spec, self.grid, folder)
        self.attribute = None
        if self.cluster != (1, 1, 1):
            self.attribute = _LaunchAttribute()
            self.attribute.id = _LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
            dim = self.attribute.value.clusterDim
            dim.x, dim.y, dim.z = self.cluster


class ExportedKernel:
    def __init__(self, folder):
        self.folder = folder
        with open(os.path.join(folder, "launch.json")) as f:
            self.launch_json = json.load(f)
        with open(os.path.join(folder, self.launch_json["cubin"]), "rb") as f:
            image = f.read()
        self._module = ctypes.c_void_p()
        _check(_cuda().cuModuleLoadData(ctypes.byref(self._module), image), "cuModuleLoadData")
        # An export of one kernel (before "kernels" existed) is a call of its top-level launch.
        specs = self.launch_json.get("kernels") or [self.launch_json]
        num_sms = _num_sms()
        self._kernels = {spec["entry"]: _Kernel(self._module, spec, folder, num_sms)
                         for spec in specs}
        # Scratch shapes, evaluated for this device where they are sized by it.
        self._scratch = [dict(spec, shape=[_evaluate(dim, {"NUM_SMS": num_sms})
                                           for dim in spec["shape"]])
                         for spec in self.launch_json.get("scratch", [])]
        self._scratch_shapes = {spec["name"]: spec["shape"] for spec in self._scratch}
        self._call = self.launch_json.get("call") or [{"launch": spec["entry"]} for spec in specs]
        main = self._kernels[specs[0]["entry"]]
        # The first kernel's launch, as single-kernel exports always offered it.
        self.grid, self.block, self.smem = main.grid, main.block, main.smem

    def _encode(self, param, tensor):
        cuda = _cuda()
        rank = param["rank"]
        tensor_map = _TensorMap()
        dims = (ctypes.c_uint64 * rank)(*param["dims"])
        strides = (ctypes.c_uint64 * max(rank - 1, 1))(*param["strides_bytes"])
        box = (ctypes.c_uint32 * rank)(*param["box"])
        element_strides = (ctypes.c_uint32 * rank)(*param["element_strides"])
        _check(cuda.cuTensorMapEncodeTiled(
            ctypes.byref(tensor_map), ctypes.c_int(_MAP_DTYPES[param["dtype"]]),
            ctypes.c_uint32(rank), ctypes.c_void_p(tensor.data_ptr()), dims, strides, box,
            element_strides, ctypes.c_int(_INTERLEAVE[param["interleave"]]),
            ctypes.c_int(_SWIZZLE[param["swizzle"]]),
            ctypes.c_int(_L2_PROMOTION[param["l2_promotion"]]),
            ctypes.c_int(_FILL[param["fill"]])), f"cuTensorMapEncodeTiled of {param['name']}")
        return tensor_map

    def _arguments(self, kernel, tensors, torch):
        """The argument values of one kernel on these tensors (scratch among them), checked
        against the export: shapes, dtypes and contiguity."""
        values = []
        for param in kernel.spec["params"]:
            kind = param["kind"]
            if kind == "scalar":
                ctype = {"i32": ctypes.c_int32, "i64": ctypes.c_int64,
                         "f32": ctypes.c_float}[param["dtype"]]
                values.append(ctype(param["value"]))
                continue
            name = param["tensor"] if kind == "tensor_map" else param["name"]
            if name not in tensors:
                raise ValueError(f"{self.launch_json['template']} takes {name}")
            tensor = tensors[name]
            want = getattr(torch, _TORCH_DTYPES[param["dtype"]])
            if tensor.dtype != want:
                raise ValueError(f"{name} is {tensor.dtype}, the export wants {want}")
            if not tensor.is_cuda or not tensor.is_contiguous():
                raise ValueError(f"{name} must be a contiguous CUDA tensor")
            if kind == "tensor_map":
                dims = list(reversed(tensor.shape))
                if dims != param["dims"]:
                    raise ValueError(f"{name} is {list(tensor.shape)}, the map of {param['name']}"
                                     f" wants {list(reversed(param['dims']))}")
                values.append(self._encode(param, tensor))
            else:
                want_shape = self._scratch_shapes[name] if kind == "scratch" else param["shape"]
                if list(tensor.shape) != want_shape:
                    raise ValueError(f"{name} is {list(tensor.shape)}, the export wants "
                                     f"{want_shape}")
                values.append(ctypes.c_void_p(tensor.data_ptr()))
        return values

    def bind(self, tensors):
        """A launcher of the call on these tensors (by argument name), checked against the
        export: shapes, dtypes and contiguity. Scratch is allocated here, not passed."""
        import torch

        tensors = dict(tensors)
        device = next((t.device for t in tensors.values()), None)
        if device is None:
            device = torch.device("cuda", torch.cuda.current_device())
        scratch = {}
        for spec in self._scratch:
            name = spec["name"]
            if name in tensors:
                raise ValueError(f"{name} is scratch of {self.launch_json['template']}: bind "
                                 "allocates it")
            allocate = torch.empty if spec["zero"] == "never" else torch.zeros
            scratch[name] = allocate(spec["shape"], device=device,
                                     dtype=getattr(torch, _TORCH_DTYPES[spec["dtype"]]))
        tensors.update(scratch)

        cuda = _cuda()
        keep_alive = [scratch]  # what the pointers point into
        steps = []
        for step in self._call:
            if "memset" in step:
                tensor = scratch[step["memset"]]
                steps.append(("memset", ctypes.c_uint64(tensor.data_ptr()),
                              tensor.numel() * tensor.element_size()))
                continue
            kernel = self._kernels[step["launch"]]
            values = self._arguments(kernel, tensors, torch)
            pointers = (ctypes.c_void_p * len(values))(
                *[ctypes.cast(ctypes.byref(v), ctypes.c_void_p) for v in values])
            keep_alive.append(values)
            steps.append(("launch", kernel, pointers))

        def launch():
            stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
            for step in steps:
                if step[0] == "memset":
                    _, address, count = step
                    _check(cuda.cuMemsetD8Async(address, ctypes.c_ubyte(0),
                                                ctypes.c_size_t(count), stream),
                           "cuMemsetD8Async")
                    continue
                _, kernel, pointers = step
                grid, block = kernel.grid, kernel.block
                if kernel.attribute is not None:
                    config = _LaunchConfig(grid[0], grid[1], grid[2], block[0], block[1],
                                           block[2], kernel.smem, stream,
                                           ctypes.pointer(kernel.attribute), 1)
                    _check(cuda.cuLaunchKernelEx(ctypes.byref(config), kernel.function, pointers,
                                                 None),
                           f"cuLaunchKernelEx of {kernel.spec['entry']}")
                    continue
                _check(cuda.cuLaunchKernel(kernel.function, grid[0], grid[1], grid[2], block[0],
                                           block[1], block[2], kernel.smem, stream, pointers,
                                           None),
                       f"cuLaunchKernel of {kernel.spec['entry']}")

        launch.keep_alive = keep_alive
        launch.scratch = scratch
        return launch
