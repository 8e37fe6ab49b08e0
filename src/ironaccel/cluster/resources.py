"""What one node offers a Ray cluster: its accelerators that run programs, as Ray custom resources and node
labels.

Ray schedules on counts it is told about when a node starts (``ray start --resources``, ``--labels``); it
cannot see a Vulkan or CUDA device by itself. :func:`node_resources` turns this host's discovery (every
family's probe, then which devices an execution backend opens: the table of ``ironaccel devices``) into
``{"ironaccel_cpu": ..., "ironaccel_vulkan": ..., "ironaccel_cuda": ...}``, so that a replica asking for
``ironaccel_vulkan: 1`` lands only on a node that has such a device. :func:`node_labels` describes each
device (name, tier, memory, capability flags) as labels a label selector can match, and
:func:`ray_start_args` writes both as the options of ``ray start``.

The CPU backend's resource counts replicas, not devices: one per core by default, since a replica runs its
calls on one thread (see :mod:`.slots`). A GPU family counts devices. Software devices (lavapipe,
SwiftShader) run on the same cores as the CPU backend and are left out unless asked for, as ``auto``
leaves them out of ``ironaccel.open``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
from collections.abc import Sequence
from typing import Any

from ..core import BackendReport, DeviceDescriptor

PREFIX = "ironaccel_"
LABEL_PREFIX = "ironaccel/"
# Families are placed in this order by Pool(device="auto"): a GPU before the CPU.
PREFERENCE = ("cuda", "vulkan", "cpu")
_LABEL_VALUE = re.compile(r"[^A-Za-z0-9_.-]+")
_LABEL_MAX = 63  # Ray keeps to Kubernetes' label syntax: at most 63 characters of [A-Za-z0-9_.-]


def resource_name(backend: str) -> str:
    """The Ray resource of an execution backend's devices: ``"vulkan"`` -> ``"ironaccel_vulkan"``."""
    return PREFIX + backend.replace("-", "_")


@dataclasses.dataclass(frozen=True)
class NodeDevice:
    """One device of this node that runs programs: the id ``ironaccel.open`` takes, its backend and what
    discovery says about it."""

    execution_id: str
    backend: str
    descriptor: DeviceDescriptor

    @property
    def software(self) -> bool:
        return self.descriptor.software is not None


def node_devices(
    include_software: bool = False, reports: Sequence[BackendReport] | None = None
) -> dict[str, list[NodeDevice]]:
    """This host's devices that run programs, by execution backend (``{"cpu": [...], "vulkan": [...]}``), each
    backend's devices in the order of their ids. A backend that cannot open a device here (its library is
    missing) offers none; a device of another family that runs as a Vulkan device counts once, as that one."""
    from ..cli.devices import execution_backends, execution_ids, native_stderr_silenced

    with native_stderr_silenced():
        if reports is None:
            import ironaccel

            reports = ironaccel.describe()
        execution = execution_ids(reports)
        usable = {b["name"] for b in execution_backends() if b["available"] and b["runs_programs"]}
    by_id = {str(d.id): d for r in reports for d in r.devices}
    found: dict[str, list[NodeDevice]] = {}
    for key, where in execution.items():
        # Only a device's own row: "opengl:0 as vulkan:0" is vulkan:0 again.
        if where.id is None or where.through or where.id != key:
            continue
        backend = key.partition(":")[0]
        descriptor = by_id[key]
        if backend not in usable or (descriptor.software and not include_software):
            continue
        found.setdefault(backend, []).append(NodeDevice(key, backend, descriptor))
    for devices in found.values():
        devices.sort(key=lambda d: d.descriptor.ordinal)
    return dict(sorted(found.items(), key=lambda item: _rank(item[0])))


def _rank(backend: str) -> tuple[int, str]:
    return (PREFERENCE.index(backend) if backend in PREFERENCE else len(PREFERENCE), backend)


def node_resources(
    cpu_replicas: int | None = None,
    include_software: bool = False,
    devices: dict[str, list[NodeDevice]] | None = None,
) -> dict[str, float]:
    """The Ray custom resources this node should start with: ``ironaccel_<backend>`` for each execution
    backend with a device here, its count of devices, and ``ironaccel_cpu`` as ``cpu_replicas`` (default:
    one per core this process may run on). For ``ray start --resources`` or ``Cluster.add_node(resources=...)``."""
    devices = node_devices(include_software) if devices is None else devices
    out: dict[str, float] = {}
    for backend, found in devices.items():
        if backend == "cpu":
            count = cpu_replicas if cpu_replicas is not None else _cores()
            if count > 0:
                out[resource_name("cpu")] = float(count)
        elif found:
            out[resource_name(backend)] = float(len(found))
    return out


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def label_value(text: str) -> str:
    """``text`` as a Ray label value: runs of other characters become ``-``, trimmed to 63 characters that
    start and end with a letter or digit."""
    value = _LABEL_VALUE.sub("-", text).strip("-_.")[:_LABEL_MAX].rstrip("-_.")
    return value or "unknown"


def node_labels(devices: dict[str, list[NodeDevice]] | None = None, include_software: bool = False) -> dict[str, str]:
    """Node labels describing each device of :func:`node_devices`, for label selectors
    (``Pool(..., label_selector={"ironaccel/cuda-0-tier": "datacenter"})``):

    - ``ironaccel/backends``: the backends with a device here, joined by ``.`` (``cpu.vulkan``);
    - ``ironaccel/<backend>-<n>``: the n-th device's name; ``-tier``, ``-memory-gib``, ``-flags`` (capability
      flags joined by ``.``), ``-vendor``, and ``-software`` (the software driver) where it is one.
    """
    devices = node_devices(include_software) if devices is None else devices
    labels = {LABEL_PREFIX + "backends": ".".join(devices) or "none"}
    for backend, found in devices.items():
        for n, device in enumerate(found):
            d = device.descriptor
            key = f"{LABEL_PREFIX}{backend}-{n}"
            labels[key] = label_value(d.name)
            labels[key + "-tier"] = label_value(str(d.capability.tier))
            labels[key + "-vendor"] = label_value(d.vendor.value)
            flags = ".".join(d.capability.flags.names())
            if flags:
                labels[key + "-flags"] = label_value(flags)
            if d.memory_bytes:
                labels[key + "-memory-gib"] = str(d.memory_bytes // 2**30)
            if d.software:
                labels[key + "-software"] = label_value(d.software)
    return labels


def ray_start_args(cpu_replicas: int | None = None, include_software: bool = False) -> list[str]:
    """``ray start`` options advertising this node's devices: ``["--resources=<json>", "--labels=k=v,..."]``
    (label values never hold ``,`` or ``=``: :func:`label_value`)."""
    devices = node_devices(include_software)
    resources = node_resources(cpu_replicas, include_software, devices)
    labels = ",".join(f"{k}={v}" for k, v in node_labels(devices).items())
    return [f"--resources={json.dumps(resources)}", f"--labels={labels}"]


def shell_args(args: Sequence[str]) -> str:
    """``args`` quoted for a shell command line."""
    return " ".join(shlex.quote(a) for a in args)


def advertised(resources: dict[str, Any]) -> dict[str, float]:
    """The ``ironaccel_*`` entries of a Ray resource dict (``ray.cluster_resources()``), backend -> amount,
    best family first."""
    found = {k.removeprefix(PREFIX): float(v) for k, v in resources.items() if k.startswith(PREFIX) and v > 0}
    return dict(sorted(found.items(), key=lambda item: _rank(item[0])))
