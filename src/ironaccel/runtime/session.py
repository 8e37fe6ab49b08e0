"""The API a user touches: ``open`` a device, ``compile`` a program, call it.

    dev = ironaccel.open("cpu")          # "vulkan", "vulkan:1", "auto"
    exe = dev.compile("model.tosa")      # a path, bytes or a tosa.Program: validated, admitted, loaded
    y, = exe(x)                          # numpy (or any DLPack array) in, numpy out
    run = exe.submit(x, out=y); run.wait()   # asynchronous, results into the caller's arrays

Each Device owns one context and one queue on its Accelerator; an Executable owns a loaded program.
Device and Executable are safe to use from several threads (submitted calls run in submission order on
the device's one queue); ``close`` belongs after the other threads' calls. A Run is for one thread.

A call ``exe(x)`` of a program the backend can run on the caller's thread (``Accelerator.run_direct``:
programs that keep no state between runs) runs there, on the caller's arrays, with no queue hand-off:
no other call can observe the difference, except that such calls from several threads may overlap.
``submit`` goes through the queue, except where the backend can start such a run and finish it later
(``Accelerator.start_direct``: a virtio device, where it saves round trips); those runs of one
executable still complete in the order submitted. Where the backend launches prepared submissions
natively (Vulkan, ADR 0016), each of an executable's buffer sets is prepared once and a call through
the queue is then one launch.

This module is the user API's entry: :func:`open_device` picks and opens the device; the objects live one
per module (:mod:`.device`, :mod:`.executable`, :mod:`.run`, and what they hold on the device in
:mod:`.holdings`) and are importable from here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.descriptor import DeviceDescriptor
from ..core.errors import IronAccelError, Unsupported
from .backends import AUTO, AUTO_ORDER, Resolved, open_resolved, resolve
from .device import Device
from .executable import Executable
from .holdings import SPARE_SETS
from .run import Run

__all__ = ["SPARE_SETS", "Device", "Executable", "Run", "compile_and_run", "open_device"]


def open_device(spec: str | DeviceDescriptor = "auto") -> Device:
    """Open an execution device: ``"auto"``, ``"cpu"`` (or ``"cpu:0"``), ``"vulkan"``, ``"vulkan:N"`` (an
    index, UUID or part of the name after the colon), ``"virtio:PATH"``, or a DeviceDescriptor from
    ``ironaccel.devices()``. A device that discovery lists but no execution backend runs (``"cuda:0"``) is
    refused with the execution device that runs the same hardware, where there is one.

    "auto" takes the first backend of AUTO_ORDER that opens a non-software device, else the CPU; the
    returned Device's ``why`` says what was picked and why.
    """
    resolved = resolve(spec)
    if resolved.backend != AUTO:
        return Device(open_resolved(resolved), resolved.label, f"asked for {resolved.label}")
    skipped: list[str] = []
    for candidate in AUTO_ORDER:
        try:
            acc = open_resolved(Resolved(candidate, None, candidate))
        except ImportError as exc:
            # open_resolved reports a registration or factory that cannot be imported as Unsupported; this is
            # a factory that imports what it needs only when called, and found it missing.
            skipped.append(f"{candidate}: not part of this installation ({type(exc).__name__}: {exc})")
            continue
        except (IronAccelError, OSError) as exc:
            skipped.append(f"{candidate}: {exc}")
            continue
        info = acc.device_info()
        if info.software and candidate != "cpu":
            skipped.append(f"{candidate}: only a software device ({info.software})")
            close = getattr(acc, "close", None)
            if close is not None:  # not kept: release the device it opened now, not at collection
                close()
            continue
        why = f"picked {candidate} ({info.name})" + (f"; skipped {'; '.join(skipped)}" if skipped else "")
        return Device(acc, candidate, why)
    raise Unsupported("no execution backend could be opened: " + "; ".join(skipped))


def compile_and_run(program: Any, inputs: Sequence[Any], device: str = "cpu") -> list[np.ndarray]:
    """One-shot helper: open, compile, run, close."""
    with open_device(device) as dev:
        return dev.compile(program)(*inputs)
