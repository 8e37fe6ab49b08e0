"""Reductions along one axis, the axis kept with extent 1: REDUCE_SUM, REDUCE_PRODUCT, REDUCE_MAX,
REDUCE_MIN, REDUCE_ANY, REDUCE_ALL.

The input is seen as [outer, length, inner] around the reduced axis and the result, contiguous, as
[outer, inner]: one thread per result element walks its ``length`` inputs in order, ``inner`` apart.
The argument block's scalars carry ``length``, ``inner`` and the NaN mode.

* Float sums and products accumulate in fp64 and round once to the result's type (through fp32 for fp16
  and bf16), as the CPU backend does: fp64 is far tighter than the specification's bound for an fp32,
  fp16 or bf16 accumulator, so order and accumulator type change nothing that bound can see.
* REDUCE_SUM of int32 adds in 32-bit unsigned arithmetic: TOSA REQUIREs that the int32 accumulator does
  not overflow, and the low 32 bits of a sum do not depend on its order, so the result is the CPU
  backend's exact sum wrapped to int32.
* REDUCE_MAX / REDUCE_MIN pick an input (exact), keeping the first of equal values; floats follow the
  attribute's NaN mode (``ia_max_f32`` / ``ia_min_f32``): PROPAGATE gives NaN when any input is NaN,
  IGNORE skips NaNs and gives NaN only when every input is one.
* REDUCE_ANY / REDUCE_ALL fold the bools with | and &.
"""

from __future__ import annotations

import dataclasses
import functools
import math

from ....tosa.capability import Signature
from ....tosa.dtypes import DType
from ....tosa.operators import Op
from ..prelude import PRELUDE
from .common import Kernel, Launch, LoweringContext, Step
from .elementwise import ctype, kernel_name
from .elementwise_binary import nan_mode
from .registry import in_out, lowering

FLOATS = ("fp32", "fp16", "bf16")


@dataclasses.dataclass(frozen=True)
class Fold:
    """How a reduction folds its inputs: the accumulator's C type, its value before the first input
    (``first`` is that input, for the folds that start from it), the C expression of one step over
    ``acc`` and the input ``v`` (compute type), and the accumulator converted to the result's compute
    type."""

    acc: str
    start: str
    step: str
    finish: str = "acc"
    from_first: bool = False  # the fold starts from the first input (MAX / MIN), not an identity


FLOAT_FOLDS = {
    Op.REDUCE_SUM: Fold("double", "0.0", "acc + (double)v", "(float)acc"),
    Op.REDUCE_PRODUCT: Fold("double", "1.0", "acc * (double)v", "(float)acc"),
    Op.REDUCE_MAX: Fold("float", "first", "ia_max_f32(acc, v, a.scalars[2])", from_first=True),
    Op.REDUCE_MIN: Fold("float", "first", "ia_min_f32(acc, v, a.scalars[2])", from_first=True),
}
INT_FOLDS = {
    Op.REDUCE_SUM: Fold("unsigned", "0u", "acc + (unsigned)v", "(int)acc"),
    Op.REDUCE_MAX: Fold("int", "first", "(v > acc ? v : acc)", from_first=True),
    Op.REDUCE_MIN: Fold("int", "first", "(v < acc ? v : acc)", from_first=True),
}
BOOL_FOLDS = {
    Op.REDUCE_ANY: Fold("int", "0", "acc | (v != 0)"),
    Op.REDUCE_ALL: Fold("int", "1", "acc & (v != 0)"),
}


@functools.cache
def reduce_kernel(name: str, dtype: DType, fold: Fold) -> Kernel:
    """The kernel ``name`` folding each result element's inputs of ``dtype`` (scalars: length, inner)."""
    t = ctype(dtype)

    def load(k: str) -> str:
        return t.load.format(f"x[base + ({k}) * inner]")

    # A zero-length axis leaves the identity, or a first input that is never read as a zero.
    start = f"length > 0 ? {load('0')} : ({t.compute})0" if fold.from_first else fold.start
    lines = [
        f'extern "C" __global__ void {name}(const __grid_constant__ IaArgs a) {{',
        f"    const {t.storage}* x = (const {t.storage}*)a.in[0];",
        "    const long long length = a.scalars[0];",
        "    const long long inner = a.scalars[1];",
        "    const long long step = (long long)gridDim.x * blockDim.x;",
        "    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < a.count; i += step) {",
        "        const long long base = (i / inner) * length * inner + i % inner;",
        f"        {fold.acc} acc = {start};",
        f"        for (long long k = {1 if fold.from_first else 0}; k < length; ++k) {{",
        f"            const {t.compute} v = {load('k')};",
        f"            acc = {fold.step};",
        "        }",
        f"        const {t.compute} r = {fold.finish};",
        f"        (({t.storage}*)a.out)[i] = {t.store.format('r')};",
        "    }",
        "}",
        "",
    ]
    return Kernel(name, PRELUDE + "\n" + "\n".join(lines))


def view(ctx: LoweringContext) -> tuple[int, int, int]:
    """The input as [outer, length, inner] around the reduced axis."""
    shape, axis = ctx.inputs[0].shape, ctx.operator.attribute.axis
    return math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1 :])


def _steps(ctx: LoweringContext, fold: Fold) -> list[Step]:
    x, out = ctx.inputs[0], ctx.outputs[0]
    outer, length, inner = view(ctx)
    count = outer * inner
    if count == 0:
        return []
    k = reduce_kernel(kernel_name(ctx.operator.op.name, x.dtype), x.dtype, fold)
    scalars = (length, inner, nan_mode(ctx))
    return [Launch(k, (ctx.place(x),), ctx.place(out), count, (count,), ((0,),), scalars)]


@lowering(
    Op.REDUCE_SUM,
    signatures=(
        Signature.of(in_out_t="fp32", acc_t="fp32"),
        Signature.of(in_out_t="fp16", acc_t="fp16"),
        Signature.of(in_out_t="bf16", acc_t="fp32"),
    ),
)
@lowering(Op.REDUCE_PRODUCT, Op.REDUCE_MAX, Op.REDUCE_MIN, signatures=in_out(*FLOATS))
def reduce_float(ctx: LoweringContext) -> list[Step]:
    return _steps(ctx, FLOAT_FOLDS[ctx.operator.op])


@lowering(Op.REDUCE_SUM, signatures=(Signature.of(in_out_t="int32", acc_t="int32"),))
@lowering(Op.REDUCE_MAX, Op.REDUCE_MIN, signatures=in_out("int8", "int16", "int32"))
def reduce_integer(ctx: LoweringContext) -> list[Step]:
    return _steps(ctx, INT_FOLDS[ctx.operator.op])


@lowering(Op.REDUCE_ANY, Op.REDUCE_ALL, signatures=in_out("bool"))
def reduce_bool(ctx: LoweringContext) -> list[Step]:
    return _steps(ctx, BOOL_FOLDS[ctx.operator.op])
