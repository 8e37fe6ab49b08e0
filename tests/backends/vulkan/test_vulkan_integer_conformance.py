"""Arm's TOSA conformance suite (PRO-INT) on the Vulkan integer tier (lavapipe), through ``ironaccel
conformance``.

The device advertises the integer tier beside the FP16 tier; PRO-INT tests of what it does not offer
(INT4 / INT16 extensions, control flow, dynamic shapes) are not applicable and never run. The bounded
subset here (``make test``) takes two tests of every advertised operator of the profile, positive and
negative, and every result must be bit-exact (``tosa_verify`` compares integers exactly);
``make conformance-vulkan-int`` runs all of them.
"""

from __future__ import annotations

import pytest

from ironaccel.backends.vulkan import capability, open_accelerator
from ironaccel.core.errors import Unsupported
from ironaccel.core.settings import Settings
from tosa_fixtures import run_conformance

DEVICE = "vulkan:lavapipe"


def _lavapipe_reason() -> str | None:
    try:
        acc = open_accelerator("lavapipe", settings=Settings())
    except Unsupported as exc:
        return f"lavapipe unavailable: {exc}"
    acc.close()
    return None


_REASON = _lavapipe_reason()


@pytest.mark.skipif(_REASON is not None, reason=_REASON or "")
@pytest.mark.tosa_tools
def test_bounded_pro_int_subset_passes_on_lavapipe(tmp_path):
    text, cases = run_conformance(
        tmp_path / "report", "--device", DEVICE, "--profile", "pro-int", "--per-operator", "2", "-j", "2"
    )
    ran = [c for c in cases if c.find("skipped") is None]
    operators_run = {c.get("classname").removeprefix("tosa.").upper() for c in ran}
    # every operator the integer tier offers has a test of its own in the profile, but CONST_SHAPE
    offered = {op.name for op in capability.INT_SIGNATURES}
    assert offered - operators_run == set()
    assert len(ran) >= len(offered)
    assert "| negative (rejected) |" in text and "not applicable" in text
