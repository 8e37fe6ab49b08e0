"""Pipeline statistics (backends/vulkan/statistics.py): a driver that reports them gives figures for each
kernel a program used; one that does not, or a device opened without asking, says why.

lavapipe lacks VK_KHR_pipeline_executable_properties, so here only the refusals run; ``scripts/gpu-check``
runs the rest on the NVIDIA driver, which has it.
"""

from __future__ import annotations

import numpy as np
import pytest

from ironaccel.backends import vulkan
from ironaccel.core.errors import Unsupported
from ironaccel.core.settings import Settings
from ironaccel.runtime import ArtifactRef
from ironaccel.tosa import ProgramBuilder, write
from vulkan_fixtures import DEVICE, clean  # noqa: F401 - autouse: no layer messages

SELECTOR = DEVICE.split(":", 1)[1]


def open_device(**kwargs):
    try:
        return vulkan.open_accelerator(SELECTOR, settings=Settings(), **kwargs)
    except Unsupported as exc:
        pytest.skip(f"{DEVICE} unavailable: {exc}")


def matmul_artifact() -> bytes:
    b = ProgramBuilder()
    x = b.input("x", (1, 64, 64), "fp32")
    y = b.input("y", (1, 64, 64), "fp32")
    b.output(b.matmul(x, y))
    return write(b.build())


def test_a_device_opened_without_asking_says_so():
    acc = open_device()
    try:
        with pytest.raises(Unsupported, match="pipeline statistics"):
            acc.pipeline_statistics()
    finally:
        acc.close()


def test_statistics_name_every_kernel_used():
    acc = open_device(pipeline_statistics=True)
    try:
        if not acc.physical.reports_pipelines:
            with pytest.raises(Unsupported, match="lacks VK_KHR_pipeline_executable_properties"):
                acc.pipeline_statistics()
            pytest.skip(f"{acc.physical.name} does not report pipeline statistics")
        ctx = acc.create_context()
        program = acc.load_program(ctx, ArtifactRef(matmul_artifact(), 1 << 26))
        found = acc.pipeline_statistics()
        matmul = [key for key in found if key.startswith("matmul(")]
        assert matmul, sorted(found)
        for key in matmul:
            executables = found[key]
            assert len(executables) >= 1
            for ex in executables:
                assert ex.name and ex.statistics, ex
                assert all(isinstance(v, (bool, int, float)) for v in ex.statistics.values())
                assert not any(isinstance(v, float) and np.isnan(v) for v in ex.statistics.values())
        acc.unload_program(program)
        acc.destroy_context(ctx)
    finally:
        acc.close()


def test_reading_follows_the_two_call_protocol():
    """``statistics.read`` against a driver stand-in: the queries are cffi callbacks with the extension's
    signatures, so the struct layouts, the count-then-fill calls and each value format are exercised
    here, where no driver has the extension."""
    vkm = pytest.importorskip("vulkan")
    from types import SimpleNamespace

    from ironaccel.backends.vulkan import statistics

    ffi = vkm.ffi
    rows = [
        ("Register Count", vkm.VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR, "u64", 168),
        ("Spills", vkm.VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR, "b32", 1),
        ("Offset", vkm.VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR, "i64", -4),
        ("Occupancy", vkm.VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_FLOAT64_KHR, "f64", 0.25),
    ]
    asked: list[str] = []

    @ffi.callback("PFN_vkGetPipelineExecutablePropertiesKHR")
    def properties(device, info, count, out):
        asked.append("properties")
        assert info.sType == vkm.VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR
        if out == ffi.NULL:
            count[0] = 1
            return 0
        assert out[0].sType == vkm.VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR
        out[0].name = b"Compute Shader"
        out[0].description = b"the one program of a compute pipeline"
        out[0].subgroupSize = 32
        return 0

    @ffi.callback("PFN_vkGetPipelineExecutableStatisticsKHR")
    def statistics_of(device, which, count, out):
        asked.append("statistics")
        assert which.executableIndex == 0
        if out == ffi.NULL:
            count[0] = len(rows)
            return 0
        for i, (name, kind, field, value) in enumerate(rows):
            assert out[i].sType == vkm.VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR
            out[i].name = name.encode()
            out[i].format = kind
            setattr(out[i].value, field, value)
        return 0

    functions = {
        b"vkGetPipelineExecutablePropertiesKHR": properties,
        b"vkGetPipelineExecutableStatisticsKHR": statistics_of,
    }

    class Driver:
        def __getattr__(self, name):
            return getattr(vkm, name)

    fake = Driver()
    fake.ffi = ffi
    fake.lib = SimpleNamespace(vkGetDeviceProcAddr=lambda device, name: ffi.cast("PFN_vkVoidFunction", functions[name]))
    found = statistics.read(fake, ffi.NULL, ffi.NULL)
    assert asked == ["properties", "properties", "statistics", "statistics"]
    assert len(found) == 1
    ex = found[0]
    assert (ex.name, ex.subgroup_size) == ("Compute Shader", 32)
    assert ex.statistics == {"Register Count": 168, "Spills": True, "Offset": -4, "Occupancy": 0.25}
    assert isinstance(ex.statistics["Spills"], bool)
