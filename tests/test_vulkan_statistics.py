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
