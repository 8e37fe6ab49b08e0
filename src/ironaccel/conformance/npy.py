"""Tensors in the ``.npy`` forms the TOSA conformance tools read and write.

The suite stores bf16 and fp8e4m3 as little-endian void (``'<V2'``, ``'<V1'``) and fp8e5m2 as uint8,
because numpy has no such types; the reference model and ``tosa_verify`` read exactly those forms. INT4
values sit one per int8, INT48 in int64, SHAPE in int64 — the storage dtypes IronAccel already uses.

Files named by a user or a test are hostile: they are read whole through
:func:`~ironaccel.core.files.read_limited` (at most :data:`MAX_ARRAY_FILE_BYTES`) and parsed here from
bytes, header first, so a file is refused before anything is allocated from what it claims. Only plain
numeric arrays are accepted: never pickled objects, structured or subarray dtypes. Every refusal is an
:class:`~ironaccel.core.errors.InvalidArgument` (or ``ResourceLimit`` for size) naming the file.
"""

from __future__ import annotations

import io
import math
import os
import zipfile
from pathlib import Path

import numpy as np

from ..core.errors import InvalidArgument, ResourceLimit
from ..core.files import read_limited
from ..tosa.dtypes import DType

_VOID_LE = (DType.BF16, DType.FP8E4M3)
_RAW = (DType.BF16, DType.FP8E4M3, DType.FP8E5M2)  # numpy has no such types: files hold their bits

MAX_ARRAY_FILE_BYTES = 4 << 30  # one input file, .npy or .npz (all its members' data together, for .npz)
MAX_NPZ_MEMBERS = 1024  # arrays of one .npz: zipfile keeps a record per member in memory
_NPY_MAGIC = b"\x93NUMPY"
_NUMERIC_KINDS = "biufcV"  # bool, integers, floats, complex, raw bytes (bf16 / fp8 as the suite stores them)


def read_array(data: bytes, name: str) -> np.ndarray:
    """Parse the bytes of one ``.npy`` file into a writable array; ``name`` is the file, for messages.

    Refuses (InvalidArgument naming ``name`` and the fault) anything that is not a version 1.0 / 2.0
    ``.npy`` of a plain numeric dtype whose data has exactly the length its header declares; the header
    is checked before any array is made.
    """
    if not data.startswith(_NPY_MAGIC):
        raise InvalidArgument(f"{name}: not a .npy file (starts with {bytes(data[:8])!r})")
    fp = io.BytesIO(data)
    try:
        version = np.lib.format.read_magic(fp)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(fp)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(fp)
        else:
            raise InvalidArgument(f"{name}: .npy format version {version[0]}.{version[1]} is not accepted (1.0, 2.0)")
    except InvalidArgument:
        raise
    except Exception as exc:  # noqa: BLE001 - numpy's header parser raises several kinds; all mean malformed
        reason = next((line for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
        raise InvalidArgument(f"{name}: malformed .npy header: {reason}") from None
    _check_dtype(dtype, name)
    if any(d < 0 for d in shape):
        raise InvalidArgument(f"{name}: the header's shape {shape} has a negative dimension")
    offset = fp.tell()
    expected = math.prod(shape) * dtype.itemsize
    present = len(data) - offset
    if present < expected:
        raise InvalidArgument(
            f"{name}: truncated: shape {shape} of {dtype} takes {expected} bytes of data, the file holds {present}"
        )
    if present > expected:
        raise InvalidArgument(f"{name}: {present - expected} bytes follow the {expected} bytes of array data")
    try:
        flat = np.frombuffer(data, dtype=dtype, count=math.prod(shape), offset=offset)
        # A copy: writable and independent of ``data``, as np.load's arrays are.
        return np.array(flat.reshape(shape, order="F" if fortran else "C"), order="K")
    except (ValueError, TypeError, OverflowError) as exc:
        raise InvalidArgument(f"{name}: shape {shape} of {dtype} cannot be an array: {exc}") from None


def _check_dtype(dtype: np.dtype, name: str) -> None:
    if dtype.hasobject:
        raise InvalidArgument(f"{name}: object arrays are not accepted (they hold pickled Python objects)")
    if dtype.names is not None:
        raise InvalidArgument(f"{name}: structured arrays are not accepted (dtype {dtype}); give one plain array")
    if dtype.subdtype is not None:
        raise InvalidArgument(f"{name}: subarray dtypes are not accepted (dtype {dtype})")
    if dtype.kind not in _NUMERIC_KINDS or dtype.itemsize == 0:
        raise InvalidArgument(f"{name}: holds {dtype.str} values; only numeric arrays are accepted")


def read_file(path: str | os.PathLike, limit: int = MAX_ARRAY_FILE_BYTES) -> np.ndarray:
    """The array in the ``.npy`` file at ``path``, read through the bounded reader and :func:`read_array`."""
    return read_array(read_limited(path, limit, ".npy array file"), os.fsdecode(os.fspath(path)))


def load_npz(path: str | os.PathLike, limit: int = MAX_ARRAY_FILE_BYTES) -> dict[str, np.ndarray]:
    """The arrays of the ``.npz`` archive at ``path``, by name (without ``.npy``), as np.load gives them.

    The file is read bounded by ``limit``; so is the sum of its members' declared sizes, checked before
    any member is decompressed (and a member never yields more than it declares). At most
    :data:`MAX_NPZ_MEMBERS` members; each must be a ``.npy`` that :func:`read_array` accepts.
    """
    shown = os.fsdecode(os.fspath(path))
    data = read_limited(path, limit, ".npz archive")
    # Every central-directory record starts with this signature, so the count bounds the members from
    # above before zipfile builds a record for each.
    if data.count(b"PK\x01\x02") > MAX_NPZ_MEMBERS:
        raise ResourceLimit(f"{shown}: more than {MAX_NPZ_MEMBERS} members in one .npz archive")
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
            declared = sum(info.file_size for info in members)
            if declared > limit:
                raise ResourceLimit(f"{shown}: members declare {declared} bytes, over the limit of {limit} bytes")
            arrays: dict[str, np.ndarray] = {}
            for info in members:
                if not info.filename.endswith(".npy"):
                    raise InvalidArgument(f"{shown}: member {info.filename!r} is not a .npy array")
                with archive.open(info) as member:
                    raw = member.read(info.file_size + 1)
                arrays[info.filename[: -len(".npy")]] = read_array(raw, f"{shown}[{info.filename}]")
            return arrays
    except (InvalidArgument, ResourceLimit):
        raise
    except Exception as exc:  # noqa: BLE001 - zipfile, zlib, bz2 and lzma each raise their own kinds
        raise InvalidArgument(f"{shown}: not a readable .npz archive: {type(exc).__name__}: {exc}") from None


def load(path: Path, dtype: DType) -> np.ndarray:
    """An array from a suite ``.npy`` file, in IronAccel's storage dtype for ``dtype``.

    The file is read as :func:`read_file` reads it (bounded, refused with InvalidArgument when it is not
    a plain numeric ``.npy``), then converted as :func:`coerce` converts."""
    return coerce(read_file(path), dtype, str(path))


def coerce(array: np.ndarray, dtype: DType | np.dtype, where: str) -> np.ndarray:
    """``array`` in IronAccel's storage dtype for ``dtype`` (a TOSA DType, or a numpy dtype for slots of
    other artifacts, which must match as they are). Raw forms of the same width are reinterpreted;
    integers are widened or narrowed only when every value survives; anything else is a ValueError naming
    ``where`` and both types (never a silent conversion)."""
    tosa = isinstance(dtype, DType)
    storage = dtype.numpy if tosa else np.dtype(dtype)
    if array.dtype == storage:
        return array
    if tosa and dtype in _RAW and array.dtype.kind in "uV" and array.dtype.itemsize == storage.itemsize:
        return array.view(storage)
    if tosa and array.dtype.kind in "iub" and storage.kind in "iub":
        converted = array.astype(storage)
        if np.array_equal(converted.astype(array.dtype), array):
            return converted
    raise ValueError(f"{where}: holds {array.dtype} values, which are not {dtype} ({storage})")


def save(path: Path, value: np.ndarray, dtype: DType) -> None:
    """Write ``value`` (IronAccel storage form) the way the reference model writes its outputs."""
    value = np.array(value, order="C")  # not ascontiguousarray: that turns rank 0 into rank 1
    if dtype is DType.FP8E5M2:
        np.save(path, value.view(np.uint8), allow_pickle=False)
        return
    if dtype not in _VOID_LE:
        np.save(path, value, allow_pickle=False)
        return
    size = dtype.numpy.itemsize
    buffer = io.BytesIO()
    np.save(buffer, value.view(f"V{size}"), allow_pickle=False)
    # numpy writes void as '|V2'; the suite's readers expect the little-endian spelling (same length).
    path.write_bytes(buffer.getvalue().replace(f"'|V{size}'".encode(), f"'<V{size}'".encode(), 1))
