"""What a file that is not a TOSA flatbuffer looks like, from its first bytes.

A user who hands IronAccel an ONNX model, an ExecuTorch program or a PyTorch checkpoint should hear
what they gave and what to do, not only that the flatbuffer identifier is wrong. Only the first bytes
are read; a guess is named as one ("looks like").
"""

from __future__ import annotations

# (what it is, what to do with it), keyed by a test on the first bytes; the first match wins.
_CONVERT = "export it to TOSA first (see docs/guide.md: ExecuTorch's Arm TOSA backend, or torch-mlir)"


def _flatbuffer_id(head: bytes) -> bytes:
    return head[4:8] if len(head) >= 8 else b""


def _onnx(head: bytes) -> bool:
    # A ModelProto starts with field 1 (ir_version, a small varint), then field 2 or 8 (producer / opset).
    return len(head) >= 3 and head[0] == 0x08 and 0 < head[1] < 0x20 and head[2] in (0x12, 0x1A, 0x22, 0x3A, 0x42)


def _safetensors(head: bytes) -> bool:
    return len(head) >= 9 and head[8:9] == b"{" and int.from_bytes(head[:8], "little") < 1 << 32


_KINDS: tuple[tuple[str, object], ...] = (
    ("an ExecuTorch program (.pte): " + _CONVERT, lambda h: _flatbuffer_id(h)[:2] == b"ET"),
    ("a TensorFlow Lite model: " + _CONVERT, lambda h: _flatbuffer_id(h) == b"TFL3"),
    ("a zip archive (a PyTorch .pt checkpoint? an .npz?): " + _CONVERT, lambda h: h[:4] == b"PK\x03\x04"),
    ("a Python pickle (a PyTorch checkpoint?): " + _CONVERT, lambda h: len(h) >= 2 and h[0] == 0x80 and 2 <= h[1] <= 5),
    ("a numpy array (.npy): give it as an input (-i), not as the program", lambda h: h[:6] == b"\x93NUMPY"),
    ("a GGUF model: not a TOSA program", lambda h: h[:4] == b"GGUF"),
    ("an HDF5 file (a Keras model?): " + _CONVERT, lambda h: h[:4] == b"\x89HDF"),
    ("a safetensors file (weights only): " + _CONVERT, _safetensors),
    ("an ELF binary: not a TOSA program", lambda h: h[:4] == b"\x7fELF"),
    ("an ONNX model: convert it to TOSA first (torch-mlir's ONNX importer, then tosa-opt; see docs/guide.md)", _onnx),
    (
        "MLIR text (TOSA dialect?): serialize it with tosa-opt --tosa-serialize",
        lambda h: h.lstrip()[:6] in (b"module", b"func.f") or h.lstrip()[:1] == b"#",
    ),
)


def looks_like(data: bytes | bytearray | memoryview) -> str | None:
    """A one-phrase account of what ``data`` seems to be when it is not a TOSA flatbuffer, or None."""
    head = bytes(memoryview(data)[:64])
    for what, test in _KINDS:
        if test(head):  # type: ignore[operator]
            return what
    if head and all(32 <= b < 127 or b in (9, 10, 13) for b in head):
        return "text, not a binary TOSA flatbuffer"
    return None


__all__ = ["looks_like"]
