"""Capability descriptors and admission: what a backend advertises, and the first unsupported thing a
program uses, named with its operator index, operator, tensor and type."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ironaccel.tosa import DType, Op, Program, ProgramBuilder
from ironaccel.tosa.capability import (
    CapabilityDescriptor,
    OperatorSupport,
    Signature,
    admit,
    constant_operand,
    descriptor_for_all_of_tosa_1_0,
    max_rank,
    per_tensor_rescale,
    supported,
    zero_zero_points,
)
from ironaccel.tosa.errors import LoweringError
from ironaccel.tosa.target import Target

INTS = {"int8", "int16", "int32", "int48"}
FLOAT_CONV = (
    Signature.of(in_t="fp32", weight_t="fp32", out_t="fp32", acc_t="fp32"),
    Signature.of(in_t="fp16", weight_t="fp16", out_t="fp16", acc_t="fp32"),
)


def conv_program(dtype: str = "int16", weight: str = "int8", input_zp: int = 0) -> Program:
    """x, w graph inputs -> bias and zero-point constants (#0..#2 for int16, #0..#1 for int8, whose
    zero points share one constant) -> CONV2D -> ABS (not for int48)."""
    b = ProgramBuilder()
    x, w = b.input("x", (1, 4, 4, 2), dtype), b.input("w", (3, 1, 1, 2), weight)
    y = b.conv2d(x, w, 0, input_zp if dtype == "int8" else 0, 0)
    b.output(b.abs(y) if y.dtype is not DType.INT48 else y)
    return b.build()


def descriptor(operators, dtypes=("fp32", "fp16", *INTS), **kw) -> CapabilityDescriptor:
    return CapabilityDescriptor(Target(), frozenset(dtypes), operators, **kw)


def test_the_full_descriptor_admits_builder_programs_and_summarizes_them():
    full = descriptor_for_all_of_tosa_1_0()
    assert set(full.operators) == {op for op in Op if op.is_tosa_1_0} and DType.BF16 in full.dtypes
    b = ProgramBuilder()
    x = b.input("x", (1, 8), "fp32")
    state = b.variable("state", (1, 8), "fp32")
    b.variable_write(state, b.add(b.variable_read(state), x))
    (y,) = b.cond_if(True, [x], lambda g, a: g.abs(a), lambda g, a: g.negate(a))
    b.output(b.reshape(y, (8,)))
    adm = admit(b.build(), full)
    assert adm.blocks == 3 and adm.bindings == 2 and adm.max_rank == 2
    assert adm.operators_used[Op.COND_IF] == 1 and adm.operators_used[Op.IDENTITY] == 2
    assert adm.operators == sum(adm.operators_used.values())
    assert adm.dtypes == {DType.FP32, DType.BOOL, DType.SHAPE}
    assert adm.constant_bytes == 1 + 8 + 4  # condition, shape [8], NEGATE's zero points; not the variable
    assert adm.max_tensor_bytes == 32


def test_an_unsupported_dtype_is_named_with_operator_index_tensor_and_alternatives():
    d = descriptor({**supported(["CONST", "ABS"]), Op.CONV2D: OperatorSupport(FLOAT_CONV)})
    with pytest.raises(LoweringError) as info:
        admit(conv_program("int16"), d)
    assert str(info.value) == (
        "operator #3 CONV2D: dtype int16 of input 'x' not supported by this backend (supports: fp32, fp16)"
    )
    int8_conv = Signature.of(in_t="int8", weight_t="int8", out_t="int32", acc_t="int32")
    ops = {**supported(["CONST", "ABS"]), Op.CONV2D: OperatorSupport((*FLOAT_CONV, int8_conv))}
    d = descriptor(ops, dtypes=("fp32", "fp16", "int4", *INTS))
    with pytest.raises(LoweringError, match=r"#3 CONV2D: dtype int4 of weight 'w' .* \(supports: int8, fp32, fp16\)"):
        admit(conv_program("int8", "int4"), d)
    admit(conv_program("int8", "int8"), d)


def test_unsupported_operators_signatures_and_global_dtypes():
    fp = descriptor(supported(["CONST", "CONV2D", "ABS"]), dtypes=("fp32", "fp16"))
    with pytest.raises(
        LoweringError, match=r"^operator #3 CONV2D: dtype int16 of input 'x' .*\(supports: fp32, fp16\)$"
    ):
        admit(conv_program("int16"), fp)  # its int48 bias constant is judged at CONV2D, not at its CONST
    b = ProgramBuilder()
    b.output(b.input("x", (2,), "int8"))  # no operator touches it: the binding itself is checked
    with pytest.raises(LoweringError, match=r"^dtype int8 of graph input 'x' not supported by this backend$"):
        admit(b.build(), fp)
    no_abs = descriptor(supported(["CONST", "CONV2D"]))
    with pytest.raises(LoweringError, match=r"^operator #3 ABS: operator not supported by this backend$"):
        admit(conv_program("int8"), no_abs)
    fp32_acc = descriptor({**supported(["CONST", "ABS"]), Op.CONV2D: OperatorSupport(FLOAT_CONV)})
    b = ProgramBuilder()
    x = b.input("x", (1, 4, 4, 2), "fp16")
    b.output(b.conv2d(x, np.ones((3, 1, 1, 2), np.float16), acc_type="fp16"))
    with pytest.raises(LoweringError, match="type combination in_t=fp16, weight_t=fp16, out_t=fp16, acc_t=fp16"):
        admit(b.build(), fp32_acc)
    admit(conv_program("fp16", "fp16"), fp32_acc)  # the builder's default accumulator is fp32


def test_fixed_type_parameters_do_not_need_the_dtype():
    b = ProgramBuilder()
    x = b.input("x", (2, 2), "fp32")
    b.output(b.mul(x, 2.0))  # MUL's shift is an int8 constant even for fp32
    admit(b.build(), descriptor(supported(["CONST", "MUL"]), dtypes=("fp32",)))


def test_any_means_what_the_target_enables():
    fp_only = CapabilityDescriptor(Target.of(["pro-fp"]), frozenset({"fp32", "fp16", *INTS}), supported(Op))
    with pytest.raises(LoweringError, match=r"#2 CONV2D: dtype int8 of input 'x' .* \(supports: fp32, fp16\)"):
        admit(conv_program("int8"), fp_only)
    assert [str(s) for s in fp_only.signatures(Op.MATMUL)] == ["in_t=fp16, out_t=fp16", "in_t=fp16, out_t=fp32",
                                                                "in_t=fp32, out_t=fp32"]  # fmt: skip
    admit(conv_program("fp32", "fp32"), fp_only)


def test_named_constraints():
    zero_zp = descriptor({**supported(["CONST", "ABS"]), Op.CONV2D: OperatorSupport(constraints=(zero_zero_points(),))})
    admit(conv_program("int8", input_zp=0), zero_zp)
    with pytest.raises(
        LoweringError, match=r"^operator #3 CONV2D: not supported by this backend: zero zero-points only$"
    ):
        admit(conv_program("int8", input_zp=5), zero_zp)
    const_weights = descriptor({**supported(["CONST", "ABS"]), Op.CONV2D: OperatorSupport(
        constraints=(constant_operand(1, "weight"),))})  # fmt: skip
    with pytest.raises(LoweringError, match="constant weight only"):
        admit(conv_program("int8"), const_weights)

    b = ProgramBuilder()
    x = b.input("x", (1, 2, 2, 2, 2), "int32")
    b.output(b.rescale(x, [1 << 30] * 2, [31] * 2, out_dtype="int8", per_channel=True))
    program = b.build()
    per_tensor = descriptor(
        {Op.CONST: OperatorSupport(), Op.RESCALE: OperatorSupport(constraints=(per_tensor_rescale(),))}
    )
    with pytest.raises(LoweringError, match="per-tensor RESCALE only"):
        admit(program, per_tensor)
    rank4 = descriptor({Op.CONST: OperatorSupport(), Op.RESCALE: OperatorSupport(constraints=(max_rank(4),))})
    with pytest.raises(LoweringError, match="rank <= 4"):
        admit(program, rank4)


def test_graph_limits():
    program = conv_program("int8", input_zp=5)  # 5 operators, 7 tensors, 6 constant bytes, bindings x, w, out
    everything = supported(["CONST", "CONV2D", "ABS"])
    admit(program, descriptor(everything, max_operators=5, max_bindings=3, max_rank=4, max_tensor_bytes=192))
    cases = [
        ({"max_operators": 4}, "program has 5 operators; this backend takes at most 4"),
        ({"max_tensors": 6}, "program has 7 tensors"),
        ({"max_bindings": 2}, r"3 bindings \(entry inputs \+ outputs\)"),
        ({"max_constant_bytes": 5}, "constant bytes; this backend takes at most 5"),
        ({"max_rank": 3}, "operator #3 CONV2D: 'x' has rank 4 > 3"),
        ({"max_tensor_bytes": 100}, "operator #3 CONV2D: 'conv2d_0' takes 192 bytes > 100"),
    ]
    for limits, message in cases:
        with pytest.raises(LoweringError, match=message):
            admit(program, descriptor(everything, **limits))


def test_variables_need_the_variable_operators_and_nested_blocks_are_named():
    b = ProgramBuilder()
    state = b.variable("state", (2,), "fp32")
    b.output(b.abs(b.variable_read(state)))
    with pytest.raises(
        LoweringError, match=r"operator #0 IDENTITY: reads variable 'state'; .* does not support VARIABLE"
    ):
        admit(b.build(), descriptor(supported(["IDENTITY", "ABS"])))
    b = ProgramBuilder()
    x = b.input("x", (2,), "fp32")
    b.output(*b.cond_if(True, [x], lambda g, a: g.tanh(a), lambda g, a: g.abs(a)))
    with pytest.raises(LoweringError, match=r"^block 'then_0' operator #0 TANH: operator not supported"):
        admit(b.build(), descriptor(supported(["CONST", "COND_IF", "ABS"]), dtypes=("fp32", "bool")))


def test_to_json_describes_signatures_constraints_and_limits():
    d = descriptor(
        {Op.CONV2D: OperatorSupport(FLOAT_CONV, (zero_zero_points(),)), Op.ADD: OperatorSupport()},
        dtypes=("fp32", "fp16"),
        max_rank=4,
        name="vulkan",
    )
    data = json.loads(d.to_json())
    assert data["name"] == "vulkan" and data["dtypes"] == ["fp16", "fp32"]
    assert data["operators"]["ADD"] == {"signatures": "any", "constraints": []}
    assert data["operators"]["CONV2D"]["signatures"][0] == {"in_t": "fp32", "weight_t": "fp32", "out_t": "fp32",
                                                            "acc_t": "fp32"}  # fmt: skip
    assert data["operators"]["CONV2D"]["constraints"] == ["zero zero-points only"]
    assert data["limits"]["max_rank"] == 4 and data["limits"]["max_operators"] is None
    assert "EXT-BF16" in data["target"]["extensions"] and data["target"]["level"] == "none"
    full = json.loads(descriptor_for_all_of_tosa_1_0().to_json())
    assert len(full["operators"]) == 75 and full["name"] == "cpu"
    assert str(FLOAT_CONV[1]) == "in_t=fp16, weight_t=fp16, out_t=fp16, acc_t=fp32"
    assert d.signatures(Op.ADD)[0].matches({"in_out_t": DType.INT32})  # "any": the table's rows


def test_a_refusal_on_purpose_names_its_reason_and_every_gpu_backend_gives_one_for_control_flow():
    from ironaccel.backends.cuda import capability as cuda_capability
    from ironaccel.backends.vulkan import capability as vulkan_capability
    from ironaccel.conformance.semantic_fixtures import endless_program
    from ironaccel.tosa.codec import read

    program = read(endless_program())
    plain = CapabilityDescriptor(Target(), {DType.INT32, DType.BOOL}, supported(["ADD", "GREATER_EQUAL", "CONST"]))
    with pytest.raises(LoweringError, match=r"WHILE_LOOP: operator not supported by this backend$"):
        admit(program, plain)
    reasoned = CapabilityDescriptor(
        Target(), plain.dtypes, plain.operators, refusals={"WHILE_LOOP": "loops are not recorded here"}
    )
    with pytest.raises(LoweringError, match="WHILE_LOOP: operator not supported by this backend: loops are not"):
        admit(program, reasoned)
    for table in (cuda_capability.REFUSALS, vulkan_capability.REFUSALS):
        assert {Op.COND_IF, Op.WHILE_LOOP} <= set(table)
        assert "control flow" in table[Op.WHILE_LOOP]
