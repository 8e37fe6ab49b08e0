"""The one elementwise kernel template, specialised per (operator, types) as source text.

A kernel reads each operand element where its strides place it (broadcasting by index arithmetic,
:func:`..prelude` ``ia_offset``), converts it from its storage type to its compute type, evaluates the
operator's C expression over ``x0``, ``x1``, ... (and the argument block ``a``, whose scalars carry
shifts, bounds and NaN modes), and stores the result converted to the result's storage type. A grid-stride
loop covers any count. fp16 and bf16 are stored as their 16 bits and computed in fp32: exact on the way in,
rounded once on the way out (round to nearest even, ``..prelude`` conversions); for +, - and *, fp32's 24
bits are enough that this double rounding equals the correctly rounded narrow result.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable

from ....core.errors import InternalError
from ....tosa.dtypes import DType
from ..prelude import PRELUDE
from .common import Elementwise, Kernel


@dataclasses.dataclass(frozen=True)
class CType:
    """How the kernels hold one TOSA type: its storage (in memory) and compute (in registers) C types,
    and the conversions between them (``{}`` is the value converted)."""

    storage: str
    compute: str
    load: str = "{}"
    store: str = "{}"


CTYPES: dict[DType, CType] = {
    DType.FP32: CType("float", "float"),
    DType.INT32: CType("int", "int"),
    DType.FP16: CType("unsigned short", "float", "ia_f16_to_f32({})", "ia_f32_to_f16({})"),
    DType.BF16: CType("unsigned short", "float", "ia_bf16_to_f32({})", "ia_f32_to_bf16({})"),
    # fp8 widens exactly and is rounded once on store, with its format's overflow rule (..prelude)
    DType.FP8E4M3: CType("unsigned char", "float", "ia_e4m3_to_f32({})", "ia_f32_to_e4m3({})"),
    DType.FP8E5M2: CType("unsigned char", "float", "ia_e5m2_to_f32({})", "ia_f32_to_e5m2({})"),
    # The narrow integers compute in int, stored truncated (a result's range is the lowering's concern);
    # INT4 is held one value per byte and INT48 in 64 bits, as the runtime's host arrays hold them.
    DType.INT4: CType("signed char", "int", store="(signed char)({})"),
    DType.INT8: CType("signed char", "int", store="(signed char)({})"),
    DType.INT16: CType("short", "int", store="(short)({})"),
    DType.INT48: CType("long long", "long long"),
    DType.BOOL: CType("unsigned char", "int", store="(unsigned char)(({}) != 0)"),
}


def ctype(dtype: DType) -> CType:
    found = CTYPES.get(dtype)
    if found is None:  # the registrations take only these types; reaching here is a bug
        raise InternalError(f"the CUDA kernels hold no {dtype}")
    return found


# Anything an expression takes from the argument block but a literal scalar word, or the loop's index:
# such a kernel is not a pure function of its operands' elements, so no pass composes it.
_IMPURE = re.compile(r"\ba\.(?!scalars\[\d+\])|\bi\b")
WIDTH = 4  # consecutive results a thread of a contiguous variant computes per step
# storage types loaded and stored as 16-byte vectors of WIDTH elements where addresses are aligned
VECTORS = {"float": "float4", "int": "int4"}


@functools.cache
def kernel(name: str, inputs: tuple[DType, ...], output: DType, expression: str) -> Kernel:
    """The kernel ``name`` computing ``expression`` (C, over ``x0``... in the inputs' compute types, giving
    the output's compute type) elementwise from ``inputs`` into ``output``."""
    record = Elementwise(inputs, output, expression)
    return template(name, record, fusable=_IMPURE.search(expression) is None)


def _element(record: Elementwise, operand: Callable[[int], str], indent: str) -> list[str]:
    """The lines computing ``r`` from operand ``k``'s stored value ``operand(k)``."""
    lines = []
    for k, dtype in enumerate(record.inputs):
        t = ctype(dtype)
        lines.append(f"{indent}const {t.compute} x{k} = {t.load.format(operand(k))};")
    lines += [indent + statement for statement in record.body]
    lines.append(f"{indent}const {ctype(record.output).compute} r = {record.expression};")
    return lines


def _general(record: Elementwise, start: str) -> list[str]:
    """The grid-stride loop over results ``start``... of the general path (each operand at its strides)."""
    storages = [ctype(d).storage for d in record.inputs]
    out = ctype(record.output)
    lines = [f"    for (long long i = {start}; i < a.count; i += step) {{"]
    lines += _element(record, lambda k: f"((const {storages[k]}*)a.in[{k}])[ia_offset(a, {k}, i)]", " " * 8)
    lines.append(f"        (({out.storage}*)a.out)[i] = {out.store.format('r')};")
    return [*lines, "    }"]


def template(name: str, record: Elementwise, fusable: bool = True) -> Kernel:
    """The general kernel of ``record``: one result per thread and step, each operand read at its strides
    over the result's extents; ``record`` kept on the kernel when ``fusable``."""
    lines = [
        f'extern "C" __global__ void {name}(const __grid_constant__ IaArgs a) {{',
        "    const long long step = (long long)gridDim.x * blockDim.x;",
        *_general(record, "(long long)blockIdx.x * blockDim.x + threadIdx.x"),
        "}",
        "",
    ]
    return Kernel(name, PRELUDE + "\n" + "\n".join(lines), record if fusable else None)


def contiguous(kernel: Kernel, strides: tuple[int, ...]) -> Kernel:
    """``kernel``'s variant for a launch over one dimension whose operand ``k`` has element stride
    ``strides[k]``, 1 (read in order) or 0 (one element for all): each thread takes WIDTH consecutive
    results per step, as 16-byte loads and stores where the type is 4 bytes and the addresses allow, so
    that more loads are in flight and no index is divided; the last ``count % WIDTH`` results go one by
    one through the general path."""
    record = kernel.elementwise
    if record is None or len(strides) != len(record.inputs) or not set(strides) <= {0, 1}:
        raise InternalError(f"{kernel.name} has no contiguous variant for strides {strides}")
    name = f"{kernel.name}_v{''.join(str(s) for s in strides)}"
    out = ctype(record.output)
    storages = [ctype(d).storage for d in record.inputs]
    wide = [k for k, s in enumerate(strides) if s == 1 and storages[k] in VECTORS]
    aligned = [f"a.in[{k}]" for k in wide] + (["a.out"] if out.storage in VECTORS else [])
    lines = [
        f'extern "C" __global__ void {name}(const __grid_constant__ IaArgs a) {{',
        "    const long long step = (long long)gridDim.x * blockDim.x;",
        "    const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;",
        f"    const long long groups = a.count / {WIDTH};",
    ]
    if aligned:
        lines.append(f"    const bool vectors = (({' | '.join(aligned)}) & 15ull) == 0ull;")
    lines += ["    for (long long g = first; g < groups; g += step) {", f"        const long long e0 = g * {WIDTH};"]
    for k, stride in enumerate(strides):
        pointer = f"((const {storages[k]}*)a.in[{k}])"
        if stride == 0:
            lines.append(f"        const {storages[k]} s{k} = {pointer}[0];")
            continue
        lines.append(f"        {storages[k]} s{k}[{WIDTH}];")
        scalar = f"for (int e = 0; e < {WIDTH}; ++e) s{k}[e] = {pointer}[e0 + e];"
        if k in wide:
            vector = VECTORS[storages[k]]
            parts = " ".join(f"s{k}[{e}] = w.{c};" for e, c in enumerate("xyzw"))
            lines.append(f"        if (vectors) {{ const {vector} w = ((const {vector}*)a.in[{k}])[g]; {parts} }}")
            lines.append(f"        else {{ {scalar} }}")
        else:
            lines.append(f"        {scalar}")
    lines += [f"        {out.storage} o[{WIDTH}];", "#pragma unroll", f"        for (int e = 0; e < {WIDTH}; ++e) {{"]
    lines += _element(record, lambda k: f"s{k}" if strides[k] == 0 else f"s{k}[e]", " " * 12)
    lines += [f"            o[e] = {out.store.format('r')};", "        }"]
    scalar = f"for (int e = 0; e < {WIDTH}; ++e) (({out.storage}*)a.out)[e0 + e] = o[e];"
    if out.storage in VECTORS:
        vector = VECTORS[out.storage]
        parts = " ".join(f"w.{c} = o[{e}];" for e, c in enumerate("xyzw"))
        lines.append(f"        if (vectors) {{ {vector} w; {parts} (({vector}*)a.out)[g] = w; }}")
        lines.append(f"        else {{ {scalar} }}")
    else:
        lines.append(f"        {scalar}")
    lines += ["    }", *_general(record, f"groups * {WIDTH} + first"), "}", ""]
    source = PRELUDE + "\n" + "\n".join(lines)
    return dataclasses.replace(kernel, name=name, source=source, per_thread=WIDTH)


def kernel_name(*parts: object) -> str:
    """``ia_`` and the parts in lower case, joined by ``_`` (``ia_add_fp32``)."""
    return "_".join(["ia", *(str(p).lower() for p in parts)])
