"""The validator on hand-built programs: spec tables, targets, generic checks and every operator rule
of the tensor, activation, element-wise, comparison and reduction groups (valid case + each ERROR_IF)."""

from __future__ import annotations

import contextlib
import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ironaccel.core.errors import InvalidArgument
from ironaccel.tosa import Block, DType, Op, Operator, Program, Region, Tensor, Version
from ironaccel.tosa.attributes import (
    ArgMaxAttribute,
    AvgPool2dAttribute,
    ClampAttribute,
    CondIfAttribute,
    Conv2dAttribute,
    Conv3dAttribute,
    DepthwiseConv2dAttribute,
    MaximumAttribute,
    MaxPool2dAttribute,
    NanPropagationMode,
    ReduceMaxAttribute,
    ReduceSumAttribute,
    TransposeConv2dAttribute,
    WhileLoopAttribute,
)
from ironaccel.tosa.errors import ValidationError
from ironaccel.tosa.ops.rule import LEVEL_8K, LEVEL_NONE, RULES, TensorType, rule_for
from ironaccel.tosa.spec import Expr, load, operator
from ironaccel.tosa.target import DEFAULT_TARGET, MAGIC, Extension, Profile, Target
from ironaccel.tosa.validate import check, infer, validate
from tosa_fixtures import tosa_programs

FP = Target.of(["pro-fp"], [])
INT = Target.of(["pro-int"], [])
INT_8K = Target.of(["pro-int"], [], "8k")


# -- building programs ---------------------------------------------------------------------------------
def t(name: str, shape, dtype="fp32") -> Tensor:
    return Tensor(name, tuple(shape), DType.parse(dtype))


def c(name: str, values, dtype="fp32", shape=None) -> Tensor:
    """A constant (produced by CONST, or CONST_SHAPE for dtype shape)."""
    d = DType.parse(dtype)
    arr = np.asarray(values, dtype=d.numpy)
    if shape is not None:
        arr = arr.reshape(shape)
    return Tensor(name, arr.shape, d, arr)


def graph(op: Op, inputs, outputs, attribute=None, *, name="main") -> Block:
    """One operator; constant inputs get CONST ops, the other inputs are graph inputs."""
    ops = [
        Operator(Op.CONST_SHAPE if x.dtype is DType.SHAPE else Op.CONST, (), (x.name,)) for x in inputs if x.is_constant
    ]
    ops.append(Operator(op, tuple(x.name for x in inputs), tuple(x.name for x in outputs), attribute))
    tensors = {x.name: x for x in (*inputs, *outputs)}
    graph_inputs = tuple(x.name for x in inputs if not x.is_constant)
    return Block(name, ops, tuple(tensors.values()), graph_inputs, tuple(x.name for x in outputs))


V102 = Version(1, 0, 2)


def program(*blocks: Block, version: Version = V102) -> Program:
    return Program(tuple(Region(b.name, (b,)) for b in blocks), version)


def single(op: Op, inputs, outputs, attribute=None) -> Program:
    return program(graph(op, inputs, outputs, attribute))


def invalid(prog: Program, fragment: str, target: Target | None = None, *, unpredictable: bool = False):
    with pytest.raises(ValidationError) as info:
        validate(prog, target)
    assert fragment in info.value.rule, info.value
    assert info.value.unpredictable is unpredictable, info.value
    return info.value


def zp(name: str, dtype: str, value=0) -> Tensor:
    return c(name, [value], dtype)


# -- specification tables ------------------------------------------------------------------------------
def test_spec_tables_load_typed_records():
    spec = load()
    assert len(spec.operators) == 75 and spec.version == (1, 0, 2)
    assert spec.levels["8K"] == LEVEL_8K and spec.levels["none"] == LEVEL_NONE
    assert spec.extensions[Extension.BF16] == {Profile.FP}
    assert spec.extensions[Extension.VARIABLE] == {Profile.INT, Profile.FP}
    conv = operator(Op.CONV2D)
    assert [a.name for a in conv.inputs] == ["input", "weight", "bias", "input_zp", "weight_zp"]
    assert [a.name for a in conv.attributes] == ["pad", "stride", "dilation", "acc_type", "local_bound"]
    assert conv.inputs[0].dims == ("N", "IH", "IW", "IC") and conv.inputs[3].ctc
    row = conv.typesupport[0]
    assert row.types == {"in_t": DType.INT8, "weight_t": DType.INT8, "out_t": DType.INT32, "acc_t": DType.INT32}
    assert row.enabled_by == (frozenset({Profile.INT}),)
    table = operator(Op.TABLE).typesupport[1]
    assert table.values == {"TABLE_SIZE": 513} and table.requirements == {Extension.INT16}
    var = operator(Op.VARIABLE).typesupport[1]
    assert var.enabled_by == (frozenset({Profile.FP, Extension.VARIABLE}),)
    assert not var.enabled(frozenset({Profile.FP})) and var.enabled(frozenset({Profile.FP, Extension.VARIABLE}))
    assert operator(Op.ARGMAX).outputs[0].rank_bounds(LEVEL_8K) == (0, 5, True)
    assert operator(Op.CONCAT).inputs[0].is_list


def test_expressions_of_the_tables():
    assert Expr("W/2 + 1").evaluate({"W": 9}) == 5
    assert Expr("2*rank(shape1)").evaluate({"shape1": (3, 4)}) == 4
    assert Expr("scale_y_n/scale_y_d").evaluate({"scale_y_n": 3, "scale_y_d": 2}, exact=True) == 1.5
    assert Expr("dilation_y * KH").evaluate({"KH": 3}) is None
    with pytest.raises(ValueError):
        Expr("__import__('os')")


# -- targets -------------------------------------------------------------------------------------------
def test_default_target_is_all_of_tosa_1_0():
    words = DEFAULT_TARGET.encode()
    assert words == (MAGIC, 1, 1, 0, 2, 3, 0, 0x7FF, 0, 0, 0, 0)
    assert Target.decode(words) == DEFAULT_TARGET
    assert Target.of(["pro-fp"], ["tosa-ext-bf16"], "8k").encode()[5:9] == (2, 1, 1 << 2, 0)
    assert Extension.parse("control_flow") is Extension.CONTROLFLOW and Extension.INEXACTROUND.bit == 1 << 10
    assert Profile.parse("tosa-pro-int") is Profile.INT


@st.composite
def targets(draw):
    profiles = draw(st.sets(st.sampled_from(list(Profile)), min_size=1))
    allowed = [e for e in Extension if e.profiles & profiles]
    extensions = draw(st.sets(st.sampled_from(allowed)))
    level = draw(st.sampled_from([LEVEL_NONE, LEVEL_8K]))
    return Target(frozenset(profiles), frozenset(extensions), level, (1, 0, draw(st.integers(0, 0xFFFF))))


@given(targets())
def test_target_round_trip(target):
    words = target.encode()
    assert len(words) == 12 and all(0 <= w <= 0xFFFFFFFF for w in words)
    assert Target.decode(words) == target


@pytest.mark.parametrize(
    ("index", "value", "fragment"),
    [
        (0, 0x41534F54, "magic"),
        (1, 2, "ABI"),
        (2, 2, "not 1.0"),
        (4, 0x10000, "out of range"),
        (5, 0, "profile bits"),
        (5, 4, "profile bits"),
        (6, 2, "level"),
        (7, 1 << 11, "extension bits"),
        (8, 1, "extension bits"),
        (10, 1, "reserved"),
        (3, -1, "u32"),
    ],
)
def test_target_decode_refuses(index, value, fragment):
    words = list(DEFAULT_TARGET.encode())
    words[index] = value
    with pytest.raises(InvalidArgument, match=fragment):
        Target.decode(words)


def test_target_pairing_rules():
    with pytest.raises(InvalidArgument, match="EXT-BF16 extends PRO-FP"):
        Target.of(["pro-int"], ["bf16"])
    with pytest.raises(InvalidArgument, match="at least one profile"):
        Target(frozenset(), frozenset())
    with pytest.raises(InvalidArgument, match="12 words, got 11"):
        Target.decode(DEFAULT_TARGET.encode()[:11])
    words = list(Target.of(["pro-int"], []).encode())
    words[7] = Extension.FFT.bit
    with pytest.raises(InvalidArgument, match="EXT-FFT"):
        Target.decode(words)
    assert Target.of(["pro-int"], ["variable", "dynamic", "int16"]).allows(Extension.INT16)


# -- generic checks ------------------------------------------------------------------------------------
def add_program(dtype="fp32", a=(2, 3), b=(2, 3), out=(2, 3)) -> Program:
    return single(Op.ADD, [t("a", a, dtype), t("b", b, dtype)], [t("y", out, dtype)])


def test_valid_program():
    validate(add_program())
    validate(add_program("int32"), INT)
    assert check(add_program()) == []


def test_version_and_structure():
    prog = add_program()
    invalid(Program(prog.regions, Version(1, 1, 0)), "not TOSA 1.0")
    invalid(Program(()), "no blocks")
    block = prog.main
    bad_input = Block("main", block.operators, block.tensors, ("a", "b", "zz"), block.outputs)
    invalid(Program((Region("main", (bad_input,)),)), "'zz' is not a tensor")
    twice = Block("main", (*block.operators, block.operators[0]), block.tensors, block.inputs, block.outputs)
    invalid(Program((Region("main", (twice,)),)), "already produced by operator #0")
    over = Block("main", (Operator(Op.ADD, ("a", "b"), ("a",)),), block.tensors, block.inputs, ("a",))
    invalid(Program((Region("main", (over,)),)), "writes a graph input")
    unread = Block("main", block.operators, (*block.tensors, t("q", (2, 3))), block.inputs, block.outputs)
    unread = Block("main", (Operator(Op.ADD, ("a", "q"), ("y",)),), unread.tensors, unread.inputs, unread.outputs)
    invalid(Program((Region("main", (unread,)),)), "'q' is never produced")
    missing = Block("main", block.operators, block.tensors, block.inputs, ("y", "nope"))
    invalid(Program((Region("main", (missing,)),)), "graph output 'nope'")
    loop = Block(
        "main",
        (Operator(Op.ADD, ("a", "z"), ("y",)), Operator(Op.ADD, ("a", "y"), ("z",))),
        (*block.tensors, t("z", (2, 3))),
        ("a",),
        ("y",),
    )
    invalid(Program((Region("main", (loop,)),)), "cycle")


def test_argument_counts_kinds_and_ranks():
    invalid(single(Op.ADD, [t("a", (2,))], [t("y", (2,))]), "takes 2 inputs (input1, input2), got 1")
    invalid(single(Op.ADD, [t("a", (2,)), t("b", (2,))], []), "takes 1 outputs")
    invalid(single(Op.ADD, [t("a", (2,)), c("b", [2], "shape")], [t("y", (2,))]), "must be a tensor, not a shape_t")
    conv = single(
        Op.CONV2D,
        [t("x", (1, 4, 4)), t("w", (2, 1, 1, 4)), c("b", [0, 0]), zp("izp", "fp32"), zp("wzp", "fp32")],
        [t("y", (1, 4, 4, 2))],
        Conv2dAttribute((0, 0, 0, 0), (1, 1), (1, 1), False, DType.FP32),
    )
    invalid(conv, "input must have rank 4")
    deep = add_program("int32", (1,) * 7, (1,) * 7, (1,) * 7)
    validate(deep, INT)
    invalid(deep, "level 8K: input1 rank 7 exceeds 6", INT_8K, unpredictable=True)
    blk = graph(Op.ADD, [t("a", (2,)), t("b", (2,))], [t("y", (2,))], ArgMaxAttribute())
    invalid(program(blk), "ArgMaxAttribute is not the attribute of ADD")


def test_shapes_of_the_argument_tables():
    invalid(add_program(b=(2, 3, 1)), "ranks differ")
    err = invalid(
        single(
            Op.MATMUL, [t("a", (1, 2, 3)), t("b", (2, 4, 5)), zp("az", "fp32"), zp("bz", "fp32")], [t("y", (1, 2, 5))]
        ),
        "B dimension 0 (N) is 2 but N = 1 from A",
    )
    assert err.op == "MATMUL" and err.tensor == "b" and err.op_index == 2
    invalid(single(Op.FFT2D, [t("r", (1, 4, 4)), t("i", (1, 4, 2))], [t("o", (1, 4, 4)), t("p", (1, 4, 4))]), "(W)")
    invalid(add_program(out=(2, 4)), "has shape [2,4] but the operator computes [2,3]")
    dims = add_program(a=(2, 0), b=(2, 0), out=(2, 0))
    invalid(dims, "dimensions must be >= 1")
    dynamic = add_program(a=(2, -1), b=(2, 3), out=(2, 3))
    validate(dynamic)
    invalid(dynamic, "needs EXT-DYNAMIC", FP)
    shape_in = Block("main", (), (c("s", [1], "shape"),), ("s",), ("s",))
    invalid(program(shape_in), "graph inputs may not be shape_t")


def test_element_types_profiles_and_extensions():
    invalid(
        single(Op.ADD, [t("a", (2,)), t("b", (2,), "fp16")], [t("y", (2,))]),
        "input2 is fp16 but input1 is fp32 (both in_out_t)",
    )
    invalid(add_program("int8"), "unsupported type combination in_out_t=int8")
    validate(add_program("int32"), FP)  # shape arithmetic: int32 ADD is in both profiles
    abs_i32 = single(Op.ABS, [t("x", (2,), "int32")], [t("y", (2,), "int32")])
    invalid(abs_i32, "signed 32 needs PRO-INT, which the target (PRO-FP level none) does not enable", FP)
    invalid(add_program("bf16"), "bf16 needs EXT-BF16", FP)
    validate(add_program("bf16"), Target.of(["pro-fp"], ["bf16"]))
    invalid(add_program("fp32"), "needs PRO-FP", INT)
    validate(single(Op.LOGICAL_LEFT_SHIFT, [t("a", (2,), "int8"), t("b", (2,), "int8")], [t("y", (2,), "int8")]), FP)
    var = program(Block("main", (Operator(Op.VARIABLE, (), ()),), (), (), ()))
    if rule_for(Op.VARIABLE) is None:  # the generic check alone: both profile and extension are needed
        invalid(var, "PRO-FP and EXT-VARIABLE", FP)


def test_compile_time_constants_and_levels():
    x, w, b = t("x", (1, 4, 4, 1)), c("w", np.ones((2, 1, 1, 1))), c("b", [0, 0])
    attr = Conv2dAttribute((0, 0, 0, 0), (1, 1), (1, 1), False, DType.FP32)
    dynamic_zp = single(Op.CONV2D, [x, w, b, t("izp", (1,)), zp("wzp", "fp32")], [t("y", (1, 4, 4, 2))], attr)
    invalid(dynamic_zp, "input_zp must be a compile-time constant", FP)
    validate(dynamic_zp, Target.of(["pro-fp"], ["dynamic"]))
    big_stride = Conv2dAttribute((0, 0, 0, 0), (9000, 1), (1, 1), False, DType.FP32)
    tall = t("x", (1, 9001, 1, 1))
    prog = single(Op.CONV2D, [tall, w, b, zp("izp", "fp32"), zp("wzp", "fp32")], [t("y", (1, 2, 1, 2))], big_stride)
    validate(prog, FP)
    invalid(
        prog, "level 8K: stride_y = 9000 exceeds MAX_STRIDE = 8192", Target.of(["pro-fp"], [], "8k"), unpredictable=True
    )
    huge = add_program("int32", (2**16, 2**14), (2**16, 2**14), (2**16, 2**14))
    validate(huge, INT)
    invalid(huge, "MAX_LOG2_SIZE", INT_8K, unpredictable=True)


def test_check_collects_every_problem():
    blk = Block(
        "main",
        (Operator(Op.ADD, ("a", "b"), ("y",)), Operator(Op.SUB, ("a", "b"), ("z",))),
        (t("a", (2,)), t("b", (3,)), t("y", (2,)), t("z", (2,))),
        ("a", "b"),
        ("y", "z"),
    )
    errors = check(program(blk))
    assert [(e.op_index, e.op) for e in errors] == [(0, "ADD"), (1, "SUB")]


# -- control flow interfaces ---------------------------------------------------------------------------
def cond_if(then_out=(2,), cond_shape=(1,), else_name="else", then_in=(2,)) -> Program:
    main = Block(
        "main",
        (Operator(Op.COND_IF, ("c", "a"), ("y",), CondIfAttribute("then", else_name)),),
        (t("c", cond_shape, "bool"), t("a", (2,)), t("y", (2,))),
        ("c", "a"),
        ("y",),
    )
    then = graph(Op.ABS, [t("a", then_in)], [t("r", then_out)], name="then")
    other = graph(Op.NEGATE, [t("a", (2,)), zp("z1", "fp32"), zp("z2", "fp32")], [t("r", (2,))], name="else")
    return program(main, then, other)


def test_cond_if_interfaces():
    validate(cond_if())
    invalid(cond_if(), "needs EXT-CONTROLFLOW", FP)
    invalid(cond_if(else_name="missing"), "else_graph 'missing' names no block")
    invalid(cond_if(then_in=(3,), then_out=(3,)), "input_list #0 is fp32[2] but then_graph 'then' inputs #0")
    invalid(cond_if(cond_shape=(2,)), "exactly one element")


def while_loop(cond_dtype="bool", body="body") -> Program:
    main = Block(
        "main",
        (Operator(Op.WHILE_LOOP, ("i",), ("o",), WhileLoopAttribute("cond", body)),),
        (t("i", (), "int32"), t("o", (), "int32")),
        ("i",),
        ("o",),
    )
    cond = graph(Op.GREATER, [t("i", (), "int32"), c("k", 0, "int32")], [t("r", (), cond_dtype)], name="cond")
    loop = graph(Op.SUB, [t("i", (), "int32"), c("one", 1, "int32")], [t("n", (), "int32")], name="body")
    return program(main, cond, loop)


def test_while_loop_interfaces_and_nesting():
    validate(while_loop(), Target.of(["pro-int"], ["controlflow"]))
    invalid(while_loop(cond_dtype="int32"), "cond_graph 'cond' must output one bool element")
    invalid(while_loop(body="main"), "recursive graph")
    validate(nested(6), Target.of(["pro-fp"], ["controlflow"], "8k"))
    invalid(nested(7), "nesting depth 6 reaches MAX_NESTING = 6", Target.of(["pro-fp"], ["controlflow"], "8k"))
    validate(nested(7))


def nested(depth: int) -> Program:
    """COND_IFs nested ``depth`` deep (main holds the first); inner conditions are constants."""
    blocks = []
    for i in range(depth):
        op = Operator(Op.COND_IF, ("c", "a"), ("y",), CondIfAttribute(f"g{i + 1}", f"g{i + 1}"))
        if i == 0:
            blocks.append(Block("main", (op,), (t("c", (), "bool"), t("a", (2,)), t("y", (2,))), ("c", "a"), ("y",)))
        else:
            const = Operator(Op.CONST, (), ("c",))
            tensors = (c("c", True, "bool"), t("a", (2,)), t("y", (2,)))
            blocks.append(Block(f"g{i}", (const, op), tensors, ("a",), ("y",)))
    blocks.append(graph(Op.ABS, [t("a", (2,))], [t("y", (2,))], name=f"g{depth}"))
    return program(*blocks)


# -- inference for builders ----------------------------------------------------------------------------
def test_infer():
    conv = Conv2dAttribute((1, 1, 1, 1), (2, 2), (1, 1), False, DType.FP32)
    x, w, b = TensorType((1, 9, 9, 3), DType.FP32), TensorType((8, 3, 3, 3), DType.FP32), TensorType((8,), DType.FP32)
    zero = np.zeros(1, np.float32)
    shapes = infer(
        Op.CONV2D,
        conv,
        [x, w, b, TensorType((1,), DType.FP32), TensorType((1,), DType.FP32)],
        [None] * 3 + [zero, zero],
    )
    assert shapes == [(1, 5, 5, 8)]
    assert infer("add", None, [TensorType((1, 3), DType.FP32), TensorType((4, 1), DType.FP32)]) == [(4, 3)]
    assert infer(Op.ADD, None, [TensorType((-1, 3), DType.FP32), TensorType((1, 3), DType.FP32)]) == [(-1, 3)]
    with pytest.raises(ValidationError, match="takes 2 inputs"):
        infer(Op.ADD, None, [TensorType((3,), DType.FP32)])


def test_infer_without_a_rule_uses_the_tables(monkeypatch):
    rule_for(Op.FFT2D)
    monkeypatch.delitem(RULES, Op.FFT2D)
    real = TensorType((2, 8, 4), DType.FP32)
    assert infer(Op.FFT2D, None, [real, real]) == [(2, 8, 4), (2, 8, 4)]
    prog = single(Op.FFT2D, [t("r", (1, 3, 4)), t("i", (1, 3, 4))], [t("o", (1, 3, 4)), t("p", (1, 3, 4))])
    validate(prog)  # generic checks only: H = 3 is not caught without the rule


# -- tensor operators ----------------------------------------------------------------------------------
def pool(op: Op, kernel=(2, 2), stride=(2, 2), pad=(0, 0, 0, 0), x=(1, 4, 4, 3), y=(1, 2, 2, 3), dtype="fp32", izp=0):
    if op is Op.AVG_POOL2D:
        acc = {"int8": DType.INT32, "int16": DType.INT32}.get(dtype, DType.FP32)
        attr = AvgPool2dAttribute(kernel, stride, pad, acc)
        ins = [t("x", x, dtype), zp("izp", dtype, izp), zp("ozp", dtype)]
    else:
        attr, ins = MaxPool2dAttribute(kernel, stride, pad), [t("x", x, dtype)]
    return single(op, ins, [t("y", y, dtype)], attr)


@pytest.mark.parametrize("op", [Op.AVG_POOL2D, Op.MAX_POOL2D])
def test_pooling(op):
    validate(pool(op))
    validate(pool(op, kernel=(3, 3), stride=(1, 1), pad=(1, 1, 1, 1), y=(1, 4, 4, 3)))
    invalid(pool(op, kernel=(0, 2), y=(1, 3, 2, 3)), "kernel values must be >= 1")
    invalid(pool(op, stride=(0, 2)), "stride values must be >= 1")
    invalid(pool(op, pad=(-1, 0, 0, 0)), "pad values must be >= 0")
    invalid(pool(op, pad=(0, 0, 2, 0), y=(1, 2, 3, 3)), "pad_left / pad_right must be < kernel_x")
    invalid(pool(op, kernel=(3, 3), y=(1, 1, 1, 3)), "OH: 1 is not a multiple of the stride 2")
    invalid(pool(op, y=(1, 3, 2, 3)), "computes [1,2,2,3]")
    invalid(pool(op, kernel=(2,)), "kernel must have 2 values")


def test_avg_pool_zero_points():
    validate(pool(Op.AVG_POOL2D, dtype="int8", izp=-3), INT)
    invalid(pool(Op.AVG_POOL2D, dtype="int16", izp=1), "input_zp must be 0 for int16")
    invalid(pool(Op.AVG_POOL2D, dtype="fp32", izp=1), "input_zp must be 0 for fp32")
    max_nan = single(
        Op.MAX_POOL2D,
        [t("x", (1, 2, 2, 1))],
        [t("y", (1, 1, 1, 1))],
        MaxPool2dAttribute((2, 2), (2, 2), (0, 0, 0, 0), NanPropagationMode.UNKNOWN),
    )
    invalid(max_nan, "nan_mode 0")


def conv2d(
    pad=(0, 0, 0, 0),
    stride=(1, 1),
    dil=(1, 1),
    x=(1, 5, 5, 2),
    w=(4, 3, 3, 2),
    bias=4,
    y=(1, 3, 3, 4),
    *,
    dtype="fp32",
    wdtype=None,
    izp=0,
    wzp=0,
    acc=DType.FP32,
):
    wdtype = wdtype or dtype
    out = {"int8": "int32", "int16": "int48"}.get(dtype, dtype)
    ins = [
        t("x", x, dtype),
        c("w", np.zeros(w), wdtype),
        c("b", np.zeros(bias), out),
        zp("izp", dtype, izp),
        zp("wzp", wdtype, wzp),
    ]
    return single(Op.CONV2D, ins, [t("y", y, out)], Conv2dAttribute(pad, stride, dil, False, acc))


def test_conv2d():
    validate(conv2d())
    validate(conv2d(stride=(2, 2), pad=(1, 1, 1, 1), y=(1, 3, 3, 4), bias=1))
    validate(conv2d(dtype="int8", izp=5, wzp=-2, acc=DType.INT32), INT)
    validate(conv2d(dtype="int8", wdtype="int4", acc=DType.INT32), Target.of(["pro-int"], ["int4"]))
    invalid(conv2d(dtype="int8", wdtype="int4", wzp=1, acc=DType.INT32), "weight_zp must be 0 for int4")
    invalid(conv2d(pad=(-1, 0, 0, 0)), "pad values must be >= 0")
    invalid(conv2d(stride=(0, 1)), "stride values must be >= 1")
    invalid(conv2d(dil=(1, 0)), "dilation values must be >= 1")
    invalid(conv2d(stride=(3, 1), y=(1, 1, 3, 4)), "OH: 2 is not a multiple of the stride 3")
    invalid(conv2d(bias=3), "bias has 3 channels; must be 4")
    invalid(conv2d(izp=1), "input_zp must be 0 for fp32")
    invalid(conv2d(acc=DType.INT32), "unsupported type combination")
    invalid(conv2d(y=(1, 3, 3, 5)), "output dimension 3 (OC) is 5 but OC = 4")
    invalid(conv2d(w=(4, 3, 3, 3)), "weight dimension 3 (IC) is 3 but IC = 2")
    invalid(conv2d(dil=(3, 3), y=(1, 1, 1, 4)), "OH would be -1")


def test_conv3d_and_depthwise():
    attr3 = Conv3dAttribute((0,) * 6, (1, 1, 1), (1, 1, 1), False, DType.FP32)
    ins = [
        t("x", (1, 3, 4, 4, 2)),
        c("w", np.zeros((5, 2, 2, 2, 2))),
        c("b", np.zeros(5)),
        zp("a", "fp32"),
        zp("b2", "fp32"),
    ]
    validate(single(Op.CONV3D, ins, [t("y", (1, 2, 3, 3, 5))], attr3))
    invalid(single(Op.CONV3D, ins, [t("y", (1, 3, 3, 3, 5))], attr3), "computes [1,2,3,3,5]")
    bad = Conv3dAttribute((0,) * 4, (1, 1, 1), (1, 1, 1), False, DType.FP32)
    invalid(single(Op.CONV3D, ins, [t("y", (1, 2, 3, 3, 5))], bad), "pad must have 6 values")
    dw = DepthwiseConv2dAttribute((0, 0, 0, 0), (1, 1), (1, 1), False, DType.FP32)
    ins = [t("x", (1, 4, 4, 3)), c("w", np.zeros((2, 2, 3, 2))), c("b", np.zeros(6)), zp("a", "fp32"), zp("b2", "fp32")]
    validate(single(Op.DEPTHWISE_CONV2D, ins, [t("y", (1, 3, 3, 6))], dw))
    ins[2] = c("b", np.zeros(3))
    invalid(single(Op.DEPTHWISE_CONV2D, ins, [t("y", (1, 3, 3, 6))], dw), "bias has 3 channels; must be 6")


def tconv(out_pad=(0, 0, 0, 0), stride=(2, 2), y=(1, 5, 5, 4)) -> Program:
    ins = [t("x", (1, 2, 2, 3)), c("w", np.zeros((4, 3, 3, 3))), c("b", np.zeros(4)), zp("a", "fp32"), zp("b2", "fp32")]
    return single(Op.TRANSPOSE_CONV2D, ins, [t("y", y)], TransposeConv2dAttribute(out_pad, stride, False, DType.FP32))


def test_transpose_conv2d():
    validate(tconv())
    validate(tconv(out_pad=(-1, -2, 0, 1), y=(1, 2, 6, 4)))
    invalid(tconv(out_pad=(-3, 0, 0, 0), y=(1, 2, 5, 4)), "out_pad_top / out_pad_bottom must be > -KH")
    invalid(tconv(out_pad=(0, 0, 0, -3), y=(1, 5, 2, 4)), "out_pad_left / out_pad_right must be > -KW")
    invalid(tconv(stride=(0, 2), y=(1, 3, 5, 4)), "stride values must be >= 1")
    invalid(tconv(y=(1, 4, 5, 4)), "computes [1,5,5,4]")


def test_fft():
    fft = Target.of(["pro-fp"], ["fft"])
    validate(single(Op.FFT2D, [t("r", (1, 4, 8)), t("i", (1, 4, 8))], [t("o", (1, 4, 8)), t("p", (1, 4, 8))]), fft)
    invalid(
        single(Op.FFT2D, [t("r", (1, 4, 8)), t("i", (1, 4, 8))], [t("o", (1, 4, 8)), t("p", (1, 4, 8))]),
        "needs EXT-FFT",
        FP,
    )
    invalid(
        single(Op.FFT2D, [t("r", (1, 6, 8)), t("i", (1, 6, 8))], [t("o", (1, 6, 8)), t("p", (1, 6, 8))]),
        "H = 6 must be a power of two",
    )
    validate(single(Op.RFFT2D, [t("r", (2, 1, 8))], [t("o", (2, 1, 5)), t("p", (2, 1, 5))]))
    invalid(single(Op.RFFT2D, [t("r", (2, 1, 8))], [t("o", (2, 1, 8)), t("p", (2, 1, 8))]), "W/2 + 1 = 5")
    invalid(
        single(Op.RFFT2D, [t("r", (2, 1, 12))], [t("o", (2, 1, 7)), t("p", (2, 1, 7))]), "W = 12 must be a power of two"
    )


def test_matmul():
    def mm(dtype="fp32", out="fp32", a_zp=0, b_zp=0, b=(1, 3, 5)):
        ins = [t("a", (1, 2, 3), dtype), t("b", b, dtype), zp("az", dtype, a_zp), zp("bz", dtype, b_zp)]
        return single(Op.MATMUL, ins, [t("y", (1, 2, 5), out)])

    validate(mm())
    validate(mm("int8", "int32", a_zp=3, b_zp=-1), INT)
    invalid(mm("fp16", "fp16", b_zp=1), "B_zp must be 0 for fp16")
    invalid(mm(b=(1, 4, 5)), "B dimension 1 (C) is 4 but C = 3")
    invalid(mm("int8", "int8"), "unsupported type combination in_t=int8, out_t=int8")


def test_argmax():
    validate(single(Op.ARGMAX, [t("x", (2, 3, 4))], [t("y", (2, 4), "int32")], ArgMaxAttribute(1)))
    invalid(
        single(Op.ARGMAX, [t("x", (2, 3, 4))], [t("y", (2, 4), "int32")], ArgMaxAttribute(3)),
        "axis 3 is outside [0, 3)",
    )
    invalid(single(Op.ARGMAX, [t("x", (2, 3, 4))], [t("y", (2, 4), "int32")], ArgMaxAttribute(0)), "computes [3,4]")
    invalid(
        single(Op.ARGMAX, [t("x", (2, 3))], [t("y", (2,), "int32")], ArgMaxAttribute(1, NanPropagationMode(0))),
        "nan_mode",
    )


# -- activation ----------------------------------------------------------------------------------------
def clamp(low, high, dtype="fp32", pad=0, nan=NanPropagationMode.PROPAGATE):
    np_type = DType.parse(dtype).numpy
    raw = [np.asarray([v], np_type).tobytes() + b"\0" * pad for v in (low, high)]
    return single(Op.CLAMP, [t("x", (2, 2), dtype)], [t("y", (2, 2), dtype)], ClampAttribute(raw[0], raw[1], nan))


def test_clamp():
    validate(clamp(-1.0, 1.0))
    validate(clamp(-5, 7, "int8", pad=7), INT)
    validate(clamp(2.0, 2.0, "fp16"))
    invalid(clamp(1.0, -1.0), "max_val -1.0 is smaller than min_val 1.0")
    invalid(clamp(math.nan, 1.0), "must not be NaN")
    invalid(clamp(0, 1, "fp32", nan=NanPropagationMode.UNKNOWN), "nan_mode")
    short = single(Op.CLAMP, [t("x", (2,))], [t("y", (2,))], ClampAttribute(b"\0", b"\0"))
    invalid(short, "min_val is 1 bytes; a fp32 value needs 4")


@pytest.mark.parametrize("op", [Op.ERF, Op.SIGMOID, Op.TANH])
def test_activations(op):
    validate(single(op, [t("x", (3,))], [t("y", (3,))]))
    invalid(single(op, [t("x", (3,))], [t("y", (4,))]), "must match input [3]")
    invalid(single(op, [t("x", (3,), "int8")], [t("y", (3,), "int8")]), "unsupported type combination")


# -- element-wise, comparison, reduction ----------------------------------------------------------------
def test_binary_broadcast():
    validate(add_program(a=(2, 1, 3), b=(1, 4, 3), out=(2, 4, 3)))
    validate(add_program(a=(), b=(), out=()))
    invalid(add_program(a=(2, 3), b=(3, 3), out=(2, 3)), "shapes [2, 3] and [3, 3] do not broadcast (dimension 0)")
    invalid(add_program(a=(2, 1), b=(1, 3), out=(2, 1)), "computes [2,3]")
    mx = single(Op.MAXIMUM, [t("a", (2,)), t("b", (2,))], [t("y", (2,))], MaximumAttribute(7))
    invalid(mx, "nan_mode 7")


def test_shifts_intdiv_mul_table():
    ars = single(Op.ARITHMETIC_RIGHT_SHIFT, [t("a", (2,), "int8"), c("s", [1, 8], "int8")], [t("y", (2,), "int8")])
    invalid(ars, "shift amounts must be in [0, 7] for int8", INT, unpredictable=True)
    lls = single(Op.LOGICAL_LEFT_SHIFT, [t("a", (2,), "int16"), c("s", [0, 15], "int16")], [t("y", (2,), "int16")])
    validate(lls, INT)
    div = single(Op.INTDIV, [t("a", (2,), "int32"), c("d", [3, 0], "int32")], [t("y", (2,), "int32")])
    invalid(div, "division by zero", INT, unpredictable=True)

    def mul(dtype, out, shift):
        shift_t = c("s", [shift], "int8") if shift is not None else t("s", (1,), "int8")
        return single(Op.MUL, [t("a", (2,), dtype), t("b", (2,), dtype), shift_t], [t("y", (2,), out)])

    validate(mul("int32", "int32", 10), INT)
    validate(mul("int8", "int32", 0), INT)
    invalid(mul("int8", "int32", 1), "shift must be 0 unless the inputs are int32", INT, unpredictable=True)
    invalid(mul("int32", "int32", 64), "shift 64 is outside [0, 63]", INT, unpredictable=True)
    invalid(mul("int32", "int32", None), "shift must be a compile-time constant", INT)
    invalid(mul("fp32", "int32", 0), "unsupported type combination")

    def table(dtype, out, size):
        return single(Op.TABLE, [t("x", (4,), dtype), c("tab", np.zeros(size), dtype)], [t("y", (4,), out)])

    validate(table("int8", "int8", 256), INT)
    validate(table("int16", "int32", 513), Target.of(["pro-int"], ["int16"]))
    invalid(table("int16", "int32", 513), "needs EXT-INT16", INT)
    invalid(table("int8", "int8", 513), "a int8 table has 256 entries, got 513", INT, unpredictable=True)


def test_unary_and_negate():
    validate(single(Op.ABS, [t("x", (2, 2))], [t("y", (2, 2))]))
    invalid(single(Op.CLZ, [t("x", (2,), "int32")], [t("y", (3,), "int32")]), "must match input1 [2]", INT)

    def neg(dtype, izp=0, ozp=0):
        return single(Op.NEGATE, [t("x", (2,), dtype), zp("a", dtype, izp), zp("b", dtype, ozp)], [t("y", (2,), dtype)])

    validate(neg("int8", 3, -4), INT)
    invalid(neg("fp32", 1), "input1_zp must be 0 for fp32")
    invalid(neg("int16", 0, 2), "output_zp must be 0 for int16", INT)


def test_select_and_comparison():
    sel = [t("c", (2, 1), "bool"), t("a", (1, 3)), t("b", (2, 3))]
    validate(single(Op.SELECT, sel, [t("y", (2, 3))]))
    invalid(single(Op.SELECT, [t("c", (2, 1), "int8"), *sel[1:]], [t("y", (2, 3))]), "input1 must be bool, got int8")
    invalid(single(Op.SELECT, [*sel[:2], t("b", (2, 4))], [t("y", (2, 3))]), "do not broadcast")
    validate(single(Op.GREATER, [t("a", (2, 1)), t("b", (1, 3))], [t("y", (2, 3), "bool")]))
    invalid(single(Op.EQUAL, [t("a", (2,)), t("b", (2,))], [t("y", (2,))]), "unsupported type combination")
    invalid(single(Op.GREATER_EQUAL, [t("a", (2,)), t("b", (2, 1))], [t("y", (2,), "bool")]), "ranks differ")


@pytest.mark.parametrize("op", [Op.REDUCE_SUM, Op.REDUCE_MAX])
def test_reductions(op):
    attr = ReduceSumAttribute if op is Op.REDUCE_SUM else ReduceMaxAttribute
    validate(single(op, [t("x", (2, 3, 4))], [t("y", (2, 1, 4))], attr(1)))
    invalid(single(op, [t("x", (2, 3, 4))], [t("y", (2, 1, 4))], attr(3)), "axis 3 is outside [0, 3)")
    invalid(single(op, [t("x", (2, 3, 4))], [t("y", (2, 3, 4))], attr(1)), "computes [2,1,4]")
    invalid(single(op, [t("x", ())], [t("y", ())], attr(0)), "input must have rank 1")
    validate(single(Op.REDUCE_ALL, [t("x", (5,), "bool")], [t("y", (1,), "bool")]))


# -- command line --------------------------------------------------------------------------------------
def test_cli_validate(tmp_path, capsys):
    from ironaccel.cli.main import main
    from ironaccel.tosa import save

    save(add_program(), tmp_path / "good.tosa")
    save(add_program(out=(2, 4)), tmp_path / "bad.tosa")
    deep = (1,) * 7
    save(add_program("int32", deep, deep, deep), tmp_path / "deep.tosa")
    (tmp_path / "junk.tosa").write_bytes(b"not a flatbuffer")
    assert main(["validate", str(tmp_path / "good.tosa")]) == 0
    capsys.readouterr()
    assert main(["validate", "--json", "--level", "8k", str(tmp_path)]) == 1
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {Path(r["path"]).name: r["status"] for r in rows} == {
        "bad.tosa": "error",
        "deep.tosa": "unpredictable",
        "good.tosa": "valid",
        "junk.tosa": "unreadable",
    }
    assert "computes [2,3]" in next(r["message"] for r in rows if r["status"] == "error")
    good = str(tmp_path / "good.tosa")
    assert main(["validate", "--profile", "pro-int", "--extension", "none", good]) == 1
    assert "needs PRO-FP" in capsys.readouterr().out
    assert main(["validate", "--profile", "pro-fp", "--extension", "bf16", good]) == 0
    assert main(["validate", "--profile", "pro-int", "--extension", "bf16", good]) == 2


# -- hostile programs ----------------------------------------------------------------------------------
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(tosa_programs())
def test_validator_only_reports_validation_errors(prog):
    """Random programs (any operator, attribute, dtype, dangling names) never crash the validator."""
    assert all(isinstance(error, ValidationError) for error in check(prog))
    with contextlib.suppress(ValidationError):
        validate(prog, INT_8K)


# -- the call graph of control flow: cycles across paths, and the deepest nesting -----------------------
def test_graphs_that_call_each_other_along_different_paths_are_refused():
    from ironaccel.tosa import Program, Region
    from ironaccel.tosa.validate import validate
    from nested_graphs import calls_block as _calls

    # main -> a, main -> b, a -> b, b -> a: each graph's first path is acyclic, together they recurse.
    program = Program((Region("main", (_calls("main", "a", "b"), _calls("a", "b", "b"), _calls("b", "a", "a"))),))
    with pytest.raises(ValidationError, match="recursive graph"):
        validate(program)


def test_a_graph_reached_deeper_than_max_nesting_along_another_path_is_refused():
    from ironaccel.tosa import Program, Region
    from ironaccel.tosa.validate import validate
    from nested_graphs import step_block as _step

    n = 200  # main -> c0..c199 -> d0..d199, and main -> d0: d199 nests 401 deep, first met at depth 1
    c, d = [f"c{i}" for i in range(n)], [f"d{i}" for i in range(n)]
    blocks = [_step("main", c[0], d[0])]
    blocks += [_step(c[i], c[i + 1] if i + 1 < n else d[0], d[0]) for i in range(n)]
    blocks += [_step(d[i], d[i + 1] if i + 1 < n else None) for i in range(n)]
    with pytest.raises(ValidationError, match="nesting depth 256 reaches MAX_NESTING = 256"):
        validate(Program((Region("main", tuple(blocks)),)))
