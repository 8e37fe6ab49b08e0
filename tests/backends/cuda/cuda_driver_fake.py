"""A stand-in for ``cuda.bindings.driver`` that runs the CUDA backend's host side without a GPU.

It keeps the binding's conventions (every call returns its CUresult first, then what it produces; handles
are the binding's own types: CUdevice, CUcontext, CUstream, CUdeviceptr, ...; the enums are the real
module's) and checks what the real driver would refuse: a call without the device's context current on the
calling thread, a copy, memset or launch that touches bytes outside every live allocation, a free of
something not allocated, a stream, event or module used after it was destroyed. "Device" memory is host
memory filled with 0xCD when allocated (so a buffer the backend forgets to zero shows it). Streams run
their work at once, in order.

Launches are interpreted, not run: the argument block the backend packed is decoded with its own layout
(``prelude.ARG_WORDS``) and the kernel's name (``ia_<op>_<type>``, ``ia_cast_<from>_<to>``) chooses a numpy
evaluation of the same operator. This checks the plumbing (addresses, broadcasting strides, copies in and
out, constants), not the CUDA C, which NVRTC compiles in the other tests and the GPU runs in the gpu ones.
"""

from __future__ import annotations

import ctypes
import itertools
import struct
import threading
from typing import Any

import ml_dtypes
import numpy as np
from cuda.bindings import driver as real

from ironaccel.backends.cuda.prelude import ARG_WORDS, MAX_OPERANDS, MAX_RANK, SCALARS

OK = real.CUresult.CUDA_SUCCESS
STORAGE = {"fp32": np.float32, "int32": np.int32, "fp16": np.float16, "bf16": ml_dtypes.bfloat16}
BINARY = {"add", "sub", "mul", "maximum", "minimum"}


class FakeDriver:
    """One fake driver with ``devices`` (name, 16-byte uuid) of compute capability ``capability``."""

    CUresult = real.CUresult
    CUdevice_attribute = real.CUdevice_attribute
    CUstream_flags = real.CUstream_flags
    CUevent_flags = real.CUevent_flags
    CU_MEMHOSTALLOC_DEVICEMAP = real.CU_MEMHOSTALLOC_DEVICEMAP
    CU_MEMHOSTALLOC_PORTABLE = real.CU_MEMHOSTALLOC_PORTABLE

    def __init__(self, devices: list[tuple[str, bytes]], capability: tuple[int, int] = (9, 0)) -> None:
        self.devices = devices
        self.capability = capability
        self.lock = threading.RLock()
        self.local = threading.local()
        self.ids = itertools.count(0x1000, 0x10)
        self.memory: dict[int, tuple[np.ndarray, str]] = {}  # base address -> (backing, "device" | "host")
        self.contexts: dict[int, int] = {}  # device index -> retain count
        self.streams: set[int] = set()
        self.events: set[int] = set()
        self.modules: dict[int, str] = {}
        self.functions: dict[int, str] = {}
        self.launches: list[str] = []
        self.fault: real.CUresult | None = None  # the error the next launch returns (a sticky fault)
        self.sticky: real.CUresult | None = None

    # ---- checks ---------------------------------------------------------------------------------
    def _current(self) -> None:
        ctx = getattr(self.local, "ctx", None)
        assert ctx is not None and self.contexts.get(ctx, 0) > 0, "a driver call without a current context"

    def _range(self, address: int, size: int, kinds: tuple[str, ...] = ("device", "host")) -> None:
        with self.lock:
            for base, (backing, kind) in self.memory.items():
                if kind in kinds and base <= address and address + size <= base + backing.nbytes:
                    return
        raise AssertionError(f"{size} bytes at {address:#x} lie outside every live {'/'.join(kinds)} allocation")

    def _status(self) -> tuple:
        return (self.sticky,) if self.sticky is not None else (OK,)

    # ---- devices and contexts -------------------------------------------------------------------
    def cuInit(self, flags: int) -> tuple:
        assert flags == 0
        return (OK,)

    def cuDeviceGetCount(self) -> tuple:
        return OK, len(self.devices)

    def cuDeviceGet(self, ordinal: int) -> tuple:
        assert 0 <= ordinal < len(self.devices)
        return OK, real.CUdevice(ordinal)

    def cuDeviceGetName(self, length: int, dev: Any) -> tuple:
        return OK, self.devices[int(dev)][0].encode().ljust(length, b"\0")

    def cuDeviceGetUuid(self, dev: Any) -> tuple:
        uuid = real.CUuuid()
        found = self.devices[int(dev)][1]
        return OK, type("Uuid", (), {"bytes": found})() if found else uuid

    def cuDeviceGetAttribute(self, attribute: Any, dev: Any) -> tuple:
        values = {
            real.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: self.capability[0],
            real.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: self.capability[1],
            real.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: 4,
        }
        return OK, values[attribute]

    def cuDeviceTotalMem(self, dev: Any) -> tuple:
        return OK, 1 << 30

    def cuDevicePrimaryCtxRetain(self, dev: Any) -> tuple:
        with self.lock:
            self.contexts[int(dev) + 1] = self.contexts.get(int(dev) + 1, 0) + 1
        return OK, real.CUcontext(int(dev) + 1)

    def cuDevicePrimaryCtxRelease(self, dev: Any) -> tuple:
        with self.lock:
            assert self.contexts.get(int(dev) + 1, 0) > 0, "a primary context released more often than retained"
            self.contexts[int(dev) + 1] -= 1
        return (OK,)

    def cuCtxSetCurrent(self, ctx: Any) -> tuple:
        self.local.ctx = int(ctx)
        return (OK,)

    def cuCtxSynchronize(self) -> tuple:
        self._current()
        return self._status()

    # ---- streams, events, modules ---------------------------------------------------------------
    def _make(self, into: set[int], kind: Any) -> tuple:
        self._current()
        handle = next(self.ids)
        with self.lock:
            into.add(handle)
        return OK, kind(handle)

    def _drop(self, into: set[int] | dict, handle: Any, what: str) -> tuple:
        self._current()
        with self.lock:
            assert int(handle) in into, f"{what} destroyed twice or never made"
            if isinstance(into, dict):
                del into[int(handle)]
            else:
                into.discard(int(handle))
        return (OK,)

    def cuStreamCreate(self, flags: int) -> tuple:
        assert isinstance(flags, int)
        return self._make(self.streams, real.CUstream)

    def cuStreamDestroy(self, stream: Any) -> tuple:
        return self._drop(self.streams, stream, "stream")

    def cuStreamSynchronize(self, stream: Any) -> tuple:
        self._current()
        assert int(stream) in self.streams
        return self._status()

    def cuEventCreate(self, flags: int) -> tuple:
        assert isinstance(flags, int)
        return self._make(self.events, real.CUevent)

    def cuEventDestroy(self, event: Any) -> tuple:
        return self._drop(self.events, event, "event")

    def cuEventRecord(self, event: Any, stream: Any) -> tuple:
        self._current()
        assert int(event) in self.events and int(stream) in self.streams
        return self._status()

    def cuEventQuery(self, event: Any) -> tuple:
        assert int(event) in self.events
        return self._status()

    def cuEventSynchronize(self, event: Any) -> tuple:
        assert int(event) in self.events
        return self._status()

    def cuModuleLoadData(self, image: int) -> tuple:
        self._current()
        assert isinstance(image, int) and image, "a module image passed other than by address"
        handle = next(self.ids)
        with self.lock:
            self.modules[handle] = ""
        return OK, real.CUmodule(handle)

    def cuModuleGetFunction(self, module: Any, name: bytes) -> tuple:
        assert int(module) in self.modules and isinstance(name, bytes)
        handle = next(self.ids)
        with self.lock:
            self.functions[handle] = name.decode()
        return OK, real.CUfunction(handle)

    def cuModuleUnload(self, module: Any) -> tuple:
        return self._drop(self.modules, module, "module")

    # ---- memory ---------------------------------------------------------------------------------
    def _allocate(self, size: int, kind: str) -> int:
        self._current()
        backing = np.full(size, 0xCD, dtype=np.uint8)
        with self.lock:
            self.memory[backing.ctypes.data] = (backing, kind)
        return backing.ctypes.data

    def _free(self, address: Any, kind: str) -> tuple:
        self._current()
        with self.lock:
            found = self.memory.pop(int(address), None)
        assert found is not None and found[1] == kind, f"freeing {int(address):#x}, which is no live {kind} allocation"
        return (OK,)

    def cuMemAlloc(self, size: int) -> tuple:
        assert size > 0
        return OK, real.CUdeviceptr(self._allocate(size, "device"))

    def cuMemFree(self, address: Any) -> tuple:
        return self._free(address, "device")

    def cuMemHostAlloc(self, size: int, flags: int) -> tuple:
        assert flags & real.CU_MEMHOSTALLOC_DEVICEMAP
        return OK, self._allocate(size, "host")

    def cuMemFreeHost(self, address: int) -> tuple:
        return self._free(address, "host")

    def cuMemHostGetDevicePointer(self, address: int, flags: int) -> tuple:
        self._range(address, 1, ("host",))
        return OK, real.CUdeviceptr(address)

    def cuMemsetD8Async(self, address: int, value: int, size: int, stream: Any) -> tuple:
        self._current()
        self._range(address, size)
        ctypes.memset(address, value, size)
        return (OK,)

    def cuMemcpyHtoDAsync(self, dst: int, src: int, size: int, stream: Any) -> tuple:
        self._current()
        self._range(dst, size, ("device",))
        ctypes.memmove(dst, src, size)
        return (OK,)

    def cuMemcpyDtoHAsync(self, dst: int, src: int, size: int, stream: Any) -> tuple:
        self._current()
        self._range(src, size, ("device",))
        ctypes.memmove(dst, src, size)
        return (OK,)

    def cuMemcpyAsync(self, dst: int, src: int, size: int, stream: Any) -> tuple:
        self._current()
        assert int(stream) in self.streams
        self._range(dst, size)
        self._range(src, size)
        ctypes.memmove(dst, src, size)
        return self._status()

    # ---- launches -------------------------------------------------------------------------------
    def cuLaunchKernel(self, f: Any, gx, gy, gz, bx, by, bz, shared, stream, params, extra) -> tuple:
        self._current()
        assert int(stream) in self.streams and isinstance(params, int) and extra == 0
        assert gx >= 1 and (gy, gz, by, bz, shared) == (1, 1, 1, 1, 0)
        if self.fault is not None:
            self.sticky, self.fault = self.fault, None
        if self.sticky is not None:
            return (self.sticky,)
        name = self.functions[int(f)]
        block = ctypes.c_uint64.from_address(params).value  # the one parameter's address
        layout = f"<{MAX_OPERANDS + 1}Q{ARG_WORDS - MAX_OPERANDS - 1}q"
        words = struct.unpack(layout, ctypes.string_at(block, 8 * ARG_WORDS))
        self.launches.append(name)
        _interpret(self, name, words)
        return (OK,)


def _interpret(fake: FakeDriver, name: str, words: tuple[int, ...]) -> None:
    ins, out, count, rank = words[:MAX_OPERANDS], words[MAX_OPERANDS], words[MAX_OPERANDS + 1], words[MAX_OPERANDS + 2]
    at = MAX_OPERANDS + 3
    dims = words[at : at + rank]
    strides = [words[at + MAX_RANK + k * MAX_RANK : at + MAX_RANK + k * MAX_RANK + rank] for k in range(MAX_OPERANDS)]
    scalars = words[at + MAX_RANK + MAX_OPERANDS * MAX_RANK : at + MAX_RANK + MAX_OPERANDS * MAX_RANK + SCALARS]
    parts = name[3:].split("_")
    if parts[0] == "cast":
        op, types, result = "cast", parts[1:2], parts[2]
    else:
        op, result = "_".join(parts[:-1]), parts[-1]
        types = [result] * (2 if op in BINARY else 1)
    index = np.unravel_index(np.arange(count), dims) if rank else ()
    values = []
    for k, t in enumerate(types):
        offsets = sum((i * s for i, s in zip(index, strides[k], strict=True)), np.zeros(count, np.int64))
        span = int(offsets.max()) + 1 if count else 0
        size = np.dtype(STORAGE[t]).itemsize
        fake._range(ins[k], span * size)
        stored = np.frombuffer(ctypes.string_at(ins[k], span * size), STORAGE[t])[offsets]
        values.append(stored.astype(np.int64 if t == "int32" else np.float32))
    size = np.dtype(STORAGE[result]).itemsize
    fake._range(out, count * size)
    with np.errstate(all="ignore"):
        r = _evaluate(op, result, values, scalars)
        data = (r & 0xFFFFFFFF).astype(np.uint32).view(np.int32) if result == "int32" else r.astype(STORAGE[result])
    ctypes.memmove(out, np.ascontiguousarray(data).ctypes.data, count * size)


def _bits(word: int) -> np.float32:
    return np.uint32(word & 0xFFFFFFFF).view(np.float32)


def _pick(x: np.ndarray, y: np.ndarray, mode: int, greater: bool) -> np.ndarray:
    chosen = np.where(x >= y, x, y) if greater else np.where(x < y, x, y)
    nan_x, nan_y = np.isnan(x), np.isnan(y)
    if mode == 2:
        return np.where(nan_x, y, np.where(nan_y, x, chosen))
    return np.where(nan_x | nan_y, np.float32(np.nan), chosen)


def _evaluate(op: str, result: str, v: list[np.ndarray], scalars: tuple[int, ...]) -> np.ndarray:
    if result == "int32" and op != "cast":
        x = v[0]
        if op == "mul" and scalars[0] > 0:
            p = x * v[1]
            return (p >> scalars[0]) + ((p & ((1 << scalars[0]) - 1)) >= (1 << (scalars[0] - 1)))
        table = {"add": lambda: x + v[1], "sub": lambda: x - v[1], "mul": lambda: x * v[1], "abs": lambda: abs(x)}
        table |= {"maximum": lambda: np.maximum(x, v[1]), "minimum": lambda: np.minimum(x, v[1]), "negate": lambda: -x}
        return table[op]()
    if op == "cast":
        x = v[0]
        if result == "int32":
            return np.clip(np.rint(np.nan_to_num(x, nan=0.0)).astype(np.float64), -(2**31), 2**31 - 1).astype(np.int64)
        return x.astype(np.float32)
    x = v[0]
    table = {
        "add": lambda: x + v[1],
        "sub": lambda: x - v[1],
        "mul": lambda: x * v[1],
        "maximum": lambda: _pick(x, v[1], scalars[0], True),
        "minimum": lambda: _pick(x, v[1], scalars[0], False),
        "abs": lambda: np.abs(x),
        "negate": lambda: -x,
        "exp": lambda: np.exp(x),
        "log": lambda: np.log(x),
        "reciprocal": lambda: np.float32(1) / x,
        "rsqrt": lambda: np.float32(1) / np.sqrt(x),
        "tanh": lambda: np.tanh(x),
        "sigmoid": lambda: np.float32(1) / (np.float32(1) + np.exp(-x)),
        "clamp": lambda: _pick(_pick(x, _bits(scalars[0]), scalars[2], True), _bits(scalars[1]), scalars[2], False),
    }
    return table[op]()
