"""One replica: a process on some node that opened its device once, compiled the program once, and runs
batches of inputs on it.

The program travels as bytes (a path is read on the driver, with its ``.json`` sidecar, so no node needs the
file); a ``tosa.Program`` is written to bytes the same way; other sources (an NVFP4 projection) travel as
Python objects. A replica whose device is lost (``DeviceLost``) closes it and answers every later call with
:class:`ReplicaLost`: the pool retires it and runs its inputs elsewhere, never again on that device. It keeps
its slot on the node until :meth:`Replica.close`, so a replacement placed on the same node claims another
device rather than the lost one.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..core.errors import DeviceLost, InvalidArgument
from . import slots
from .batches import Stacked, output_arrays


class ReplicaLost(Exception):
    """A replica lost its device: it runs nothing more. Raised inside the replica, seen by the pool (a plain
    exception, so Ray carries it across processes whatever the worker imports)."""


def pack_program(program: Any) -> tuple[Any, dict[str, Any] | None]:
    """What travels to the replicas for ``program``: (bytes or the object itself, its metadata or None)."""
    if isinstance(program, str | os.PathLike):
        from ..runtime.metadata import read_sidecar

        path = Path(program)
        metadata, _ = read_sidecar(path)
        return path.read_bytes(), metadata
    from ..tosa import Program

    if isinstance(program, Program):
        from ..tosa.codec.writer import write

        return write(program), None
    if isinstance(program, bytes | bytearray | memoryview):
        return bytes(program), None
    return program, None


def node_id() -> str:
    """The Ray node this process runs on ("local" outside Ray)."""
    try:
        import ray

        if ray.is_initialized():
            return ray.get_runtime_context().get_node_id()
    except ImportError:
        pass
    return "local"


def open_device(device: str, threads: int | None = 1, per_device: int = 1) -> tuple[Any, slots.Claim, str]:
    """Open ``device`` for a replica on this node: (the Device, the slot it holds, the id opened).

    ``"cpu"``: a core of its own when ``threads`` is 1 (the replica is pinned to it). A bare GPU backend
    (``"vulkan"``, ``"cuda"``): the node's device of that backend whose slot is free (``per_device`` replicas
    may share one). A full id (``"vulkan:1"``, ``"vulkan:lavapipe"``): that device, as named.
    """
    import ironaccel

    from .resources import node_devices

    backend, colon, _ = device.partition(":")
    node = node_id()
    if backend == "cpu":
        claim, core = slots.claim_core(node)
        if threads == 1:
            slots.pin(core)
        return ironaccel.open("cpu"), claim, "cpu:0"
    if colon:
        return ironaccel.open(device), slots.Claim(None, None, 0), device
    found = node_devices(include_software=True).get(backend, [])
    claim = slots.claim(node, backend, len(found), per_device)
    spec = found[claim.index].execution_id if found else backend
    try:
        return ironaccel.open(spec), claim, spec
    except BaseException:
        claim.release()
        raise


class Replica:
    """The body of one pool replica (the pool makes it a Ray actor; Ray Data's predictor uses it in place)."""

    def __init__(
        self, payload: Any, metadata: dict[str, Any] | None, device: str, threads: int | None = 1, per_device: int = 1
    ) -> None:
        started = time.perf_counter()
        self.device_id = device
        self.node = node_id()
        self._accelerator: Any = None
        self._dev, self._claim, self.device_id = open_device(device, threads, per_device)
        self._accelerator = getattr(self._dev, "accelerator", None)
        try:
            self._exe = self._dev.compile(payload, metadata=metadata)
        except BaseException:
            self.close()
            raise
        self._lost: str | None = None
        self.ready_s = time.perf_counter() - started
        self.items = 0
        self.busy_s = 0.0

    @property
    def executable(self) -> Any:
        return self._exe

    def describe(self) -> dict[str, Any]:
        """Where this replica runs and what it runs (a plain dict)."""
        return {
            "device": self.device_id,
            "device_name": self._dev.info.name if self._lost is None else None,
            "node": self.node,
            "pid": os.getpid(),
            "affinity": sorted(os.sched_getaffinity(0)),
            "inputs": [(s.name, tuple(s.shape), str(s.dtype)) for s in self._exe.inputs],
            "outputs": [(s.name, tuple(s.shape), str(s.dtype)) for s in self._exe.outputs],
            "ready_s": self.ready_s,
        }

    def run(self, items: Sequence[Any] | Stacked) -> list[list[Any]] | Stacked:
        """The outputs of each item, in order. An item is one call's inputs: an array, a tuple or list of them
        (by position) or a mapping (by name). A :class:`~.batches.Stacked` batch is answered with its outputs
        stacked the same way (one array per output)."""
        if self._lost is not None:
            raise ReplicaLost(self._lost)
        started = time.perf_counter()
        stacked = isinstance(items, Stacked)
        count = items.count if isinstance(items, Stacked) else len(items)
        out: list[list[Any]] = []
        outputs = output_arrays(self._exe.outputs, count) if stacked else ()
        try:
            for i in range(count):
                if isinstance(items, Stacked):
                    self.call(items.item(i), [o[i] for o in outputs])
                else:
                    out.append(self.call(items[i]))
        except DeviceLost as exc:
            self._lost = f"{self.device_id} on node {self.node}: device lost: {exc}"
            self._close_device()  # the slot stays held: the lost device is not handed to a replacement
            raise ReplicaLost(self._lost) from None
        self.items += count
        self.busy_s += time.perf_counter() - started
        return Stacked(outputs, count) if stacked else out

    def call(self, item: Any, out: list[Any] | None = None) -> list[Any]:
        if isinstance(item, Mapping):
            return self._exe(dict(item), out=out)
        if isinstance(item, tuple | list):
            return self._exe(*item, out=out)
        return self._exe(item, out=out)

    def stats(self) -> dict[str, Any]:
        """Items run and the seconds spent running them (the program's calls, without Ray's transfers)."""
        return {"items": self.items, "busy_s": self.busy_s}

    def lose_device(self, reason: str = "lost on request") -> None:
        """Behave from now on as if the device were gone (``DeviceLost`` on the next call): for tests of the
        pool's handling of a device loss."""
        exe = self._exe

        def lost(*args: Any, **kwargs: Any) -> Any:
            raise DeviceLost(reason)

        self._exe = _Lost(exe, lost)

    def close(self) -> dict[str, int]:
        """Close the executable and the device and free the slot (idempotent). Returns the device's
        ``live_resources()`` afterwards: all zero when nothing was left open."""
        try:
            self._close_device()
        finally:
            claim = getattr(self, "_claim", None)
            if claim is not None:
                claim.release()
        accelerator = getattr(self, "_accelerator", None)
        return dict(accelerator.live_resources()) if accelerator is not None else {}

    def _close_device(self) -> None:
        dev, self._dev = getattr(self, "_dev", None), _Closed()
        if dev is not None and not isinstance(dev, _Closed):
            dev.close()


class _Lost:
    """An executable whose device is gone: same specs, every call raises."""

    def __init__(self, exe: Any, call: Any) -> None:
        self.inputs, self.outputs, self._call = exe.inputs, exe.outputs, call

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._call(*args, **kwargs)


class _Closed:
    info = None

    def close(self) -> None:
        pass


def check_threads(threads: int | None) -> int | None:
    if threads is not None and (not isinstance(threads, int) or threads < 1):
        raise InvalidArgument(f"threads must be a positive int or None, got {threads!r}")
    return threads
