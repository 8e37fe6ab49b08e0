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

from ....core.errors import InternalError
from ....tosa.dtypes import DType
from ..prelude import PRELUDE
from .common import Kernel


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


@functools.cache
def kernel(name: str, inputs: tuple[DType, ...], output: DType, expression: str) -> Kernel:
    """The kernel ``name`` computing ``expression`` (C, over ``x0``... in the inputs' compute types, giving
    the output's compute type) elementwise from ``inputs`` into ``output``."""
    lines = [
        f'extern "C" __global__ void {name}(const __grid_constant__ IaArgs a) {{',
        "    const long long step = (long long)gridDim.x * blockDim.x;",
        "    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < a.count; i += step) {",
    ]
    for k, dtype in enumerate(inputs):
        t = ctype(dtype)
        value = f"((const {t.storage}*)a.in[{k}])[ia_offset(a, {k}, i)]"
        lines.append(f"        const {t.compute} x{k} = {t.load.format(value)};")
    out = ctype(output)
    lines.append(f"        const {out.compute} r = {expression};")
    lines.append(f"        (({out.storage}*)a.out)[i] = {out.store.format('r')};")
    lines += ["    }", "}", ""]
    return Kernel(name, PRELUDE + "\n" + "\n".join(lines))


def kernel_name(*parts: object) -> str:
    """``ia_`` and the parts in lower case, joined by ``_`` (``ia_add_fp32``)."""
    return "_".join(["ia", *(str(p).lower() for p in parts)])
