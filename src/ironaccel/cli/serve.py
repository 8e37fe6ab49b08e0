"""``ironaccel serve --device cpu|vulkan[:SEL] --socket PATH``: the virtio-accel daemon, in the foreground.

Opens the device, then serves guests on PATH until SIGTERM or SIGINT (Ctrl-C): each guest process
that connects (``ironaccel.open("virtio:PATH")``) gets its own engine session, so its objects, quota
and cleanup are its own. Logs go to stderr; on a signal every guest is disconnected, everything they
held is released, the socket file is removed, and the command exits 0.

Limits (sizes as bytes or with a binary unit: 512M, 4G, 1.5T):
  --guest-bytes, --guest-program-bytes, --guest-programs  what one guest may hold (buffer backing,
      declared program bytes, programs);
  --max-bytes  what all guests together may hold (default: half of MemAvailable, printed at start-up);
  --max-guests  guests served at once; the next one is told "daemon full";
  --max-run-seconds  the longest one submission may run (a guest's longer or absent timeout is cut to it);
  --setup-timeout  how long a new connection may take to start its command queue.
Exit status: 0 after a signal; 2 for a bad option or a socket path that cannot be served (the path is
named: missing directory, not a socket, a live daemon there, no permission); 1 when the device fails.
"""

from __future__ import annotations

import argparse
import logging
import math
import re
import signal
import sys

_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?", re.IGNORECASE)


def parse_size(text: str) -> int:
    """Bytes from "4096", "512M", "4G", "1.5GiB" (binary units); argparse's error for anything else."""
    match = _SIZE.fullmatch(text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size (bytes, or a number with K, M, G or T)")
    size = int(float(match.group(1)) * _UNITS[match.group(2).lower()])
    if size < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive size")
    return size


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value


def _human(n: int) -> str:
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", default="cpu", help="the accelerator guests get: cpu, vulkan or vulkan:N")
    parser.add_argument("--socket", required=True, metavar="PATH", help="the Unix socket guests connect to")
    parser.add_argument("--max-guests", type=_count, default=64, help="guests served at once (default 64)")
    parser.add_argument(
        "--max-bytes",
        type=parse_size,
        metavar="SIZE",
        help="what all guests together may hold: buffer backing and declared program bytes"
        " (default: half of the host's MemAvailable)",
    )
    parser.add_argument(
        "--guest-bytes", type=parse_size, metavar="SIZE", help="buffer backing one guest may hold (default 8G)"
    )
    parser.add_argument(
        "--guest-program-bytes",
        type=parse_size,
        metavar="SIZE",
        help="resident bytes one guest's programs may declare together (default 2G)",
    )
    parser.add_argument("--guest-programs", type=_count, metavar="N", help="programs one guest may hold (default 256)")
    parser.add_argument(
        "--max-run-seconds",
        type=_seconds,
        metavar="S",
        help="the longest one submission may run; a guest's longer or absent timeout is cut to it (default 60)",
    )
    parser.add_argument(
        "--setup-timeout",
        type=_seconds,
        metavar="S",
        help="seconds a new connection may take to start its command queue before it is closed (default 10)",
    )
    parser.add_argument(
        "--poll-us",
        type=float,
        help="after a guest's last command, watch its ring this long before sleeping"
        " (0: never; default 50 on hosts of 4 or more cores, else 0)",
    )
    parser.add_argument(
        "--poll-linger-us",
        type=float,
        help="how long after a SUBMIT a guest's poll may wait for the work to end before answering"
        " pending (0: never wait; default 500)",
    )
    parser.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        help="default: info (a daemon logs its guests), or what ironaccel's -v / -q ask for",
    )


def run(args: argparse.Namespace) -> int:
    chosen_level = args.log_level
    if chosen_level is None and not getattr(args, "verbose", 0) and not getattr(args, "quiet", False):
        chosen_level = "info"
    if chosen_level is not None:
        level = getattr(logging, chosen_level.upper())
        # Where the command line has given the ironaccel loggers a handler of their own, only their level
        # is set here; otherwise the records go to stderr through the root logger.
        logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
        logging.getLogger("ironaccel").setLevel(level)
    log = logging.getLogger("ironaccel.serve")
    from ..core.errors import IronAccelError
    from ..runtime.backends import factory
    from ..virtio import DeviceEngine, GuestQuota
    from ..virtio.daemon import for_engine
    from ..virtio.engine_account import HOST_MEMORY_FRACTION, available_memory

    name, _, selector = args.device.partition(":")
    if name.strip().lower() in ("virtio", "auto"):
        print(f"ironaccel serve: --device must name a local backend (cpu, vulkan...), not {name!r}", file=sys.stderr)
        return 2
    if args.poll_linger_us is not None and not 0 <= args.poll_linger_us <= 1e6:
        limit = f"--poll-linger-us must be between 0 and 1000000, got {args.poll_linger_us}"
        print(f"ironaccel serve: {limit}", file=sys.stderr)
        return 2
    if args.poll_us is not None and args.poll_us < 0:
        print(f"ironaccel serve: --poll-us must be 0 or more, got {args.poll_us}", file=sys.stderr)
        return 2
    chosen = {
        "max_total_buffer_bytes": args.guest_bytes,
        "max_total_program_bytes": args.guest_program_bytes,
        "max_programs": args.guest_programs,
        "max_run_seconds": args.max_run_seconds,
    }
    quota = GuestQuota(**{k: v for k, v in chosen.items() if v is not None})
    max_bytes, available = args.max_bytes, None
    if max_bytes is None:
        available = available_memory()
        max_bytes = None if available is None else int(available * HOST_MEMORY_FRACTION)
    try:
        accelerator = factory(name.strip().lower())(selector) if selector else factory(name.strip().lower())()
        linger = {} if args.poll_linger_us is None else {"poll_linger": args.poll_linger_us * 1e-6}
        engine = DeviceEngine(accelerator, quota=quota, max_bytes=max_bytes, **linger)
    except (IronAccelError, OSError, ImportError, ValueError) as exc:
        print(f"ironaccel serve: {exc}", file=sys.stderr)
        return 1
    device: dict[str, float] = {}
    if args.poll_us is not None:
        device["poll_s"] = args.poll_us * 1e-6
    if args.setup_timeout is not None:
        device["setup_timeout_s"] = args.setup_timeout
    try:
        daemon = for_engine(args.socket, engine, max_guests=args.max_guests, device=device)
        daemon.listen()
    except IronAccelError as exc:  # the socket path: every message names it
        print(f"ironaccel serve: {exc}", file=sys.stderr)
        return 2
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: daemon.stop())
    log.info("serving %s (%s) on %s", accelerator.device_info().name, args.device, args.socket)
    if args.max_bytes is not None:
        cap = f"{_human(args.max_bytes)} (--max-bytes)"
    elif max_bytes is not None:
        cap = f"{_human(max_bytes)} ({HOST_MEMORY_FRACTION:.0%} of MemAvailable, {_human(available or 0)})"
    else:
        cap = "no cap (MemAvailable unknown; set --max-bytes)"
    log.info(
        "limits: all guests together %s; per guest %s of buffers, %s of programs (%d programs),"
        " %g s per submission; %d guests; set-up within %g s",
        cap,
        _human(quota.max_total_buffer_bytes),
        _human(quota.max_total_program_bytes),
        quota.max_programs,
        quota.max_run_seconds,
        args.max_guests,
        daemon.options.setup_timeout_s,
    )
    daemon.serve()
    left = engine.reclaim()
    log.info("host resources after shutdown: %s; still held by running work: %s", accelerator.live_resources(), left)
    return 0
