"""virtio-accel's operator corpus (../shared/testdata/virtio-accel/cases) on the CPU backend and on the
Vulkan backend (lavapipe), each case judged by its own rule (``meta.json["compare"]``).

Every case runs on the CPU backend. On Vulkan, a case runs when the device's descriptor (its float and
integer tiers) admits its program; one it does not admit must be refused at load with LoweringError,
and must be one the tiers leave out on purpose (INT4 storage), so a signature dropped by mistake shows
here as a failure.
"""

from __future__ import annotations

import json

import pytest

from corpus import CASES, NAMES, compare, load_case
from ironaccel.backends.cpu import run as cpu_run
from ironaccel.backends.vulkan import instance
from ironaccel.tosa import admit, read
from ironaccel.tosa.errors import LoweringError
from vulkan_fixtures import BIG, dev

__all__ = ["dev"]  # fixture, used by name

# Storage and signatures the tiers do not offer.
NOT_OFFERED = {"identity-int4"}  # EXT-INT4: no tier stores int4
needs_corpus = pytest.mark.skipif(not NAMES, reason=f"no corpus at {CASES}")


@needs_corpus
def test_the_corpus_is_all_here():
    assert len(NAMES) == 50
    fp16 = [n for n in NAMES if json.loads((CASES / n / "meta.json").read_text())["expected"][0]["dtype"] == "FP16"]
    assert len(fp16) >= 30  # the BOOL / INT32 results of fp16 operators are counted by their output type


@needs_corpus
@pytest.mark.parametrize("name", NAMES)
def test_case_on_the_cpu_backend(name):
    program, inputs, meta = load_case(name)
    outputs = cpu_run(program, inputs)
    assert len(outputs) == 1
    compare(outputs[0], meta)


@needs_corpus
@pytest.mark.parametrize("name", NAMES)
def test_case_on_vulkan(dev, name):
    program_bytes, inputs, meta = load_case(name)
    program = read(program_bytes)
    instance.clear_validation_messages()
    try:
        admit(program, dev.accelerator.capabilities())
    except LoweringError:
        assert name in NOT_OFFERED, f"{name} is refused by the Vulkan descriptor"
        with pytest.raises(LoweringError):
            dev.compile(program, resident_bytes=BIG)
        return
    exe = dev.compile(program, resident_bytes=BIG)
    try:
        outputs = exe(*inputs)
    finally:
        exe.close()
    assert len(outputs) == 1
    compare(outputs[0], meta)
    assert not instance.validation_messages()
    live = {k: v for k, v in dev.accelerator.live_resources().items() if v}
    assert live == {"context": 1, "queue": 1}, live


@needs_corpus
def test_what_vulkan_runs_and_refuses(dev):
    """The tally the module doc promises: every case but those left out on purpose runs."""
    descriptor = dev.accelerator.capabilities()
    refused = set()
    for name in NAMES:
        try:
            admit(read((CASES / name / "program.tosa").read_bytes()), descriptor)
        except LoweringError:
            refused.add(name)
    assert refused == NOT_OFFERED
    assert len(NAMES) - len(refused) >= 49
