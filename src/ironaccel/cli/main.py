"""Entry point: one sub-command per module in this package, registered in ``COMMANDS``.

A user's mistake never ends in a traceback: an :class:`~ironaccel.core.errors.IronAccelError` (the TOSA
layer's errors among them), ``ValueError`` or ``OSError`` escaping a command is printed as one line,
``ironaccel <command>: <message>``, on stderr, with exit status 2. ``--debug`` (or ``IRONACCEL_DEBUG=1``
in the environment: ``Settings.debug``) lets it propagate with its traceback instead. Ctrl-C exits with
130, a closed output pipe with 0.

Logging: the ``ironaccel`` logger hierarchy writes to stderr, one line per record, at the level ``-v``
(info), ``-vv`` (debug) or ``-q`` (errors only) asks for; without them, at ``Settings.log_level``
(``IRONACCEL_LOG_LEVEL``, default warning). Both settings are read as the command starts.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence

from .. import __version__
from ..core.errors import IronAccelError
from ..core.settings import Settings

# name -> (module, one-line help). Each module has add_arguments(parser) and run(args) -> int.
COMMANDS: dict[str, tuple[str, str]] = {
    "devices": ("devices", "list every accelerator family, its devices and what they can do"),
    "run": ("run", "run a .tosa program on a device and write its outputs"),
    "demo": ("demo", "list the devices, then run the bundled model on the best device and the CPU"),
    "validate": ("validate", "check .tosa files against the TOSA 1.0 specification for a target"),
    "inspect": ("inspect", "show what a .tosa file holds: version, blocks, operators and tensors"),
    "export": (
        "export",
        "export a PyTorch module (needs ironaccel[torch]) or an ONNX model (make onnx-env) to a .tosa program",
    ),
    "conformance": ("conformance", "judge a device by Arm's TOSA conformance suite and write a report"),
    "serve": ("serve", "serve a device to guests as virtio-accel over a Unix socket (the daemon)"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ironaccel",
        description="Find every accelerator on this host and run TOSA 1.0 programs on it.",
    )
    parser.add_argument("--version", action="version", version=f"ironaccel {__version__}")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error (also IRONACCEL_DEBUG=1)")
    loudness = parser.add_mutually_exclusive_group()
    loudness.add_argument(
        "-v", "--verbose", action="count", default=0, help="log more: -v info, -vv debug (default: IRONACCEL_LOG_LEVEL)"
    )
    loudness.add_argument("-q", "--quiet", action="store_true", help="log errors only")
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
    # The environment as this command starts (a test may change it after ironaccel was imported).
    current = Settings.from_env()
    args.debug = args.debug or current.debug
    configure_logging(args.verbose, args.quiet, current.log_level)
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except (IronAccelError, ValueError, OSError) as exc:
        if args.debug:
            raise
        print(f"ironaccel {args.command}: {one_line(exc)}", file=sys.stderr)
        return 2


LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


class OneLineFormatter(logging.Formatter):
    """``ironaccel.runtime: WARNING: message``; a message or traceback of several lines is joined by " | ",
    so every record is one line whatever it carries."""

    def __init__(self) -> None:
        super().__init__("%(name)s: %(levelname)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        return " | ".join(line.rstrip() for line in text.splitlines() if line.strip())


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is when a record comes, not what it was when the command began:
    daemon threads outlive the command, and the stream it started with may be closed by then (an
    embedding program, or a test, swapping stderr)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


def configure_logging(verbose: int = 0, quiet: bool = False, default: str | None = None) -> int:
    """Send the ``ironaccel`` logger hierarchy to stderr at the level asked for (-v info, -vv debug, -q
    error; else ``default``, a settings.log_level value, read from the environment when None), replacing
    a handler an earlier call attached. Returns the level. The hierarchy does not propagate to the root
    logger, so a record is printed once."""
    if default is None:
        default = Settings.from_env().log_level
    if quiet:
        level = logging.ERROR
    elif verbose:
        level = logging.INFO if verbose == 1 else logging.DEBUG
    else:
        level = LEVELS.get(default, logging.WARNING)
    logger = logging.getLogger("ironaccel")
    for handler in [h for h in logger.handlers if getattr(h, "_ironaccel_cli", False)]:
        logger.removeHandler(handler)
    handler = _StderrHandler()
    handler._ironaccel_cli = True  # type: ignore[attr-defined]  # ours to replace on the next call
    handler.setFormatter(OneLineFormatter())
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False
    if not verbose and not quiet and default not in LEVELS:
        known = ", ".join(LEVELS)
        logger.warning("IRONACCEL_LOG_LEVEL=%r is not a level (%s); logging warnings", default, known)
    return level


def one_line(exc: BaseException) -> str:
    """The message of ``exc`` on one line (its lines joined by "; "); its type's name when it has none."""
    if isinstance(exc, OSError) and exc.strerror:  # "x.npy: No such file or directory", not "[Errno 2] ..."
        where = exc.filename
        if isinstance(where, str | bytes):
            where = os.fsdecode(where)
        text = exc.strerror if where is None else f"{where}: {exc.strerror}"
    else:
        text = str(exc)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return "; ".join(lines) or type(exc).__name__


if __name__ == "__main__":
    sys.exit(main())
