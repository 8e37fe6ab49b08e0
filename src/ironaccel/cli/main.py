"""Entry point: one sub-command per module in this package, registered in ``COMMANDS``."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from .. import __version__

# name -> (module, one-line help). Each module has add_arguments(parser) and run(args) -> int.
COMMANDS: dict[str, tuple[str, str]] = {
    "devices": ("devices", "list every accelerator family, its devices and what they can do"),
    "run": ("run", "run a .tosa program on a device and write its outputs"),
    "demo": ("demo", "list the devices, then run the bundled model on the best device and the CPU"),
    "validate": ("validate", "check .tosa files against the TOSA 1.0 specification for a target"),
    "inspect": ("inspect", "show what a .tosa file holds: version, blocks, operators and tensors"),
    "conformance": ("conformance", "judge a device by Arm's TOSA conformance suite and write a report"),
    "serve": ("serve", "serve a device to guests as virtio-accel over a Unix socket (the daemon)"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ironaccel",
        description="Find every accelerator on this host and run TOSA 1.0 programs on it.",
    )
    parser.add_argument("--version", action="version", version=f"ironaccel {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in COMMANDS.items():
        module = importlib.import_module(f"{__package__}.{module_name}")
        cmd = sub.add_parser(name, help=help_text, description=help_text[0].upper() + help_text[1:] + ".")
        module.add_arguments(cmd)
        cmd.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
