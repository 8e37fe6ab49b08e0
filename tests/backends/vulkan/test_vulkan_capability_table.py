"""The Vulkan backend's one operator table (ops/registry.py) and the descriptor derived from it.

``vulkan_capability_table.json`` records what the backend admits: every operator, its signatures (as
sets), its constraints' names in order, and, for the operators with constraints, which constraint (if
any) refuses each of a grid of operator views that their signatures admit; plus the target, the types
and the limits. It was written from the hand-kept tables the registrations replaced, and a signature
added to the backend is added to it (``python tests/backends/vulkan/test_vulkan_capability_table.py --write``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ironaccel.backends.vulkan import capability
from ironaccel.backends.vulkan.device import Limits
from ironaccel.core.errors import InternalError
from ironaccel.tosa import ProgramBuilder
from ironaccel.tosa.capability import CapabilityDescriptor, OperatorView, Signature, admit
from ironaccel.tosa.dtypes import DType
from ironaccel.tosa.errors import LoweringError
from ironaccel.tosa.ir import Operator
from ironaccel.tosa.operators import TOSA_1_0_OPS, Group, Op
from ironaccel.tosa.ops.rule import TensorType
from ironaccel.tosa.spec import operator as spec_of

TABLE = Path(__file__).with_name("vulkan_capability_table.json")
LIMITS = Limits(1 << 30, 1 << 30, 1 << 30, 64, 64, 64, 128, (65535, 65535, 65535), 49152)
VIEW_TYPES = (DType.FP32, DType.FP16, DType.BF16, DType.INT8, DType.INT16, DType.INT32, DType.BOOL)


def _signature(sig: Signature) -> str:
    return ", ".join(f"{var}={dt}" for var, dt in sorted(sig.types))


def _views(op: Op) -> list[OperatorView]:
    """Views of ``op`` with every operand and the result of one type, and constant operands: none, all
    zero, all one, then each one alone (one, then zero)."""
    spec = spec_of(op)
    n = max(len(spec.inputs) if spec else 0, 3)
    zero, one = np.zeros(1, np.int32), np.ones(1, np.int32)
    patterns = [[None] * n, [zero] * n, [one] * n]
    for i in range(n):
        patterns += [[one if j == i else None for j in range(n)], [zero if j == i else None for j in range(n)]]
    operator = Operator(op, tuple(f"x{k}" for k in range(n)), ("y",))
    return [
        OperatorView(
            0,
            "main",
            operator,
            tuple(TensorType((1,), dt, f"x{k}") for k in range(n)),
            (TensorType((1,), dt, "y"),),
            tuple(consts),
        )
        for dt in VIEW_TYPES
        for consts in patterns
    ]


def _verdicts(descriptor: CapabilityDescriptor, op: Op) -> list[str | None]:
    """Per view its signatures admit, the name of the first constraint that refuses it (None: none)."""
    from ironaccel.tosa.capability import bindings

    support, spec = descriptor.operators[op], spec_of(op)
    found = []
    for view in _views(op):
        bound = bindings(spec, view.operator, view.inputs, view.outputs)
        if any(s.matches(bound) for s in descriptor.signatures(op)):
            found.append(next((c.name for c in support.constraints if not c(view)), None))
    return found


def snapshot(descriptor: CapabilityDescriptor) -> dict[str, Any]:
    """``descriptor`` in the recorded form (signature order is not part of it)."""
    record = descriptor.as_dict()
    record["operators"] = {
        op.name: {
            "signatures": "any" if s.signatures is None else sorted({_signature(sig) for sig in s.signatures}),
            "constraints": [c.name for c in s.constraints],
            **({"verdicts": _verdicts(descriptor, op)} if s.constraints else {}),
        }
        for op, s in sorted(descriptor.operators.items())
    }
    return record


def test_the_derived_descriptor_admits_exactly_the_recorded_table():
    recorded = json.loads(TABLE.read_text())
    current = snapshot(capability.descriptor(LIMITS))
    for name in sorted(set(recorded["operators"]) | set(current["operators"])):
        assert current["operators"].get(name) == recorded["operators"].get(name), name
    assert current == recorded


def test_every_registration_lives_in_the_module_of_its_operators_group():
    from ironaccel.backends.vulkan.ops import registry

    assert registry.TABLE.misplaced("ironaccel.backends.vulkan.ops") == []
    groups = {r.op.group for r in registry.registrations()}
    assert groups == set(Group) - {Group.CUSTOM, Group.CONTROL_FLOW, Group.VARIABLE, Group.DRAFT}


def test_each_registered_type_combination_has_exactly_one_lowering():
    from ironaccel.backends.vulkan.ops import registry

    for op, support in capability.ALL_OPERATORS.items():
        for sig in support.signatures or ():
            binding = [r for r in registry.registrations(op) if r.binds(dict(sig.types))]
            assert len(binding) == 1, (op.name, str(sig))
            assert registry.chosen(op, dict(sig.types)) is binding[0]


def test_a_second_lowering_for_registered_types_is_refused():
    from ironaccel.backends.vulkan.ops import registry

    before = registry.registrations()
    with pytest.raises(InternalError, match=r"ADD: in_out_t=fp16 is bound by two Vulkan lowerings"):
        registry.lowering(Op.ADD, signatures=registry.in_out("fp16"))(lambda ctx: [])
    # a signature naming fewer variables binds more: MUL in_t=int8 alone would take MUL's int8 -> int32
    with pytest.raises(InternalError, match=r"MUL: .* is bound by two Vulkan lowerings"):
        registry.lowering(Op.MUL, signatures=(Signature.of(in_t="int8"),))(lambda ctx: [])
    with pytest.raises(InternalError, match="CONST: a Vulkan lowering for every type"):
        registry.lowering(Op.CONST, signatures=registry.in_out("fp32"))(lambda ctx: [])
    assert registry.registrations() == before


def _plan_shaders(dtype: str, make: Any) -> list[str]:
    """The shaders of the plan of ``make(builder, x, y)`` over two [2, 8] inputs of ``dtype``."""
    from ironaccel.backends.vulkan import plan as planning

    b = ProgramBuilder()
    x = b.input("x", (2, 8), dtype)
    y = b.input("y", (2, 8), dtype)
    b.output(make(b, x, y))
    program = b.build()
    admit(program, capability.descriptor(LIMITS))
    return [getattr(step, "shader", "copy") for step in planning.build(program).steps]


def test_the_planner_runs_the_lowering_registered_for_the_operators_types():
    def add(b, x, y):
        return b.add(x, y)

    assert _plan_shaders("fp32", add) == ["binary"]
    assert _plan_shaders("int32", add) == ["integer"]
    # fp16 and bf16: the fp32 kernel between conversions (registered widened=)
    assert _plan_shaders("fp16", add) == ["cast", "cast", "binary", "cast"]
    assert _plan_shaders("bf16", add) == ["cast", "cast", "binary", "cast"]
    assert _plan_shaders("int8", lambda b, x, y: b.mul(x, y)) == ["integer"]
    assert _plan_shaders("int8", lambda b, x, y: b.cast(x, "bool")) == ["int_unary"]
    assert _plan_shaders("int8", lambda b, x, y: b.cast(x, "fp32")) == ["cast"]
    assert _plan_shaders("fp32", lambda b, x, y: b.cast(x, "int8")) == ["cast"]


def _negate(dtype: str, zero_points: tuple[Any, Any]) -> str | None:
    b = ProgramBuilder()
    x = b.input("x", (4,), dtype)
    zps = [b.input(f"zp{k}", (1,), dtype) if z is None else z for k, z in enumerate(zero_points)]
    b.output(b.op(Op.NEGATE, [x, *zps]))
    try:
        admit(b.build(), capability.descriptor(LIMITS))
    except LoweringError as exc:
        return str(exc).split(": ")[-1]
    return None


def test_a_registrations_constraints_guard_its_own_signatures_only():
    # integer NEGATE: zero points of any value, read on the host, so constant
    assert _negate("int8", (3, -2)) is None
    assert _negate("int8", (None, 0)) == "constant input zero point only"
    assert _negate("int16", (0, None)) == "constant output zero point only"
    # float NEGATE: the fp32 kernel reads no zero points, so constant zeros only
    assert _negate("fp32", (0, 0)) is None
    assert _negate("fp16", (0, 0)) is None
    assert _negate("fp32", (None, 0)) == "zero zero-points for float operands"


def test_every_advertised_signature_is_one_the_specification_defines():
    """A signature TOSA 1.0 lacks could never load (the validator refuses it first): advertising one is a
    registration's mistake."""
    desc = capability.descriptor(LIMITS)
    foreign = []
    for op in desc.operators:
        spec = spec_of(op)
        defined = {tuple(sorted((v, dt) for v, dt in t.types.items())) for t in spec.typesupport} if spec else set()
        foreign += [
            f"{op.name}({_signature(sig)})" for sig in desc.signatures(op) if tuple(sorted(sig.types)) not in defined
        ]
    assert foreign == []


def test_the_cpu_kernel_table_loads_every_group_tosa_defines():
    from ironaccel.backends.cpu.kernel import kernel_for

    assert [op.name for op in TOSA_1_0_OPS if kernel_for(op) is None] == ["CUSTOM"]


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    TABLE.write_text(json.dumps(snapshot(capability.descriptor(LIMITS)), indent=1, sort_keys=True) + "\n")
