"""The serialized NVFP4 projection artifact: a fixed 64-byte little-endian header and an optional name.

======  =====  ==============================================================================
offset  bytes  field
======  =====  ==============================================================================
0       4      magic ``b"NVF4"`` (the artifact format id 0x3446564E read as a little-endian u32)
4       2      version (1)
6       2      header_bytes (64)
8       1      form: 1 single, 2 batched, 3 experts
9       1      activation: 0 none, 1 silu, 2 sigmoid, 3 squared_relu
10      2      reserved, 0
12      4      m (1 for the batched form)
16      4      n
20      4      k (a multiple of 16)
24      4      count: 1, the batch or the number of experts
28      4      reserved, 0
32      8      weight_bytes: packed bytes of one weight matrix, n * k / 2
40      8      scale_bytes: scale bytes of one weight matrix, n * k / 16
48      4      name_offset (64: the name follows the header)
52      4      name_length (at most 256)
56      8      total_bytes: header_bytes + name_length, the exact length of the artifact
======  =====  ==============================================================================

The byte counts repeat what n and k imply so that a reader in another language can check its own
size arithmetic against the writer's before binding buffers. :func:`read` treats the bytes as hostile:
every field is checked against its rule and the bounds of :mod:`.bounds`, lengths are compared with
the data actually present, and the first fault raises :class:`HeaderError` naming the field.
"""

from __future__ import annotations

import struct

from .bounds import ACTIVATIONS, BLOCK, MAX_NAME_BYTES, Form, check_name, check_shape
from .errors import HeaderError
from .projection import BatchedProjection, ExpertProjection, Projection, ProjectionArtifact

MAGIC = b"NVF4"
VERSION = 1
HEADER = struct.Struct("<4sHHBBHIIIIIQQIIQ")
HEADER_BYTES = HEADER.size  # 64


def write(projection: ProjectionArtifact) -> bytes:
    """The artifact bytes of ``projection`` (already checked when it was constructed)."""
    name = projection.name.encode("utf-8")
    n, k = projection.n, projection.k
    header = HEADER.pack(
        MAGIC,
        VERSION,
        HEADER_BYTES,
        int(projection.form),
        ACTIVATIONS.index(projection.activation),
        0,
        projection.m,
        n,
        k,
        projection.count,
        0,
        n * k // 2,
        n * k // BLOCK,
        HEADER_BYTES,
        len(name),
        HEADER_BYTES + len(name),
    )
    return header + name


def read(data: bytes | bytearray | memoryview) -> ProjectionArtifact:
    """The projection ``data`` describes; HeaderError naming the first field that breaks its rule."""
    data = bytes(data)
    if len(data) < HEADER_BYTES:
        raise HeaderError("header", f"truncated: {len(data)} bytes, the header takes {HEADER_BYTES}")
    (
        magic,
        version,
        header_bytes,
        form_code,
        activation_code,
        reserved0,
        m,
        n,
        k,
        count,
        reserved1,
        weight_bytes,
        scale_bytes,
        name_offset,
        name_length,
        total_bytes,
    ) = HEADER.unpack_from(data)
    if magic != MAGIC:
        raise HeaderError("header.magic", f"must be {MAGIC!r}, got {magic!r}")
    if version != VERSION:
        raise HeaderError("header.version", f"version {version} is not supported (this reader takes {VERSION})")
    if header_bytes != HEADER_BYTES:
        raise HeaderError("header.header_bytes", f"must be {HEADER_BYTES}, got {header_bytes}")
    try:
        form = Form(form_code)
    except ValueError:
        raise HeaderError("header.form", f"unknown form {form_code} (1 single, 2 batched, 3 experts)") from None
    if form is Form.MOE:  # its offsets do not fit this header: VKNVMOE (.upstream) carries it
        raise HeaderError("header.form", "form 4 (MoE) has no NVF4 encoding; it is carried by a VKNVMOE artifact")
    if activation_code >= len(ACTIVATIONS):
        raise HeaderError("activation", f"unknown activation code {activation_code} (0..{len(ACTIVATIONS) - 1})")
    if reserved0 or reserved1:
        raise HeaderError("header.reserved", "reserved fields must be 0")
    check_shape(form, m, n, k, count)
    if weight_bytes != n * k // 2:
        raise HeaderError("header.weight_bytes", f"must be n * k / 2 = {n * k // 2}, got {weight_bytes}")
    if scale_bytes != n * k // BLOCK:
        raise HeaderError("header.scale_bytes", f"must be n * k / {BLOCK} = {n * k // BLOCK}, got {scale_bytes}")
    if name_offset != HEADER_BYTES:
        raise HeaderError("header.name_offset", f"must be {HEADER_BYTES} (the name follows the header)")
    if name_length > MAX_NAME_BYTES:
        raise HeaderError("header.name_length", f"{name_length} exceeds the bound of {MAX_NAME_BYTES} bytes")
    if total_bytes != name_offset + name_length:
        raise HeaderError("header.total_bytes", f"must be {name_offset + name_length}, got {total_bytes}")
    if len(data) < total_bytes:
        raise HeaderError("header.total_bytes", f"truncated: header says {total_bytes} bytes, {len(data)} given")
    if len(data) > total_bytes:
        raise HeaderError("header.total_bytes", f"{len(data) - total_bytes} bytes follow the artifact's end")
    try:
        name = check_name(data[name_offset:total_bytes].decode("utf-8"))
    except UnicodeDecodeError:
        raise HeaderError("name", "is not valid UTF-8") from None
    activation = ACTIVATIONS[activation_code]
    if form is Form.SINGLE:
        return Projection(m=m, n=n, k=k, activation=activation, name=name)
    if form is Form.BATCHED:
        return BatchedProjection(batch=count, n=n, k=k, activation=activation, name=name)
    return ExpertProjection(experts=count, m=m, n=n, k=k, activation=activation, name=name)
