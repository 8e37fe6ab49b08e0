"""The operator table every kernel backend keeps (tosa/lowering_table.py): registration and the overlap
refusal, the lookup by the types admission binds, the derived operator support with its scoped
constraints, and the check that each registration sits in its group's module."""

from __future__ import annotations

import numpy as np
import pytest

from ironaccel.core.errors import InternalError
from ironaccel.tosa.capability import Constraint, OperatorView, Signature
from ironaccel.tosa.dtypes import DType
from ironaccel.tosa.ir import Operator
from ironaccel.tosa.lowering_table import LoweringTable, in_out, signature_types
from ironaccel.tosa.operators import Op
from ironaccel.tosa.ops.rule import TensorType

NONZERO = Constraint("shift is zero", lambda v: v.consts[-1] is not None and not np.any(v.consts[-1]))


def _float(ctx: object) -> str:
    return "float"


def _integer(ctx: object) -> str:
    return "integer"


def _table() -> LoweringTable:
    table = LoweringTable("Test")
    table.lowering(Op.ADD, signatures=in_out("fp32", "fp16"))(_float)
    table.lowering(Op.MUL, signatures=[Signature.of(in_t=t, out_t=t) for t in ("fp32", "fp16")])(_float)
    table.lowering(Op.MUL, signatures=(Signature.of(in_t="int8", out_t="int32"),), constraints=[NONZERO])(_integer)
    table.lowering(Op.CONST, signatures=None)(_float)
    return table


def _types(dtype: str, out: str | None = None) -> tuple[list[TensorType], list[TensorType]]:
    dt, odt = DType.parse(dtype), DType.parse(out or dtype)
    return [TensorType((2,), dt), TensorType((2,), dt)], [TensorType((2,), odt)]


def test_lookup_runs_the_registration_whose_signature_binds_the_types():
    table = _table()
    add, mul = Operator(Op.ADD, ("a", "b"), ("c",)), Operator(Op.MUL, ("a", "b", "s"), ("c",))
    assert table.lookup(add, *_types("fp16")).lower is _float
    assert table.lookup(mul, *_types("int8", "int32")).lower is _integer
    assert table.lookup(add, *_types("int8")) is None
    assert table.lookup(Operator(Op.CONST, (), ("c",)), [], [TensorType((2,), DType.INT4)]).lower is _float
    assert table.operators() == (Op.ADD, Op.MUL, Op.CONST)
    assert [r.op for r in table.registrations()] == [Op.ADD, Op.MUL, Op.MUL, Op.CONST]


def test_a_registration_that_would_make_the_choice_ambiguous_is_refused():
    table = _table()
    before = table.registrations()
    with pytest.raises(InternalError, match=r"ADD: in_out_t=fp16 is bound by two Test lowerings"):
        table.lowering(Op.ADD, signatures=in_out("fp16"))(_integer)
    # a signature naming fewer variables binds more, in either order of registration
    with pytest.raises(InternalError, match=r"MUL: in_t=int8 is bound by two Test lowerings"):
        table.lowering(Op.MUL, signatures=(Signature.of(in_t="int8"),))(_integer)
    with pytest.raises(InternalError, match="CONST: a Test lowering for every type shares"):
        table.lowering(Op.CONST, signatures=in_out("fp32"))(_integer)
    with pytest.raises(InternalError, match="a Test lowering of SUB is registered with no signature"):
        table.lowering(Op.SUB, signatures=())(_integer)
    assert table.registrations() == before


def test_the_operator_support_unites_signatures_and_scopes_a_constraint_to_its_registration():
    table = _table()
    support = table.operator_support()
    assert support[Op.ADD].signatures == in_out("fp32", "fp16")
    assert support[Op.CONST].signatures is None
    assert len(support[Op.MUL].signatures) == 3
    (scoped,) = support[Op.MUL].constraints
    assert scoped.name == NONZERO.name and scoped is not NONZERO
    mul = Operator(Op.MUL, ("a", "b", "s"), ("c",))

    def view(dtype: str, out: str, shift: int) -> OperatorView:
        ins, outs = _types(dtype, out)
        ins.append(TensorType((1,), DType.INT8))
        return OperatorView(0, "main", mul, tuple(ins), tuple(outs), (None, None, np.array([shift], np.int8)))

    assert scoped(view("int8", "int32", 0)) and not scoped(view("int8", "int32", 3))
    assert scoped(view("fp32", "fp32", 3))  # the float registration does not carry it
    fp16_only = table.operator_support(lambda op, sig: DType.FP16 in dict(sig.types).values())
    assert set(fp16_only) == {Op.ADD, Op.MUL, Op.CONST}
    assert (
        fp16_only[Op.MUL].signatures == (Signature.of(in_t="fp16", out_t="fp16"),)
        and fp16_only[Op.MUL].constraints == ()
    )
    assert signature_types(fp16_only) == {DType.FP16}
    assert signature_types(support) == {DType.FP32, DType.FP16, DType.INT8, DType.INT32}


def test_a_registration_outside_its_groups_module_is_named():
    table = _table()
    assert {r.module for r in table.registrations()} == {__name__}
    assert table.misplaced("tests") == [
        ("ADD", __name__),
        ("MUL", __name__),
        ("MUL", __name__),
        ("CONST", __name__),
    ]
