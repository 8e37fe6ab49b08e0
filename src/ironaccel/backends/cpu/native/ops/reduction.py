"""Native code for the reductions: one axis, kept as a dimension of size 1.

The input is read as [outer, n, inner] (n along the axis). With inner > 1 a row of accumulators lives in
scratch and every input row is folded into it, so the innermost loop runs along contiguous memory and
vectorises; with inner == 1 each result is one sequential loop. As in the numpy kernels: fp32 sums are
taken in double and rounded once (the order of a double sum of float32 values changes its float32
rounding only in ties of 1e-16 relative), int32 sums in 64 bits wrapped to 32; maximum and minimum keep
the first of equal values and follow the NaN mode (``apply_max_s``).

Long reductions poll the run's control block (:mod:`..polls`): on one outer row in so many, or one row
along the axis in so many, or in chunks of a row too long for one budget (the order of the fold is the
same either way). A reduction along the last axis with many elements splits its rows among threads.
"""

from __future__ import annotations

import dataclasses

from .....tosa.attributes import NanPropagationMode
from .....tosa.dtypes import DType
from .....tosa.operators import Op
from .. import polls
from ..lowering import Kernel, NotNative, OpView, c_type, lowering, size
from .elementwise import SPLIT_ELEMENTS

_BYTES = {"double": 8, "float": 4, "int64_t": 8, "int32_t": 4, "int16_t": 2, "int8_t": 1, "uint8_t": 1}


@dataclasses.dataclass(frozen=True)
class _Fold:
    acc_type: str
    start: str  # the accumulator from the first element v
    step: str  # the accumulator after element v
    finish: str  # the result from the accumulator


def _reduce(view: OpView, fold: _Fold) -> Kernel:
    shape = view.inputs[0].shape
    axis = view.attribute.axis
    outer, n, inner = size(shape[:axis]), shape[axis], size(shape[axis + 1 :])
    ct, out_ct = c_type(view.dtype(0)), c_type(view.out_dtype())
    if inner == 1:
        # One result per row: rows are units that threads may share (each row's fold is unchanged).
        units = outer if outer > 1 and size(shape) >= SPLIT_ELEMENTS else 0
        nest = polls.plan([outer, n], polls.ELEMENT_WORK)
        declare, outer_poll, along = _polled(nest, "a", "1", str(n))
        body = f"""{declare}
for (ptrdiff_t o = {"lo" if units else "0"}; o < {"hi" if units else outer}; o++) {{
    {outer_poll}
    const {ct} *restrict p = X0 + o * {n};
    {ct} v = p[0];
    {fold.acc_type} acc = {fold.start};
    {along} {{ v = p[a]; acc = {fold.step}; }}{"}" if nest and nest.innermost else ""}
    Y0[o] = ({out_ct})({fold.finish});
}}"""
        return Kernel(body, macs=size(shape), units=units)
    acc_size = inner * _BYTES[fold.acc_type]
    nest = polls.plan([outer, n, inner], polls.ELEMENT_WORK)
    declare, outer_poll, across = _polled(nest, "i", "0", str(inner))
    fold_row = [
        "{",
        f"    const {ct} *restrict row = p + a * {inner};",
        f"    {across} {{",
        f"        const {ct} v = row[i];",
        f"        const {fold.acc_type} acc = accs[i];",
        f"        accs[i] = {fold.step};",
        "    }" + ("}" if nest and nest.innermost else ""),
        "}",
    ]
    if nest is not None and nest.level == 1:
        rows = polls.blocked("a", 1, n, nest.every, fold_row)  # blocks of rows: see polls.blocked
    else:
        rows = [f"for (ptrdiff_t a = 1; a < {n}; a++)", *fold_row]
    rows_text = "\n".join(f"    {line}" for line in rows)
    body = f"""{fold.acc_type} *restrict accs = ({fold.acc_type} *)S0;
{declare if nest is not None and nest.level == 0 else ""}
for (ptrdiff_t o = 0; o < {outer}; o++) {{
    {outer_poll}
    const {ct} *restrict p = X0 + o * {n * inner};
    for (ptrdiff_t i = 0; i < {inner}; i++) {{ const {ct} v = p[i]; accs[i] = {fold.start}; }}
{rows_text}
    for (ptrdiff_t i = 0; i < {inner}; i++) {{
        const {fold.acc_type} acc = accs[i];
        Y0[o * {inner} + i] = ({out_ct})({fold.finish});
    }}
}}"""
    return Kernel(body, scratch=(acc_size,), macs=size(shape))


def _polled(nest: polls.Nest | None, var: str, start: str, stop: str) -> tuple[str, str, str]:
    """For a reduction's loops polled as ``nest`` says: the countdown's declaration, the poll first in an
    outer row, and the head of the innermost loop (``var`` over [start, stop), chunked where the nest
    polls there; its chunks' brace is closed by the caller)."""
    declare = polls.declare() if nest is not None and not nest.innermost else ""
    outer_poll = polls.poll(nest.every) if nest is not None and nest.level == 0 and not nest.innermost else ""
    if nest is not None and nest.innermost:
        head, _ = polls.chunked(var, start, stop, nest.every)
        return declare, outer_poll, " ".join(line.strip() for line in head)
    return declare, outer_poll, f"for (ptrdiff_t {var} = {start}; {var} < {stop}; {var}++)"


@lowering(Op.REDUCE_SUM)
def reduce_sum(view: OpView) -> Kernel:
    if view.dtype() is DType.FP32:
        return _reduce(view, _Fold("double", "(double)v", "acc + (double)v", "(float)acc"))
    if view.dtype() is DType.INT32:
        return _reduce(view, _Fold("int64_t", "(int64_t)v", "acc + (int64_t)v", "(uint32_t)(uint64_t)acc"))
    raise NotNative(f"REDUCE_SUM on {view.dtype()}")


def _extremum(view: OpView, greater: bool) -> Kernel:
    dtype = view.dtype()
    if dtype is DType.FP32:
        ignore = view.attribute.nan_mode == NanPropagationMode.IGNORE
        fn = ("ia_max_" if greater else "ia_min_") + ("i" if ignore else "p")
        return _reduce(view, _Fold("float", "v", f"{fn}(acc, v)", "acc"))
    if dtype in (DType.INT8, DType.INT16, DType.INT32):
        ct = c_type(dtype)
        keep = "acc >= v" if greater else "acc < v"
        return _reduce(view, _Fold(ct, "v", f"{keep} ? acc : v", "acc"))
    raise NotNative(f"{view.op.name} on {dtype}")


@lowering(Op.REDUCE_MAX)
def reduce_max(view: OpView) -> Kernel:
    return _extremum(view, greater=True)


@lowering(Op.REDUCE_MIN)
def reduce_min(view: OpView) -> Kernel:
    return _extremum(view, greater=False)


@lowering(Op.REDUCE_ANY)
def reduce_any(view: OpView) -> Kernel:
    if view.dtype() is not DType.BOOL:
        raise NotNative(f"REDUCE_ANY on {view.dtype()}")
    return _reduce(view, _Fold("uint8_t", "v != 0", "acc | (v != 0)", "acc"))


@lowering(Op.REDUCE_ALL)
def reduce_all(view: OpView) -> Kernel:
    if view.dtype() is not DType.BOOL:
        raise NotNative(f"REDUCE_ALL on {view.dtype()}")
    return _reduce(view, _Fold("uint8_t", "v != 0", "acc & (v != 0)", "acc"))
