"""``ironaccel serve --device cpu|vulkan[:SEL] --socket PATH``: the virtio-accel daemon, in the foreground.

Opens the device, then serves guests on PATH until SIGTERM or SIGINT (Ctrl-C): each guest process
that connects (``ironaccel.open("virtio:PATH")``) gets its own engine session, so its objects, quota
and cleanup are its own. Logs go to stderr; on a signal every guest is disconnected, everything they
held is released, the socket file is removed, and the command exits 0.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", default="cpu", help="the accelerator guests get: cpu, vulkan or vulkan:N")
    parser.add_argument("--socket", required=True, metavar="PATH", help="the Unix socket guests connect to")
    parser.add_argument("--max-guests", type=int, default=64, help="guests served at once (default 64)")
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
        "--log-level", default="info", choices=("debug", "info", "warning", "error"), help="default: info"
    )


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=getattr(logging, args.log_level.upper()),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    log = logging.getLogger("ironaccel.serve")
    from ..core.errors import IronAccelError
    from ..runtime.backends import factory
    from ..virtio import DeviceEngine
    from ..virtio.daemon import for_engine

    name, _, selector = args.device.partition(":")
    if name.strip().lower() in ("virtio", "auto"):
        print(f"ironaccel serve: --device must name a local backend (cpu, vulkan...), not {name!r}", file=sys.stderr)
        return 2
    if args.poll_linger_us is not None and not 0 <= args.poll_linger_us <= 1e6:
        limit = f"--poll-linger-us must be between 0 and 1000000, got {args.poll_linger_us}"
        print(f"ironaccel serve: {limit}", file=sys.stderr)
        return 2
    try:
        accelerator = factory(name.strip().lower())(selector) if selector else factory(name.strip().lower())()
        linger = {} if args.poll_linger_us is None else {"poll_linger": args.poll_linger_us * 1e-6}
        engine = DeviceEngine(accelerator, **linger)
        device = {}
        if args.poll_us is not None:
            if args.poll_us < 0:
                raise ValueError(f"--poll-us must be 0 or more, got {args.poll_us}")
            device["poll_s"] = args.poll_us * 1e-6
        daemon = for_engine(args.socket, engine, max_guests=args.max_guests, device=device)
        daemon.listen()
    except (IronAccelError, OSError, ImportError, ValueError) as exc:
        print(f"ironaccel serve: {exc}", file=sys.stderr)
        return 1
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: daemon.stop())
    log.info("serving %s (%s) on %s", accelerator.device_info().name, args.device, args.socket)
    daemon.serve()
    left = engine.reclaim()
    log.info("host resources after shutdown: %s; still held by running work: %s", accelerator.live_resources(), left)
    return 0
