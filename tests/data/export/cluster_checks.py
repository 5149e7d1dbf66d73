"""Checks of the cluster launches of an exported Python package and of scripts/evo_launch.py that
need no GPU: their ctypes copies of cuda.h's CUlaunchConfig and CUlaunchAttribute have cuda.h's
layout (cuLaunchKernelEx reads them as raw memory, so a wrong offset launches a wrong cluster
rather than failing), a launch's config points at its cluster, and a kernel's "cluster" in
launch.json is read, defaulted and refused as the C++ export reads the table's.

    python3 cluster_checks.py PACKAGE_PARENT PACKAGE_NAME SCRIPTS_DIR LAYOUT
LAYOUT: what the test's C++ program compiled against cuda.h printed, "name=value ...".
Prints one line per check and PASSED.
"""
import ctypes
import importlib
import sys

from expectations import expect

sys.path.insert(0, sys.argv[1])
sys.path.insert(0, sys.argv[3])
driver = importlib.import_module(sys.argv[2] + "._driver")
evo_launch = importlib.import_module("evo_launch")
header = {name: int(value) for name, value in (item.split("=") for item in sys.argv[4].split())}


for where, module, cluster_dimension in (
        ("the package's driver", driver, driver.LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION),
        ("evo_launch.py", evo_launch, evo_launch._LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)):
    attribute, value = module._LaunchAttribute, module._LaunchAttributeValue
    config = module._LaunchConfig
    layout = {
        "attribute_size": ctypes.sizeof(attribute),
        "attribute_align": ctypes.alignment(attribute),
        "attribute_value": attribute.value.offset,
        "value_size": ctypes.sizeof(value),
        "cluster_dim": value.clusterDim.offset,
        "config_size": ctypes.sizeof(config),
        "config_smem": config.sharedMemBytes.offset,
        "config_stream": config.hStream.offset,
        "config_attrs": config.attrs.offset,
        "config_num_attrs": config.numAttrs.offset,
        "cluster_dimension": cluster_dimension,
    }
    assert layout == header, (where, layout, header)
    print(f"ok: {where} lays out CUlaunchConfig and CUlaunchAttribute as cuda.h does")

# The config the package's ctypes binding passes to cuLaunchKernelEx.
config, attribute = driver.cluster_launch_config((16, 16, 1), (384, 1, 1), (2, 1, 1), 200704, 0)
assert (config.gridDimX, config.gridDimY, config.gridDimZ) == (16, 16, 1)
assert (config.blockDimX, config.blockDimY, config.blockDimZ) == (384, 1, 1)
assert config.sharedMemBytes == 200704 and not config.hStream and config.numAttrs == 1
assert ctypes.addressof(config.attrs.contents) == ctypes.addressof(attribute)
raw = bytes(attribute)
assert int.from_bytes(raw[0:4], "little") == header["cluster_dimension"], raw
assert [int.from_bytes(raw[8 + 4 * i:12 + 4 * i], "little") for i in range(3)] == [2, 1, 1], raw
print("ok: a cluster launch's config points at its attribute: cluster dimension 2x1x1")
# The package refuses bad clusters when it reads the table, and grids that are not a multiple when
# it plans a call (_rule): the export test asserts both beside the C++ library's refusals.

# evo_launch.py: launch.json's "cluster" over the grid computed on the device.
spec = {"entry": "sdpa_hopper_fwd", "grid": [16, 16, 1]}
assert evo_launch._launch_cluster(spec, (16, 16, 1), "one") == (1, 1, 1)
print("ok: evo_launch.py reads a launch.json without a cluster as a plain launch")
assert evo_launch._launch_cluster(dict(spec, cluster=[2, 1, 1]), (16, 16, 1), "one") == (2, 1, 1)
print("ok: evo_launch.py keeps launch.json's cluster [2, 1, 1]")
for cluster in ([0, 1, 1], [16, 1, 1], [4, 4, 1], ["2", 1, 1], [True, 1, 1], [2, 1]):
    expect(RuntimeError, f"one: sdpa_hopper_fwd's cluster {cluster} is not 1 to 8 CTAs",
           evo_launch._launch_cluster, dict(spec, cluster=cluster), (16, 16, 1), "one")
expect(RuntimeError, "one: sdpa_hopper_fwd's grid [15, 16, 1] is not a multiple of its cluster "
       "[2, 1, 1]", evo_launch._launch_cluster, dict(spec, cluster=[2, 1, 1]), (15, 16, 1), "one")
print("PASSED")
