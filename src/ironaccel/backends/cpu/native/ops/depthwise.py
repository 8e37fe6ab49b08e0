"""Native code for DEPTHWISE_CONV2D: one small product per channel, over the kernel's taps.

fp32 with channel multiplier 1 runs along the channels with the prelude's vectors (fused multiply-adds
in tap order); other multipliers, and int8 (exact, in 64 bits, wrapped to int32 like the accumulator),
run per element. Weights and bias are padded to whole vectors at load when they are constants, else by
the prologue; a padded or integer input is copied into scratch first (:func:`.tensor_common.padded_copy`).
A unit is one output row. Polls: in the output rows or columns, and in the prologues' rows.
"""

from __future__ import annotations

import numpy as np

from .....tosa.operators import Op
from .. import polls
from ..lowering import Kernel, OpView, c_type, lowering, size
from .tensor_common import check_windows, padded_bias, padded_copy, product_types, scoped


@lowering(Op.DEPTHWISE_CONV2D)
def depthwise_conv2d(view: OpView) -> Kernel:
    integer = product_types(view)
    attr = view.attribute
    n, ih, iw, c = view.inputs[0].shape
    kh, kw, _, mult = view.inputs[1].shape
    _, oh, ow, oc = view.outputs[0].shape
    top, bottom, left, right = attr.pad
    sy, sx = attr.stride
    dy, dx = attr.dilation
    check_windows(view, ih, top + bottom, kh, sy, dy, oh)
    check_windows(view, iw, left + right, kw, sx, dx, ow)
    zp_x = view.scalar(3, "input_zp") if integer else 0
    zp_w = view.scalar(4, "weight_zp") if integer else 0
    vl = view.tools.vector_floats
    width = -(-oc // vl) * vl
    taps = kh * kw
    elem = "int32_t" if integer else "float"
    scratch: list[int] = []
    prologue: list[str] = []
    arrays: dict[str, np.ndarray] = {}
    padded = integer or any(attr.pad)
    ph, pw = (ih + top + bottom, iw + left + right) if padded else (ih, iw)
    if padded:
        scratch.append(n * ph * pw * c * 4)
        prologue.append(padded_copy(c_type(view.dtype()), (n, ih, iw, c), tuple(attr.pad), zp_x, integer, elem))
    if view.values[1] is not None:
        weights = np.asarray(view.values[1]).astype(np.int64 if integer else np.float32)
        packed = np.zeros((taps, width), np.int32 if integer else np.float32)
        packed[:, :oc] = (weights - zp_w).reshape(taps, oc)
        arrays["w"] = packed
        w_ptr = "K_w"
    else:
        k = len(scratch)
        scratch.append(taps * width * 4)
        value = f"({elem})((int32_t)X1[t * {oc} + j] - {zp_w})" if integer else f"X1[t * {oc} + j]"
        declare, poll = polls.countdown(taps, width)
        prologue.append(
            f"""{elem} *restrict PW = ({elem} *)S{k};
{declare}
for (ptrdiff_t t = 0; t < {taps}; t++) {{
    {poll}
    for (ptrdiff_t j = 0; j < {width}; j++) PW[t * {width} + j] = j < {oc} ? {value} : 0;
}}"""
        )
        w_ptr = f"(const {elem} *)S{k}"
    if view.values[2] is not None:
        arrays["b"] = padded_bias(np.asarray(view.values[2]).reshape(-1), oc, width, integer)
        b_ptr = "K_b"
    else:
        k = len(scratch)
        scratch.append(width * 4)
        spread = "j" if size(view.inputs[2].shape) == oc else "0"
        prologue.append(
            f"""{elem} *restrict PB = ({elem} *)S{k};
for (ptrdiff_t j = 0; j < {width}; j++) PB[j] = j < {oc} ? X2[{spread}] : 0;"""
        )
        b_ptr = f"(const {elem} *)S{k}"
    row = pw * c
    offsets = [ky * dy * row + kx * dx * c for ky in range(kh) for kx in range(kw)]
    table = f"static const ptrdiff_t {view.prefix}taps[{taps}] = {{{', '.join(map(str, offsets))}}};"
    nest = polls.plan([n * oh, ow], polls.DEPTHWISE_WORK, oc * taps)  # rows, columns: a countdown in either
    head = [
        f"const {elem} *restrict P = {f'(const {elem} *)S0' if padded else 'X0'};",
        f"const {elem} *restrict W = {w_ptr};",
        f"const {elem} *restrict B = {b_ptr};",
        *([polls.declare()] if nest else []),
        "for (ptrdiff_t r = lo; r < hi; r++) {",
        *([f"    {polls.poll(nest.every)}"] if nest and nest.level == 0 else []),
        f"    const ptrdiff_t b = r / {oh}, oy = r % {oh};",
        f"    for (ptrdiff_t ox = 0; ox < {ow}; ox++) {{",
        *([f"        {polls.poll(nest.every)}"] if nest and nest.level == 1 else []),
        f"        const {elem} *restrict base = P + b * {ph * row} + oy * {sy * row} + ox * {sx * c};",
        f"        {c_type(view.out_dtype())} *restrict o = Y0 + (r * {ow} + ox) * {oc};",
    ]
    if not integer and mult == 1:
        inner = [
            f"        for (ptrdiff_t c0 = 0; c0 < {oc}; c0 += IA_VL) {{",
            "            ia_vf acc = ia_vload(B + c0);",
            f"            if (c0 + IA_VL <= {oc}) {{",
            f"                for (int t = 0; t < {taps}; t++) {{",
            f"                    const ia_vf x = ia_vload(base + {view.prefix}taps[t] + c0);",
            f"                    acc = ia_vfma(x, ia_vload(W + t * {width} + c0), acc);",
            "                }",
            "                ia_vstore(o + c0, acc);",
            "            } else {",
            f"                for (int t = 0; t < {taps}; t++) {{",
            f"                    const ia_vf x = ia_vload_n(base + {view.prefix}taps[t] + c0, {oc} - (int)c0);",
            f"                    acc = ia_vfma(x, ia_vload(W + t * {width} + c0), acc);",
            "                }",
            f"                ia_vstore_n(o + c0, acc, {oc} - (int)c0);",
            "            }",
            "        }",
        ]
    elif integer:
        inner = [
            f"        for (ptrdiff_t j = 0; j < {oc}; j++) {{",
            "            int64_t acc = 0;",
            f"            for (int t = 0; t < {taps}; t++)",
            f"                acc += (int64_t)base[{view.prefix}taps[t] + j / {mult}] * W[t * {width} + j];",
            "            o[j] = (int32_t)((uint32_t)(uint64_t)acc + (uint32_t)B[j]);",
            "        }",
        ]
    else:
        inner = [
            f"        for (ptrdiff_t j = 0; j < {oc}; j++) {{",
            "            float acc = B[j];",
            f"            for (int t = 0; t < {taps}; t++)",
            f"                acc = fmaf(base[{view.prefix}taps[t] + j / {mult}], W[t * {width} + j], acc);",
            "            o[j] = acc;",
            "        }",
        ]
    body = [*head, *inner, "    }"]
    if view.epilogue:
        body.append("    " + view.epilogue.loop(f"Y0 + r * {ow * oc}", ow * oc, view.tools))
    body.append("}")
    return Kernel(
        "\n".join(body),
        prologue=scoped(prologue),
        helpers=table,
        scratch=tuple(scratch),
        arrays=arrays,
        units=n * oh,
        macs=n * oh * ow * oc * taps,
        poll_work=polls.DEPTHWISE_WORK,
        vectors=not integer and mult == 1,
    )
