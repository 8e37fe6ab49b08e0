"""``ironaccel devices``: every family, available or why not, and each device's facts."""

from __future__ import annotations

import argparse
import json
import sys

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


def run(args: argparse.Namespace) -> int:
    registry = default_registry()
    reports = registry.describe_all(timeout=args.timeout)
    if args.family:
        wanted = {BackendKind.parse(name) for name in args.family}
        reports = [r for r in reports if r.kind in wanted]
    if args.json:
        json.dump({"backends": [r.to_json() for r in reports]}, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        render(reports)
    return 0


def _gib(n: int | None) -> str:
    return "—" if n is None else f"{n / 2**30:.1f} GiB"


def render(reports: list[BackendReport]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    families = Table(title="Accelerator families", title_justify="left")
    families.add_column("family", style="bold")
    families.add_column("status")
    families.add_column("devices", justify="right")
    families.add_column("probe", justify="right")
    families.add_column("reason", overflow="fold")
    for r in reports:
        status = "[green]available[/]" if r.available else "[dim]unavailable[/]"
        families.add_row(r.kind.value, status, str(len(r.devices)), f"{r.seconds * 1e3:.0f} ms", r.reason or "")
    console.print(families)

    devices = [d for r in reports for d in r.devices]
    if not devices:
        console.print("No devices found.")
        return
    table = Table(title="Devices", title_justify="left")
    for col in ("id", "vendor", "name", "arch", "memory", "tier", "software", "flags"):
        table.add_column(col, overflow="fold")
    for d in devices:
        table.add_row(
            str(d.id),
            d.vendor.value,
            d.name,
            d.arch,
            _gib(d.memory_bytes),
            str(d.capability.tier),
            d.software or "",
            " ".join(d.capability.flags.names()),
        )
    console.print(table)
