"""``ironaccel devices``: every family, available or why not, each device's facts, whether it runs programs
and under which id ``ironaccel.open`` takes, the installed execution backends (each available or why not,
a registration that cannot be read with the reason), and which device ``auto`` picks and why.

A device runs programs when an execution backend opens it: ``cpu:0``; ``vulkan:N`` unless the Vulkan
backend refuses it (``backends.vulkan.device.shortfall``); a device of another family through the Vulkan
device that is the same hardware (``runtime.same_hardware``), shown "as vulkan:N".
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Iterator, Sequence
from typing import Any

from ..core import BackendKind, BackendReport, DeviceDescriptor, IronAccelError
from ..probe import default_registry


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    parser.add_argument(
        "--family",
        action="append",
        metavar="NAME",
        help="only these families (repeatable): " + " ".join(k.value for k in BackendKind),
    )
    parser.add_argument(
        "--timeout", type=float, help="seconds to wait for each probe (default: IRONACCEL_PROBE_TIMEOUT, else 10)"
    )
    parser.add_argument(
        "--driver-messages", action="store_true", help="let vendor drivers print their own messages to stderr"
    )


def run(args: argparse.Namespace) -> int:
    # A misspelt family fails here, in one line, before seconds of probing.
    wanted = {BackendKind.parse(name) for name in args.family} if args.family else None
    registry = default_registry()
    quiet = contextlib.nullcontext() if args.driver_messages else native_stderr_silenced()
    with quiet:
        reports = registry.describe_all(timeout=args.timeout)
        # From every family's report: a device of one family runs through its counterpart in another.
        execution = execution_ids(reports)
        installed = execution_backends()
        auto = auto_choice(reports)
    if wanted is not None:
        reports = [r for r in reports if r.kind in wanted]
    virtio = _virtio()
    if args.json:
        backends = [r.to_json() for r in reports]
        for entry in backends:
            for device in entry["devices"]:
                device.update(execution[device["id"]].to_json())
        document = {"backends": backends, "execution_backends": installed, "auto": auto, **virtio}
        json.dump(document, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        render(reports, execution, auto, installed)
        if virtio:
            _render_virtio(virtio["virtio"])
    return 0


# The families whose devices the bundled backends run, each with its own rules below.
_BUNDLED = (BackendKind.CPU, BackendKind.VULKAN)


class Execution:
    """Whether one discovered device runs programs: the id to open it by, or why not."""

    __slots__ = ("id", "through", "why_not")

    def __init__(self, id: str | None, why_not: str | None = None, through: bool = False) -> None:
        self.id = id
        self.why_not = why_not
        self.through = through  # runs as another family's device (shown "as vulkan:0")

    def to_json(self) -> dict[str, Any]:
        return {"runs_programs": self.id is not None, "execution_id": self.id, "why_not": self.why_not}

    def __str__(self) -> str:
        if self.id is None:
            return f"no: {self.why_not}" if self.why_not else "no"
        return f"as {self.id}" if self.through else self.id


def execution_ids(reports: Sequence[BackendReport]) -> dict[str, Execution]:
    """Each discovered device's :class:`Execution`, by its id ("cuda:0")."""
    from ..runtime.backends import backend_for, execution_counterparts

    vulkan = _vulkan_refusals([d for r in reports if r.kind is BackendKind.VULKAN for d in r.devices])
    out: dict[str, Execution] = {}
    for device in (d for r in reports for d in r.devices):
        key = str(device.id)
        installed = backend_for(device.kind) if device.kind not in _BUNDLED else None
        if device.kind is BackendKind.CPU:
            out[key] = Execution(key) if device.ordinal == 0 else Execution(None, "the CPU backend runs cpu:0 only")
        elif device.kind is BackendKind.VULKAN:
            refusal = vulkan[key]
            out[key] = Execution(None, refusal) if refusal else Execution(key)
        elif installed is not None:
            # A backend from another distribution runs this family: the device opens under its own id.
            single = installed.one_device and device.ordinal != 0
            out[key] = Execution(None, f"the {installed.name} backend runs one device") if single else Execution(key)
        else:
            evidence, same = execution_counterparts(device, reports)
            if not same:
                out[key] = Execution(None, f"no execution backend runs {device.kind.value} devices")
            elif len(same) > 1:
                ids = " or ".join(str(d.id) for d in same)
                out[key] = Execution(None, f"one of {ids} (same {evidence}): which one is unknown")
            else:
                target = str(same[0].id)
                refusal = vulkan[target]
                out[key] = Execution(None, f"{target}: {refusal}") if refusal else Execution(target, through=True)
    return out


def execution_backends() -> list[dict[str, Any]]:
    """Every installed execution backend (the entry points of ``ironaccel.backends``, ADR 0030): its name,
    family, rank for ``auto``, whether it runs programs, and whether it can open a device here or why not.
    A registration that cannot be read is listed with the reason, never raised."""
    from ..runtime.backends import registrations
    from ..runtime.registration import unavailable

    listed: list[dict[str, Any]] = []
    for entry in registrations():
        registration = entry.registration
        why = entry.error if registration is None else unavailable(registration)
        listed.append(
            {
                "name": entry.name,
                "registration": entry.value,
                "distribution": entry.distribution,
                "family": registration.family if registration else None,
                "auto_rank": registration.auto_rank if registration else None,
                "runs_programs": registration.runs_programs if registration else False,
                "summary": registration.summary if registration else "",
                "available": registration is not None and why is None,
                "why_not": why,
            }
        )
    return listed


def _vulkan_refusals(devices: list[DeviceDescriptor]) -> dict[str, str | None]:
    """Why the Vulkan backend would refuse each discovered Vulkan device (None: it runs it)."""
    if not devices:
        return {}
    from ..core.settings import Settings

    if "vulkan" in Settings.from_env().disabled:
        return {str(d.id): "the Vulkan backend is switched off (IRONACCEL_VULKAN=0)" for d in devices}
    try:
        from ..backends.vulkan import device as vk_device
        from ..backends.vulkan.instance import instance

        physical = vk_device.describe_all(instance())
    except (IronAccelError, ImportError, OSError) as exc:
        return {str(d.id): f"the Vulkan backend cannot start: {exc}" for d in devices}
    from ..runtime.same_hardware import uuid_key

    by_uuid = {pd.uuid_hex: pd for pd in physical}
    by_index = {pd.index: pd for pd in physical}
    out: dict[str, str | None] = {}
    for d in devices:
        # The probe's ordinal is the loader's index; the UUID confirms it where both report one.
        key = uuid_key(d.uuid)
        pd = by_uuid.get(key) if key and len(by_uuid) == len(physical) else None
        pd = pd or by_index.get(d.ordinal)
        out[str(d.id)] = "the Vulkan backend does not list it" if pd is None else vk_device.shortfall(pd)
    return out


def auto_choice(reports: Sequence[BackendReport]) -> dict[str, Any]:
    """What ``ironaccel.open("auto")`` picks here: {"id", "device", "why"}; id None and the reason as
    "why" when nothing opens. The device is opened and closed again."""
    import ironaccel

    try:
        dev = ironaccel.open("auto")
    except (IronAccelError, ImportError, OSError) as exc:
        return {"id": None, "device": None, "why": str(exc)}
    try:
        return {"id": _opened_id(dev.name, dev.info.uuid, reports), "device": dev.info.name, "why": dev.why}
    finally:
        dev.close()


def _opened_id(name: str, uuid: bytes, reports: Sequence[BackendReport]) -> str:
    """The discovered id of an opened device: cpu:0, the Vulkan device with its UUID, else its name."""
    from ..runtime.same_hardware import uuid_key

    if name in ("cpu", "cpu:0"):
        return "cpu:0"
    if name.partition(":")[0] == "vulkan" and any(uuid):
        for d in (d for r in reports if r.kind is BackendKind.VULKAN for d in r.devices):
            if uuid_key(d.uuid) == uuid.hex():
                return str(d.id)
    return name


def _virtio() -> dict:
    """The virtio-accel device IRONACCEL_VIRTIO_SOCKET names, as it describes itself ({} when none is named)."""
    from ..core.settings import settings

    if not settings.virtio_socket:
        return {}
    from ..virtio.guest_describe import describe

    return {"virtio": [describe(settings.virtio_socket)]}


def _render_virtio(entries: list[dict]) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="virtio-accel devices", title_justify="left")
    for column in ("id", "device", "domains", "why not"):
        table.add_column(column, overflow="fold")
    for e in entries:
        d = e.get("device") or {}
        facts = f"{d['class']} · buffers up to {_gib(d['limits']['max_buffer_bytes'])}" if d else ""
        table.add_row(
            escape(d.get("id", f"virtio:{e['socket']}")),
            f"{escape(d.get('name', ''))}\n[dim]{escape(facts)}[/]" if d else "[dim]unavailable[/]",
            " ".join(d.get("memory_domains", [])),
            escape(e.get("reason") or ""),
        )
    (Console() if sys.stdout.isatty() else Console(width=160)).print(table)


@contextlib.contextmanager
def native_stderr_silenced() -> Iterator[None]:
    """Drivers (Mesa, wgpu-native) write chatter straight to file descriptor 2 while probing; park it."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except OSError:
        yield
        return
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _gib(n: int | None) -> str:
    return "—" if n is None else f"{n / 2**30:.1f} GiB"


def render(
    reports: list[BackendReport],
    execution: dict[str, Execution] | None = None,
    auto: dict[str, Any] | None = None,
    installed: list[dict[str, Any]] | None = None,
) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    # Piped output keeps full rows rather than folding at rich's 80-column default.
    console = Console() if sys.stdout.isatty() else Console(width=160)
    families = Table(title="Accelerator families", title_justify="left")
    families.add_column("family", style="bold", no_wrap=True)
    families.add_column("status", no_wrap=True)
    families.add_column("devices", justify="right")
    families.add_column("probe", justify="right", no_wrap=True)
    families.add_column("why not", overflow="fold")
    for r in reports:
        status = "[green]available[/]" if r.available else "[dim]unavailable[/]"
        families.add_row(r.kind.value, status, str(len(r.devices)), f"{r.seconds * 1e3:.0f} ms", escape(r.reason or ""))
    console.print(families)

    if installed is not None:
        _render_backends(console, installed)
    devices = [d for r in reports for d in r.devices]
    if not devices:
        console.print("No devices found.")
        return
    table = Table(title="Devices", title_justify="left")
    table.add_column("id", no_wrap=True, style="bold")
    table.add_column("device", overflow="fold")
    table.add_column("memory", justify="right", no_wrap=True)
    table.add_column("tier", no_wrap=True)
    table.add_column("flags", overflow="fold")
    if execution is not None:
        table.add_column("runs programs", overflow="fold")
    for d in devices:
        facts = " · ".join(x for x in (d.vendor.value, d.arch, f"software: {d.software}" if d.software else "") if x)
        row = [
            str(d.id),
            f"{escape(d.name)}\n[dim]{escape(facts)}[/]",
            _gib(d.memory_bytes),
            str(d.capability.tier),
            " ".join(d.capability.flags.names()),
        ]
        if execution is not None:
            runs = execution.get(str(d.id))
            row.append(escape(str(runs)) if runs is not None and runs.id else f"[dim]{escape(str(runs or 'no'))}[/]")
        table.add_row(*row)
    console.print(table)
    if auto is not None:
        picked = f"[bold]{escape(auto['id'])}[/]" if auto.get("id") else "[red]nothing[/]"
        console.print(f"auto picks {picked}: {escape(auto.get('why') or '')}")


def _render_backends(console: Any, installed: list[dict[str, Any]]) -> None:
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="Execution backends", title_justify="left")
    table.add_column("name", style="bold", no_wrap=True)
    table.add_column("family", no_wrap=True)
    table.add_column("auto", justify="right", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("why not", overflow="fold")
    for b in installed:
        if b["available"]:
            status = "[green]available[/]" if b["runs_programs"] else "available (runs no program)"
        else:
            status = "[dim]unavailable[/]"
        rank = "—" if b["auto_rank"] is None else str(b["auto_rank"])
        table.add_row(escape(b["name"]), b["family"] or "—", rank, status, escape(b["why_not"] or ""))
    console.print(table)
