"""One :class:`~ironaccel.tosa.builder.ProgramBuilder` method per TOSA 1.0 operator.

The operators models use have typed methods below, whose defaults are the neutral values a model
would pass (zero points 0, stride 1, no padding, a zero bias), so that ``b.conv2d(x, w)`` is a whole
convolution. Every other operator gets a method generated from the specification's argument list
(tensor inputs positional in specification order, attribute fields as keyword arguments, with the
real signature and a docstring for ``help()``). All of them go through ``ProgramBuilder.op``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .builder_types import generated_method, is_value
from .operators import TOSA_1_0_OPS, Op

if TYPE_CHECKING:
    from .builder import Operand, Value
    from .dtypes import DType

Ints = Sequence[int]


def _given(**kw: Any) -> dict[str, Any]:
    """Keyword attributes that were given (None means: the builder's default)."""
    return {k: v for k, v in kw.items() if v is not None}


class OperatorMethods:
    """The operator methods of ProgramBuilder (a mixin: everything ends in ``self.op``)."""

    def op(self, op: Op | str, inputs: Sequence[Operand] = (), **kw: Any) -> Any:
        raise NotImplementedError

    # -- tensor operators ---------------------------------------------------------------------------
    def argmax(self, input: Operand, axis: int = 0, *, nan_mode: str = "propagate", name: str | None = None) -> Value:
        """ARGMAX: index (int32) of the largest value along ``axis``; that axis is removed."""
        return self.op(Op.ARGMAX, [input], axis=axis, nan_mode=nan_mode, name=name)

    def avg_pool2d(
        self,
        input: Operand,
        input_zp: Operand = 0,
        output_zp: Operand = 0,
        *,
        kernel: Ints,
        stride: Ints = (1, 1),
        pad: Ints = (0, 0, 0, 0),
        acc_type: str | None = None,
        name: str | None = None,
    ) -> Value:
        """AVG_POOL2D over NHWC ``input``; pad is (top, bottom, left, right). acc_type defaults to
        the table's (fp32 where fp16 and fp32 are both allowed)."""
        attrs = _given(kernel=kernel, stride=stride, pad=pad, acc_type=acc_type)
        return self.op(Op.AVG_POOL2D, [input, input_zp, output_zp], name=name, **attrs)

    def conv2d(
        self,
        input: Operand,
        weight: Operand,
        bias: Operand = 0,
        input_zp: Operand = 0,
        weight_zp: Operand = 0,
        *,
        pad: Ints = (0, 0, 0, 0),
        stride: Ints = (1, 1),
        dilation: Ints = (1, 1),
        acc_type: str | None = None,
        local_bound: bool = False,
        name: str | None = None,
    ) -> Value:
        """CONV2D: NHWC input, [OC, KH, KW, IC] weight, bias [OC] or [1] (default: one zero of the
        output type). The output type follows the table (int8 x int8 -> int32, int16 x int8 -> int48)."""
        attrs = _given(pad=pad, stride=stride, dilation=dilation, acc_type=acc_type, local_bound=local_bound)
        return self.op(Op.CONV2D, [input, weight, bias, input_zp, weight_zp], name=name, **attrs)

    def depthwise_conv2d(
        self,
        input: Operand,
        weight: Operand,
        bias: Operand = 0,
        input_zp: Operand = 0,
        weight_zp: Operand = 0,
        *,
        pad: Ints = (0, 0, 0, 0),
        stride: Ints = (1, 1),
        dilation: Ints = (1, 1),
        acc_type: str | None = None,
        local_bound: bool = False,
        name: str | None = None,
    ) -> Value:
        """DEPTHWISE_CONV2D: NHWC input, [KH, KW, C, M] weight; C*M output channels."""
        attrs = _given(pad=pad, stride=stride, dilation=dilation, acc_type=acc_type, local_bound=local_bound)
        return self.op(Op.DEPTHWISE_CONV2D, [input, weight, bias, input_zp, weight_zp], name=name, **attrs)

    def transpose_conv2d(
        self,
        input: Operand,
        weight: Operand,
        bias: Operand = 0,
        input_zp: Operand = 0,
        weight_zp: Operand = 0,
        *,
        out_pad: Ints = (0, 0, 0, 0),
        stride: Ints = (1, 1),
        acc_type: str | None = None,
        local_bound: bool = False,
        name: str | None = None,
    ) -> Value:
        """TRANSPOSE_CONV2D: NHWC input, [OC, KH, KW, IC] weight; out_pad is (top, bottom, left, right)."""
        attrs = _given(out_pad=out_pad, stride=stride, acc_type=acc_type, local_bound=local_bound)
        return self.op(Op.TRANSPOSE_CONV2D, [input, weight, bias, input_zp, weight_zp], name=name, **attrs)

    def matmul(self, a: Operand, b: Operand, a_zp: Operand = 0, b_zp: Operand = 0, *, name: str | None = None) -> Value:
        """MATMUL: [N, H, C] x [N, C, W] -> [N, H, W] (int8 -> int32, int16 -> int48, fp -> as table)."""
        return self.op(Op.MATMUL, [a, b, a_zp, b_zp], name=name)

    def max_pool2d(
        self,
        input: Operand,
        *,
        kernel: Ints,
        stride: Ints = (1, 1),
        pad: Ints = (0, 0, 0, 0),
        nan_mode: str = "propagate",
        name: str | None = None,
    ) -> Value:
        """MAX_POOL2D over NHWC ``input``; pad is (top, bottom, left, right)."""
        return self.op(Op.MAX_POOL2D, [input], kernel=kernel, stride=stride, pad=pad, nan_mode=nan_mode, name=name)

    # -- activations --------------------------------------------------------------------------------
    def clamp(
        self, input: Operand, min_val: float, max_val: float, *, nan_mode: str = "propagate", name: str | None = None
    ) -> Value:
        """CLAMP to [min_val, max_val], given as numbers of the input's type."""
        return self.op(Op.CLAMP, [input], min_val=min_val, max_val=max_val, nan_mode=nan_mode, name=name)

    def erf(self, input: Operand, *, name: str | None = None) -> Value:
        """ERF, element-wise."""
        return self.op(Op.ERF, [input], name=name)

    def sigmoid(self, input: Operand, *, name: str | None = None) -> Value:
        """SIGMOID, element-wise."""
        return self.op(Op.SIGMOID, [input], name=name)

    def tanh(self, input: Operand, *, name: str | None = None) -> Value:
        """TANH, element-wise."""
        return self.op(Op.TANH, [input], name=name)

    # -- element-wise binary (equal ranks, size-1 dimensions broadcast) ----------------------------
    def add(self, input1: Operand, input2: Operand, *, name: str | None = None) -> Value:
        """ADD; a Python number becomes a rank-matched constant of the other operand's type."""
        return self.op(Op.ADD, [input1, input2], name=name)

    def sub(self, input1: Operand, input2: Operand, *, name: str | None = None) -> Value:
        """SUB: input1 - input2."""
        return self.op(Op.SUB, [input1, input2], name=name)

    def mul(self, input1: Operand, input2: Operand, shift: Operand = 0, *, name: str | None = None) -> Value:
        """MUL; ``shift`` (int8, 0 except for int32) rounds the product right. int8/int16 -> int32."""
        return self.op(Op.MUL, [input1, input2, shift], name=name)

    def maximum(
        self, input1: Operand, input2: Operand, *, nan_mode: str = "propagate", name: str | None = None
    ) -> Value:
        """MAXIMUM, element-wise."""
        return self.op(Op.MAXIMUM, [input1, input2], nan_mode=nan_mode, name=name)

    def minimum(
        self, input1: Operand, input2: Operand, *, nan_mode: str = "propagate", name: str | None = None
    ) -> Value:
        """MINIMUM, element-wise."""
        return self.op(Op.MINIMUM, [input1, input2], nan_mode=nan_mode, name=name)

    def pow(self, input1: Operand, input2: Operand, *, name: str | None = None) -> Value:
        """POW: input1 ** input2 (floating point)."""
        return self.op(Op.POW, [input1, input2], name=name)

    def table(self, input: Operand, table: Operand, *, name: str | None = None) -> Value:
        """TABLE lookup: int8 with a 256-entry int8 table, int16 with a 513-entry int16 table (-> int32)."""
        return self.op(Op.TABLE, [input, table], name=name)

    # -- element-wise unary -------------------------------------------------------------------------
    def abs(self, input: Operand, *, name: str | None = None) -> Value:
        """ABS."""
        return self.op(Op.ABS, [input], name=name)

    def ceil(self, input: Operand, *, name: str | None = None) -> Value:
        """CEIL."""
        return self.op(Op.CEIL, [input], name=name)

    def cos(self, input: Operand, *, name: str | None = None) -> Value:
        """COS."""
        return self.op(Op.COS, [input], name=name)

    def exp(self, input: Operand, *, name: str | None = None) -> Value:
        """EXP."""
        return self.op(Op.EXP, [input], name=name)

    def floor(self, input: Operand, *, name: str | None = None) -> Value:
        """FLOOR."""
        return self.op(Op.FLOOR, [input], name=name)

    def log(self, input: Operand, *, name: str | None = None) -> Value:
        """LOG (natural)."""
        return self.op(Op.LOG, [input], name=name)

    def negate(
        self, input: Operand, input_zp: Operand = 0, output_zp: Operand = 0, *, name: str | None = None
    ) -> Value:
        """NEGATE, with zero points for int8 (0 otherwise)."""
        return self.op(Op.NEGATE, [input, input_zp, output_zp], name=name)

    def reciprocal(self, input: Operand, *, name: str | None = None) -> Value:
        """RECIPROCAL: 1 / x."""
        return self.op(Op.RECIPROCAL, [input], name=name)

    def rsqrt(self, input: Operand, *, name: str | None = None) -> Value:
        """RSQRT: 1 / sqrt(x)."""
        return self.op(Op.RSQRT, [input], name=name)

    def sin(self, input: Operand, *, name: str | None = None) -> Value:
        """SIN."""
        return self.op(Op.SIN, [input], name=name)

    # -- selection and comparison -------------------------------------------------------------------
    def select(self, condition: Operand, on_true: Operand, on_false: Operand, *, name: str | None = None) -> Value:
        """SELECT: on_true where the bool condition holds, else on_false."""
        return self.op(Op.SELECT, [condition, on_true, on_false], name=name)

    def equal(self, input1: Operand, input2: Operand, *, name: str | None = None) -> Value:
        """EQUAL -> bool."""
        return self.op(Op.EQUAL, [input1, input2], name=name)

    def greater(self, input1: Operand, input2: Operand, *, name: str | None = None) -> Value:
        """GREATER -> bool."""
        return self.op(Op.GREATER, [input1, input2], name=name)

    def greater_equal(self, input1: Operand, input2: Operand, *, name: str | None = None) -> Value:
        """GREATER_EQUAL -> bool."""
        return self.op(Op.GREATER_EQUAL, [input1, input2], name=name)

    # -- reductions (the axis is kept, with size 1) -------------------------------------------------
    def reduce_all(self, input: Operand, axis: int, *, name: str | None = None) -> Value:
        """REDUCE_ALL over a bool tensor."""
        return self.op(Op.REDUCE_ALL, [input], axis=axis, name=name)

    def reduce_any(self, input: Operand, axis: int, *, name: str | None = None) -> Value:
        """REDUCE_ANY over a bool tensor."""
        return self.op(Op.REDUCE_ANY, [input], axis=axis, name=name)

    def reduce_max(self, input: Operand, axis: int, *, nan_mode: str = "propagate", name: str | None = None) -> Value:
        """REDUCE_MAX."""
        return self.op(Op.REDUCE_MAX, [input], axis=axis, nan_mode=nan_mode, name=name)

    def reduce_min(self, input: Operand, axis: int, *, nan_mode: str = "propagate", name: str | None = None) -> Value:
        """REDUCE_MIN."""
        return self.op(Op.REDUCE_MIN, [input], axis=axis, nan_mode=nan_mode, name=name)

    def reduce_product(self, input: Operand, axis: int, *, name: str | None = None) -> Value:
        """REDUCE_PRODUCT."""
        return self.op(Op.REDUCE_PRODUCT, [input], axis=axis, name=name)

    def reduce_sum(self, input: Operand, axis: int, *, name: str | None = None) -> Value:
        """REDUCE_SUM."""
        return self.op(Op.REDUCE_SUM, [input], axis=axis, name=name)

    # -- data layout --------------------------------------------------------------------------------
    def concat(self, inputs: Sequence[Operand], axis: int = 0, *, name: str | None = None) -> Value:
        """CONCAT along ``axis``."""
        return self.op(Op.CONCAT, list(inputs), axis=axis, name=name)

    def pad(self, input: Operand, padding: Any, pad_const: Operand = 0, *, name: str | None = None) -> Value:
        """PAD; ``padding`` is [before0, after0, before1, after1, ...] or a list of (before, after)."""
        if not is_value(padding):
            padding = np.asarray(padding).reshape(-1).tolist()
        return self.op(Op.PAD, [input, padding, pad_const], name=name)

    def reshape(self, input: Operand, shape: Any, *, name: str | None = None) -> Value:
        """RESHAPE to ``shape`` (a list, where one -1 is worked out here, or a const_shape Value)."""
        if not is_value(shape):
            shape = [int(d) for d in shape]
            if shape.count(-1) == 1 and hasattr(input, "shape"):
                known = int(np.prod([d for d in shape if d != -1]))
                shape[shape.index(-1)] = int(np.prod(input.shape)) // max(known, 1)
        return self.op(Op.RESHAPE, [input, shape], name=name)

    def reverse(self, input: Operand, axis: int, *, name: str | None = None) -> Value:
        """REVERSE along ``axis``."""
        return self.op(Op.REVERSE, [input], axis=axis, name=name)

    def slice(self, input: Operand, start: Any, size: Any, *, name: str | None = None) -> Value:
        """SLICE: ``size`` elements from ``start`` in every dimension."""
        return self.op(Op.SLICE, [input, start, size], name=name)

    def tile(self, input: Operand, multiples: Any, *, name: str | None = None) -> Value:
        """TILE: repeat ``multiples[i]`` times along dimension i."""
        return self.op(Op.TILE, [input, multiples], name=name)

    def transpose(self, input: Operand, perms: Ints, *, name: str | None = None) -> Value:
        """TRANSPOSE: output dimension i is input dimension perms[i]."""
        return self.op(Op.TRANSPOSE, [input], perms=perms, name=name)

    # -- scatter / gather, image, type conversion ---------------------------------------------------
    def gather(self, values: Operand, indices: Operand, *, name: str | None = None) -> Value:
        """GATHER: values [N, K, C], int32 indices [N, W] -> [N, W, C]."""
        return self.op(Op.GATHER, [values, indices], name=name)

    def scatter(self, values_in: Operand, indices: Operand, input: Operand, *, name: str | None = None) -> Value:
        """SCATTER: values_in [N, K, C] with rows indices [N, W] replaced by input [N, W, C]."""
        return self.op(Op.SCATTER, [values_in, indices, input], name=name)

    def resize(
        self,
        input: Operand,
        scale: Any,
        offset: Any = (0, 0),
        border: Any = (0, 0),
        *,
        mode: str,
        out_dtype: str | None = None,
        name: str | None = None,
    ) -> Value:
        """RESIZE (``mode`` "nearest" or "bilinear"); scale is (y_n, y_d, x_n, x_d). ``out_dtype`` where
        the input type allows several (int8: int8 for NEAREST, int32 for BILINEAR)."""
        return self.op(Op.RESIZE, [input, scale, offset, border], mode=mode, name=name, out_dtype=out_dtype)

    def cast(self, input: Operand, out_dtype: str | DType, *, name: str | None = None) -> Value:
        """CAST to ``out_dtype`` (one of the pairs of the table)."""
        return self.op(Op.CAST, [input], out_dtype=out_dtype, name=name)

    def rescale(
        self,
        input: Operand,
        multiplier: Operand,
        shift: Operand,
        input_zp: Operand = 0,
        output_zp: Operand = 0,
        *,
        out_dtype: str | DType,
        scale32: bool = True,
        rounding_mode: str = "single_round",
        per_channel: bool = False,
        input_unsigned: bool = False,
        output_unsigned: bool = False,
        name: str | None = None,
    ) -> Value:
        """RESCALE: (x - input_zp) * multiplier >> shift + output_zp. A Python multiplier becomes int32
        (int16 without scale32); unsigned zero points (128) are stored in the signed type's bits."""
        in_type = getattr(input, "dtype", None)
        zps = [_signed(input_zp, input_unsigned, in_type), _signed(output_zp, output_unsigned, out_dtype)]
        attrs = {"scale32": scale32, "rounding_mode": rounding_mode, "per_channel": per_channel}
        attrs.update(input_unsigned=input_unsigned, output_unsigned=output_unsigned)
        inputs = [input, multiplier, shift, *zps]
        return self.op(Op.RESCALE, inputs, out_dtype=out_dtype, name=name, **attrs)

    def identity(self, input: Operand, *, name: str | None = None) -> Value:
        """IDENTITY: a copy (a view, for the memory planner)."""
        return self.op(Op.IDENTITY, [input], name=name)

    def custom(
        self,
        inputs: Sequence[Operand],
        outputs: Sequence[tuple[Sequence[int], str | DType]],
        *,
        operator_name: str,
        domain_name: str = "",
        implementation_attrs: bytes = b"",
        name: str | None = None,
    ) -> tuple[Value, ...]:
        """CUSTOM: an implementation-defined operator; ``outputs`` declares (shape, dtype) per output."""
        shapes, dtypes = [list(s) for s, _ in outputs], [d for _, d in outputs]
        attrs = {
            "operator_name": operator_name,
            "domain_name": domain_name,
            "implementation_attrs": implementation_attrs,
        }
        return self.op(Op.CUSTOM, list(inputs), out_shape=shapes, out_dtype=dtypes, name=name, **attrs)


def _signed(zero_point: Any, unsigned: bool, dtype: Any) -> Any:
    """An unsigned zero point (128 for uint8) as the value of the signed type with the same bits."""
    from .dtypes import DType

    if not unsigned or not isinstance(zero_point, int | np.integer) or dtype is None:
        return zero_point
    bits = DType.parse(dtype).bits
    half = 1 << (bits - 1)
    return int(zero_point) - 2 * half if half <= zero_point < 2 * half else int(zero_point)


OWN_METHODS = ("const", "const_shape", "cond_if", "while_loop", "variable", "variable_read", "variable_write")
for _op in TOSA_1_0_OPS:
    if _op.name.lower() not in OWN_METHODS and not hasattr(OperatorMethods, _op.name.lower()):
        setattr(OperatorMethods, _op.name.lower(), generated_method(_op))
