"""The Vulkan backend (no NVFP4 kernels) refuses an NVFP4 projection at load, naming it, and keeps nothing."""

from __future__ import annotations

import pytest

from ironaccel import nvfp4
from ironaccel.tosa.errors import LoweringError
from vulkan_fixtures import clean, dev

__all__ = ["clean", "dev"]  # fixtures, used by name


@pytest.mark.parametrize(
    "projection",
    [
        nvfp4.Projection(m=1, n=64, k=64, activation="silu", name="mlp.up"),
        nvfp4.BatchedProjection(batch=4, n=32, k=32),
        nvfp4.ExpertProjection(experts=2, m=1, n=16, k=16, activation="squared_relu"),
    ],
    ids=lambda p: type(p).__name__,
)
def test_vulkan_refuses_nvfp4_projection_at_load(dev, projection):
    with pytest.raises(LoweringError, match="does not run NVFP4 projections") as info:
        dev.compile(projection)
    assert type(projection).__name__ in str(info.value)
    assert dev.accelerator.live_resources()["program"] == 0
