"""Upstream virtio-accel's NVFP4 artifacts: VKNVFP4 projections and VKNVMOE mixtures of experts (ADR 0042).

Both travel under artifact format ``FORMAT`` (0x564E4634) with the 12 target words ``TARGET``; the
payload is the header alone (the weights are bindings of every run, never part of the artifact). All
fields are little-endian u32.

VKNVFP4, exactly 32 bytes:

======  =====  ==============================================================================
offset  bytes  field
======  =====  ==============================================================================
0       8      magic ``b"VKNVFP4\\0"``
8       4      version (1)
12      4      m: rows of x; the batch (mode 1) or the number of experts (mode 2, at most 6)
16      4      n
20      4      k (a multiple of 16)
24      4      activation: 0 none, 1 silu, 2 sigmoid, 3 squared_relu
28      4      weight_mode: 0 one matrix, 1 a stacked batch, 2 one binding pair per expert
======  =====  ==============================================================================

Its bindings, in slot order, are x (m, k) float32, the packed E2M1 nibbles (low nibble first, n * k / 2
bytes per matrix), the E4M3 block scales (n * k / 16 bytes per matrix), the float32 tensor scale (one
per matrix), then y (m, n). Modes 0 and 1 are our :class:`~.projection.Projection` and
:class:`~.projection.BatchedProjection` binding for binding. Mode 2 is our
:class:`~.projection.ExpertProjection` with one row per expert, whose bindings differ in order only:
upstream binds (packed, scales) per expert and then all tensor scales as one (m,) array; ours binds
(packed, scales, tensor_scale) per expert. :func:`arguments` reorders upstream's argument list into ours.

VKNVMOE, exactly 160 bytes: magic ``b"VKNVMOE\\0"`` (0), version 1 (8), batch (12, the number of experts,
1..6), width (16), inner (20, both multiples of 16), expert_bytes (24), then 6 x 4 byte offsets (28..124:
up packed, up scales, down packed, down scales of each expert; those of experts past ``batch`` are 0),
then 36 bytes of 0. It is :class:`~.moe.MoEProjection`, binding for binding.

:func:`read` treats the bytes as hostile: lengths are compared before anything is decoded, every field
is checked against its rule and the bounds of :mod:`.bounds`, and the first fault raises
:class:`HeaderError` naming the field. Nothing is allocated from a header's counts.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.errors import InvalidArgument
from .bounds import ACTIVATIONS, MAX_UPSTREAM_EXPERTS, Form
from .errors import HeaderError
from .moe import PLANES, MoEProjection
from .projection import BatchedProjection, ExpertProjection, Projection, ProjectionArtifact

FORMAT = 0x564E4634  # upstream's artifact format id for both headers
TARGET = (0x564B4E46, 0x50340001) + (0,) * 10  # upstream's target identity of NVFP4 artifacts, version 1
MAGIC = b"VKNVFP4\0"
MOE_MAGIC = b"VKNVMOE\0"
VERSION = 1
HEADER = struct.Struct("<8s6I")
HEADER_BYTES = HEADER.size  # 32
MOE_HEADER = struct.Struct(f"<8s5I{4 * MAX_UPSTREAM_EXPERTS}I36s")
MOE_HEADER_BYTES = MOE_HEADER.size  # 160
MODES = {Form.SINGLE: 0, Form.BATCHED: 1, Form.EXPERTS: 2}  # weight_mode codes


def recognises(data: bytes | bytearray | memoryview) -> bool:
    """Whether ``data`` starts with either upstream magic."""
    head = bytes(data[:8])
    return head in (MAGIC, MOE_MAGIC)


def write(projection: ProjectionArtifact) -> bytes:
    """The upstream artifact bytes of ``projection``. Upstream headers carry no name, so a projection's
    name is not written; HeaderError where a projection has no upstream encoding (an expert form with more
    than one row per expert or more than six experts)."""
    if isinstance(projection, MoEProjection):
        words = [w for four in projection.offsets for w in four]
        words += [0] * (4 * MAX_UPSTREAM_EXPERTS - len(words))
        p = projection
        return MOE_HEADER.pack(MOE_MAGIC, VERSION, p.experts, p.width, p.inner, p.expert_bytes, *words, bytes(36))
    mode = MODES.get(projection.form)
    if mode is None:
        raise HeaderError("form", f"{projection} has no VKNVFP4 encoding")
    if mode == 2 and (projection.m != 1 or projection.count > MAX_UPSTREAM_EXPERTS):
        raise HeaderError(
            "m", f"{projection}: VKNVFP4 binds one row per expert and at most {MAX_UPSTREAM_EXPERTS} experts"
        )
    rows = projection.m if mode == 0 else projection.count
    activation = ACTIVATIONS.index(projection.activation)
    return HEADER.pack(MAGIC, VERSION, rows, projection.n, projection.k, activation, mode)


def read(data: bytes | bytearray | memoryview) -> ProjectionArtifact:
    """The projection an upstream artifact describes; HeaderError naming the first field that breaks its rule."""
    data = bytes(data)
    magic = data[:8]
    if magic == MOE_MAGIC:
        return _read_moe(data)
    if magic != MAGIC:
        raise HeaderError("header.magic", f"must be {MAGIC!r} or {MOE_MAGIC!r}, got {magic!r}")
    if len(data) != HEADER_BYTES:
        raise HeaderError("header", f"a VKNVFP4 artifact is exactly {HEADER_BYTES} bytes, got {len(data)}")
    _, version, m, n, k, activation, mode = HEADER.unpack(data)
    _version(version)
    if activation >= len(ACTIVATIONS):
        raise HeaderError("activation", f"unknown activation code {activation} (0..{len(ACTIVATIONS) - 1})")
    act = ACTIVATIONS[activation]
    if mode == 0:
        return Projection(m=m, n=n, k=k, activation=act)
    if mode == 1:
        return BatchedProjection(batch=m, n=n, k=k, activation=act)
    if mode == 2:
        if not 1 <= m <= MAX_UPSTREAM_EXPERTS:
            raise HeaderError("m", f"the expert-batch mode takes 1..{MAX_UPSTREAM_EXPERTS} experts, got {m}")
        return ExpertProjection(experts=m, m=1, n=n, k=k, activation=act)
    raise HeaderError("weight_mode", f"unknown weight mode {mode} (0 single, 1 batched, 2 expert batch)")


def _version(version: int) -> None:
    if version != VERSION:
        raise HeaderError("header.version", f"version {version} is not supported (this reader takes {VERSION})")


def _read_moe(data: bytes) -> MoEProjection:
    if len(data) != MOE_HEADER_BYTES:
        raise HeaderError("header", f"a VKNVMOE artifact is exactly {MOE_HEADER_BYTES} bytes, got {len(data)}")
    _, version, batch, width, inner, expert_bytes, *rest = MOE_HEADER.unpack(data)
    words, padding = rest[:-1], rest[-1]
    _version(version)
    if not 1 <= batch <= MAX_UPSTREAM_EXPERTS:
        raise HeaderError("batch", f"must be 1..{MAX_UPSTREAM_EXPERTS} experts, got {batch}")
    if any(words[4 * batch :]):
        raise HeaderError("offsets", f"the offsets of experts past batch = {batch} must be 0")
    if any(padding):
        raise HeaderError("header.reserved", "the 36 bytes after the offsets must be 0")
    offsets = tuple(tuple(words[4 * e : 4 * e + 4]) for e in range(batch))
    return MoEProjection(batch, width, inner, expert_bytes, offsets)  # type: ignore[arg-type]


def arguments(projection: ProjectionArtifact, args: Sequence[Any]) -> list[Any]:
    """Upstream's argument list for ``projection`` (as its bindings are ordered, see above) rearranged into
    ours, host arrays reshaped to our operands' shapes. Only the expert-batch form differs in order; its
    tensor scales (one (experts,) array upstream) must be host arrays to be split per expert."""
    if projection.form is not Form.EXPERTS:
        ours = list(args)
    else:
        experts = projection.count
        if len(args) != 2 + 2 * experts:
            raise InvalidArgument(f"upstream binds {2 + 2 * experts} inputs for {projection}, got {len(args)}")
        tensor = np.asarray(args[-1], np.float32).reshape(experts)
        ours = [args[0]]
        for e in range(experts):
            ours += [args[1 + 2 * e], args[2 + 2 * e], tensor[e]]
    return [_shaped(value, operand) for value, operand in zip(ours, projection.inputs, strict=True)]


def _shaped(value: Any, operand: Any) -> Any:
    """A host array viewed in the operand's shape and dtype (upstream's planes are flat bytes)."""
    if not isinstance(value, np.ndarray | np.generic):
        return value  # a DeviceArray, bound as it is
    array = np.asarray(value)
    if array.dtype != operand.dtype and array.dtype.itemsize == operand.dtype.itemsize:
        array = array.view(operand.dtype)
    return array.reshape(operand.shape)


__all__ = ["FORMAT", "MAGIC", "MOE_MAGIC", "PLANES", "TARGET", "arguments", "read", "recognises", "write"]
