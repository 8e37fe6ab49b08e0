"""A stand-in for ``cuda.bindings.driver`` that runs the CUDA backend without a GPU, its kernels included.

It keeps the binding's conventions (every call returns its CUresult first, then what it produces; handles
are the binding's own types: CUdevice, CUcontext, CUstream, CUdeviceptr, ...; the enums are the real
module's) and checks what the real driver would refuse: a call without the device's context current on the
calling thread, a copy, memset or launch that touches bytes outside every live allocation, a free of
something not allocated, a stream, event, module or function used after it was destroyed or unloaded, a
launch shape other than the backend's (a one-dimensional grid of one-dimensional blocks, no dynamic shared
memory). "Device" memory is host memory filled with 0xCD when allocated (so a buffer the backend forgets to
zero shows it). Streams run their work at once, in order, one driver operation at a time.

Kernels run for real, on the host: installed with :func:`install`, the backend's ``compile_source`` hands
the kernel's CUDA C text to ``cuModuleLoadData`` in place of a cubin, and the fake builds it with the host's
C++ compiler (host_kernels.py), so a launch runs the very source NVRTC compiles for the GPU, every element
in turn on the calling thread. Around each launch the fake checks what it can know of the kernel's memory:
every operand and result address lies in a live allocation; an operand the source reads as the elementwise
template does (``((const T*)a.in[k])[ia_offset(a, k, i)]``) lies whole, over every index the launch covers,
in one allocation, and so does a result written as ``((T*)a.out)[i]``, ``count`` elements; and no byte of
device memory changed outside what the launch may write (those ``count`` elements, or for a kernel that
writes otherwise, from the result's address to the end of its allocation). What a kernel reads through
other index arithmetic is not bounded here. Results are the host's IEEE single operations, which may differ
from the GPU's contracted multiply-adds and approximate transcendentals by a rounding or a few units in the
last place: the GPU tests run the same kernels on the device.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import re
import struct
import threading
from collections.abc import Iterator
from typing import Any

import cuda_blas_fake
import host_kernels
import numpy as np
import pytest
from cuda.bindings import driver as real

from ironaccel.backends.cuda import accelerator, kernels
from ironaccel.backends.cuda import device as device_module
from ironaccel.backends.cuda.prelude import ARG_WORDS, MAX_OPERANDS, MAX_RANK, PRELUDE

OK = real.CUresult.CUDA_SUCCESS
MAX_BLOCK = 1024  # threads per block the real driver accepts at most
ALLOCATION_ALIGNMENT = 256
ARGS = struct.Struct(f"<{MAX_OPERANDS + 1}Q{ARG_WORDS - MAX_OPERANDS - 1}q")
# Bytes of the C types the kernels store tensors as.
C_SIZES = {
    "float": 4, "double": 8, "int": 4, "unsigned": 4, "unsigned int": 4, "short": 2, "unsigned short": 2,
    "signed char": 1, "unsigned char": 1, "char": 1, "long long": 8, "unsigned long long": 8,
}  # fmt: skip
TYPE = r"((?:unsigned\s+|signed\s+)?(?:long\s+long|[A-Za-z_]\w*))"


def source_image(source: str, arch: str) -> bytes:
    """What the installed fake's ``compile_source`` returns: the source itself, NUL-terminated as a PTX
    image is, for ``cuModuleLoadData`` to read."""
    return source.encode() + b"\0"


def install(monkeypatch: pytest.MonkeyPatch, driver: FakeDriver) -> None:
    """Make ``driver`` the CUDA backend's binding, any architecture acceptable and kernels built for the
    host. One clear skip where the host has no C++ compiler."""
    if host_kernels.compiler() is None:
        pytest.skip(host_kernels.NO_COMPILER)
    monkeypatch.setattr(device_module, "api", lambda: driver)
    monkeypatch.setattr(accelerator, "require_architecture", lambda arch: None)
    monkeypatch.setattr(kernels, "compile_source", source_image)
    cuda_blas_fake.install(monkeypatch, driver)


@contextlib.contextmanager
def stand_in(capability: tuple[int, int] = (9, 0), name: str = "Stand-in Device") -> Iterator[tuple[Any, FakeDriver]]:
    """The CUDA backend opened on a fresh stand-in driver (one device of ``capability``, kernels built for the
    host): yields (device, driver); on the way out closes it and checks that nothing was left on the driver."""
    import gc

    import ironaccel

    driver = FakeDriver([(name, bytes(range(16)))], capability=capability)
    with pytest.MonkeyPatch.context() as patch:
        install(patch, driver)
        dev = ironaccel.open("cuda")
        try:
            yield dev, driver
        finally:
            dev.close()
            dev.accelerator.close()
            gc.collect()
    assert not driver.memory and not driver.streams and not driver.events and not driver.modules
    assert not any(driver.contexts.values()), driver.contexts


class Access:
    """What the fake can bound of one kernel's memory, from its source: the element bytes of each operand
    read at ``ia_offset`` of the launch's index ``i``, and of the result when it is written at ``i`` only."""

    READ = re.compile(r"\(\(const\s+" + TYPE + r"\s*\*\)\s*a\.in\[(\d)\]\)\[ia_offset\(a,\s*(\d),\s*i\)\]")
    WRITE = re.compile(r"\(\(" + TYPE + r"\s*\*\)\s*a\.out\)\[i\]\s*=[^=]")

    LOOP = re.compile(r"for\s*\(\s*long\s+long\s+i\s*=[^;]*;\s*i\s*<\s*a\.count\s*;")
    ASSIGNED = re.compile(r"\bi\s*=(?!=)")

    def __init__(self, source: str) -> None:
        body = source[len(PRELUDE) :] if source.startswith(PRELUDE) else source
        self.reads: dict[int, int] = {}
        self.write: int | None = None
        # ``i`` must be the grid-stride loop's index, over [0, count), and nothing else.
        if not (self.LOOP.search(body) and len(self.ASSIGNED.findall(body)) == 1):
            return
        for ctype, k, again in self.READ.findall(body):
            size = C_SIZES.get(" ".join(ctype.split()))
            if k == again and size is not None:
                self.reads[int(k)] = size
        writes = self.WRITE.findall(body)
        size = C_SIZES.get(" ".join(writes[0].split())) if len(writes) == 1 else None
        self.write = size if body.count("a.out") == 1 else None


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
        self.modules: dict[int, host_kernels.HostModule] = {}
        self.functions: dict[int, tuple[int, host_kernels.HostKernel, Access]] = {}  # -> (module, kernel, access)
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

    def cuStreamWaitEvent(self, stream: Any, event: Any, flags: int) -> tuple:
        # Streams run their work at once, so what the event marks has already happened.
        self._current()
        assert int(event) in self.events and int(stream) in self.streams and flags == 0
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
        source = ctypes.string_at(image).decode()
        assert "__global__" in source, "a module image that is no kernel source: install the fake with install()"
        module = host_kernels.load(source)
        handle = next(self.ids)
        with self.lock:
            self.modules[handle] = module
        return OK, real.CUmodule(handle)

    def cuModuleGetFunction(self, module: Any, name: bytes) -> tuple:
        assert int(module) in self.modules and isinstance(name, bytes)
        found = self.modules[int(module)]
        kernel = found.function(name.decode())
        if kernel is None:
            return real.CUresult.CUDA_ERROR_NOT_FOUND, None
        handle = next(self.ids)
        with self.lock:
            self.functions[handle] = (int(module), kernel, Access(found.source))
        return OK, real.CUfunction(handle)

    def cuModuleUnload(self, module: Any) -> tuple:
        return self._drop(self.modules, module, "module")

    # ---- memory ---------------------------------------------------------------------------------
    def _allocate(self, size: int, kind: str) -> int:
        self._current()
        # Aligned as cuMemAlloc's are (256 bytes at least), which runs binding buffers in place rely on.
        raw = np.full(size + ALLOCATION_ALIGNMENT, 0xCD, dtype=np.uint8)
        start = -raw.ctypes.data % ALLOCATION_ALIGNMENT
        backing = raw[start : start + size]
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
        with self.lock:  # one at a time with the launches
            ctypes.memset(address, value, size)
        return (OK,)

    def cuMemcpyHtoDAsync(self, dst: int, src: int, size: int, stream: Any) -> tuple:
        self._current()
        self._range(dst, size, ("device",))
        with self.lock:  # one at a time with the launches
            ctypes.memmove(dst, src, size)
        return (OK,)

    def cuMemcpyDtoHAsync(self, dst: int, src: int, size: int, stream: Any) -> tuple:
        self._current()
        self._range(src, size, ("device",))
        with self.lock:  # one at a time with the launches
            ctypes.memmove(dst, src, size)
        return (OK,)

    def cuMemcpyAsync(self, dst: int, src: int, size: int, stream: Any) -> tuple:
        self._current()
        assert int(stream) in self.streams
        self._range(dst, size)
        self._range(src, size)
        with self.lock:  # one at a time with the launches
            ctypes.memmove(dst, src, size)
        return self._status()

    # ---- launches -------------------------------------------------------------------------------
    def cuLaunchKernel(self, f: Any, gx, gy, gz, bx, by, bz, shared, stream, params, extra) -> tuple:
        self._current()
        assert int(stream) in self.streams and isinstance(params, int) and extra == 0
        assert gx >= 1 and 1 <= bx <= MAX_BLOCK and (gy, gz, by, bz, shared) == (1, 1, 1, 1, 0)
        if self.fault is not None:
            self.sticky, self.fault = self.fault, None
        if self.sticky is not None:
            return (self.sticky,)
        module, kernel, access = self.functions[int(f)]
        assert module in self.modules, f"{kernel.name} launched after its module was unloaded"
        block = ctypes.c_uint64.from_address(params).value  # the one parameter's address
        words = ARGS.unpack(ctypes.string_at(block, ARGS.size))
        with self.lock:  # no copy runs beside the kernel, so what changed in memory is the kernel's doing
            self.launches.append(kernel.name)
            window = self._check_addresses(kernel.name, access, words)
            before = {base: backing.copy() for base, (backing, kind) in self.memory.items() if kind == "device"}
            kernel(block)
            self._check_writes(kernel.name, before, window)
        return (OK,)

    def _allocation(self, address: int) -> tuple[int, int]:
        """The live allocation holding ``address``: (base, end)."""
        for base, (backing, _) in self.memory.items():
            if base <= address < base + backing.nbytes:
                return base, base + backing.nbytes
        raise AssertionError(f"{address:#x} lies outside every live allocation")

    def _check_addresses(self, name: str, access: Access, words: tuple[int, ...]) -> tuple[int, int]:
        """Every address of the block lies in a live allocation, and each operand the source reads at
        ``ia_offset`` does whole, over every index of the launch. Returns the bytes the kernel may write."""
        ins, out, count, rank = (
            words[:MAX_OPERANDS],
            words[MAX_OPERANDS],
            words[MAX_OPERANDS + 1],
            words[MAX_OPERANDS + 2],
        )
        at = MAX_OPERANDS + 3
        dims = words[at : at + rank]
        assert out and count >= 0 and 0 <= rank <= MAX_RANK, (name, out, count, rank)
        for k, address in enumerate(ins):
            if address:
                self._allocation(address)
            if k in access.reads and count:
                strides = words[at + MAX_RANK * (k + 1) : at + MAX_RANK * (k + 1) + rank]
                offsets = _offsets(count, dims, strides)
                size = access.reads[k]
                low, high = address + int(offsets.min()) * size, address + (int(offsets.max()) + 1) * size
                assert address, f"{name} reads operand {k} at address 0"
                self._range(low, high - low)
        if access.write is not None:
            self._range(out, count * access.write)
            return out, out + count * access.write
        return out, self._allocation(out)[1]

    def _check_writes(self, name: str, before: dict[int, np.ndarray], window: tuple[int, int]) -> None:
        for base, old in before.items():
            new = self.memory[base][0]
            changed = np.flatnonzero(old != new) + base
            stray = changed[(changed < window[0]) | (changed >= window[1])]
            assert not stray.size, (
                f"{name} wrote {stray.size} bytes outside [{window[0]:#x}, {window[1]:#x}), the first at "
                f"{int(stray[0]):#x} (allocation {base:#x}, offset {int(stray[0]) - base})"
            )


def _offsets(count: int, dims: tuple[int, ...], strides: tuple[int, ...]) -> np.ndarray:
    """The element offsets ``ia_offset`` (prelude.ARGS) gives for every index of a launch."""
    i = np.arange(count, dtype=np.int64)
    if len(dims) == 1:
        return i * strides[0]
    offsets = np.zeros(count, dtype=np.int64)
    for extent, stride in zip(reversed(dims), reversed(strides), strict=True):
        offsets += (i % extent) * stride
        i //= extent
    return offsets
