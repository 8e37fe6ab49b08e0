"""The interface between the native code generator and its per-operator lowerings.

A lowering turns one TOSA operator (with static shapes, see :class:`OpView`) into a :class:`Kernel`: the
body of one C function. The body names its operands ``X0, X1, ...`` and its results ``Y0, ...`` (typed
pointers to C-contiguous storage; results never alias operands), the scratch buffers it asked for
``S0, ...`` (``unsigned char *``, 64-byte aligned, contents undefined on entry), the arrays it
prepared at load ``K_<name>``, and ``ctl``, the run's control block, which its long loops poll where
:mod:`.polls` says (a body or prologue that sees a stop returns at once). Constant operands that only
set the code (zero points, shifts, bounds) are read in Python through :meth:`OpView.constant` and
written into the code as literals.

A lowering that cannot take an operator (a dtype, an attribute or a non-constant operand the code does
not handle) raises :class:`NotNative` with the reason; the whole program then stays with the
interpreter. Lowerings never see an invalid program: the validator and the interpreter's planning have
run first. They must still generate code that stays inside every buffer by construction: every index
is derived from the declared shapes, never from data, except TABLE's, which its dtype bounds, and
GATHER's, which the code checks before it reads (a :attr:`Kernel.failure`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from ....core.lazy import LazyTable
from ....tosa.dtypes import DType
from ....tosa.ir import Operator, Tensor
from ....tosa.operators import Op
from .toolchain import Toolchain


class NotNative(Exception):
    """The native path does not take this operator (or program); the message says why."""


# C storage type of each dtype the native path handles.
C_TYPES: dict[DType, str] = {
    DType.BOOL: "uint8_t",
    DType.INT8: "int8_t",
    DType.INT16: "int16_t",
    DType.INT32: "int32_t",
    DType.INT48: "int64_t",
    DType.FP32: "float",
}


@dataclasses.dataclass(frozen=True)
class OpView:
    """One operator of the main graph as a lowering sees it."""

    index: int
    operator: Operator
    inputs: tuple[Tensor, ...]
    outputs: tuple[Tensor, ...]
    values: tuple[np.ndarray | None, ...]  # each operand's value when it is a constant, else None
    tools: Toolchain
    prefix: str  # for names of C helpers this operator defines (unique in the program)
    # What every result element is mapped through before the operator returns: a following CLAMP fused
    # into it (see codegen.fusions). None for nothing.
    epilogue: Epilogue | None = None

    @property
    def op(self) -> Op:
        return self.operator.op

    @property
    def attribute(self) -> Any:
        return self.operator.attribute

    def constant(self, index: int, what: str) -> np.ndarray:
        """Operand ``index``'s value; NotNative when it is not a constant of the program."""
        value = self.values[index] if index < len(self.values) else None
        if value is None:
            raise NotNative(f"{self.op.name}: {what} is not a constant")
        return value

    def scalar(self, index: int, what: str) -> int:
        """The single integer of a constant operand (a zero point, a shift)."""
        return int(np.asarray(self.constant(index, what)).reshape(-1)[0])

    def dtype(self, index: int = 0) -> DType:
        return self.inputs[index].dtype

    def out_dtype(self, index: int = 0) -> DType:
        return self.outputs[index].dtype

    def where(self) -> str:
        return f"operator #{self.index} {self.op.name}"


@dataclasses.dataclass
class Kernel:
    """What a lowering produces; see the module doc for the names the body may use."""

    body: str
    prologue: str = ""  # statements run once before the body's units (which may then run in parallel)
    helpers: str = ""  # static C functions the body calls, named with OpView.prefix
    scratch: tuple[int, ...] = ()  # bytes of each scratch buffer S0, S1, ...
    arrays: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)  # K_<name>, prepared at load
    units: int = 0  # > 0: the body covers units [lo, hi) of this many, and may be split across threads
    macs: int = 0  # multiply-adds (or element operations) of the whole operator, to judge a split
    poll_work: int | None = None  # how many of ``macs`` run between two polls (polls.py; None: ELEMENT_WORK)
    alias: bool = False  # the result is operand 0's bytes unchanged (RESHAPE, IDENTITY): no code needed
    vectors: bool = False  # the code uses the prelude's float vectors (ia_vf)
    # A REQUIRE of the specification that the code checks on data (an index within its axis), as the rule's
    # words. The body then also takes ``int *restrict failed``: where the rule does not hold it sets
    # ``*failed`` and returns, and the run stops and raises ValidationError(failure, unpredictable=True),
    # as the interpreter does. Only for bodies without units or prologue.
    failure: str = ""


Lowering = Callable[[OpView], Kernel]
_GROUPS = ("elementwise", "conversion", "data_layout", "reduction", "tensor")
_TABLE: LazyTable[Op, Lowering] = LazyTable("native lowering", f"{__package__}.ops", _GROUPS)
# ``@lowering(Op.X)``: register the decorated function as the lowering of the given operators.
lowering = _TABLE.register


@dataclasses.dataclass(frozen=True)
class Epilogue:
    """A map applied in place to results just written, while they are in L1."""

    scalar: str  # a C expression of ``v`` (one element)
    vector: str = ""  # the same of ``v`` as an ia_vf, where the prelude has a vector form (AVX-512)

    def loop(self, pointer: str, count: int | str, tools: Toolchain) -> str:
        """C statements mapping ``count`` floats from ``pointer`` in place."""
        if self.vector and tools.isa == "avx512":
            return (
                f"{{ float *restrict e = {pointer}; const ptrdiff_t count = {count}; ptrdiff_t j = 0;\n"
                "  for (; j + 16 <= count; j += 16) {\n"
                f"    const ia_vf v = ia_vload(e + j); ia_vstore(e + j, {self.vector});\n  }}\n"
                f"  if (j < count) {{ const ia_vf v = ia_vload_n(e + j, (int)(count - j)); "
                f"ia_vstore_n(e + j, {self.vector}, (int)(count - j)); }} }}"
            )
        return (
            f"{{ float *restrict e = {pointer};\n"
            f"  for (ptrdiff_t j = 0; j < {count}; j++) {{ const float v = e[j]; e[j] = (float)({self.scalar}); }} }}"
        )


def lowering_for(op: Op) -> Lowering | None:
    return _TABLE.get(op)


def c_type(dtype: DType) -> str:
    try:
        return C_TYPES[dtype]
    except KeyError:
        raise NotNative(f"dtype {dtype} has no native code") from None


def c_float(value: float) -> str:
    """A float32 literal that reads back as exactly ``value`` (hex form; inf and NaN by expression)."""
    v = float(np.float32(value))
    if v != v:
        return '__builtin_nanf("")' if not np.signbit(np.float32(value)) else '(-__builtin_nanf(""))'
    if v in (float("inf"), float("-inf")):
        return "__builtin_inff()" if v > 0 else "(-__builtin_inff())"
    return f"{v.hex()}f"


def c_int(value: int) -> str:
    """An integer literal of type int64_t (the minimum of int64 cannot be written as one literal)."""
    value = int(value)
    if value == -(1 << 63):
        return "INT64_MIN"
    return f"INT64_C({value})"


def strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """C-order element strides of ``shape``."""
    out, step = [], 1
    for d in reversed(shape):
        out.append(step)
        step *= d
    return tuple(reversed(out))


def size(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n
