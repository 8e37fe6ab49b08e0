"""The mixture-of-experts form of upstream virtio-accel's NVFP4 artifacts (VKNVMOE, ADR 0042).

One routed token per expert goes through that expert's two NVFP4 projections with a squared ReLU
between them::

    h[e] = max(x[e] @ up_hat_e.T, 0)^2       up_hat_e (inner, width): the up projection's decode
    y[e] = h[e] @ down_hat_e.T               down_hat_e (width, inner)

Each expert's four weight planes live in one binding of ``expert_bytes`` bytes (a cache slot holding
the expert as it was loaded), at the byte offsets the artifact names: up packed (inner, width/2), up
scales (inner, width/16), down packed (width, inner/2), down scales (width, inner/16). The two tensor
scales are one float32 per expert each, in bindings of their own::

    exe(x, blob_0, ..., blob_{E-1}, up_tensor_scale, down_tensor_scale) -> y
    x (E, width) float32, blob_e (expert_bytes,) uint8, *_tensor_scale (E,) float32, y (E, width)

:func:`pack_expert` lays out one expert's planes the way :meth:`MoEProjection.packed` describes them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from .bounds import BLOCK, MAX_K, MAX_N, MAX_UPSTREAM_EXPERTS, Form, check_name
from .errors import HeaderError
from .projection import Operand, ProjectionArtifact
from .quantize import E4M3_DTYPE, QuantizedWeights

_F32 = np.dtype(np.float32)
_U8 = np.dtype(np.uint8)
PLANES = ("up_packed", "up_scales", "down_packed", "down_scales")  # the order of each expert's offsets
PLANE_ALIGNMENT = 4  # upstream's rule: every plane starts on a 32-bit word of its binding


def _count(field: str, value: object, low: int, high: int) -> int:
    if type(value) is not int or not low <= value <= high:
        raise HeaderError(field, f"must be an integer in [{low}, {high}], got {value!r}")
    return value


@dataclasses.dataclass(frozen=True)
class MoEProjection(ProjectionArtifact):
    """Up projection, squared ReLU, down projection for ``experts`` routed tokens (one row each)."""

    experts: int
    width: int
    inner: int
    expert_bytes: int
    offsets: tuple[tuple[int, int, int, int], ...]
    name: str = ""
    form: ClassVar[Form] = Form.MOE
    activation: ClassVar[str] = "squared_relu"  # between the projections; none after the down projection

    def __post_init__(self) -> None:
        _count("experts", self.experts, 1, MAX_UPSTREAM_EXPERTS)
        for field, value, high in (("width", self.width, min(MAX_N, MAX_K)), ("inner", self.inner, MAX_N)):
            _count(field, value, BLOCK, high)
            if value % BLOCK:
                raise HeaderError(field, f"must be a multiple of {BLOCK}, got {value}")
        _count("expert_bytes", self.expert_bytes, 1, 0xFFFFFFFF)
        offsets = self.offsets
        if not isinstance(offsets, tuple) or len(offsets) != self.experts:
            raise HeaderError("offsets", f"must be a tuple of {self.experts} (one per expert), got {offsets!r}")
        sizes = self.plane_bytes
        for e, four in enumerate(offsets):
            if not isinstance(four, tuple) or len(four) != len(PLANES):
                raise HeaderError(f"offsets[{e}]", f"must be a tuple of 4 byte offsets {PLANES}, got {four!r}")
            for plane, offset, size in zip(PLANES, four, sizes, strict=True):
                field = f"offsets[{e}].{plane}"
                _count(field, offset, 0, 0xFFFFFFFF)
                if offset % PLANE_ALIGNMENT:
                    raise HeaderError(field, f"must be a multiple of {PLANE_ALIGNMENT}, got {offset}")
                if offset + size > self.expert_bytes:
                    raise HeaderError(
                        field, f"plane of {size} bytes at {offset} ends past expert_bytes = {self.expert_bytes}"
                    )
        check_name(self.name)

    @classmethod
    def packed(cls, experts: int, width: int, inner: int, name: str = "") -> MoEProjection:
        """The projection whose experts are laid out as :func:`pack_expert` lays them out."""
        sizes = [width * inner // 2, width * inner // BLOCK] * 2
        offsets, top = [], 0
        for size in sizes:
            offsets.append(top)
            top += -(-size // PLANE_ALIGNMENT) * PLANE_ALIGNMENT
        return cls(experts, width, inner, top, (tuple(offsets),) * experts, name)  # type: ignore[arg-type]

    @property
    def plane_bytes(self) -> tuple[int, int, int, int]:
        """Bytes of the up packed, up scales, down packed and down scales planes of one expert."""
        packed, scales = self.width * self.inner // 2, self.width * self.inner // BLOCK
        return packed, scales, packed, scales

    # The fields every form has, as the up projection sees them (m rows of x per expert, n outputs, k inputs).
    @property
    def m(self) -> int:  # type: ignore[override]
        return 1

    @property
    def n(self) -> int:  # type: ignore[override]
        return self.inner

    @property
    def k(self) -> int:  # type: ignore[override]
        return self.width

    @property
    def count(self) -> int:
        return self.experts

    def _check(self) -> None:  # __post_init__ checks this form's own fields
        pass

    @property
    def inputs(self) -> tuple[Operand, ...]:
        blobs = [Operand(f"expert{e}", (self.expert_bytes,), _U8) for e in range(self.experts)]
        return (
            Operand("x", (self.experts, self.width), _F32),
            *blobs,
            Operand("up_tensor_scale", (self.experts,), _F32),
            Operand("down_tensor_scale", (self.experts,), _F32),
        )

    @property
    def outputs(self) -> tuple[Operand, ...]:
        return (Operand("y", (self.experts, self.width), _F32),)

    def planes(self, blob: np.ndarray, expert: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Views of expert ``expert``'s four planes in its binding ``blob`` (uint8): up packed (inner,
        width/2), up scales (inner, width/16) as E4M3, down packed (width, inner/2), down scales (width,
        inner/16) as E4M3."""
        flat = np.asarray(blob).reshape(-1)
        shapes = (
            (self.inner, self.width // 2),
            (self.inner, self.width // BLOCK),
            (self.width, self.inner // 2),
            (self.width, self.inner // BLOCK),
        )
        views = []
        for i, (offset, size, shape) in enumerate(zip(self.offsets[expert], self.plane_bytes, shapes, strict=True)):
            view = flat[offset : offset + size].reshape(shape)
            views.append(view.view(E4M3_DTYPE) if i % 2 else view)
        return views[0], views[1], views[2], views[3]

    def to_bytes(self) -> bytes:
        from .upstream import write

        return write(self)

    def _dims(self) -> str:
        return f"experts={self.experts}, width={self.width}, inner={self.inner}, expert_bytes={self.expert_bytes}"


def pack_expert(up: QuantizedWeights, down: QuantizedWeights) -> np.ndarray:
    """One expert's binding: up (inner, width) and down (width, inner) weights, each plane at the offset
    :meth:`MoEProjection.packed` gives it (the tensor scales are operands of their own)."""
    up.check()
    down.check()
    if up.packed.ndim != 2 or down.packed.ndim != 2 or (up.n, up.k) != (down.k, down.n):
        raise HeaderError(
            "weights",
            f"up must be (inner, width) and down (width, inner), got {up.packed.shape} and {down.packed.shape}",
        )
    layout = MoEProjection.packed(1, up.k, up.n)
    blob = np.zeros(layout.expert_bytes, np.uint8)
    planes: Sequence[np.ndarray] = (up.packed, up.scales, down.packed, down.scales)
    for offset, plane in zip(layout.offsets[0], planes, strict=True):
        data = np.ascontiguousarray(plane).view(np.uint8).reshape(-1)
        blob[offset : offset + data.size] = data
    return blob
