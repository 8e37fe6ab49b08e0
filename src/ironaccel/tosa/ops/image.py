"""Rule of RESIZE.

The scale, offset and border operands are SHAPE constants:
``scale = [scale_y_n, scale_y_d, scale_x_n, scale_x_d]``, ``offset = [offset_y, offset_x]``,
``border = [border_y, border_x]``. The ranges the specification puts on them keep integer
implementations inside int32 and the downscale within 1/16; the output size follows from inverting the
scale, and must come out exact (``idiv_check``: the division has no remainder).

The level limit on the scale ratios (``scale_y_n/scale_y_d <= MAX_SCALE``) is a level-table entry;
the engine evaluates it (it names the four scale values), so it is not repeated here.
"""

from __future__ import annotations

from ..operators import Op
from .data_layout import UNKNOWN, known, shape_values
from .rule import Context, rule

Shape = tuple[int, ...]
MAX_IMAGE_DIM = 16384  # GPU APIs' texture limit; also keeps position * stride within int32


def output_dim(ctx: Context, axis: str, size: int, n: int, d: int, offset: int, border: int) -> int:
    """OH / OW: ``(size - 1) * n - offset + border`` must divide exactly by ``d``; the dim is that + 1."""
    if not known(size):
        return UNKNOWN
    numerator = (size - 1) * n - offset + border
    ctx.error_if(
        numerator % d != 0,
        f"ERROR_IF(({'IH' if axis == 'y' else 'IW'} - 1) * scale_{axis}_n - offset_{axis} + border_{axis} "
        f"is not a multiple of scale_{axis}_d): {numerator} % {d} != 0",
    )
    return numerator // d + 1


@rule(Op.RESIZE)
def resize(ctx: Context) -> list[Shape]:
    """Input [N,IH,IW,C] gives output [N,OH,OW,C]; see the module docstring for the parameters."""
    image = ctx.inputs[0]
    if image.rank != 4:
        return [(UNKNOWN,) * 4]  # the engine reports the rank
    batch, ih, iw, channels = image.shape
    scale, offset, border = shape_values(ctx, 1), shape_values(ctx, 2), shape_values(ctx, 3)
    oh = ow = UNKNOWN
    if scale is not None and len(scale) == 4:
        y_n, y_d, x_n, x_d = scale
        ctx.error_if(
            y_n <= 0 or y_d <= 0 or x_n <= 0 or x_d <= 0,
            f"ERROR_IF(scale_y_n <= 0 || scale_y_d <= 0 || scale_x_n <= 0 || scale_x_d <= 0): scale = {list(scale)}",
        )
        ctx.error_if(
            y_n > 1 << 11 or x_n > 1 << 11,
            f"ERROR_IF(scale_y_n > 2048 || scale_x_n > 2048): scale = {list(scale)}",
        )
        ctx.error_if(
            y_d >= 16 * y_n or x_d >= 16 * x_n,
            f"ERROR_IF(scale_y_d >= 16 * scale_y_n || scale_x_d >= 16 * scale_x_n): downscale below 1/16, "
            f"scale = {list(scale)}",
        )
        if offset is not None and len(offset) == 2:
            off_y, off_x = offset
            ctx.error_if(
                off_y < -y_n or off_y >= 16 * y_n,
                f"ERROR_IF(offset_y < -scale_y_n || offset_y >= 16 * scale_y_n): offset_y={off_y}, scale_y_n={y_n}",
            )
            ctx.error_if(
                off_x < -x_n or off_x >= 16 * x_n,
                f"ERROR_IF(offset_x < -scale_x_n || offset_x >= 16 * scale_x_n): offset_x={off_x}, scale_x_n={x_n}",
            )
        if border is not None and len(border) == 2:
            bor_y, bor_x = border
            ctx.error_if(
                bor_y < -16 * y_n or bor_y >= y_n,
                f"ERROR_IF(border_y < -16 * scale_y_n || border_y >= scale_y_n): border_y={bor_y}, scale_y_n={y_n}",
            )
            ctx.error_if(
                bor_x < -16 * x_n or bor_x >= x_n,
                f"ERROR_IF(border_x < -16 * scale_x_n || border_x >= scale_x_n): border_x={bor_x}, scale_x_n={x_n}",
            )
        if offset is not None and border is not None and len(offset) == 2 and len(border) == 2 and y_d > 0 and x_d > 0:
            oh = output_dim(ctx, "y", ih, y_n, y_d, offset[0], border[0])
            ow = output_dim(ctx, "x", iw, x_n, x_d, offset[1], border[1])
    # Where the parameters leave OH / OW open, the size limit applies to the declared output dims.
    check_h, check_w = oh, ow
    if ctx.outputs and ctx.outputs[0].rank == 4:
        check_h = ctx.outputs[0].shape[1] if oh == UNKNOWN else oh
        check_w = ctx.outputs[0].shape[2] if ow == UNKNOWN else ow
    ctx.error_if(
        max(check_h, check_w, ih, iw) >= MAX_IMAGE_DIM,
        f"ERROR_IF(max(OH, OW, IH, IW) >= 16384): OH={check_h}, OW={check_w}, IH={ih}, IW={iw}",
    )
    return [(batch, oh, ow, channels)]
