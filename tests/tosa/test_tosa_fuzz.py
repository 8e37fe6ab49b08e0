"""Hostile input: ``read`` may only return a Program or raise FormatError (NotTosa10Error included), quickly.

Every input that reads is also validated (every profile and extension, level 8K), where only
ValidationError may escape. Inputs are random bytes, random bytes behind a valid header, and mutations of
valid files (bit flips, byte and 16/32-bit field overwrites with boundary values, truncations, splices,
duplicated and deleted ranges). Seeds are files our writer produces for hand-made programs covering every table of the
schema, plus real conformance files when tosa-tools is present. A file that reads must write and read
back to the same program.

The default run is bounded (a few thousand inputs). ``IRONACCEL_FUZZ_EXAMPLES=200000 pytest -m slow
tests/tosa/test_tosa_fuzz.py`` (``make fuzz-tosa``) runs the long mode.
"""

from __future__ import annotations

import gc
import os
import struct
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ironaccel.conformance import cts
from ironaccel.tosa import Block, DType, Op, Operator, Program, Region, Tensor, Version, read, write
from ironaccel.tosa.attributes import (
    ClampAttribute,
    CondIfAttribute,
    Conv2dAttribute,
    CustomAttribute,
    RescaleAttribute,
    RoundingMode,
    TransposeAttribute,
)
from ironaccel.tosa.errors import FormatError, ValidationError
from ironaccel.tosa.target import Target
from ironaccel.tosa.validate import validate
from tosa_fixtures import tosa_tools_venv

LONG_EXAMPLES = int(os.environ.get("IRONACCEL_FUZZ_EXAMPLES", "0") or 0)
PER_INPUT_SECONDS = 2.0
TARGET = Target.of(["pro-int", "pro-fp"], [e for exts in cts.EXTENSIONS.values() for e in exts], "8k")
BOUNDARY_U32 = [0, 1, 2, 3, 4, 7, 8, 0x7F, 0x80, 0xFF, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFC, 0xFFFFFFFF]


def _seed_programs() -> list[Program]:
    f32 = np.linspace(-2, 2, 6, dtype=np.float32).reshape(2, 3)
    main = Block(
        "main",
        (
            Operator(Op.CONST, (), ("w",)),
            Operator(Op.CONST, (), ("q",)),
            Operator(Op.CONST_SHAPE, (), ("s",)),
            Operator(Op.RESHAPE, ("x", "s"), ("r",), location="loc(1:2)"),
            Operator(Op.CLAMP, ("r",), ("c",), ClampAttribute(b"\0\0\x80\xbf", b"\0\0\x80\x3f")),
            Operator(Op.CONV2D, ("c", "w"), ("y",), Conv2dAttribute((0, 0, 1, 1), (1, 1), (1, 1), True, DType.FP32)),
            Operator(Op.TRANSPOSE, ("y",), ("t",), TransposeAttribute((1, 0))),
            Operator(Op.RESCALE, ("q",), ("z",), RescaleAttribute(True, RoundingMode.DOUBLE_ROUND, True)),
            Operator(Op.COND_IF, ("b", "t"), ("o",), CondIfAttribute("then", "else")),
            Operator(Op.CUSTOM, ("o",), ("u",), CustomAttribute("op", "dom", b"\x01\x02\x03")),
        ),
        (
            Tensor("x", (2, 3), DType.FP32),
            Tensor("w", (2, 3), DType.FP32, f32),
            Tensor("q", (5,), DType.INT4, np.array([-8, -1, 0, 3, 7], np.int8)),
            Tensor("b", (), DType.BOOL, np.array(True)),
            Tensor("v", (3,), DType.INT48, np.array([-1, 2**40, 5], np.int64), variable=True, variable_name="v"),
            Tensor("h", (2,), DType.BF16, np.zeros(2, DType.BF16.numpy)),
            Tensor("e", (2,), DType.FP8E4M3, np.ones(2, DType.FP8E4M3.numpy)),
            Tensor("d", (-1, 4), DType.INT16, unranked=True),
            Tensor("s", (2,), DType.SHAPE, np.array([3, 2], np.int64)),
        ),
        ("x",),
        ("u", "z"),
    )
    then = Block("then", (Operator(Op.IDENTITY, ("a",), ("a2",)),), (Tensor("a", (3, 2), DType.FP32),), ("a",), ("a2",))
    return [
        Program((Region("main", (main,)), Region("then", (then,))), Version(1, 0, 2, True)),
        Program((Region("main", (Block("main", (), (), (), ()),)),)),
    ]


def _cts_seeds(limit: int = 12) -> list[bytes]:
    """A few small real conformance files, when a CTS cache from the round-trip tests exists."""
    if tosa_tools_venv() is None:
        return []
    root = Path(__file__).resolve().parents[2] / ".cache" / "cts"
    files = sorted(root.glob("*/operators/*/*/*/test.tosa"), key=lambda p: (p.stat().st_size, str(p)))
    picked = files[:: max(len(files) // limit, 1)][:limit] if files else []
    return [p.read_bytes() for p in picked if p.stat().st_size < 64 << 10]


SEEDS: list[bytes] = [write(p) for p in _seed_programs()] + _cts_seeds()


def _timed(fn, *args):
    """``fn(*args)`` and the CPU seconds this thread spent in it, with the garbage collector held off: a
    full collection of everything hypothesis keeps during a long run is not the code's cost."""
    gc.disable()
    start = time.thread_time()  # CPU time of this thread: a loaded machine must not make the bound flaky
    try:
        return fn(*args), time.thread_time() - start
    finally:
        gc.enable()


def _read(data: bytes):
    try:
        return read(data)
    except FormatError as exc:
        assert "internal decoder error" not in str(exc), str(exc)
        return None


def _validate(prog) -> None:
    try:
        validate(prog, TARGET)
    except ValidationError:
        pass


def check(data: bytes) -> bool:
    """The property: only FormatError escapes the reader and only ValidationError the validator, nothing
    slips through the reader's safety net, both are quick, and whatever reads also round-trips."""
    prog, elapsed = _timed(_read, data)
    assert elapsed < PER_INPUT_SECONDS, f"read took {elapsed:.2f} s of CPU on {len(data)} bytes"
    if prog is not None:
        assert read(write(prog)) == prog
        _, elapsed = _timed(_validate, prog)
        assert elapsed < PER_INPUT_SECONDS, f"validate took {elapsed:.2f} s of CPU"
    return prog is not None


@st.composite
def mutated(draw) -> bytes:
    data = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 4))):
        size = len(data)
        kind = draw(st.integers(0, 7))
        if size < 8:
            data += draw(st.binary(min_size=1, max_size=8))
            continue
        at = draw(st.integers(0, size - 1))
        if kind == 0:  # bit flip
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == 1:  # a byte
            data[at] = draw(st.integers(0, 255))
        elif kind == 2:  # a 32-bit field (offsets, lengths, soffsets), aligned
            at = min(at & ~3, size - 4)
            value = draw(st.sampled_from(BOUNDARY_U32) | st.integers(0, 2**32 - 1) | st.just(size))
            struct.pack_into("<I", data, at, value)
        elif kind == 3:  # a 16-bit field (vtable entries, sizes)
            at = min(at & ~1, size - 2)
            struct.pack_into(
                "<H", data, at, draw(st.sampled_from([0, 1, 2, 3, 4, 6, 0xFFFE, 0xFFFF]) | st.integers(0, 0xFFFF))
            )
        elif kind == 4:  # truncate
            del data[at:]
        elif kind == 5:  # splice random bytes in
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif kind == 6:  # delete a range
            del data[at : at + draw(st.integers(1, 32))]
        else:  # duplicate a range elsewhere
            length = draw(st.integers(1, 64))
            chunk = bytes(data[at : at + length])
            dest = draw(st.integers(0, size - 1))
            data[dest : dest + len(chunk)] = chunk
    return bytes(data)


random_bytes = st.binary(max_size=512) | st.binary(max_size=256).map(lambda b: b"\x0c\0\0\0TOSA" + b)
FUZZ_SETTINGS = dict(deadline=None, database=None, suppress_health_check=list(HealthCheck))


def test_seeds_are_valid():
    for seed in SEEDS:
        check(seed)
        read(seed)


@settings(max_examples=1000, **FUZZ_SETTINGS)
@given(random_bytes)
def test_random_bytes(data):
    check(data)


@settings(max_examples=3000, **FUZZ_SETTINGS)
@given(mutated())
def test_mutated_valid_files(data):
    check(data)


@pytest.mark.slow
@pytest.mark.skipif(LONG_EXAMPLES <= 0, reason="long fuzzing: set IRONACCEL_FUZZ_EXAMPLES (make fuzz-tosa)")
def test_fuzz_long(record_property):
    counts = {"inputs": 0, "read": 0}

    @settings(max_examples=LONG_EXAMPLES, **FUZZ_SETTINGS)
    @given(mutated() | random_bytes)
    def run(data):
        counts["inputs"] += 1
        counts["read"] += check(data)

    run()
    record_property("fuzz_inputs", counts["inputs"])
    print(f"\nfuzzed {counts['inputs']} inputs ({counts['read']} read as programs) from {len(SEEDS)} seeds")
