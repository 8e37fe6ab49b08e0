"""The interface between the CPU interpreter and its kernels.

A kernel computes one TOSA operator with numpy. It receives a :class:`KernelContext` (the operator,
its input and output tensor declarations, and hooks into the interpreter for control flow and
variables) and the input values as numpy arrays in storage form (:attr:`DType.numpy`: INT4 as int8
values, INT48 as int64, BF16/FP8 as ml_dtypes arrays, SHAPE as int64), and returns the output values
in the same form, shaped as declared. Kernels never validate what the validator already checked;
a kernel meeting an impossible case raises :class:`~ironaccel.core.errors.InternalError`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Hashable, Sequence
from typing import Protocol, TypeVar

import numpy as np

from ...core.lazy import LazyTable
from ...tosa.ir import Operator, Program, Tensor
from ...tosa.operators import Group, Op

T = TypeVar("T")


class KernelContext(Protocol):
    operator: Operator
    inputs: Sequence[Tensor]  # declarations of the operator's inputs, spec order
    outputs: Sequence[Tensor]  # declarations of its outputs
    program: Program

    def run_block(self, name: str, values: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Run the block ``name`` of the program (COND_IF / WHILE_LOOP graphs) on ``values``."""
        ...

    def variable(self, name: str) -> np.ndarray:
        """The current value of the variable ``name``."""
        ...

    def set_variable(self, name: str, value: np.ndarray) -> None: ...

    def is_constant(self, index: int) -> bool:
        """Whether operand ``index`` is a constant of the program (the same array on every run)."""
        ...

    def cached(self, key: Hashable, make: Callable[[], T]) -> T:
        """``make()``, computed once per operator and ``key`` and kept with the loaded program: for values
        derived only from constant operands (a weight matrix in the layout the kernel multiplies with)."""
        ...

    def destination(self, index: int) -> np.ndarray | None:
        """Where result ``index`` may be written in place, or None: on the main graph's operators that
        produce a program output, the caller's output buffer (shaped and typed as declared, not aliasing
        any input). A kernel that writes there returns that very array; using it is optional."""
        ...


Kernel = Callable[[KernelContext, Sequence[np.ndarray]], list[np.ndarray]]
# One kernel module per operator group tosa defines, but CUSTOM's (a custom operator is an implementation's
# own; this backend defines none) and the 1.1 drafts'.
_GROUP_MODULES = tuple(group.value for group in Group if group not in (Group.CUSTOM, Group.DRAFT))
_TABLE: LazyTable[Op, Kernel] = LazyTable("CPU kernel", f"{__package__}.ops", _GROUP_MODULES)
KERNELS = _TABLE.entries
# ``@kernel(Op.X)``: register the decorated function as the CPU kernel of the given operators.
kernel = _TABLE.register


def kernel_for(op: Op) -> Kernel | None:
    """The kernel of ``op``; kernel modules are imported on first use."""
    return _TABLE.get(op)


# Kernels also run under contexts that implement only the declarations (tests call kernels directly with
# such stand-ins): these helpers fall back to computing each time, to "not a constant" and to no buffer.
def prepared(ctx: KernelContext, key: Hashable, make: Callable[[], T]) -> T:
    """``ctx.cached(key, make)`` where the context caches, else ``make()``: for values derived from the
    attribute and constant operands only (prepared once per operator, at load or on the first run)."""
    cached = getattr(ctx, "cached", None)
    return make() if cached is None else cached(key, make)


def constants(ctx: KernelContext, *indices: int) -> bool:
    """Whether every operand in ``indices`` is a program constant (the same array on every run)."""
    is_constant = getattr(ctx, "is_constant", None)
    if is_constant is None:
        return False
    for index in indices:
        if not is_constant(index):
            return False
    return True


_ALREADY = contextlib.nullcontext()


def muted(ctx: KernelContext) -> contextlib.AbstractContextManager:
    """numpy's floating-point warnings off for a block (inf and NaN results are data): nothing to do under
    the interpreter, which runs every kernel so (its contexts say ``warnings_muted``); entering np.errstate
    costs about as much as a small elementwise operation."""
    return _ALREADY if getattr(ctx, "warnings_muted", False) else np.errstate(all="ignore")


def destination(ctx: KernelContext, dtype: np.dtype) -> np.ndarray | None:
    """The caller's buffer for result 0 when the interpreter offers one of ``dtype`` and the declared shape."""
    offer = getattr(ctx, "destination", None)
    out = None if offer is None else offer(0)
    if out is None or out.dtype != dtype or out.shape != tuple(ctx.outputs[0].shape):
        return None
    return out
