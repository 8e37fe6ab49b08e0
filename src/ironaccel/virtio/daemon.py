"""The host daemon: a Unix socket that serves virtio-accel to guests, each on a thread of its own.

    daemon = Daemon("/run/ironaccel.sock", connect=engine.connect, options=DeviceOptions(config=...))
    daemon.serve()          # until stop() (signal handlers call it)

Every accepted connection gets a :class:`GuestConnection` and a fresh engine session; guests never
share objects, and one guest's malformed input or disconnection touches no other. ``stop`` is safe to
call from a signal handler or another thread: it raises an eventfd that the accept loop and every
connection thread watch, so all of them leave their wait at once, close their sessions and unmap
their memory; ``serve`` then removes the socket file and returns.

The socket file is created with mode 0600: who may connect is decided by the file system, and the
daemon logs each guest's process and user id.
"""

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import socket
import stat
import struct
import threading
from collections.abc import Callable
from typing import Any

from .daemon_connection import DeviceOptions, GuestConnection, Session
from .engine import DeviceEngine

log = logging.getLogger("ironaccel.virtio.daemon")


class Daemon:
    """Serves guests on ``path`` until ``stop``. At most ``max_guests`` connections at once."""

    def __init__(
        self,
        path: str,
        connect: Callable[[], Session],
        options: DeviceOptions | None = None,
        max_guests: int = 64,
    ) -> None:
        self.path = path
        self.connect = connect
        self.options = options or DeviceOptions()
        self.max_guests = max_guests
        self._stop_fd = os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK)
        self._lock = threading.Lock()
        self._guests: dict[int, tuple[threading.Thread, socket.socket]] = {}
        self._next_id = 1
        self._listener: socket.socket | None = None
        self.served = 0

    def listen(self) -> None:
        """Bind the socket (replacing a stale one nobody listens on). ``serve`` calls it if needed."""
        _remove_stale(self.path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        old_umask = os.umask(0o177)
        try:
            sock.bind(self.path)
        finally:
            os.umask(old_umask)
        sock.listen(16)
        self._listener = sock
        log.info("listening on %s", self.path)

    def serve(self) -> None:
        if self._listener is None:
            self.listen()
        assert self._listener is not None
        sel = selectors.DefaultSelector()
        sel.register(self._listener, selectors.EVENT_READ, "accept")
        sel.register(self._stop_fd, selectors.EVENT_READ, "stop")
        try:
            while True:
                if any(key.data == "stop" for key, _ in sel.select()):
                    break
                self._accept()
        finally:
            sel.close()
            self._shutdown()

    def stop(self) -> None:
        """Ask every thread to finish; safe from a signal handler."""
        if self._stop_fd >= 0:
            with contextlib.suppress(OSError):
                os.eventfd_write(self._stop_fd, 1)

    @property
    def guests(self) -> int:
        with self._lock:
            return len(self._guests)

    def _accept(self) -> None:
        assert self._listener is not None
        try:
            sock, _ = self._listener.accept()
        except OSError as exc:
            log.warning("accept failed: %s", exc)
            return
        pid, uid = _peer(sock)
        with self._lock:
            if len(self._guests) >= self.max_guests:
                log.warning("refused guest pid %s: %d guests connected (the limit)", pid, self.max_guests)
                sock.close()
                return
            gid = self._next_id
            self._next_id += 1
        name = f"guest {gid} (pid {pid}, uid {uid})"
        try:
            conn = GuestConnection(sock, self.connect, self.options, name)
        except Exception:  # the engine refused a session: this guest goes, the daemon stays
            log.exception("%s: no engine session", name)
            sock.close()
            return
        thread = threading.Thread(target=self._run, args=(gid, conn), name=f"ironaccel-guest-{gid}", daemon=True)
        with self._lock:
            self._guests[gid] = (thread, sock)
            self.served += 1
        log.info("%s connected", name)
        thread.start()

    def _run(self, gid: int, conn: GuestConnection) -> None:
        try:
            conn.run(self._stop_fd)
        except Exception:  # a bug in one connection must not end the daemon
            log.exception("%s: connection failed", conn.name)
            with contextlib.suppress(Exception):
                conn.close()
        finally:
            with self._lock:
                self._guests.pop(gid, None)
            log.info("%s gone (%d commands, %d malformed chains)", conn.name, conn.commands, conn.rejected_chains)

    def _shutdown(self, timeout: float = 10.0) -> None:
        self.stop()
        if self._listener is not None:
            self._listener.close()
            self._listener = None
            with contextlib.suppress(OSError):
                os.unlink(self.path)
        with self._lock:
            guests = list(self._guests.values())
        for thread, _ in guests:
            thread.join(timeout)
        if any(thread.is_alive() for thread, _ in guests):
            log.warning("a guest connection did not finish within %.0f s", timeout)
        else:
            os.close(self._stop_fd)
            self._stop_fd = -1
        log.info("stopped after serving %d guest(s)", self.served)


def for_engine(path: str, engine: DeviceEngine, **options: Any) -> Daemon:
    """A daemon serving ``engine``: its configuration space and frame bounds are the engine's."""
    config = engine.config
    device = DeviceOptions(
        config=config.pack(),
        max_chain=config.max_chain_descriptors,
        max_request=config.max_request_bytes,
        max_response=config.max_response_bytes,
        **options.pop("device", {}),
    )
    return Daemon(path, engine.connect, device, **options)


def _peer(sock: socket.socket) -> tuple[int | str, int | str]:
    try:
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        pid, uid, _gid = struct.unpack("3i", creds)
    except OSError:
        return "?", "?"
    return pid, uid


def _remove_stale(path: str) -> None:
    """Remove a socket file left by a daemon that died; refuse to touch anything else or a live daemon."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise FileExistsError(f"{path} exists and is not a socket")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
    except ConnectionRefusedError:
        os.unlink(path)
        return
    except OSError:
        return
    finally:
        probe.close()
    raise FileExistsError(f"a daemon is already serving {path}")
