"""ProgramBuilder: programs it makes are valid TOSA 1.0 (validator), survive the codec, compute what they
say (CPU backend; tosa-tools' reference model where installed), and mistakes fail with clear errors."""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pytest

import tosa_fixtures
from ironaccel.backends import cpu
from ironaccel.core.errors import InvalidArgument
from ironaccel.tosa import DType, Op, Program, ProgramBuilder, Value
from ironaccel.tosa.attributes import RoundingMode
from ironaccel.tosa.codec import read, write
from ironaccel.tosa.errors import ValidationError
from ironaccel.tosa.target import Target
from ironaccel.tosa.validate import validate

RNG = np.random.default_rng(7)


def roundtrip(program: Program) -> None:
    """Valid, and unchanged through write / read."""
    validate(program)
    assert read(write(program)) == program


def test_the_example_builds_an_immutable_valid_program_that_adds():
    b = ProgramBuilder()
    x = b.input("x", (1, 8), "fp32")
    w = b.const(np.ones((1, 8), np.float32))
    y = b.add(x, w)
    b.output(y)
    program = b.build()
    assert str(program.version) == "1.0.0" and program.version.is_tosa_1_0
    assert [r.name for r in program.regions] == ["main"] and program.main.name == "main"
    assert program.main.inputs == ("x",) and program.main.outputs == (y.name,)
    assert [op.op for op in program.main.operators] == [Op.CONST, Op.ADD]
    assert (y.shape, y.dtype) == ((1, 8), DType.FP32)
    with pytest.raises(dataclasses.FrozenInstanceError):
        program.main.operators = ()  # type: ignore[misc]
    roundtrip(program)
    x_in = np.arange(8, dtype=np.float32).reshape(1, 8)
    np.testing.assert_array_equal(cpu.run(program, [x_in])[0], x_in + 1)


def test_every_tosa_1_0_operator_has_a_method_with_a_real_signature():
    for op in Op:
        if op.is_tosa_1_0:
            assert callable(getattr(ProgramBuilder, op.name.lower())), op
    generated = inspect.signature(ProgramBuilder.arithmetic_right_shift)
    assert list(generated.parameters)[:3] == ["self", "input1", "input2"]
    assert generated.parameters["round"].kind is inspect.Parameter.KEYWORD_ONLY
    assert "ARITHMETIC_RIGHT_SHIFT" in (ProgramBuilder.arithmetic_right_shift.__doc__ or "")
    typed = inspect.signature(ProgramBuilder.conv2d)
    assert list(typed.parameters)[1:6] == ["input", "weight", "bias", "input_zp", "weight_zp"]


def test_fp32_network_through_every_common_operator_validates_round_trips_and_runs():
    b = ProgramBuilder()
    x = b.input("x", (1, 4, 4, 2), "fp32")
    c = b.conv2d(x, RNG.random((3, 3, 3, 2), np.float32), np.zeros(3, np.float32), pad=(1, 1, 1, 1))
    d = b.depthwise_conv2d(c, RNG.random((3, 3, 3, 2), np.float32), pad=[1, 1, 1, 1])
    t = b.transpose_conv2d(d, RNG.random((2, 2, 2, 6), np.float32), stride=(2, 2))
    pooled = b.avg_pool2d(t, kernel=(2, 2), stride=(2, 2))
    act = b.erf(b.tanh(b.sigmoid(b.clamp(pooled, 0.0, 6.0))))
    r = b.reshape(act, (1, -1, 2))
    mm = b.matmul(r, np.ones((1, 2, 5), np.float32))
    pw = b.pow(b.abs(mm), 0.5)
    mx = b.maximum(pw, b.minimum(pw, 1.0))
    sub = b.sub(mx, b.exp(b.log(b.reciprocal(b.rsqrt(b.add(mx, 1.0))))))
    neg = b.negate(b.floor(b.ceil(b.sin(b.cos(sub)))))
    rs, rp = b.reduce_sum(neg, 1), b.reduce_product(neg, 1)
    cc = b.concat([b.reduce_max(neg, 2), b.reduce_min(neg, 2)], axis=2)
    pd = b.pad(cc, [(0, 0), (1, 1), (0, 0)], 0.0)
    rv = b.reverse(b.transpose(b.tile(b.slice(pd, [0, 0, 0], [1, 2, 2]), [1, 2, 1]), [0, 2, 1]), 1)
    g = b.gather(rv, np.array([[0, 1, 1]], np.int32))
    sc = b.scatter(g, np.array([[2]], np.int32), np.zeros((1, 1, 4), np.float32))
    sel = b.select(b.equal(sc, 0.0), sc, b.identity(sc))
    am = b.argmax(sel, 2)
    rz = b.resize(b.reshape(sel, (1, 3, 4, 1)), [2, 1, 2, 1], [0, 0], [0, 0], mode="nearest")
    mp = b.max_pool2d(rz, kernel=(2, 2))
    b.output(b.cast(am, "fp32"), mp, rs, rp, b.greater(sc, 0.0), b.greater_equal(sc, 0.0))
    program = b.build()
    assert [(v.shape, v.dtype) for v in (c, t, r, mm, am, rz, mp)] == [
        ((1, 4, 4, 3), DType.FP32),
        ((1, 8, 8, 2), DType.FP32),
        ((1, 16, 2), DType.FP32),
        ((1, 16, 5), DType.FP32),
        ((1, 3), DType.INT32),
        ((1, 5, 7, 1), DType.FP32),
        ((1, 4, 6, 1), DType.FP32),
    ]
    roundtrip(program)
    outputs = cpu.run(program, [RNG.random((1, 4, 4, 2), np.float32)])
    assert [o.shape for o in outputs] == [(1, 3), (1, 4, 6, 1), (1, 1, 5), (1, 1, 5), (1, 3, 4), (1, 3, 4)]


def test_generated_methods_cover_the_other_operators():
    b = ProgramBuilder()
    x = b.input("x", (1, 4, 8), "fp32")
    real, imag = b.rfft2d(x)
    back_real, back_imag = b.fft2d(x, b.abs(x), inverse=True)
    v = b.input("v", (1, 2, 4, 4, 1), "fp32")
    c3 = b.conv3d(v, np.ones((2, 1, 1, 1, 1), np.float32), 0, 0, 0)
    i = b.input("i", (4,), "int32")
    bits = b.arithmetic_right_shift(b.bitwise_xor(b.bitwise_and(i, 3), b.logical_left_shift(i, 1)), 1, round=True)
    logic = b.logical_and(b.equal(i, 0), b.logical_not(b.greater(i, 2)))
    b.output(real, imag, back_real, c3, bits, b.clz(bits), b.intdiv(bits, 2), b.reduce_any(logic, 0))
    program = b.build()
    assert (real.shape, back_imag.shape, c3.shape) == ((1, 4, 5), (1, 4, 8), (1, 2, 4, 4, 2))
    roundtrip(program)
    ins = [RNG.random((1, 4, 8), np.float32), np.ones((1, 2, 4, 4, 1), np.float32), np.arange(4, dtype=np.int32)]
    out = cpu.run(program, ins)
    np.testing.assert_allclose(out[0], np.fft.rfft2(ins[0][0]).real[None], rtol=1e-4, atol=1e-4)
    i_in = ins[2]
    expected = ((i_in & 3) ^ (i_in << 1)).astype(np.int64)
    np.testing.assert_array_equal(out[4], (expected + 1) >> 1)
    assert out[7].tolist() == [True]


def int8_program() -> Program:
    """A quantized block: int8 conv (int32 out) -> rescale -> pool -> table -> clamp -> argmax."""
    b = ProgramBuilder()
    x = b.input("x", (1, 8, 8, 3), "int8")
    w = b.const(RNG.integers(-128, 127, (4, 3, 3, 3)).astype(np.int8))
    c = b.conv2d(x, w, RNG.integers(-1000, 1000, 4).astype(np.int32), 5, 0, pad=(1, 1, 1, 1))
    q = b.rescale(c, 1 << 22, 31, 0, -3, out_dtype="int8")
    dw = b.depthwise_conv2d(q, RNG.integers(-128, 127, (3, 3, 4, 1)).astype(np.int8), 0, -3, 0)
    q2 = b.rescale(dw, [1 << 21] * 4, [30] * 4, out_dtype="int8", per_channel=True)
    pooled = b.max_pool2d(b.avg_pool2d(q2, kernel=(2, 2), stride=(2, 2)), kernel=(1, 1))
    cl = b.clamp(b.table(pooled, np.arange(127, -129, -1).astype(np.int8)), -100, 100)
    mm = b.matmul(b.reshape(b.negate(cl), (1, 9, 4)), RNG.integers(-128, 127, (1, 4, 5)).astype(np.int8))
    am = b.argmax(cl, 3)
    unsigned = b.rescale(cl, 1 << 30, 31, 0, 128, out_dtype="int8", output_unsigned=True)
    b.output(am, b.mul(mm, 3, shift=2), b.cast(am, "fp32"), unsigned)
    return b.build()


def test_int8_types_come_from_the_type_table():
    program = int8_program()
    main = program.main
    conv = next(o for o in main.operators if o.op is Op.CONV2D)
    types = [main.tensor(n).dtype for n in conv.inputs]
    assert types == [DType.INT8, DType.INT8, DType.INT32, DType.INT8, DType.INT8]  # zp dtypes from in_t / weight_t
    assert conv.attribute.acc_type is DType.INT32 and main.tensor(conv.outputs[0]).dtype is DType.INT32
    assert main.tensor(conv.inputs[3]).data.tolist() == [5]
    rescales = [o for o in main.operators if o.op is Op.RESCALE]
    assert main.tensor(rescales[0].inputs[1]).dtype is DType.INT32  # scale32 multiplier
    assert main.tensor(rescales[0].inputs[2]).dtype is DType.INT8  # shift
    assert rescales[0].attribute.rounding_mode is RoundingMode.SINGLE_ROUND
    assert main.tensor(rescales[1].inputs[1]).shape == (4,) and rescales[1].attribute.per_channel
    assert main.tensor(rescales[2].inputs[4]).data.tolist() == [-128]  # unsigned 128 in int8 bits
    roundtrip(program)
    (argmax, product, as_float, _) = cpu.run(program, [RNG.integers(-128, 127, (1, 8, 8, 3)).astype(np.int8)])
    assert argmax.dtype == np.int32 and product.shape == (1, 9, 5)
    np.testing.assert_array_equal(as_float, argmax.astype(np.float32))


def test_python_values_become_constants_of_the_right_type_and_rank():
    b = ProgramBuilder()
    x = b.input("x", (2, 3), "fp16")
    y = b.add(x, 1.5)
    n = b.input("n", (2, 3), "int32")
    m = b.mul(n, 3, shift=1)
    main = b.build().main
    add, mul = (o for o in main.operators if o.op in (Op.ADD, Op.MUL))
    one = main.tensor(add.inputs[1])
    assert (one.shape, one.dtype, one.data.tolist()) == ((1, 1), DType.FP16, [[1.5]])
    shift = main.tensor(mul.inputs[2])
    assert (shift.shape, shift.dtype) == ((1,), DType.INT8)
    assert (y.dtype, m.dtype) == (DType.FP16, DType.INT32)


def test_small_constants_are_shared_within_a_graph():
    b = ProgramBuilder()
    x = b.input("x", (1, 4, 4, 1), "int8")
    w = b.const(np.ones((1, 1, 1, 1), np.int8))
    b.output(b.conv2d(x, w), b.conv2d(x, w, pad=(0, 0, 0, 0)))
    consts = [o for o in b.build().main.operators if o.op is Op.CONST]
    assert len(consts) == 3  # weight, one int32 bias, one int8 zero point for input and weight zp


def test_shape_arguments_reshape_minus_one_and_pad_pairs():
    b = ProgramBuilder()
    x = b.input("x", (2, 3, 4), "int8")
    r = b.reshape(x, [4, -1])
    p = b.pad(x, [(1, 0), (0, 2), (0, 0)], -1)
    s = b.slice(x, [0, 1, 0], [2, 2, 4])
    t = b.tile(x, [1, 1, 2])
    b.output(r, p, s, t)
    program = b.build()
    assert (r.shape, p.shape, s.shape, t.shape) == ((4, 6), (3, 5, 4), (2, 2, 4), (2, 3, 8))
    shapes = [t for t in program.main.tensors if t.dtype is DType.SHAPE]
    assert shapes[0].data.tolist() == [4, 6] and shapes[1].data.tolist() == [1, 0, 0, 2, 0, 0]
    roundtrip(program)
    x_in = RNG.integers(-100, 100, (2, 3, 4)).astype(np.int8)
    out = cpu.run(program, [x_in])
    np.testing.assert_array_equal(out[0], x_in.reshape(4, 6))
    np.testing.assert_array_equal(out[1], np.pad(x_in, [(1, 0), (0, 2), (0, 0)], constant_values=-1))
    np.testing.assert_array_equal(out[2], x_in[:, 1:3])
    np.testing.assert_array_equal(out[3], np.tile(x_in, (1, 1, 2)))


def test_accumulator_defaults_to_fp32_when_the_table_allows_several():
    b = ProgramBuilder()
    x = b.input("x", (1, 4, 4, 2), "fp16")
    y = b.conv2d(x, np.ones((2, 1, 1, 2), np.float16))
    z = b.conv2d(x, np.ones((2, 1, 1, 2), np.float16), acc_type="fp16")
    b.output(y, z)
    convs = [o for o in b.build().main.operators if o.op is Op.CONV2D]
    assert [c.attribute.acc_type for c in convs] == [DType.FP32, DType.FP16]
    assert y.dtype is DType.FP16


def test_cast_needs_out_dtype_and_impossible_types_are_rejected():
    b = ProgramBuilder()
    x = b.input("x", (4,), "int8")
    with pytest.raises(InvalidArgument, match="out_dtype"):
        b.op("CAST", [x])
    with pytest.raises(ValidationError, match="not possible"):
        b.cast(x, "int48")
    assert b.cast(x, "bf16").dtype is DType.BF16
    with pytest.raises(ValidationError, match="unsupported type combination in_out_t=int8"):
        b.add(x, x)  # ADD has no int8 row
    f = b.input("f", (4,), "fp32")
    with pytest.raises(ValidationError, match="input2 is int8 but in_out_t is already fp32"):
        b.maximum(f, x)


def test_shape_errors_come_from_the_operator_rules():
    b = ProgramBuilder()
    x = b.input("x", (1, 8), "fp32")
    with pytest.raises(ValidationError, match="ADD"):
        b.add(x, b.input("y", (2, 3), "fp32"))
    with pytest.raises(ValidationError, match="not a multiple of the stride"):
        b.max_pool2d(b.input("img", (1, 5, 5, 1), "fp32"), kernel=(2, 2), stride=(2, 2))
    with pytest.raises(ValidationError, match="computes"):
        b.op("ABS", [x], out_shape=(8, 1))


def test_misuse_is_reported_clearly():
    b = ProgramBuilder()
    x = b.input("x", (1, 8), "fp32")
    with pytest.raises(InvalidArgument, match=r"has no attribute strid \(its attributes: pad, stride"):
        b.op("CONV2D", [b.input("img", (1, 4, 4, 1), "fp32"), np.ones((1, 1, 1, 1), np.float32), 0, 0, 0], strid=(1, 1))
    with pytest.raises(InvalidArgument, match="already used"):
        b.input("x", (1,), "fp32")
    with pytest.raises(InvalidArgument, match="takes inputs"):
        b.op(Op.ADD, [x])
    with pytest.raises(InvalidArgument, match="own method: use const"):
        b.op("CONST", [])
    with pytest.raises(InvalidArgument, match="belongs to graph"):
        b.abs(ProgramBuilder().input("other", (1,), "fp32"))
    with pytest.raises(InvalidArgument, match="int8 values must lie in"):
        b.const([300], "int8")
    with pytest.raises(InvalidArgument, match="unknown TOSA dtype"):
        b.input("z", (1,), "float128")
    with pytest.raises(InvalidArgument, match="cannot tell the type"):
        b.op("CAST", [[1, 2]], out_dtype="fp32")


def test_a_failed_operator_leaves_nothing_behind():
    b = ProgramBuilder()
    x = b.input("x", (1, 4, 4, 1), "int8")
    with pytest.raises(ValidationError, match="stride"):
        b.conv2d(x, np.ones((1, 2, 2, 1), np.int8), 3, name="y", stride=(3, 3))  # constants made, then fails
    assert b.block().operators == () and list(b.block().tensor_map) == ["x"]
    assert b.conv2d(x, np.ones((1, 1, 1, 1), np.int8), name="y").name == "y"


def test_names_are_unique_and_user_names_are_kept():
    b = ProgramBuilder()
    x = b.input("x", (4,), "fp32")
    a, c = b.abs(x, name="magnitude"), b.abs(x)
    b.output(a, c)
    names = [t.name for t in b.build().main.tensors]
    assert "magnitude" in names and len(names) == len(set(names))


def test_custom_declares_its_outputs():
    b = ProgramBuilder()
    x = b.input("x", (2, 2), "fp32")
    out, idx = b.custom([x], [((2, 2), "fp32"), ((2,), "int32")], operator_name="my.op", domain_name="acme")
    assert (out.shape, idx.dtype) == ((2, 2), DType.INT32)
    b.output(out, idx)
    program = b.build()
    op = program.main.operators[-1]
    assert op.op is Op.CUSTOM and op.attribute.operator_name == "my.op"
    roundtrip(program)


def control_flow_program() -> Program:
    """y = c ? x + z : z - x; then 3 loop steps each adding x, or z once i > 1: tensors of enclosing
    graphs are used freely and become explicit graph inputs / loop state."""
    b = ProgramBuilder()
    c = b.input("c", (1,), "bool")
    x, z = b.input("x", (3,), "int32"), b.input("z", (3,), "int32")
    (y,) = b.cond_if(c, [x], lambda g, a: g.add(a, z), lambda g, a: g.sub(z, a))

    def body(g: ProgramBuilder, i: Value, v: Value) -> tuple[Value, Value]:
        (w,) = g.cond_if(g.greater(i, 1), [v], lambda h, q: h.add(q, z), lambda h, q: h.add(q, x))
        return g.add(i, 1), w

    step, total = b.while_loop([np.array([0], np.int32), y], lambda g, i, v: g.greater(3, i), body)
    b.output(total, step)
    return b.build()


def test_cond_if_and_while_loop_with_captured_tensors():
    program = control_flow_program()
    assert [r.name for r in program.regions] == ["main", "then_0", "else_0", "then_1", "else_1", "cond_0", "body_0"]
    for region in program.regions:
        for op in region.blocks[0].operators:  # every operand is the block's own
            assert all(n in region.blocks[0].tensor_map for n in op.inputs), (region.name, op)
    loop = program.main.operators[-1]
    assert loop.op is Op.WHILE_LOOP and len(loop.inputs) == 4 and len(loop.outputs) == 4  # + z, x carried
    roundtrip(program)
    x, z = np.array([1, 2, 3], np.int32), np.array([10, 20, 30], np.int32)
    total, step = cpu.run(program, [np.array([True]), x, z])
    assert total.tolist() == [23, 46, 69] and step.tolist() == [3]
    total, _ = cpu.run(program, [np.array([False]), x, z])
    assert total.tolist() == [21, 42, 63]


def test_graph_callbacks_are_checked():
    b = ProgramBuilder()
    x = b.input("x", (3,), "int32")
    with pytest.raises(InvalidArgument, match="then graph returns"):
        b.cond_if(True, [x], lambda g, a: g.add(a, a), lambda g, a: g.cast(a, "int8"))
    with pytest.raises(InvalidArgument, match="cond must return one bool element"):
        b.while_loop([x], lambda g, a: g.equal(a, a), lambda g, a: a)
    with pytest.raises(InvalidArgument, match="gets its inputs as callback arguments"):
        b.cond_if(True, [x], lambda g, a: g.input("y", (3,), "int32"), lambda g, a: a)


def test_variables_persist_between_runs():
    b = ProgramBuilder()
    x = b.input("x", (2,), "fp32")
    state = b.variable("state", (2,), "fp32", [1.0, 2.0])
    before = b.variable_read(state)
    b.variable_write(state, x)
    b.output(b.add(before, 0.0))
    with pytest.raises(InvalidArgument, match="variable_read"):
        b.add(state, 1.0)
    with pytest.raises(InvalidArgument, match="does not match variable"):
        b.variable_write(state, b.const(np.zeros(3, np.float32)))
    program = b.build()
    tensor = program.main.tensor(state.name)
    assert tensor.variable and tensor.variable_name == "state" and tensor.data.tolist() == [1.0, 2.0]
    roundtrip(program)
    compiled = cpu.load(program)
    assert compiled.run([np.array([5, 6], np.float32)])[0].tolist() == [1, 2]
    assert compiled.run([np.array([7, 8], np.float32)])[0].tolist() == [5, 6]


def test_build_validates_against_the_builders_target():
    b = ProgramBuilder(target=Target.of(["pro-fp"]))
    x = b.input("x", (4,), "int32")
    b.output(b.cast(b.abs(x), "fp32"))
    with pytest.raises(ValidationError, match="PRO-INT"):
        b.build()
    assert b.build(validate=False).main.outputs


@pytest.mark.tosa_tools
@pytest.mark.parametrize("make", [int8_program, control_flow_program], ids=["int8", "control_flow"])
def test_builder_programs_agree_with_the_reference_model(make):
    tosa_fixtures.require_tosa_tools()
    program = make()
    if program.main.inputs == ("x",):
        inputs = [RNG.integers(-128, 127, (1, 8, 8, 3)).astype(np.int8)]
    else:
        inputs = [np.array([True]), np.array([1, 2, 3], np.int32), np.array([10, 20, 30], np.int32)]
    expected = tosa_fixtures.run_reference_model(write(program), inputs)
    for ours, theirs in zip(cpu.run(program, inputs), expected, strict=True):
        np.testing.assert_array_equal(ours, np.asarray(theirs).reshape(ours.shape).astype(ours.dtype))
