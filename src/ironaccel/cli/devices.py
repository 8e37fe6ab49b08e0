"""``ironaccel devices``: every family, available or why not, and each device's facts."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Iterator

from ..core import BackendKind, BackendReport
from ..probe import default_registry


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    parser.add_argument(
        "--family",
        action="append",
        metavar="NAME",
        help="only these families (repeatable): " + " ".join(k.value for k in BackendKind),
    )
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for each probe (default 10)")
    parser.add_argument(
        "--driver-messages", action="store_true", help="let vendor drivers print their own messages to stderr"
    )


def run(args: argparse.Namespace) -> int:
    registry = default_registry()
    if args.driver_messages:
        reports = registry.describe_all(timeout=args.timeout)
    else:
        with native_stderr_silenced():
            reports = registry.describe_all(timeout=args.timeout)
    if args.family:
        wanted = {BackendKind.parse(name) for name in args.family}
        reports = [r for r in reports if r.kind in wanted]
    virtio = _virtio()
    if args.json:
        json.dump({"backends": [r.to_json() for r in reports], **virtio}, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        render(reports)
        if virtio:
            _render_virtio(virtio["virtio"])
    return 0


def _virtio() -> dict:
    """The virtio-accel device IRONACCEL_VIRTIO_SOCKET names, as it describes itself ({} when none is named)."""
    from ..core.settings import settings

    if not settings.virtio_socket:
        return {}
    from ..virtio.guest import describe

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


def render(reports: list[BackendReport]) -> None:
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
    for d in devices:
        facts = " · ".join(x for x in (d.vendor.value, d.arch, f"software: {d.software}" if d.software else "") if x)
        table.add_row(
            str(d.id),
            f"{escape(d.name)}\n[dim]{escape(facts)}[/]",
            _gib(d.memory_bytes),
            str(d.capability.tier),
            " ".join(d.capability.flags.names()),
        )
    console.print(table)
