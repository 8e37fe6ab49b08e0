"""The CUDA backend's host side that needs no driver: plans (launches, copies, arena), the argument block,
the operator table and descriptor, device selectors, the CUresult mapping, and the registration (light to
read, and saying why no device opens here).
"""

from __future__ import annotations

import struct
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest

import ironaccel
from ironaccel.backends.cuda import driver, plan, prelude
from ironaccel.backends.cuda.binding import direct_addresses
from ironaccel.backends.cuda.capability import descriptor
from ironaccel.backends.cuda.device import Listed, choose
from ironaccel.backends.cuda.ops.common import Copy, Launch, Place, coalesce, pack
from ironaccel.backends.cuda.ops.elementwise import CTYPES
from ironaccel.backends.cuda.registration import REGISTRATION, why_not
from ironaccel.core.errors import DeviceLost, InvalidArgument, NativeError, OutOfMemory, Unsupported
from ironaccel.runtime.backends import AUTO_ORDER
from ironaccel.runtime.bindings import BoundRange
from ironaccel.tosa import DType, Op, ProgramBuilder
from ironaccel.tosa.capability import admit
from ironaccel.tosa.errors import LoweringError
from ironaccel.tosa.spec import operator as spec_of


def _chain():
    """y = exp((x + c) * (x + c)) reshaped, x: fp32[2, 3], c: a constant fp32[1, 3] broadcast over rows."""
    b = ProgramBuilder()
    x = b.input("x", (2, 3), DType.FP32)
    c = b.const(np.array([[1.0, 2.0, 3.0]], dtype=np.float32), DType.FP32)
    s = b.op(Op.ADD, [x, c])
    m = b.mul(s, s, 0)
    e = b.op(Op.EXP, [m])
    b.output(b.reshape(e, b.const_shape([6])))
    return b.build()


def test_a_small_program_lowers_to_its_launches_and_arena(monkeypatch):
    monkeypatch.setenv("IRONACCEL_CUDA_FUSION", "0")  # each operator's own launch (fusion: test_cuda_fusion.py)
    program = _chain()
    admit(program, descriptor())
    p = plan.build(program)
    names = [s.kernel.name for s in p.steps if isinstance(s, Launch)]
    assert names == ["ia_add_fp32", "ia_mul_fp32_v11", "ia_exp_fp32_v1"]  # contiguous ones take the _v variant
    assert isinstance(p.steps[-1], Copy)  # the reshape of an intermediate into the graph output
    add, mul, exp = p.launches
    assert add.count == 6 and add.dims == (2, 3) and add.strides == ((3, 1), (0, 1))  # c broadcast over rows
    assert mul.dims == (6,) and mul.strides == ((1,), (1,)) and mul.scalars == (0,)
    assert exp.reads == (mul.write,)
    # x, the three intermediates and y are 24 bytes each, 256-aligned. x and y hold their bytes for the
    # whole run (a run may bind the caller's buffers there); the sum [0, 1] and the exponential [2, 3] share
    # a place, and the product [1, 2], which overlaps both, takes a fourth.
    assert p.arena_bytes == 4 * plan.ALIGNMENT
    places = {p.inputs[0], p.outputs[0], mul.write, add.write}
    assert len(places) == 4 and add.write == exp.write
    assert p.const_bytes == plan.ALIGNMENT and len(p.constants) == 1
    assert add.reads[1] == Place("const", 0, 12)
    assert p.inputs[0].buffer == p.outputs[0].buffer == "arena"
    assert len(p.kernels) == 3


def test_views_and_constants_move_nothing(monkeypatch):
    monkeypatch.setenv("IRONACCEL_CUDA_FUSION", "0")
    b = ProgramBuilder()
    x = b.input("x", (4,), DType.FP32)
    t = b.op(Op.ABS, [x])
    r = b.reshape(t, b.const_shape([2, 2]))  # an intermediate's view: the same bytes
    c = b.reshape(b.const(np.arange(4, dtype=np.float32), DType.FP32), b.const_shape([2, 2]))  # folded
    b.output(b.op(Op.ADD, [r, c]))
    p = plan.build(b.build())
    assert [type(s).__name__ for s in p.steps] == ["Launch", "Launch"]
    absolute, add = p.launches
    assert add.reads[0] == absolute.write and add.reads[1].buffer == "const"


def test_planning_needs_no_driver():
    code = (
        "import sys; from ironaccel.backends.cuda import plan; "
        "from ironaccel.backends.cuda.capability import descriptor; "
        "from ironaccel.conformance.semantic import add_program; from ironaccel.tosa.codec import read; "
        "descriptor(); plan.build(read(add_program(4))); print(sorted(m for m in sys.modules if m.startswith('cuda')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_what_the_table_cannot_lower_is_refused_naming_the_operator():
    b = ProgramBuilder()
    x = b.input("x", (1, 4, 8), DType.FP32)
    for part in b.rfft2d(x):  # no kernel computes a Fourier transform
        b.output(part)
    with pytest.raises(LoweringError, match=r"operator #0 RFFT2D: the CUDA backend has no lowering"):
        plan.build(b.build())


def test_the_argument_block_has_the_prelude_s_layout():
    launch = Launch(
        plan.build(_chain()).launches[0].kernel,
        (Place("arena", 0, 24), Place("const", 256, 12)),
        Place("arena", 512, 24),
        6,
        (2, 3),
        ((3, 1), (0, 1)),
        (7,),
    )
    bases = {"arena": 0x10000, "const": 0x20000}
    words = struct.unpack(f"<{prelude.ARG_WORDS}q", pack(launch, lambda p: bases[p.buffer] + p.offset))
    assert len(words) == prelude.ARG_WORDS == 46
    assert words[:4] == (0x10000, 0x20100, 0, 0x10200) and words[4:6] == (6, 2)
    assert words[6:12] == (2, 3, 1, 1, 1, 1)
    assert words[12:18] == (3, 1, 0, 0, 0, 0) and words[18:24] == (0, 1, 0, 0, 0, 0)
    assert words[30:] == (7,) + (0,) * 15
    assert "long long scalars[IA_SCALARS];" in prelude.ARGS  # the last field, as packed


def test_coalescing_merges_what_every_operand_walks_contiguously():
    assert coalesce((1, 4, 5, 3), [(60, 15, 3, 1), (12, 3, 0, 1)]) == ((4, 5, 3), ((15, 3, 1), (3, 0, 1)))
    assert coalesce((2, 3, 4), [(12, 4, 1), (12, 4, 1)]) == ((24,), ((1,), (1,)))
    assert coalesce((1, 1), [(1, 1)]) == ((), ((),))


def test_the_descriptor_is_the_table_and_only_what_tosa_defines():
    d = descriptor()
    assert {DType.FP32, DType.FP16, DType.BF16, DType.INT32, DType.INT8, DType.BOOL} <= d.dtypes <= set(CTYPES)
    assert d.max_rank == prelude.MAX_RANK
    for op, support in d.operators.items():
        rows = [dict(r.types) for r in spec_of(op).typesupport]
        for sig in support.signatures or ():
            assert any(sig.matches(row) for row in rows), f"{op.name} ({sig}) is no signature of TOSA 1.0"
    assert {Op.ADD, Op.MUL, Op.CAST, Op.CLAMP, Op.RESHAPE, Op.CONST} <= set(d.operators)


def test_a_selector_is_an_index_a_uuid_or_part_of_a_name():
    devices = [Listed(0, "NVIDIA Graphics Card", bytes(range(16))), Listed(1, "Other Card", bytes(range(1, 17)))]
    assert choose(devices, None) is devices[0] and choose(devices, " 1 ") is devices[1]
    assert choose(devices, "other") is devices[1]
    uuid = bytes(range(1, 17)).hex()
    assert choose(devices, uuid) is devices[1]
    assert choose(devices, f"GPU-{uuid[:8]}-{uuid[8:12]}-{uuid[12:16]}-{uuid[16:20]}-{uuid[20:]}") is devices[1]
    with pytest.raises(InvalidArgument, match="ambiguous"):
        choose(devices, "card")
    with pytest.raises(Unsupported, match="no CUDA device matches '7'"):
        choose(devices, "7")
    with pytest.raises(Unsupported, match="lists no device"):
        choose([], None)


def test_cuda_results_map_to_the_error_vocabulary():
    assert isinstance(driver.error(2, "CUDA_ERROR_OUT_OF_MEMORY", "cuMemAlloc"), OutOfMemory)
    assert isinstance(driver.error(1, "CUDA_ERROR_INVALID_VALUE", "x"), InvalidArgument)
    for name in ("CUDA_ERROR_ILLEGAL_ADDRESS", "CUDA_ERROR_LAUNCH_FAILED", "CUDA_ERROR_ECC_UNCORRECTABLE"):
        assert isinstance(driver.error(700, name, "x"), DeviceLost)
    assert isinstance(driver.error(100, "CUDA_ERROR_NO_DEVICE", "cuInit"), Unsupported)
    other = driver.error(999, "CUDA_ERROR_UNKNOWN", "cuCtxSynchronize")
    assert isinstance(other, NativeError) and other.domain == "cuda" and other.code == 999

    class Status(int):
        name = "CUDA_ERROR_OUT_OF_MEMORY"

    assert driver.check((0, 5), "x") == 5 and driver.check((0,), "x") is None and driver.check((0, 1, 2), "x") == (1, 2)
    with pytest.raises(OutOfMemory, match=r"cuMemAlloc\(64\): CUDA_ERROR_OUT_OF_MEMORY \(2\)"):
        driver.check((Status(2), None), "cuMemAlloc(64)")


def test_the_registration_is_light_and_auto_tries_it_before_vulkan():
    code = (
        "import sys; import ironaccel.backends.cuda; from ironaccel.backends.cuda.registration import REGISTRATION; "
        "print(sorted(m for m in sys.modules if m.startswith(('cuda', 'ironaccel.backends.cuda.'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['ironaccel.backends.cuda.registration']"
    assert REGISTRATION.name == REGISTRATION.family == "cuda" and not REGISTRATION.one_device
    # "auto" tries it before Vulkan: on NVIDIA hardware it is the vendor's own path.
    assert REGISTRATION.auto_rank is not None and tuple(AUTO_ORDER).index("cuda") < tuple(AUTO_ORDER).index("vulkan")


def test_where_no_device_opens_the_reason_is_clear_and_auto_still_opens_one():
    reason = why_not()
    if reason is None:
        pytest.skip("a CUDA device opens here (the gpu tests cover it)")
    assert "cuda" in reason.lower() or "libcuda" in reason
    with pytest.raises(Unsupported) as caught:
        ironaccel.open("cuda")
    message = str(caught.value)
    assert "CUDA" in message and ("libcuda.so.1" in message or "cuda-bindings" in message), message
    with ironaccel.open("auto") as dev:
        assert dev.info.kind != "cuda"


def _ranges(p, bases, lengths=None, host=0):
    """Bound ranges over stand-in buffers at ``bases``, one per input then output, each whole; ``host`` is
    every buffer's host address (0: device memory)."""
    places = (*p.inputs, *p.outputs)[: len(bases)]
    lengths = lengths or [pl.size for pl in places]
    return [
        BoundRange(slot, SimpleNamespace(device=base, host=host), 0, length, None, None)
        for slot, (base, length) in enumerate(zip(bases, lengths, strict=True))
    ]


def test_aligned_whole_ranges_stand_in_for_the_io_places():
    p = plan.build(_chain())
    loaded = lambda place: {"arena": 0x100000, "const": 0x200000}[place.buffer] + place.offset  # noqa: E731
    direct = direct_addresses(p, _ranges(p, [0x400000, 0x500000]), loaded)
    assert direct is not None and direct[1] == {0, 1}
    address = direct[0]
    assert address(p.inputs[0]) == 0x400000 and address(p.outputs[0]) == 0x500000
    add = p.launches[0]
    assert address(add.write) == 0x100000 + add.write.offset  # intermediates stay in the arena
    assert address(add.reads[1]) == 0x200000  # and constants in theirs


def test_ranges_that_cannot_stand_in_leave_the_run_copying():
    p = plan.build(_chain())
    loaded = lambda place: place.offset  # noqa: E731
    assert direct_addresses(p, _ranges(p, [0x400010, 0x500000]), loaded) is None  # misaligned
    assert direct_addresses(p, _ranges(p, [0x400000, 0x400000]), loaded) is None  # the output overlaps the input
    assert direct_addresses(p, _ranges(p, [0x400000, 0x500000], [12, 24]), loaded) is None  # not whole
    assert direct_addresses(p, _ranges(p, [0x400000]), loaded) is None  # the output not bound
    # pinned host memory mapped into the device: kernels would read it across the bus, so the run copies it
    assert direct_addresses(p, _ranges(p, [0x400000, 0x500000], host=0x7F0000000000), loaded) is None


def test_ranges_in_host_memory_are_copied_while_device_ranges_stand_in():
    p = plan.build(_chain())
    loaded = lambda place: 0x100000 + place.offset  # noqa: E731
    x, y = _ranges(p, [0x7F0000000000, 0x500000])
    x = BoundRange(x.slot, SimpleNamespace(device=0x7F0000000000, host=0x7F0000000000), 0, x.length, None, None)
    address, in_place = direct_addresses(p, [x, y], loaded)
    assert in_place == {1}
    assert address(p.inputs[0]) == 0x100000 + p.inputs[0].offset  # x is copied into its arena place
    assert address(p.outputs[0]) == 0x500000
