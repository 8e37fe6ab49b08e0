"""MATMUL, and the arithmetic of every dot product of the tensor operators (convolutions included).

How the arithmetic stays within the specification while BLAS does the work:

* Integer results must be exact. Operands (minus their zero points) are converted to a float type and
  multiplied by BLAS when ``max|a| * max|b| * terms`` stays below the largest integer that type holds
  exactly (2**24 for float32, 2**53 for float64): every product and partial sum is then an integer the
  type represents exactly, in any summation order, so the float result is the exact sum. float32 covers
  the int8 products of most real layers and runs sgemm at twice dgemm's speed; beyond 2**53, int64
  arithmetic is used (:func:`work_type`). The exact sum is then wrapped to the output type
  (:func:`to_output`): overflow of the int32 / int48 accumulator is a REQUIRE in the specification
  (unpredictable), so wrapping is allowed and deterministic.
* Floating-point dot products are judged against an fp64 reference with an error bound scaled to the
  accumulator and output types. Every float type is widened to float32 (exact for fp16, bf16 and fp8),
  multiplied and summed by sgemm, and rounded once to the output type. That is at least as accurate
  as accumulating in fp16 (the fp16 / fp8 ``acc_type``), so it meets those bounds as well.

A large product is split by rows across threads (:func:`matmul_into`, :mod:`..parallel`); an operand that
is a program constant is converted once per program (:func:`constant_or`). A float32 MATMUL result is
written straight into the program's output buffer when the interpreter offers one (:func:`output_buffer`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ....tosa.operators import Op
from ..kernel import KernelContext, constants, kernel, prepared
from ..parallel import parallel_for, split_threads

# The largest integer below which every integer is exact, per BLAS work type.
_EXACT = {np.dtype(np.float32): 2**24, np.dtype(np.float64): 2**53}
SPLIT_MACS = 4 << 20  # below this many multiply-adds a kernel runs on one thread (a hand-off costs more)


def is_int(value: np.ndarray) -> bool:
    return value.dtype.kind == "i"


def zero_point(value: np.ndarray | None) -> int:
    """The single value of a zero-point operand (0 when there is none)."""
    return int(np.asarray(value).reshape(-1)[0]) if value is not None else 0


_RANGES: dict[np.dtype, tuple[int, int]] = {}  # integer dtype -> (min, max); np.iinfo costs more than a conv2d


def _magnitude(value: np.ndarray, zp: np.ndarray | None) -> int:
    """A bound on ``|value - zp|`` from the dtype and the zero point alone (no pass over the data)."""
    limits = _RANGES.get(value.dtype)
    if limits is None:
        info = np.iinfo(value.dtype)
        limits = _RANGES[value.dtype] = (int(info.min), int(info.max))
    point = zero_point(zp)
    return max(limits[1] - point, point - limits[0])


def work_type(a: np.ndarray, a_zp: np.ndarray | None, b: np.ndarray, b_zp: np.ndarray | None, terms: int) -> np.dtype:
    """The cheapest type in which ``sum(a * b)`` over ``terms`` products is exact (see the module doc)."""
    bound = _magnitude(a, a_zp) * _magnitude(b, b_zp) * max(terms, 1)
    for dtype, exact in _EXACT.items():
        if bound < exact:
            return dtype
    return np.dtype(np.int64)


def operand(value: np.ndarray, zp: np.ndarray | None, work: np.dtype | None = None) -> np.ndarray:
    """``value - zp`` in the work type: ``work`` for integers (exact), float32 for floats."""
    if not is_int(value):
        return value.astype(np.float32, copy=False)
    out = value.astype(work if work is not None else np.float64)
    point = zero_point(zp)
    if point:
        out -= point
    return out


def to_output(acc: np.ndarray, bias: np.ndarray | None, out_dtype: np.dtype) -> np.ndarray:
    """Exact integer sum (+ bias) wrapped to int32, or to 48 bits for int48 (int64 storage)."""
    if out_dtype == np.int32 and acc.dtype == np.float32:
        # |sum| < 2**24 (the float32 bound): the cast is exact, and int32 addition wraps like the accumulator.
        total32 = acc.astype(np.int32)
        if bias is not None:
            total32 += bias.astype(np.int32)
        return total32
    total = acc if acc.dtype == np.int64 else acc.astype(np.int64)  # exact integers: no rounding needed
    if bias is not None:
        total = total + bias.astype(np.int64)
    if out_dtype == np.int64:
        return ((total + (1 << 47)) & ((1 << 48) - 1)) - (1 << 47)
    return total.astype(out_dtype)


def output_buffer(ctx: KernelContext, dtype: np.dtype) -> np.ndarray | None:
    """The program's output buffer for this operator's result, when there is one of the right type."""
    out = ctx.destination(0)
    if out is None or out.dtype != dtype or out.shape != tuple(ctx.outputs[0].shape):
        return None
    return out


def matmul_into(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> np.ndarray:
    """out = a @ b for [N, H, C] x [N, C, W]; a large product is split across threads, by rows of ``a``,
    or by columns of ``b`` where a single product has more columns than rows."""
    n, h, c = a.shape
    w = b.shape[2]
    large = n * h * c * w >= SPLIT_MACS
    if large and n == 1 and w > h and w >= 128 and (threads := split_threads()) > 1:
        _by_columns(a[0], b[0], out[0], threads)
        return out
    threads = split_threads() if large and h >= 32 else 1
    if threads == 1:
        return np.matmul(a, b, out=out)
    # Row blocks of at least 16 rows (BLAS's panels), about two per thread.
    per_batch = max(1, min(h // 16, -(-2 * threads // n)))
    size = -(-h // per_batch)
    tasks = [(i, r, min(h, r + size)) for i in range(n) for r in range(0, h, size)]

    def one(index: int) -> None:
        i, start, stop = tasks[index]
        np.matmul(a[i, start:stop], b[i], out=out[i, start:stop])

    parallel_for(len(tasks), one, threads)
    return out


def _by_columns(a: np.ndarray, b: np.ndarray, out: np.ndarray, threads: int) -> None:
    """out = a @ b, each thread on its own columns of ``b`` (BLAS reads the strided column blocks in place).
    Split by rows, every thread would pack all of ``b``, the larger operand here, for its call."""
    w = b.shape[1]
    # Blocks of whole 64-column panels, two per thread so that a late thread delays only one.
    size = max(64, (-(-w // (2 * threads)) + 63) // 64 * 64)
    starts = range(0, w, size)

    def one(index: int) -> None:
        start = starts[index]
        np.matmul(a, b[:, start : start + size], out=out[:, start : start + size])

    parallel_for(len(starts), one, threads)


def constant_or(
    ctx: KernelContext, index: int, make: Callable[[], np.ndarray], also: tuple[int, ...] = (), tag: Any = None
) -> np.ndarray:
    """``make()``, computed once per program when operand ``index`` (and those in ``also``) are constants."""
    if constants(ctx, index, *also):
        return prepared(ctx, ("operand", index, tag), make)
    return make()


@kernel(Op.MATMUL)
def matmul(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    a, b, a_zp, b_zp = inputs
    out_decl = ctx.outputs[0]
    out_dtype = out_decl.dtype.numpy
    shape = (a.shape[0], a.shape[1], b.shape[2])
    if not is_int(a):
        wa, wb = operand(a, None), constant_or(ctx, 1, lambda: operand(b, None))
        dest = output_buffer(ctx, np.dtype(np.float32))
        acc = matmul_into(wa, wb, dest if dest is not None else np.empty(shape, np.float32))
        return [acc.astype(out_dtype, copy=False)]
    work = work_type(a, a_zp, b, b_zp, a.shape[-1])
    wa = operand(a, a_zp, work)
    wb = constant_or(ctx, 1, lambda: operand(b, b_zp, work), (3,), work)
    if work == np.int64:  # no BLAS for integers: numpy's own loop
        return [to_output(np.matmul(wa, wb), None, out_dtype)]
    return [to_output(matmul_into(wa, wb, np.empty(shape, work)), None, out_dtype)]
