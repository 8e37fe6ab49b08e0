"""Workgroup-scope matrices (backends/vulkan/workgroup_matrix.py): the structs the `vulkan` package lacks,
read through a driver stand-in here; on a device, enabling them where listed and nowhere else.

lavapipe lacks VK_NV_cooperative_matrix2, so the stand-in exercises the layouts and the count-then-fill
query; ``scripts/gpu-check`` opens the NVIDIA device, which lists the extension, with them enabled.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ironaccel.backends import vulkan
from ironaccel.backends.vulkan import workgroup_matrix as wm
from ironaccel.core.errors import Unsupported
from ironaccel.core.settings import Settings
from vulkan_fixtures import DEVICE, clean  # noqa: F401 - autouse: no layer messages

vkm = pytest.importorskip("vulkan")  # the stand-in is built from the package's own cffi types

FP16, FP32, INT8, INT32 = 0, 1, 3, 5
SUBGROUP = 3


def listing(*rows: tuple[int, ...]) -> list[dict[str, int]]:
    keys = (
        "MGranularity",
        "NGranularity",
        "KGranularity",
        "AType",
        "BType",
        "CType",
        "ResultType",
        "saturatingAccumulation",
        "scope",
        "workgroupInvocations",
    )
    return [dict(zip(keys, r, strict=True)) for r in rows]


def stand_in(
    features: dict[str, int], rows: list[dict[str, int]], asked: list[str], result: int = 0
) -> SimpleNamespace:
    """A `vulkan` module whose queries answer from ``features`` and ``rows`` (the list query returning
    ``result``), checking each struct's sType."""
    vffi, ffi = vkm.ffi, wm._ffi()

    def ours(pointer, ctype, stype):
        struct = ffi.cast(f"{ctype} *", int(vffi.cast("uintptr_t", pointer)))
        assert struct.sType == stype
        return struct

    def features2(physical, f2):
        asked.append("features")
        found = ours(f2.pNext, "Matrix2Features", wm.FEATURES_STYPE)
        for name, value in features.items():
            setattr(found, name, value)

    def properties2(physical, p2):
        asked.append("properties")
        found = ours(p2.pNext, "Matrix2Properties", wm.PROPERTIES_STYPE)
        found.workgroupScopeMaxWorkgroupSize, found.flexibleDimensionsMaxDimension = 1024, 4096
        found.workgroupScopeReservedSharedMemory = 8192

    @ffi.callback("ListFlexible")
    def list_flexible(physical, count, out):
        asked.append("list")
        if result != 0:
            return result
        if out == ffi.NULL:
            count[0] = len(rows)
            return 0
        assert count[0] == len(rows)
        for i, row in enumerate(rows):
            assert out[i].sType == wm.FLEXIBLE_STYPE
            for name, value in row.items():
                setattr(out[i], name, value)
        return 0

    def proc_addr(instance, name):
        assert name == wm.LIST_FLEXIBLE.encode()
        return vffi.cast("PFN_vkVoidFunction", int(ffi.cast("uintptr_t", list_flexible)))

    lib = SimpleNamespace(
        vkGetPhysicalDeviceFeatures2=features2,
        vkGetPhysicalDeviceProperties2=properties2,
        vkGetInstanceProcAddr=proc_addr,
    )
    fake = SimpleNamespace(ffi=vffi, lib=lib, _keep=list_flexible)
    for name in ("VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2", "VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2"):
        setattr(fake, name, getattr(vkm, name))
    return fake


def test_workgroup_configurations_are_read_in_two_calls():
    asked: list[str] = []
    rows = listing(
        (16, 16, 16, FP16, FP16, FP32, FP32, 0, wm.WORKGROUP_SCOPE, 256),
        (16, 16, 16, FP16, FP16, FP32, FP32, 0, wm.WORKGROUP_SCOPE, 128),
        (16, 8, 32, INT8, INT8, INT32, INT32, 0, wm.WORKGROUP_SCOPE, 256),
        (16, 16, 16, FP16, FP16, FP32, FP32, 0, SUBGROUP, 32),  # subgroup scope: KHR's list has these
        (16, 16, 32, INT8, INT8, INT32, INT32, 1, wm.WORKGROUP_SCOPE, 256),  # saturating: not used
    )
    fake = stand_in({"workgroupScope": 1, "flexibleDimensions": 1, "tensorAddressing": 1}, rows, asked)
    found = wm.describe(fake, vkm.ffi.NULL, vkm.ffi.NULL, {wm.EXTENSION})
    assert asked == ["features", "properties", "list", "list"]
    assert found == wm.WorkgroupMatrices(
        configurations=frozenset({"fp16:16x16x16:fp32@256", "fp16:16x16x16:fp32@128", "int8:16x8x32:int32@256"}),
        max_workgroup_size=1024,
        max_dimension=4096,
        reserved_shared_memory=8192,
        tensor_addressing=True,
    )


def test_a_list_of_nothing_usable_means_none():
    asked: list[str] = []
    rows = listing((16, 16, 16, FP16, FP16, FP32, FP32, 0, SUBGROUP, 32))
    fake = stand_in({"workgroupScope": 1, "flexibleDimensions": 1}, rows, asked)
    assert wm.describe(fake, vkm.ffi.NULL, vkm.ffi.NULL, {wm.EXTENSION}) is None
    assert asked == ["features", "properties", "list", "list"]


def test_a_list_the_driver_fails_to_give_means_none():
    asked: list[str] = []
    fake = stand_in({"workgroupScope": 1, "flexibleDimensions": 1}, listing(), asked, result=-3)
    assert wm.describe(fake, vkm.ffi.NULL, vkm.ffi.NULL, {wm.EXTENSION}) is None
    assert asked == ["features", "properties", "list"]


@pytest.mark.parametrize("features", [{"workgroupScope": 1}, {"flexibleDimensions": 1}, {}])
def test_either_feature_missing_means_none(features):
    asked: list[str] = []
    fake = stand_in(features, listing(), asked)
    assert wm.describe(fake, vkm.ffi.NULL, vkm.ffi.NULL, {wm.EXTENSION}) is None
    assert asked == ["features"]


def test_without_the_extension_nothing_is_asked():
    asked: list[str] = []
    fake = stand_in({"workgroupScope": 1, "flexibleDimensions": 1}, listing(), asked)
    assert wm.describe(fake, vkm.ffi.NULL, vkm.ffi.NULL, {"VK_KHR_cooperative_matrix"}) is None
    assert asked == []


@pytest.mark.parametrize("tensors", [False, True])
def test_enable_ends_the_chain_with_what_is_offered(tensors):
    vffi = vkm.ffi
    f2 = vffi.new("VkPhysicalDeviceFeatures2 *")
    chain = [f2]
    offered = wm.WorkgroupMatrices(frozenset({"fp16:16x16x16:fp32@256"}), 1024, 4096, 0, tensor_addressing=tensors)
    kept = wm.enable(vffi, chain, offered)
    assert int(vffi.cast("uintptr_t", f2.pNext)) == int(wm._ffi().cast("uintptr_t", kept))
    assert (kept.sType, kept.workgroupScope, kept.flexibleDimensions) == (wm.FEATURES_STYPE, 1, 1)
    assert kept.tensorAddressing == int(tensors)
    assert kept.pNext == wm._ffi().NULL
    assert (kept.reductions, kept.conversions, kept.perElementOperations, kept.blockLoads) == (0, 0, 0, 0)


@pytest.mark.parametrize("asked", [False, True])
def test_enabled_only_when_asked_and_listed(asked):
    try:
        acc = vulkan.open_accelerator(DEVICE.split(":", 1)[1], settings=Settings(), workgroup_matrices=asked)
    except Unsupported as exc:
        pytest.skip(f"{DEVICE} unavailable: {exc}")
    try:
        listed = acc.physical.workgroup_matrices
        assert acc._native.device.workgroup_matrices == (asked and listed is not None)
        if listed is not None:  # a driver with the extension lists at least one configuration
            assert listed.configurations and listed.max_workgroup_size > 0
    finally:
        acc.close()
