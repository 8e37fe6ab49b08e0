"""Rules of CAST and RESCALE.

CAST has no rule beyond "same shape": which (in_t, out_t) pairs exist is the type-support table, which
the engine applies.

RESCALE carries the integer quantization rules. Its operands are input, multiplier, shift, input_zp,
output_zp (in that order). Three things the type tables cannot say are checked here:

* the multiplier's element type depends on the ``scale32`` attribute (i32 when set, else i16), and the
  multiplier / shift length NC depends on ``per_channel`` (the input's last dim, else 1);
* the zero-point and signedness ERROR_IFs, which compare operand *values* (zero points must be
  constants in PRO-INT; they are checked whenever the engine supplies the value);
* the rounding mode: DOUBLE_ROUND needs ``scale32``, and DOUBLE_ROUND / INEXACT_ROUND exist only with
  the EXT-DOUBLEROUND / EXT-INEXACTROUND extensions. The extensions a target supports are not part of
  the rule Context protocol; a Context that has an ``extensions`` attribute (a collection of names such
  as ``"EXT-DOUBLEROUND"`` or ``"doubleround"``) gets that enforced, one without it does not.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..attributes import RescaleAttribute, RoundingMode
from ..dtypes import DType
from ..operators import Op
from .data_layout import UNKNOWN, attribute_of, known
from .rule import Context, rule

Shape = tuple[int, ...]

# Rounding modes that only exist with an extension.
ROUNDING_EXTENSION = {
    RoundingMode.DOUBLE_ROUND: "EXT-DOUBLEROUND",
    RoundingMode.INEXACT_ROUND: "EXT-INEXACTROUND",
}


def extension_name(name: str) -> str:
    """``"doubleround"``, ``"tosa-ext-doubleround"``, ``"EXT_DOUBLEROUND"`` -> ``"EXT-DOUBLEROUND"``."""
    key = str(name).strip().upper().replace("_", "-")
    key = key.removeprefix("TOSA-")
    return key if key.startswith("EXT-") else f"EXT-{key}"


def target_extensions(ctx: Context) -> frozenset[str] | None:
    """The target's extensions when the Context offers them (see the module docstring), else None."""
    names: Iterable[str] | None = getattr(ctx, "extensions", None)
    if names is None:
        return None
    return frozenset(extension_name(n) for n in names)


@rule(Op.CAST)
def cast(ctx: Context) -> list[Shape]:
    """The output has the input's shape; the dtype pair is the type table's business."""
    return [ctx.inputs[0].shape]


def zero_point(ctx: Context, index: int) -> int | None:
    """The constant zero point of input ``index`` (its first value), or None when it is not constant."""
    value = ctx.const(index)
    if value is None or value.size == 0:
        return None
    return int(value.reshape(-1)[0])


@rule(Op.RESCALE)
def rescale(ctx: Context) -> list[Shape]:
    """See the module docstring; the output has the input's shape."""
    attr = attribute_of(ctx, RescaleAttribute)
    value, multiplier, shift = ctx.inputs[0], ctx.inputs[1], ctx.inputs[2]
    in_t = value.dtype
    out_t = ctx.outputs[0].dtype if ctx.outputs else ctx.inputs[4].dtype

    # Operand types and lengths that follow from the attributes.
    mul_t = DType.INT32 if attr.scale32 else DType.INT16
    ctx.error_if(
        multiplier.dtype != mul_t,
        f"ERROR_IF(multiplier type != {mul_t}) with scale32={attr.scale32}: multiplier is {multiplier.dtype}",
        multiplier.name or None,
    )
    ctx.error_if(
        attr.per_channel and value.rank < 1,
        "ERROR_IF(per_channel && rank(input) < 1): per-channel scaling needs a channel dimension",
    )
    nc = value.shape[-1] if attr.per_channel and value.rank >= 1 else 1
    for operand in (multiplier, shift):
        length = operand.shape[0] if operand.rank == 1 else UNKNOWN
        ctx.error_if(
            known(nc, length) and length != nc,
            f"ERROR_IF(shape({operand.name or 'operand'}) != [NC]) with NC = "
            f"{'shape(input)[-1]' if attr.per_channel else '1'} = {nc}: its length is {length}",
            operand.name or None,
        )

    # Rounding mode.
    mode = attr.rounding_mode
    ctx.error_if(
        mode not in (RoundingMode.SINGLE_ROUND, RoundingMode.INEXACT_ROUND, RoundingMode.DOUBLE_ROUND),
        f"rounding_mode must be SINGLE_ROUND, INEXACT_ROUND or DOUBLE_ROUND, not {mode.name}",
    )
    ctx.error_if(
        not attr.scale32 and mode == RoundingMode.DOUBLE_ROUND,
        "ERROR_IF(!scale32 && rounding_mode == DOUBLE_ROUND): double rounding needs the 32-bit multiplier",
    )
    extensions = target_extensions(ctx)
    needed = ROUNDING_EXTENSION.get(mode)
    if extensions is not None and needed is not None:
        ctx.error_if(needed not in extensions, f"rounding_mode {mode.name} requires the {needed} extension")

    # Precision and signedness.
    ctx.error_if(
        attr.scale32 and in_t == DType.INT48,
        "ERROR_IF(scale32 && in_t == i48_t): a 48-bit input cannot take the 32-bit multiplier",
    )
    unsigned_in, unsigned_out = attr.input_unsigned, attr.output_unsigned
    ctx.error_if(unsigned_in and unsigned_out, "ERROR_IF(input_unsigned && output_unsigned)")
    ctx.error_if(out_t == DType.INT32 and unsigned_in, "ERROR_IF(out_t == i32_t && input_unsigned)")
    ctx.error_if(in_t == DType.INT32 and unsigned_out, "ERROR_IF(in_t == i32_t && output_unsigned)")
    ctx.error_if(in_t == DType.INT48 and unsigned_out, "ERROR_IF(in_t == i48_t && output_unsigned)")
    ctx.error_if(in_t == DType.INT48 and unsigned_in, "ERROR_IF(in_t == i48_t && input_unsigned): no u48 inputs")
    ctx.error_if(in_t == DType.INT32 and unsigned_in, "ERROR_IF(in_t == i32_t && input_unsigned): no u32 inputs")
    ctx.error_if(out_t == DType.INT32 and unsigned_out, "ERROR_IF(out_t == i32_t && output_unsigned): no u32 outputs")

    # Zero points: int8 / uint8 may take any value, uint16 only 0 or 32768, everything else only 0.
    for index, side, dtype, unsigned in ((3, "input", in_t, unsigned_in), (4, "output", out_t, unsigned_out)):
        zp = zero_point(ctx, index)
        if zp is None:
            continue
        name = ctx.inputs[index].name or None
        if dtype == DType.INT16 and unsigned:
            bits = zp & 0xFFFF  # stored as int16: 32768 reads back as -32768
            ctx.error_if(
                bits not in (0, 32768),
                f"ERROR_IF(uint16 {side}_zp != 0 && {side}_zp != 32768): {side}_zp = {bits}",
                name,
            )
        elif dtype != DType.INT8:
            ctx.error_if(
                zp != 0,
                f"ERROR_IF({side}_zp != 0) for {'u' if unsigned else ''}{dtype}: only int8/uint8 "
                f"and uint16 take a non-zero zero point; {side}_zp = {zp}",
                name,
            )

    # apply_scale_32 / apply_scale_16: checked when multiplier and shift are constants.
    multipliers, shifts = ctx.const(1), ctx.const(2)
    if multipliers is not None and multipliers.size:
        low = int(multipliers.min())
        ctx.require(low >= 0, f"REQUIRE(multiplier >= 0): found {low}", multiplier.name or None)
    if shifts is not None and shifts.size:
        low, high = int(shifts.min()), int(shifts.max())
        ctx.require(2 <= low and high <= 62, f"REQUIRE(2 <= shift <= 62): found {low}..{high}", shift.name or None)
    return [value.shape]
