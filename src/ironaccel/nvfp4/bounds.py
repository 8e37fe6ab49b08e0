"""The bounds every NVFP4 projection obeys, checked before anything is allocated.

The same checks run when a projection is constructed and when its header is read from bytes, so a
hostile header and a wrong argument fail the same way: :class:`HeaderError` naming the field. Sizes
are computed with Python integers (they cannot wrap) and compared against :data:`MAX_OPERAND_BYTES`
before any array of that size exists.
"""

from __future__ import annotations

import enum

from .errors import HeaderError

BLOCK = 16  # elements along k sharing one FP8 E4M3 scale

MAX_M = 1 << 16  # rows of x per product
MAX_N = 1 << 18  # output features (a vocabulary projection fits)
MAX_K = 1 << 18  # input features, a multiple of BLOCK
MAX_BATCH = 1 << 16  # independent (1, k) x (n, k) products of the batched form
MAX_EXPERTS = 1 << 10  # experts of the expert-batch form (three bindings each)
# Experts of upstream virtio-accel's expert-batch and MoE artifacts (its descriptor budget); a VKNVFP4
# header (:mod:`.upstream`) with more is refused.
MAX_UPSTREAM_EXPERTS = 6
MAX_OPERAND_BYTES = 1 << 36  # any one operand (x, all packed weights, all scales, y)
MAX_NAME_BYTES = 256  # the optional UTF-8 label

ACTIVATIONS = ("none", "silu", "sigmoid", "squared_relu")  # header code = index


class Form(enum.IntEnum):
    """Which projection shape an artifact describes (the first three are also NVF4 header codes)."""

    SINGLE = 1  # y (m, n) = act(x (m, k) @ w_hat (n, k).T)
    BATCHED = 2  # y[b] (n,) = act(x[b] (k,) @ w_hat[b].T): one weight matrix per row, stacked
    EXPERTS = 3  # y[e] (m, n) = act(x[e] (m, k) @ w_hat_e.T): each expert's weights separate bindings
    # y[e] = (max(x[e] @ up_hat_e.T, 0)^2) @ down_hat_e.T: one row per expert, up and down projections in
    # one binding per expert (:mod:`.moe`); it has no NVF4 encoding, only upstream's VKNVMOE
    MOE = 4


def _count(field: str, value: object, low: int, high: int) -> int:
    if type(value) is not int or not low <= value <= high:
        raise HeaderError(field, f"must be an integer in [{low}, {high}], got {value!r}")
    return value


def check_shape(form: Form, m: object, n: object, k: object, count: object) -> None:
    """Raise HeaderError naming the first field out of bounds; afterwards every operand fits its bound."""
    limit_m = 1 if form is Form.BATCHED else MAX_M
    _count("m", m, 1, limit_m)
    _count("n", n, 1, MAX_N)
    _count("k", k, BLOCK, MAX_K)
    if k % BLOCK:  # type: ignore[operator]
        raise HeaderError("k", f"must be a multiple of {BLOCK} (one scale per {BLOCK} elements), got {k}")
    if form is Form.SINGLE:
        _count("count", count, 1, 1)
    elif form is Form.BATCHED:
        _count("batch", count, 1, MAX_BATCH)
    else:
        _count("experts", count, 1, MAX_EXPERTS)
    sizes = {
        "x": count * m * k * 4,  # type: ignore[operator]
        "packed": count * n * k // 2,  # type: ignore[operator]
        "scales": count * n * k // BLOCK,  # type: ignore[operator]
        "y": count * m * n * 4,  # type: ignore[operator]
    }
    for name, size in sizes.items():
        if size > MAX_OPERAND_BYTES:
            raise HeaderError(name, f"operand of {size} bytes exceeds the bound of {MAX_OPERAND_BYTES} bytes")


def check_activation(value: object) -> str:
    if value not in ACTIVATIONS:
        raise HeaderError("activation", f"must be one of {', '.join(ACTIVATIONS)}; got {value!r}")
    return value  # type: ignore[return-value]


def check_name(value: object) -> str:
    if not isinstance(value, str):
        raise HeaderError("name", f"must be a string, got {type(value).__name__}")
    # Surrogates are not printable, so the encoding below cannot fail.
    if not value.isprintable() or len(value.encode("utf-8")) > MAX_NAME_BYTES:
        raise HeaderError("name", f"must be printable and at most {MAX_NAME_BYTES} UTF-8 bytes")
    return value
