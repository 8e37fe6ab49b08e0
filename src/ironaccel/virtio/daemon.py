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

The accept loop never waits on a peer: the listening socket is non-blocking, and what runs there per
connection (peer credentials, the engine session, the connection object) touches nothing the peer
controls. A guest slot is held from accept until the connection ends; one that has not started its
command queue within ``DeviceOptions.setup_timeout_s`` (10 s) is closed by its own thread, so sockets
that connect and idle cannot lock guests out for longer than that. A connection beyond ``max_guests``
is accepted, sent the refusal "daemon full (N guests)" (``daemon_connection.refuse``: one message of at
most 256 bytes of reason, written without blocking) and closed at once; the guest transport raises
ResourceLimit with that reason.

``listen`` names the socket path in every error: a missing directory or a path too long
(InvalidArgument), a path that exists and is not a socket (InvalidArgument), a socket a live daemon
serves (Busy), no permission (PermissionDenied).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import selectors
import socket
import stat
import struct
import threading
import time
from collections.abc import Callable
from typing import Any

from ..core.errors import Busy, InvalidArgument, IronAccelError, PermissionDenied
from .daemon_connection import DeviceOptions, GuestConnection, Session, refuse
from .engine import DeviceEngine

log = logging.getLogger("ironaccel.virtio.daemon")

BACKLOG = 128  # connections waiting for accept; a guest that finds it full tries again until its set-up deadline
SUN_PATH_MAX = 108  # sockaddr_un.sun_path, its terminating NUL included
REFUSAL_LOG_S = 1.0  # refusals of a full daemon are logged at most once per this many seconds


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
        if not 0 < self.options.setup_timeout_s < float("inf"):
            seconds = self.options.setup_timeout_s
            raise InvalidArgument(f"the set-up deadline must be a positive number of seconds, got {seconds}")
        if max_guests < 1:
            raise InvalidArgument(f"max_guests must be at least 1, got {max_guests}")
        self.max_guests = max_guests
        self._stop_fd = os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK)
        self._lock = threading.Lock()
        self._guests: dict[int, tuple[threading.Thread, socket.socket]] = {}
        self._next_id = 1
        self._listener: socket.socket | None = None
        self.served = 0
        self._refused = 0
        self._refusal_logged = -REFUSAL_LOG_S

    def listen(self) -> None:
        """Bind the socket (replacing a stale one nobody listens on). ``serve`` calls it if needed.
        Raises an IronAccelError naming the path (see the module's description)."""
        _remove_stale(self.path)
        # Clients wait for the socket file and then connect: bound at a hidden name and listening before it is
        # linked at the path, the file never stands there refusing them, and a daemon starting beside this
        # one never takes it for a stale socket. link, not rename: a socket that appeared meanwhile is kept.
        hidden = _hidden_name(self.path)
        sock = _bound(hidden, self.path) if hidden else None
        if sock is None:  # no room for the hidden name, or a file system without hard links
            sock = _bound(self.path, None)
        assert sock is not None  # without a link to make, binding succeeds or raises
        sock.setblocking(False)  # a peer gone between select and accept must not stall the loop
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
        except BlockingIOError:
            return  # the peer left before we got to it
        except OSError as exc:
            log.warning("accept failed: %s", exc)
            return
        sock.setblocking(True)  # the connection's thread sets its own timeouts
        pid, uid = _peer(sock)
        with self._lock:
            full = len(self._guests) >= self.max_guests
            gid = self._next_id
            if not full:
                self._next_id += 1
        if full:
            self._refused += 1
            now = time.monotonic()
            if now >= self._refusal_logged + REFUSAL_LOG_S:  # a flood of connections is not a flood of lines
                log.warning(
                    "refused guest pid %s uid %s: %d guests connected (the limit); %d refused in all",
                    pid,
                    uid,
                    self.max_guests,
                    self._refused,
                )
                self._refusal_logged = now
            refuse(sock, f"daemon full ({self.max_guests} guests)")
            sock.close()
            return
        name = f"guest {gid} (pid {pid}, uid {uid})"
        try:
            conn = GuestConnection(sock, self.connect, self.options, name)
        except IronAccelError as exc:  # the engine refused a session: this guest goes, the daemon stays
            log.warning("%s: no engine session: %s", name, exc)
            refuse(sock, f"no engine session: {exc}")
            sock.close()
            return
        except Exception:
            log.exception("%s: no engine session", name)
            refuse(sock, "no engine session (see the daemon's log)")
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


def _bound(name: str, link: str | None) -> socket.socket | None:
    """A socket bound at ``name`` and listening, then linked at ``link`` (``name`` removed); None where
    the file system refuses the hard link. Errors name the socket path."""
    path = link or name
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    old_umask = os.umask(0o177)
    linking = False
    try:
        sock.bind(name)
        sock.listen(BACKLOG)
        if link is not None:
            linking = True
            os.link(name, link)
    except OSError as exc:
        sock.close()
        if linking and exc.errno in (errno.EPERM, errno.EOPNOTSUPP, errno.EMLINK):
            return None
        raise _listen_error(path, exc) from exc
    finally:
        os.umask(old_umask)
        if link is not None:
            with contextlib.suppress(OSError):
                os.unlink(name)
    return sock


def _hidden_name(path: str) -> str | None:
    """A fresh name beside ``path`` to bind before the socket is linked there; None where it would not fit a
    Unix socket address that ``path`` fits (the daemon then binds ``path`` itself)."""
    hidden = os.path.join(os.path.dirname(path), f".ironaccel-{os.getpid()}-{os.urandom(4).hex()}")
    fits = len(os.fsencode(hidden)) < SUN_PATH_MAX
    return hidden if fits and len(os.fsencode(path)) < SUN_PATH_MAX else None


def _remove_stale(path: str) -> None:
    """Remove a socket file left by a daemon that died; refuse to touch anything else or a live daemon."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise _listen_error(path, exc) from exc
    if not stat.S_ISSOCK(mode):
        raise InvalidArgument(f"cannot listen on {path}: it exists and is not a socket")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
    except ConnectionRefusedError:
        try:
            os.unlink(path)
        except OSError as exc:
            raise _listen_error(path, exc) from exc
        return
    except OSError as exc:
        raise _listen_error(path, exc) from exc
    finally:
        probe.close()
    raise Busy(f"cannot listen on {path}: a daemon is already serving it")


def _listen_error(path: str, exc: OSError) -> IronAccelError:
    """What binding ``path`` failed with, said with the path."""
    if isinstance(exc, PermissionError):
        return PermissionDenied(f"cannot listen on {path}: {(exc.strerror or 'permission denied').lower()}")
    if isinstance(exc, FileNotFoundError):
        folder = os.path.dirname(os.path.abspath(path))
        return InvalidArgument(f"cannot listen on {path}: the directory {folder} does not exist")
    if isinstance(exc, NotADirectoryError):
        return InvalidArgument(f"cannot listen on {path}: a component of the path is not a directory")
    if isinstance(exc, OSError) and exc.errno in (errno.EADDRINUSE, errno.EEXIST):
        return Busy(f"cannot listen on {path}: the address is in use")
    reason = exc.strerror or str(exc)
    return InvalidArgument(f"cannot listen on {path}: {reason}")
