"""Where a planned program's tensors live (tosa/arena.py, shared by the Vulkan and CUDA planners): one arena
by liveness with views in their source's bytes, constants packed once with folded views in their bytes,
the static-shape refusal, RESHAPE / IDENTITY as a view or a copy; and the strides kernels walk
(tosa/strides.py)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from ironaccel.tosa import DType, Op, ProgramBuilder
from ironaccel.tosa.arena import ArenaLayout, Copy, Place, view_or_copy
from ironaccel.tosa.errors import LoweringError
from ironaccel.tosa.ir import Block, Program, Region, Tensor
from ironaccel.tosa.strides import broadcast_strides, coalesce, contiguous_strides


def _program():
    """x -> abs -> reshape (a view) + reshape(constant) (folded) -> y; a dead exp of x."""
    b = ProgramBuilder()
    x = b.input("x", (4,), DType.FP32)
    b.op(Op.EXP, [x])  # reaches no output
    r = b.reshape(b.op(Op.ABS, [x]), b.const_shape([2, 2]))
    c = b.const(np.arange(4, dtype=np.float32), DType.FP32)
    b.output(b.op(Op.ADD, [r, b.identity(b.reshape(c, b.const_shape([2, 2])))]))
    return b.build()


def test_tensors_live_in_the_arena_and_constants_fold_into_their_bytes():
    layout = ArenaLayout(_program(), 256, "Test")
    ops = [op for _, op in layout.live_operators()]
    assert Op.EXP not in {op.op for op in ops}
    absolute = next(op for op in ops if op.op is Op.ABS)
    view = next(op for op in ops if op.op is Op.RESHAPE and op.inputs[0] == absolute.outputs[0])
    assert layout.place(view.outputs[0]) == layout.place(absolute.outputs[0])
    assert layout.place(absolute.outputs[0]).buffer == "arena"
    add = next(op for op in ops if op.op is Op.ADD)
    folded = add.inputs[1]
    assert layout.constant_data(folded) is not None
    assert list(layout.constant_data(folded)) == [0, 1, 2, 3]
    assert layout.place(folded) == Place("const", 0, 16) == layout.upload(layout.constant_root(folded).name, None)
    assert len(layout.constants) == 1 and layout.const_top == 16
    assert layout.constant_data("x") is None and layout.constant_root("x") is None
    inputs, outputs = layout.io_places()
    assert inputs[0].buffer == outputs[0].buffer == "arena"
    assert layout.upload("another", np.zeros(3, np.int8)) == Place("const", 256, 3)  # aligned after the first
    assert layout.align(257) == 512


def test_a_tensor_without_a_static_shape_is_refused_naming_the_backend():
    block = Block("main", (), (Tensor("x", (-1,), DType.FP32),), ("x",), ("x",))
    with pytest.raises(LoweringError, match="tensor 'x' has no static shape; the Test backend needs static shapes"):
        ArenaLayout(Program((Region("main", (block,)),)), 256, "Test")


def test_reshape_is_nothing_when_a_view_and_a_copy_otherwise():
    a, b = Place("arena", 0, 16), Place("arena", 256, 16)
    tensors = (Tensor("s", (4,), DType.FP32), Tensor("d", (2, 2), DType.FP32))
    places = {"s": a, "d": a}
    ctx = SimpleNamespace(inputs=tensors[:1], outputs=tensors[1:], place=lambda t: places[t.name])
    assert view_or_copy(ctx) == []
    places["d"] = b
    (copy,) = view_or_copy(ctx)
    assert copy == Copy(a, b) and copy.reads == (a,) and copy.writes == (b,)
    places["d"] = Place("arena", 256, 0)
    assert view_or_copy(ctx) == []


def test_strides_of_broadcast_operands_coalesce():
    assert contiguous_strides((2, 3, 4)) == [12, 4, 1]
    assert broadcast_strides((1, 3, 1), (2, 3, 4)) == [0, 1, 0]
    assert coalesce((2, 3, 4), [contiguous_strides((2, 3, 4)), broadcast_strides((1, 3, 1), (2, 3, 4))]) == (
        (2, 3, 4),
        ((12, 4, 1), (0, 1, 0)),
    )
    assert coalesce((1, 4, 5, 3), [(60, 15, 3, 1), (12, 3, 0, 1)]) == ((4, 5, 3), ((15, 3, 1), (3, 0, 1)))
    assert coalesce((2, 3, 4), [(12, 4, 1)]) == ((24,), ((1,),))
