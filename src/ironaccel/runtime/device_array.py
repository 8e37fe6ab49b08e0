"""A tensor that stays on its device (:class:`DeviceArray`): made by ``Device.array`` or ``Device.empty``, or
handed back by a call whose inputs were DeviceArrays, and bound in place by the calls it is given to.

Each array is one buffer of the device's context, in the device's own memory where it has some (DEVICE),
else in the domain the accelerator offers (SHARED, then HOST); its bytes cross to the host only when asked
(``numpy()``, ``np.asarray``). DLPack exports a view of the buffer without a copy where the buffer is memory
of this process (the CPU backend); elsewhere the bytes are not addressable and ``numpy()`` is the way out.

NVFP4 weights go up as a :class:`DeviceQuantizedWeights`: one DeviceArray per part (packed codes, block
scales, tensor scale), which a projection's call takes in place of those three inputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.errors import InvalidArgument
from ..nvfp4.quantize import QuantizedWeights
from ..tosa.dtypes import DType
from . import reclaim
from .handles import Buffer
from .holdings import ArrayHoldings
from .types import BufferDesc, BufferUsage, DeviceInfo, MemoryDomain

if TYPE_CHECKING:
    from .device import Device

_USAGE = (
    BufferUsage.PROGRAM_INPUT
    | BufferUsage.PROGRAM_OUTPUT
    | BufferUsage.TRANSFER_SOURCE
    | BufferUsage.TRANSFER_DESTINATION
)

_KDLCPU = 1


def resident_domain(info: DeviceInfo) -> MemoryDomain:
    """Where a DeviceArray lives: the device's own memory where it has some, else the domain a program
    binds without a copy (SHARED), else HOST."""
    for domain in (MemoryDomain.DEVICE, MemoryDomain.SHARED, MemoryDomain.HOST):
        if domain in info.domains:
            return domain
    raise InvalidArgument(f"{info.name} offers no memory domain")


def storage_dtype(dtype: Any) -> np.dtype:
    """The numpy dtype a tensor of ``dtype`` (a numpy dtype or a ``tosa.DType``) is stored as."""
    return dtype.numpy if isinstance(dtype, DType) else np.dtype(dtype)


class DeviceArray:
    """One tensor in a buffer of ``device``: ``shape``, ``dtype`` (the numpy storage dtype, as
    ``TensorSpec.numpy_dtype``), ``nbytes``.

    Given to a call, it is bound in place: as an input it is not written, as an ``out=`` array it is not
    read back. ``numpy()`` reads it into a new host array; an array given to ``submit`` as ``out`` holds
    the outputs once that Run's ``wait`` returned.

    Thread safety: reads and calls may come from any threads; ``close`` only once no call uses it.

    Lifetime: ``close()`` (or leaving a ``with`` block) frees the buffer, as does collection of an array
    dropped without it, and the device's ``close``; work still bound to the buffer delays the free until
    it ends."""

    __slots__ = ("__weakref__", "_held", "device", "dtype", "nbytes", "shape")

    def __init__(self, device: Device, shape: Sequence[int], dtype: Any) -> None:
        """Uninitialised: use ``Device.empty`` or ``Device.array``."""
        self.device = device
        self.shape = tuple(int(d) for d in shape)
        if any(d < 0 for d in self.shape):
            raise InvalidArgument(f"negative dimension in shape {self.shape}")
        self.dtype = storage_dtype(dtype)
        self.nbytes = int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize
        held = device._held
        if held.closed:
            raise InvalidArgument(f"{device!r} was closed")
        desc = BufferDesc(max(self.nbytes, 1), resident_domain(device.info), _USAGE)
        self._held: ArrayHoldings = held.hold(held.acc.allocate_buffer(held.context, desc))

    @property
    def buffer(self) -> Buffer:
        """The buffer holding the tensor (a contract handle of ``device.accelerator``)."""
        buffer = self._held.buffer
        if buffer is None:
            raise InvalidArgument(f"{self!r} was closed")
        return buffer

    @property
    def closed(self) -> bool:
        return self._held.buffer is None

    def __repr__(self) -> str:
        state = " closed" if self._held.buffer is None else ""
        return f"<DeviceArray {self.dtype}{list(self.shape)} on {self.device.name}{state}>"

    def write(self, source: Any) -> None:
        """Copy ``source`` (of this array's shape and dtype) into the buffer: one host-to-device write."""
        arr = np.asarray(source)
        if arr.dtype != self.dtype or arr.shape != self.shape:
            raise InvalidArgument(f"{self!r}: cannot write a {arr.dtype}{list(arr.shape)} array into it")
        if self.nbytes:
            arr = arr if arr.flags.c_contiguous else np.ascontiguousarray(arr)
            self._held.acc.write_buffer(self.buffer, 0, arr.reshape(-1).view(np.uint8))

    def numpy(self) -> np.ndarray:
        """A new host array holding the tensor: one device-to-host read."""
        out = np.empty(self.shape, self.dtype)
        buffer = self.buffer
        if self.nbytes:
            self._held.acc.read_buffer(buffer, 0, self.nbytes, out=out.reshape(-1).view(np.uint8))
        return out

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        if copy is False:
            raise ValueError(f"{self!r} is device memory: a host array of it is always a copy")
        out = self.numpy()
        return out if dtype is None else out.astype(dtype, copy=False)

    def _host_array(self) -> np.ndarray | None:
        """The buffer's own memory as an array of the tensor (writable, kept with the holdings until the
        buffer is freed), where the process can address it; else None."""
        held = self._held
        view = held.view
        if view is None:
            memory = held.acc.host_view(self.buffer)
            if memory is None:
                view = False
            else:
                view = np.frombuffer(memory, np.uint8, self.nbytes).view(self.dtype).reshape(self.shape)
            held.view = view
        return None if view is False else view

    def _host_view(self) -> np.ndarray:
        """The buffer's own memory as an array of the tensor, where the process can address it."""
        view = self._host_array()
        if view is not None:
            return view
        raise BufferError(
            f"{self!r}: the buffer is not memory of this process, so DLPack cannot share it; use .numpy()"
        )

    def __dlpack__(self, *, stream: Any = None, **options: Any) -> Any:
        """A DLPack capsule viewing the buffer without a copy (kDLCPU), which keeps the memory alive;
        BufferError where the buffer is not host memory of this process."""
        if stream is not None:
            raise BufferError("a kDLCPU array takes no stream")
        view = self._host_view()
        return view.__dlpack__(**{k: v for k, v in options.items() if v is not None})

    def __dlpack_device__(self) -> tuple[int, int]:
        self._host_view()  # the same refusal as __dlpack__
        return (_KDLCPU, 0)

    def close(self) -> None:
        """Free the buffer. Idempotent. Work still bound to it delays the free until it ends."""
        if self._held.buffer is not None:
            reclaim.release(self._held.close)

    def __del__(self) -> None:
        held = getattr(self, "_held", None)
        if held is not None and held.buffer is not None:
            reclaim.release(held.close)

    def __enter__(self) -> DeviceArray:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class DeviceQuantizedWeights:
    """NVFP4 weights (an ``nvfp4.QuantizedWeights``) on ``device``: ``packed``, ``scales`` and
    ``tensor_scale``, each a :class:`DeviceArray`, written once by ``Device.array(q)``.

    Given to a projection's call where its weight inputs are (by position, or by name: ``weights`` for a
    projection's unprefixed ``packed``, ``scales``, ``tensor_scale``; ``expert0`` for ``expert0.packed``
    and its two siblings), it stands for its three parts in that order, each bound in place. Its parts do
    not make the call's outputs DeviceArrays: that follows the activations alone.

    Lifetime: ``close()`` (or leaving a ``with`` block) frees the three buffers, as does collection of the
    object and its parts, and the device's ``close``."""

    __slots__ = ("__weakref__", "device", "packed", "scales", "tensor_scale")

    PARTS = ("packed", "scales", "tensor_scale")

    def __init__(self, device: Device, q: QuantizedWeights) -> None:
        """Write ``q`` onto ``device``: use ``Device.array(q)``."""
        q.check()
        made: list[DeviceArray] = []
        try:
            for part in q.operands:
                arr = np.asarray(part)
                made.append(DeviceArray(device, arr.shape, arr.dtype))
                made[-1].write(arr)
        except BaseException:
            for array in made:
                array.close()
            raise
        self.device = device
        self.packed, self.scales, self.tensor_scale = made

    @property
    def parts(self) -> tuple[DeviceArray, DeviceArray, DeviceArray]:
        """The three arrays in the order a projection takes them (as ``QuantizedWeights.operands``)."""
        return self.packed, self.scales, self.tensor_scale

    @property
    def n(self) -> int:
        return self.packed.shape[-2]

    @property
    def k(self) -> int:
        return self.packed.shape[-1] * 2

    @property
    def lead(self) -> tuple[int, ...]:
        """The stack's leading shape: () for one matrix, (batch,) for a batched projection's weights."""
        return self.packed.shape[:-2]

    @property
    def nbytes(self) -> int:
        return sum(part.nbytes for part in self.parts)

    @property
    def closed(self) -> bool:
        return any(part.closed for part in self.parts)

    def __repr__(self) -> str:
        state = " closed" if self.closed else ""
        stack = f"{list(self.lead)} x " if self.lead else ""
        return f"<DeviceQuantizedWeights NVFP4 {stack}(n={self.n}, k={self.k}) on {self.device.name}{state}>"

    def to_host(self) -> QuantizedWeights:
        """The weights read back into a new ``nvfp4.QuantizedWeights``: one read per part."""
        tensor = self.tensor_scale.numpy()
        return QuantizedWeights(self.packed.numpy(), self.scales.numpy(), tensor if tensor.ndim else tensor[()])

    def close(self) -> None:
        """Free the three buffers. Idempotent. Work still bound to them delays the free until it ends."""
        for part in self.parts:
            part.close()

    def __enter__(self) -> DeviceQuantizedWeights:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["DeviceArray", "DeviceQuantizedWeights", "resident_domain", "storage_dtype"]
