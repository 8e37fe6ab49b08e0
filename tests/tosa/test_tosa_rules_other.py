"""Operator rules of the type-conversion, data-node, custom, control-flow, variable and shape groups."""

from __future__ import annotations

import pytest
from test_tosa_rules_layout import const, fails, infer, make, shape_value, t

from ironaccel.tosa.attributes import (
    ConcatAttribute,
    CondIfAttribute,
    RescaleAttribute,
    RoundingMode,
    WhileLoopAttribute,
    attribute_class,
)
from ironaccel.tosa.dtypes import DType
from ironaccel.tosa.errors import ValidationError
from ironaccel.tosa.operators import Op
from ironaccel.tosa.ops.control_flow import GraphInterface, check_cond_if_interface, check_while_loop_interface
from ironaccel.tosa.ops.rule import LEVEL_8K, TensorType

SINGLE, DOUBLE, INEXACT = RoundingMode.SINGLE_ROUND, RoundingMode.DOUBLE_ROUND, RoundingMode.INEXACT_ROUND


def T(*shape: int, dtype: DType = DType.FP32, name: str = "") -> TensorType:
    return TensorType(tuple(shape), dtype, name)


# -- CAST -------------------------------------------------------------------------------------------
def test_cast_keeps_the_shape():
    assert infer(Op.CAST, t(2, 3, dtype=DType.INT8)) == [(2, 3)]
    assert infer(Op.CAST, t(dtype=DType.FP16)) == [()]


# -- RESCALE ----------------------------------------------------------------------------------------
def rescale_operands(
    shape=(2, 3),
    in_t=DType.INT8,
    out_t=DType.INT8,
    scale32=True,
    nc=1,
    multiplier=1 << 30,
    shift=30,
    input_zp=0,
    output_zp=0,
):
    mul_t = DType.INT32 if scale32 else DType.INT16
    return (
        t(*shape, dtype=in_t),
        const([multiplier] * nc, mul_t, "multiplier"),
        const([shift] * nc, DType.INT8, "shift"),
        const([input_zp], in_t, "input_zp"),
        const([output_zp], out_t, "output_zp"),
    )


def rescale(attr: RescaleAttribute | None = None, **kwargs):
    extra = {k: kwargs.pop(k) for k in ("extensions", "outputs") if k in kwargs}
    return infer(Op.RESCALE, *rescale_operands(**kwargs), attribute=attr or RescaleAttribute(True, SINGLE), **extra)


def rescale_fails(match: str, attr: RescaleAttribute | None = None, **kwargs) -> ValidationError:
    with pytest.raises(ValidationError, match=match) as info:
        rescale(attr, **kwargs)
    return info.value


def test_rescale_valid_cases():
    assert rescale() == [(2, 3)]
    assert rescale(RescaleAttribute(True, SINGLE, per_channel=True), nc=3) == [(2, 3)]
    assert rescale(RescaleAttribute(False, SINGLE), scale32=False, in_t=DType.INT48, out_t=DType.INT16) == [(2, 3)]
    # int8 / uint8 zero points may take any value; uint16 may be 32768 (stored as int16 -32768).
    assert rescale(RescaleAttribute(True, SINGLE, input_unsigned=True), input_zp=-56, output_zp=17) == [(2, 3)]
    u16 = RescaleAttribute(True, SINGLE, output_unsigned=True)
    assert rescale(u16, out_t=DType.INT16, output_zp=-32768) == [(2, 3)]
    assert rescale(RescaleAttribute(True, DOUBLE)) == [(2, 3)]  # extensions unknown: not enforced
    assert rescale(RescaleAttribute(True, DOUBLE), extensions=frozenset({"EXT-DOUBLEROUND"})) == [(2, 3)]
    assert rescale(RescaleAttribute(False, INEXACT), scale32=False, extensions=["tosa-ext-inexactround"]) == [(2, 3)]


def test_rescale_operand_shapes_and_types():
    rescale_fails(r"ERROR_IF\(multiplier type != int32\) with scale32=True", scale32=False)
    rescale_fails(r"ERROR_IF\(multiplier type != int16\) with scale32=False", RescaleAttribute(False, SINGLE))
    rescale_fails(
        r"ERROR_IF\(shape\(multiplier\) != \[NC\]\) with NC = shape\(input\)\[-1\] = 3",
        RescaleAttribute(True, SINGLE, per_channel=True),
    )
    rescale_fails(r"ERROR_IF\(shape\(multiplier\) != \[NC\]\) with NC = 1 = 1", nc=3)
    rescale_fails(
        r"ERROR_IF\(per_channel && rank\(input\) < 1\)", RescaleAttribute(True, SINGLE, per_channel=True), shape=()
    )


def test_rescale_rounding_mode():
    rescale_fails(
        r"ERROR_IF\(!scale32 && rounding_mode == DOUBLE_ROUND\)", RescaleAttribute(False, DOUBLE), scale32=False
    )
    rescale_fails(
        r"rounding_mode must be SINGLE_ROUND, INEXACT_ROUND or DOUBLE_ROUND",
        RescaleAttribute(True, RoundingMode.UNKNOWN),
    )
    rescale_fails(
        r"rounding_mode DOUBLE_ROUND requires the EXT-DOUBLEROUND extension",
        RescaleAttribute(True, DOUBLE),
        extensions=(),
    )
    rescale_fails(
        r"rounding_mode INEXACT_ROUND requires the EXT-INEXACTROUND extension",
        RescaleAttribute(True, INEXACT),
        extensions=["EXT-DOUBLEROUND"],
    )
    assert rescale(RescaleAttribute(True, SINGLE), extensions=()) == [(2, 3)]


def test_rescale_signedness_errors():
    a = RescaleAttribute
    rescale_fails(r"ERROR_IF\(scale32 && in_t == i48_t\)", in_t=DType.INT48)
    rescale_fails(
        r"ERROR_IF\(input_unsigned && output_unsigned\)", a(True, SINGLE, input_unsigned=True, output_unsigned=True)
    )
    rescale_fails(
        r"ERROR_IF\(out_t == i32_t && input_unsigned\)", a(True, SINGLE, input_unsigned=True), out_t=DType.INT32
    )
    rescale_fails(
        r"ERROR_IF\(in_t == i32_t && output_unsigned\)", a(True, SINGLE, output_unsigned=True), in_t=DType.INT32
    )
    i48 = dict(in_t=DType.INT48, scale32=False)
    rescale_fails(r"ERROR_IF\(in_t == i48_t && output_unsigned\)", a(False, SINGLE, output_unsigned=True), **i48)
    rescale_fails(r"ERROR_IF\(in_t == i48_t && input_unsigned\)", a(False, SINGLE, input_unsigned=True), **i48)
    rescale_fails(
        r"ERROR_IF\(in_t == i32_t && input_unsigned\)", a(True, SINGLE, input_unsigned=True), in_t=DType.INT32
    )
    rescale_fails(
        r"ERROR_IF\(out_t == i32_t && output_unsigned\)", a(True, SINGLE, output_unsigned=True), out_t=DType.INT32
    )


def test_rescale_zero_point_errors():
    a = RescaleAttribute
    rescale_fails(r"ERROR_IF\(input_zp != 0\) for int16", in_t=DType.INT16, input_zp=3)
    rescale_fails(r"ERROR_IF\(output_zp != 0\) for int32", out_t=DType.INT32, output_zp=-1)
    rescale_fails(
        r"ERROR_IF\(uint16 input_zp != 0 && input_zp != 32768\): input_zp = 32767",
        a(True, SINGLE, input_unsigned=True),
        in_t=DType.INT16,
        input_zp=32767,
    )
    rescale_fails(
        r"ERROR_IF\(uint16 output_zp != 0 && output_zp != 32768\)",
        a(True, SINGLE, output_unsigned=True),
        out_t=DType.INT16,
        output_zp=1,
    )
    # out_t comes from the declared output when there is one.
    rescale_fails(r"ERROR_IF\(output_zp != 0\) for int16", output_zp=5, outputs=[T(2, 3, dtype=DType.INT16)])


def test_rescale_scale_requires():
    err = rescale_fails(r"REQUIRE\(2 <= shift <= 62\): found 63\.\.63", shift=63)
    assert err.unpredictable
    rescale_fails(r"REQUIRE\(2 <= shift <= 62\): found 1\.\.1", shift=1)
    rescale_fails(r"REQUIRE\(multiplier >= 0\)", multiplier=-1)


# -- CONST / IDENTITY / CUSTOM / CONST_SHAPE ----------------------------------------------------------
def test_const_and_const_shape_take_the_declared_shape():
    assert infer(Op.CONST, outputs=[T(2, 3)]) == [(2, 3)]
    assert infer(Op.CONST_SHAPE, outputs=[T(4, dtype=DType.SHAPE)]) == [(4,)]
    fails(Op.CONST, match=r"CONST: the output shape must be declared")
    fails(Op.CONST_SHAPE, match=r"CONST_SHAPE: the output shape must be declared")


def test_identity():
    assert infer(Op.IDENTITY, t(2, 3, dtype=DType.INT4)) == [(2, 3)]


def test_custom_outputs_are_declared():
    assert infer(Op.CUSTOM, t(2), t(3), outputs=[T(5), T(1, 1)]) == [(5,), (1, 1)]
    assert infer(Op.CUSTOM, outputs=[]) == []
    fails(Op.CUSTOM, t(2), match=r"CUSTOM: the output shape must be declared")


# -- COND_IF / WHILE_LOOP -------------------------------------------------------------------------------
COND = t(dtype=DType.BOOL, name="cond")


def test_cond_if_condition():
    attr = CondIfAttribute("then", "else")
    assert infer(Op.COND_IF, COND, t(2), attribute=attr, outputs=[T(2)]) == [(2,)]
    assert infer(Op.COND_IF, t(1, 1, dtype=DType.BOOL), attribute=attr, outputs=[]) == []
    fails(
        Op.COND_IF,
        t(2, dtype=DType.BOOL),
        match=r"ERROR_IF\(tensor_size\(shape\(condition\)\) != 1\)",
        attribute=attr,
        outputs=[],
    )
    fails(Op.COND_IF, COND, match=r"COND_IF: output_list must be declared", attribute=attr)


def test_cond_if_interface():
    attr = CondIfAttribute("then", "else")
    graph = GraphInterface("then", (T(2), T(3, dtype=DType.INT8)), (T(4),))
    other = GraphInterface("else", graph.inputs, graph.outputs)
    ctx = make(Op.COND_IF, COND, t(2), t(3, dtype=DType.INT8), attribute=attr, outputs=[T(4)])
    assert check_cond_if_interface(ctx, graph, other, depth=0) == [(4,)]
    bad_inputs = GraphInterface("else", (T(2), T(3)), graph.outputs)
    with pytest.raises(
        ValidationError, match=r"ERROR_IF\(shapes of input_list != input shapes of else_graph\): element 1"
    ):
        check_cond_if_interface(ctx, graph, bad_inputs)
    with pytest.raises(ValidationError, match=r"ERROR_IF\(shapes of input_list != input shapes of then_graph\)"):
        check_cond_if_interface(ctx, GraphInterface("then", (T(2),), graph.outputs), other)
    with pytest.raises(ValidationError, match=r"ERROR_IF\(shapes of output_list != output shapes of then_graph\)"):
        check_cond_if_interface(ctx, GraphInterface("then", graph.inputs, (T(5),)), other)
    with pytest.raises(ValidationError, match=r"ERROR_IF\(shapes of output_list != output shapes of else_graph\)"):
        check_cond_if_interface(ctx, graph, GraphInterface("else", graph.inputs, (T(4), T(4))))
    deep = make(Op.COND_IF, COND, t(2), t(3, dtype=DType.INT8), attribute=attr, outputs=[T(4)], level=LEVEL_8K)
    with pytest.raises(ValidationError, match=r"ERROR_IF\(nesting depth >= MAX_NESTING\): depth 6, limit 6"):
        check_cond_if_interface(deep, graph, other, depth=6)
    # Inference: the outputs are then_graph's.
    assert check_cond_if_interface(
        make(Op.COND_IF, COND, t(2), t(3, dtype=DType.INT8), attribute=attr), graph, other
    ) == [(4,)]


def test_while_loop():
    attr = WhileLoopAttribute("cond", "body")
    assert infer(Op.WHILE_LOOP, t(2), t(dtype=DType.INT32), attribute=attr) == [(2,), ()]
    assert infer(Op.WHILE_LOOP, t(2), attribute=attr, outputs=[T(2)]) == [(2,)]
    fails(
        Op.WHILE_LOOP,
        t(2),
        match=r"ERROR_IF\(shapes of input_list != shapes of output_list\)",
        attribute=attr,
        outputs=[T(3)],
    )


def test_while_loop_interface():
    attr = WhileLoopAttribute("cond", "body")
    carried = (T(2), T(dtype=DType.INT32))
    ctx = make(Op.WHILE_LOOP, t(2), t(dtype=DType.INT32), attribute=attr, outputs=list(carried))
    cond = GraphInterface("cond", carried, (T(dtype=DType.BOOL),))
    body = GraphInterface("body", carried, carried)
    check_while_loop_interface(ctx, cond, body, depth=0)

    def bad(match: str, cond_graph: GraphInterface = cond, body_graph: GraphInterface = body) -> None:
        with pytest.raises(ValidationError, match=match):
            check_while_loop_interface(ctx, cond_graph, body_graph)

    bad(
        r"ERROR_IF\(shapes of input_list != input shapes of cond_graph\)",
        GraphInterface("c", carried[:1], cond.outputs),
    )
    bad(
        r"ERROR_IF\(shapes of input_list != input shapes of body_graph\)",
        body_graph=GraphInterface("b", (T(3), carried[1]), carried),
    )
    bad(
        r"ERROR_IF\(shapes of input_list != output shapes of body_graph\)",
        body_graph=GraphInterface("b", carried, (T(2), T(1, dtype=DType.INT32))),
    )
    bad(
        r"ERROR_IF\(tensor_size\(output shape of cond_graph\) != 1\)",
        GraphInterface("c", carried, (T(2, dtype=DType.BOOL),)),
    )
    bad(r"ERROR_IF\(tensor_size\(output shape of cond_graph\) != 1\)", GraphInterface("c", carried, ()))
    bad(r"ERROR_IF\(output type of cond_graph != bool_t\)", GraphInterface("c", carried, (T(1, dtype=DType.INT8),)))


def test_graph_interface_from_a_block():
    from ironaccel.tosa.ir import Block, Tensor

    block = Block("b", (), (Tensor("x", (2,), DType.FP32), Tensor("y", (), DType.BOOL)), ("x",), ("y",))
    assert GraphInterface.of(block) == GraphInterface("b", (T(2, name="x"),), (T(dtype=DType.BOOL, name="y"),))


# -- variables --------------------------------------------------------------------------------------------
VAR = T(2, 3, name="var")
write_attr = attribute_class(Op.VARIABLE_WRITE)()
read_attr = attribute_class(Op.VARIABLE_READ)()


def test_variable_write_and_read_through_the_hook():
    assert infer(Op.VARIABLE_WRITE, t(2, 3), variable=VAR) == []
    assert infer(Op.VARIABLE_READ, variable=VAR) == [(2, 3)]
    assert infer(Op.VARIABLE_READ, variable=VAR, outputs=[T(2, 3)]) == [(2, 3)]
    err = fails(Op.VARIABLE_WRITE, t(2, 4), match=r"REQUIRE\(variable shape == shape\(input1\)\)", variable=VAR)
    assert err.unpredictable
    fails(
        Op.VARIABLE_WRITE, t(2, 3, dtype=DType.FP16), match=r"REQUIRE\(variable type == type\(input1\)\)", variable=VAR
    )
    fails(Op.VARIABLE_READ, match=r"REQUIRE\(variable shape == shape\(output1\)\)", variable=VAR, outputs=[T(3, 2)])
    fails(
        Op.VARIABLE_READ,
        match=r"REQUIRE\(variable type == type\(output1\)\)",
        variable=VAR,
        outputs=[T(2, 3, dtype=DType.INT8)],
    )
    fails(Op.VARIABLE_WRITE, t(2, 3), match=r"REQUIRE\(the variable is declared\)", variable=None)


def test_variable_ops_as_tosa_opt_writes_them():
    # IDENTITY + VariableWriteAttribute: input1 -> the variable tensor; VariableReadAttribute: the reverse.
    var = t(2, 3, name="var")
    assert infer(Op.IDENTITY, t(2, 3), attribute=write_attr, outputs=[VAR]) == [(2, 3)]
    assert infer(Op.IDENTITY, var, attribute=read_attr, outputs=[T(2, 3)]) == [(2, 3)]
    assert infer(Op.IDENTITY, var, attribute=read_attr) == [(2, 3)]
    fails(
        Op.IDENTITY, t(2, 2), match=r"REQUIRE\(variable shape == shape\(input1\)\)", attribute=write_attr, outputs=[VAR]
    )
    fails(
        Op.IDENTITY,
        var,
        match=r"REQUIRE\(variable type == type\(output1\)\)",
        attribute=read_attr,
        outputs=[T(2, 3, dtype=DType.FP16)],
    )
    # VARIABLE_READ without any way to find the declaration can only pass declared outputs through.
    assert infer(Op.VARIABLE_READ, outputs=[T(4)]) == [(4,)]
    fails(Op.VARIABLE_READ, match=r"declaration is unknown")


def test_variable_declaration():
    assert infer(Op.VARIABLE) == []
    assert infer(Op.VARIABLE, outputs=[VAR]) == [(2, 3)]
    assert infer(Op.VARIABLE, const([[1, 2, 3], [4, 5, 6]], DType.FP32), outputs=[VAR]) == [(2, 3)]
    fails(
        Op.VARIABLE,
        const([1, 2], DType.FP32),
        match=r"REQUIRE\(variable shape == shape\(initial_value\)\)",
        outputs=[VAR],
    )


def test_rules_never_crash_on_a_foreign_attribute():
    fails(
        Op.RESCALE,
        *rescale_operands(),
        match="attribute table ConcatAttribute does not belong to RESCALE",
        attribute=ConcatAttribute(0),
    )
    assert infer(Op.TILE, t(2), shape_value(2)) == [(4,)]
