#!/usr/bin/env python3
"""``ironaccel serve`` with a timestamp at each stage of a command on the daemon's side, for
``profile_virtio.py``. Nothing in the package changes: the functions of each stage are wrapped from the
outside before the daemon starts, and every stamp is ``time.monotonic_ns()`` (one clock for every process
of the machine, so the guest's stamps line up with these).

    python benchmarks/virtio/profile_daemon.py STAMPS_FILE [serve options...]

With ``STAMPS_FILE`` ``-`` nothing is wrapped (the unwrapped daemon, for the wrappers' own cost). The
stamps go to ``STAMPS_FILE`` (JSON: codes and times) when the daemon exits (SIGTERM).
"""

from __future__ import annotations

import functools
import itertools
import json
import sys
import time
from collections.abc import Callable
from typing import Any

CAPACITY = 1 << 20  # stamps; preallocated so that a stamp allocates nothing but its int
codes: list[str] = [""] * CAPACITY
times: list[int] = [0] * CAPACITY
_next = itertools.count()
_now = time.monotonic_ns


def stamp(code: str) -> None:
    i = next(_next)
    if i < CAPACITY:
        codes[i] = code
        times[i] = _now()


def around(fn: Callable[..., Any], before: str | None, after: str | None) -> Callable[..., Any]:
    """``fn`` with a stamp before the call and one after it (``None``: no stamp there)."""

    @functools.wraps(fn)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if before is not None:
            stamp(before)
        result = fn(*args, **kwargs)
        if after is not None:
            stamp(after)
        return result

    return wrapped


def install() -> None:
    from ironaccel.virtio import daemon_connection, engine_session, virtqueue_device
    from ironaccel.virtio.engine_commands import GuestCommands

    # The kick: select() has returned for the kick eventfd and the loop reads it.
    daemon_connection._drain_eventfd = around(daemon_connection._drain_eventfd, "wake", None)
    pop = virtqueue_device.DeviceQueue.pop

    @functools.wraps(pop)
    def popped(self: Any) -> Any:
        chain = pop(self)
        if chain is not None:
            stamp("popped")
        return chain

    virtqueue_device.DeviceQueue.pop = popped  # type: ignore[method-assign]
    engine_session.decode_request = around(engine_session.decode_request, "decode0", "decode1")
    # The handlers are bound per session from the class (GuestCommands.__init__), so wrapping the class's
    # methods before any guest connects reaches every session.
    for name, value in list(vars(GuestCommands).items()):
        if name.startswith("_") and not name.startswith("__") and callable(value) and name != "_ok":
            if name in {"_created", "_release", "_transfer"}:
                continue  # helpers the handlers call, not handlers
            setattr(GuestCommands, name, around(value, "h0", "h1"))
    # A READ_BUFFER's handler only checks; the backend reads into the answer afterwards (_fill).
    engine_session.GuestSession._fill = around(engine_session.GuestSession._fill, "fill0", "fill1")  # type: ignore[method-assign]
    daemon_connection._signal = around(daemon_connection._signal, None, "signal")
    serve = daemon_connection.GuestConnection._serve
    daemon_connection.GuestConnection._serve = around(serve, None, "served")  # type: ignore[method-assign]


def dump(path: str) -> None:
    n = min(next(_next), CAPACITY)
    with open(path, "w") as f:
        json.dump({"codes": codes[:n], "times": times[:n]}, f)


def main() -> int:
    from ironaccel.cli.main import main as cli

    path, options = sys.argv[1], sys.argv[2:]
    if path != "-":
        install()
    try:
        return cli(["serve", *options])
    finally:
        if path != "-":
            dump(path)


if __name__ == "__main__":
    sys.exit(main())
