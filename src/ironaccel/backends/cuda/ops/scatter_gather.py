"""GATHER and SCATTER along the K axis of [N, K, C] tensors with int32 [N, W] indices, for the types
TOSA 1.0 gives them (int8, int16, int32, fp16, bf16, fp32, fp8e4m3, fp8e5m2), moved as bits
(``.data_layout``'s integer of each width), so results are exact.

GATHER: one thread per result element [n, w, c] reads its row's index and copies values[n, index, c].
SCATTER: one thread per result element [n, k, c], with no atomics: it looks through its batch's W indices
for one equal to k (the last, as the specification's sequential writes leave it) and copies that row of
the input, else values_in[n, k, c]. Each result element is written by one thread only, so the order of
threads never matters.

The specification leaves an index outside [0, K) (and, for SCATTER, a position written twice)
unpredictable; the kernels never read or write outside the tensors for it: GATHER gives 0 for such an
index and SCATTER ignores it. scalars: 0 K, 1 W, 2 C.
"""

from __future__ import annotations

import functools

from ....tosa.capability import Signature
from ....tosa.dtypes import DType
from ....tosa.operators import Op
from ..prelude import PRELUDE
from .common import Kernel, Launch, LoweringContext, Step
from .data_layout import bits_type, copy_kernel, width
from .elementwise import ctype, kernel_name
from .registry import lowering

MOVED_TYPES = ("fp32", "fp16", "bf16", "fp8e4m3", "fp8e5m2", "int8", "int16", "int32")
SIGNATURES = tuple(Signature.of(in_out_t=t, index_t="int32") for t in MOVED_TYPES)

_GATHER = """\
extern "C" __global__ void {name}(const __grid_constant__ IaArgs a) {{
    const long long k = a.scalars[0], w = a.scalars[1], c = a.scalars[2];
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < a.count; i += step) {{
        const long long row = i / c;
        const long long index = (long long)((const int*)a.in[1])[row];
        const long long n = row / w;
        (({t}*)a.out)[i] = index >= 0 && index < k ? ((const {t}*)a.in[0])[(n * k + index) * c + i % c] : ({t})0;
    }}
}}
"""

_SCATTER = """\
extern "C" __global__ void {name}(const __grid_constant__ IaArgs a) {{
    const long long k = a.scalars[0], w = a.scalars[1], c = a.scalars[2];
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < a.count; i += step) {{
        const long long row = i / c;
        const long long n = row / k;
        const long long position = row % k;
        const int* indices = (const int*)a.in[1] + n * w;
        long long found = -1;
        for (long long j = w - 1; j >= 0 && found < 0; --j) {{
            if ((long long)indices[j] == position) found = j;
        }}
        (({t}*)a.out)[i] = found >= 0 ? ((const {t}*)a.in[2])[(n * w + found) * c + i % c] : ((const {t}*)a.in[0])[i];
    }}
}}
"""


@functools.cache
def _kernel(op: str, bits: DType) -> Kernel:
    name = kernel_name(op, f"b{width(bits)}")
    template = _GATHER if op == "gather" else _SCATTER
    return Kernel(name, PRELUDE + "\n" + template.format(name=name, t=ctype(bits).storage))


@lowering(Op.GATHER, signatures=SIGNATURES)
def gather(ctx: LoweringContext) -> list[Step]:
    values, indices = ctx.inputs[:2]
    out = ctx.outputs[0]
    if out.size == 0:
        return []
    _, k, c = values.shape
    w = indices.shape[1]
    reads = (ctx.place(values), ctx.place(indices))
    found = _kernel("gather", bits_type(values))
    return [Launch(found, reads, ctx.place(out), out.size, (out.size,), ((1,),), (k, w, c))]


@lowering(Op.SCATTER, signatures=SIGNATURES)
def scatter(ctx: LoweringContext) -> list[Step]:
    values_in, indices, updates = ctx.inputs[:3]
    out = ctx.outputs[0]
    if out.size == 0:
        return []
    _, k, c = values_in.shape
    w = indices.shape[1]
    if w == 0:  # nothing is written over values_in
        return [Launch(copy_kernel(out), (ctx.place(values_in),), ctx.place(out), out.size, (out.size,), ((1,),))]
    reads = (ctx.place(values_in), ctx.place(indices), ctx.place(updates))
    found = _kernel("scatter", bits_type(values_in))
    return [Launch(found, reads, ctx.place(out), out.size, (out.size,), ((1,),), (k, w, c))]
