"""The few CUDA driver calls the export makes: CUDA Python's cuda.bindings.driver where it is
installed, otherwise ctypes on libcuda.so.1. Both take and return plain Python ints for handles,
so the launcher above does not care which one it has.

Kernel arguments are packed by the caller with ctypes (an array of pointers to the values) and
passed as the array's address, which both cuLaunchKernel bindings accept.
"""

import ctypes

# cuda.h's enums that the export uses.
FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16
MAP_DTYPES = {"f16": 6, "f32": 7, "bf16": 9, "fp8e4m3": 0, "fp8e5m2": 0, "i32": 3}
SWIZZLE = {"none": 0, "32B": 1, "64B": 2, "128B": 3}
INTERLEAVE = {"none": 0, "16B": 1, "32B": 2}
L2_PROMOTION = {"none": 0, "64B": 1, "128B": 2, "256B": 3}
FILL = {"zero": 0, "nan": 1}
LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4


class TensorMap(ctypes.Structure):
    """CUtensorMap: 128 opaque bytes, 64-byte aligned, passed to the kernel by value."""
    _fields_ = [("opaque", ctypes.c_uint64 * 16)]


class CudaError(RuntimeError):
    pass


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


def cluster_launch_config(grid, block, cluster, smem, stream):
    """A CUlaunchConfig for a launch in thread-block clusters of `cluster` CTAs, and its
    attribute (which the config points to, so the caller keeps both alive)."""
    attribute = _LaunchAttribute()
    attribute.id = LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    attribute.value.clusterDim.x, attribute.value.clusterDim.y, attribute.value.clusterDim.z = \
        cluster
    config = _LaunchConfig(grid[0], grid[1], grid[2], block[0], block[1], block[2], smem,
                           stream or None, ctypes.pointer(attribute), 1)
    return config, attribute


class _CtypesDriver:
    name = "ctypes"

    def __init__(self):
        try:
            self._cuda = ctypes.CDLL("libcuda.so.1")
        except OSError as error:
            raise CudaError(f"cannot load the CUDA driver (libcuda.so.1): {error}") from None
        c = self._cuda
        p = ctypes.c_void_p
        signatures = {
            "cuInit": [ctypes.c_uint],
            "cuGetErrorName": [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)],
            "cuCtxGetCurrent": [ctypes.POINTER(p)],
            "cuCtxGetDevice": [ctypes.POINTER(ctypes.c_int)],
            "cuDeviceGetAttribute": [ctypes.POINTER(ctypes.c_int), ctypes.c_int, ctypes.c_int],
            "cuModuleLoadData": [ctypes.POINTER(p), p],
            "cuModuleGetFunction": [ctypes.POINTER(p), p, ctypes.c_char_p],
            "cuFuncSetAttribute": [p, ctypes.c_int, ctypes.c_int],
            "cuOccupancyMaxActiveBlocksPerMultiprocessor": [ctypes.POINTER(ctypes.c_int), p,
                                                            ctypes.c_int, ctypes.c_size_t],
            "cuTensorMapEncodeTiled": [ctypes.POINTER(TensorMap), ctypes.c_int, ctypes.c_uint32,
                                       p, ctypes.POINTER(ctypes.c_uint64),
                                       ctypes.POINTER(ctypes.c_uint64),
                                       ctypes.POINTER(ctypes.c_uint32),
                                       ctypes.POINTER(ctypes.c_uint32), ctypes.c_int,
                                       ctypes.c_int, ctypes.c_int, ctypes.c_int],
            "cuLaunchKernel": [p, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint,
                               ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, p, p, p],
            "cuLaunchKernelEx": [ctypes.POINTER(_LaunchConfig), p, p, p],
        }
        for function, argtypes in signatures.items():
            getattr(c, function).argtypes = argtypes
            getattr(c, function).restype = ctypes.c_int
        self._check(c.cuInit(0), "cuInit")

    def _check(self, result, what):
        if result != 0:
            name = ctypes.c_char_p()
            self._cuda.cuGetErrorName(result, ctypes.byref(name))
            raise CudaError(f"{what} failed: {name.value.decode() if name.value else result}")

    def current_context(self):
        context = ctypes.c_void_p()
        self._check(self._cuda.cuCtxGetCurrent(ctypes.byref(context)), "cuCtxGetCurrent")
        return context.value or 0

    def current_device(self):
        device = ctypes.c_int()
        self._check(self._cuda.cuCtxGetDevice(ctypes.byref(device)), "cuCtxGetDevice")
        return device.value

    def sm_count(self, device):
        count = ctypes.c_int()
        self._check(self._cuda.cuDeviceGetAttribute(
            ctypes.byref(count), DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device),
            "cuDeviceGetAttribute")
        return count.value

    def load_module(self, image):
        module = ctypes.c_void_p()
        buffer = ctypes.create_string_buffer(image, len(image))
        self._check(self._cuda.cuModuleLoadData(ctypes.byref(module), buffer), "cuModuleLoadData")
        return module.value

    def get_function(self, module, entry):
        function = ctypes.c_void_p()
        self._check(self._cuda.cuModuleGetFunction(ctypes.byref(function), module,
                                                   entry.encode()),
                    f"cuModuleGetFunction of {entry}")
        return function.value

    def set_max_dynamic_smem(self, function, size):
        self._check(self._cuda.cuFuncSetAttribute(
            function, FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, size), "cuFuncSetAttribute")

    def occupancy(self, function, threads, smem):
        blocks = ctypes.c_int()
        self._check(self._cuda.cuOccupancyMaxActiveBlocksPerMultiprocessor(
            ctypes.byref(blocks), function, threads, smem),
            "cuOccupancyMaxActiveBlocksPerMultiprocessor")
        return blocks.value

    def encode_tensor_map(self, dtype, address, dims, strides, box, interleave, swizzle,
                          l2_promotion, fill):
        rank = len(dims)
        tensor_map = TensorMap()
        self._check(self._cuda.cuTensorMapEncodeTiled(
            ctypes.byref(tensor_map), MAP_DTYPES[dtype], rank, address,
            (ctypes.c_uint64 * rank)(*dims), (ctypes.c_uint64 * max(rank - 1, 1))(*strides),
            (ctypes.c_uint32 * rank)(*box), (ctypes.c_uint32 * rank)(*([1] * rank)),
            INTERLEAVE[interleave], SWIZZLE[swizzle], L2_PROMOTION[l2_promotion], FILL[fill]),
            "cuTensorMapEncodeTiled")
        return tensor_map

    def launch(self, function, grid, block, smem, stream, params_address, entry,
               cluster=(1, 1, 1)):
        if tuple(cluster) != (1, 1, 1):
            # The cluster and the grid were checked when the table was read and the call planned
            # (_rule), not again on every launch.
            config, _attribute = cluster_launch_config(grid, block, cluster, smem, stream)
            self._check(self._cuda.cuLaunchKernelEx(ctypes.byref(config), function,
                                                    params_address, None),
                        f"cuLaunchKernelEx of {entry}")
            return
        self._check(self._cuda.cuLaunchKernel(function, grid[0], grid[1], grid[2], block[0],
                                              block[1], block[2], smem, stream, params_address,
                                              None),
                    f"cuLaunchKernel of {entry}")


class _CudaPythonDriver:
    name = "cuda-python"

    def __init__(self, cu):
        self._cu = cu
        self._ctypes = None  # for cluster launches, made on first use
        self._check(cu.cuInit(0), "cuInit")

    def _check(self, result, what):
        error = result[0] if isinstance(result, tuple) else result
        if error != self._cu.CUresult.CUDA_SUCCESS:
            _, name = self._cu.cuGetErrorName(error)
            raise CudaError(f"{what} failed: {name.decode() if name else error}")
        return result[1] if isinstance(result, tuple) and len(result) > 1 else None

    def current_context(self):
        return int(self._check(self._cu.cuCtxGetCurrent(), "cuCtxGetCurrent"))

    def current_device(self):
        return int(self._check(self._cu.cuCtxGetDevice(), "cuCtxGetDevice"))

    def sm_count(self, device):
        attribute = self._cu.CUdevice_attribute(DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        return int(self._check(self._cu.cuDeviceGetAttribute(attribute, device),
                               "cuDeviceGetAttribute"))

    def load_module(self, image):
        buffer = ctypes.create_string_buffer(image, len(image))
        module = self._check(self._cu.cuModuleLoadData(ctypes.addressof(buffer)),
                             "cuModuleLoadData")
        return int(module)

    def get_function(self, module, entry):
        return int(self._check(self._cu.cuModuleGetFunction(self._cu.CUmodule(module),
                                                            entry.encode()),
                               f"cuModuleGetFunction of {entry}"))

    def set_max_dynamic_smem(self, function, size):
        attribute = self._cu.CUfunction_attribute(FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)
        self._check(self._cu.cuFuncSetAttribute(self._cu.CUfunction(function), attribute, size),
                    "cuFuncSetAttribute")

    def occupancy(self, function, threads, smem):
        return int(self._check(self._cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(
            self._cu.CUfunction(function), threads, smem),
            "cuOccupancyMaxActiveBlocksPerMultiprocessor"))

    def encode_tensor_map(self, dtype, address, dims, strides, box, interleave, swizzle,
                          l2_promotion, fill):
        cu = self._cu
        rank = len(dims)
        encoded = self._check(cu.cuTensorMapEncodeTiled(
            cu.CUtensorMapDataType(MAP_DTYPES[dtype]), rank, address,
            [cu.cuuint64_t(d) for d in dims], [cu.cuuint64_t(s) for s in strides],
            [cu.cuuint32_t(b) for b in box], [cu.cuuint32_t(1)] * rank,
            cu.CUtensorMapInterleave(INTERLEAVE[interleave]),
            cu.CUtensorMapSwizzle(SWIZZLE[swizzle]),
            cu.CUtensorMapL2promotion(L2_PROMOTION[l2_promotion]),
            cu.CUtensorMapFloatOOBfill(FILL[fill])), "cuTensorMapEncodeTiled")
        tensor_map = TensorMap()
        ctypes.memmove(ctypes.byref(tensor_map), encoded.getPtr(), ctypes.sizeof(TensorMap))
        return tensor_map

    def launch(self, function, grid, block, smem, stream, params_address, entry,
               cluster=(1, 1, 1)):
        if tuple(cluster) != (1, 1, 1):
            # One implementation of the cluster launch, on the same driver through ctypes: the
            # handles are plain ints either way.
            if self._ctypes is None:
                self._ctypes = _CtypesDriver()
            self._ctypes.launch(function, grid, block, smem, stream, params_address, entry,
                                cluster)
            return
        cu = self._cu
        self._check(cu.cuLaunchKernel(cu.CUfunction(function), grid[0], grid[1], grid[2],
                                      block[0], block[1], block[2], smem, cu.CUstream(stream),
                                      params_address, 0),
                    f"cuLaunchKernel of {entry}")


_DRIVER = None
_CHOICE = None


def use(name):
    """Selects the binding: "cuda-python", "ctypes", or None (CUDA Python where installed)."""
    global _DRIVER, _CHOICE
    if name not in (None, "cuda-python", "ctypes"):
        raise ValueError(f"unknown driver binding {name!r}: cuda-python or ctypes")
    _DRIVER, _CHOICE = None, name
    return get() if name is not None else None


def get():
    global _DRIVER
    if _DRIVER is None:
        if _CHOICE in (None, "cuda-python"):
            try:
                from cuda.bindings import driver as cu
            except ImportError:
                if _CHOICE == "cuda-python":
                    raise CudaError("CUDA Python (cuda.bindings) is not installed") from None
                cu = None
            if cu is not None:
                _DRIVER = _CudaPythonDriver(cu)
                return _DRIVER
        _DRIVER = _CtypesDriver()
    return _DRIVER
