"""virtio-accel's operator corpus (../shared/testdata/virtio-accel/cases) on the CPU backend and on the
Vulkan backend (lavapipe), each case judged by its own rule (``meta.json["compare"]``).

Every case runs on the CPU backend and on Vulkan: the Vulkan descriptor admits every program of the
corpus (the int4 identity too, EXT-INT4 storing int4 one value per byte as the runtime's arrays hold it;
the corpus's packed bytes are the harness's conversion), so a signature dropped by mistake shows here as
a refusal.
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
    admit(program, dev.accelerator.capabilities())
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
def test_vulkan_admits_the_whole_corpus(dev):
    """The tally the module doc promises: 50 of 50, each under the descriptor's one target."""
    descriptor = dev.accelerator.capabilities()
    refused = {}
    for name in NAMES:
        try:
            admit(read((CASES / name / "program.tosa").read_bytes()), descriptor)
        except LoweringError as exc:
            refused[name] = str(exc)
    assert refused == {}
    assert len(NAMES) == 50
    extensions = {e.value for e in descriptor.target.extensions}
    for name in NAMES:  # the extensions each case is written for are ones the descriptor claims
        wanted = json.loads((CASES / name / "meta.json").read_text())["target"].get("extensions", [])
        assert {f"EXT-{e}" for e in wanted} <= extensions, (name, wanted)
