"""The process's table of loaded native libraries: each opened once, shared by its users, closed when unused.

A compiled program is a shared object named by the hash of its source (:func:`.toolchain.build`), so one
path always holds the same code and is opened once however many programs use it. Each
:class:`~.program.NativeProgram` acquires the library of its path here and releases it when it is
released (or collected); the table counts the users. A library whose last user let go stays open in a
small LRU of idle libraries, since the same program is often loaded again soon (a client reconnecting,
a model reloaded); one pushed out of that LRU is closed with ``dlclose``, and its mappings leave the
process. Before this, every distinct program loaded kept about five mappings for the life of the
process, and a stream of distinct programs (a guest of the virtio daemon can send one per request)
reached the kernel's limit on mappings (vm.max_map_count, 65530 by default) after about 13,000.

Closing is safe only while nothing can call into the library. The table holds the only ``CDLL`` object
and hands out only fresh function objects (:meth:`Library.function`, never ``CDLL`` attributes, which
ctypes would cache on the object); a user drops its function objects before it releases the library,
and releases it only when no run of its own is in flight (the program counts its runs). The helper pool
(:mod:`.pool`) calls into a program only from inside that program's own run. The pool's library is not
in this table: it is opened once per process and never closed. See
docs/adr/0023-native-libraries-released-when-unused.md.
"""

from __future__ import annotations

import collections
import ctypes
import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ....core.errors import InternalError
from . import pool
from .toolchain import Toolchain

try:
    from _ctypes import dlclose as _dlclose
except ImportError:  # not a dlopen platform: libraries stay open
    _dlclose = None

log = logging.getLogger("ironaccel.cpu.native")

# Idle libraries kept open for a reload: at most this many, least recently released closed first. About
# five mappings and tens of kilobytes each.
IDLE_LIBRARIES = 16


class Library:
    """One open shared object and how many programs use it (only the table changes ``users``)."""

    __slots__ = ("_cdll", "_pooled", "path", "users")

    def __init__(self, path: Path) -> None:
        self.path = path
        self._cdll: ctypes.CDLL | None = ctypes.CDLL(str(path))
        self.users = 0
        self._pooled: bool | None = None  # whether the helper pool is attached (None: not tried yet)

    @property
    def is_open(self) -> bool:
        return self._cdll is not None

    def function(self, name: str, argtypes: Sequence[Any], restype: Any) -> Any:
        """A new function object for the exported ``name``. The caller must hold the library (between
        :func:`acquire` and :func:`release`) and drop the object before it releases it."""
        if self._cdll is None:
            raise InternalError(f"native library {self.path.name} is closed: {name} cannot be looked up")
        fn = self._cdll[name]  # item access: a fresh object, not cached on the CDLL
        fn.argtypes, fn.restype = list(argtypes), restype
        return fn

    def attach_pool(self, tools: Toolchain) -> bool:
        """Give the library (a program with operators split across threads) the helper pool, once; False
        when there is no pool (its operators then run on the calling thread)."""
        if self._pooled is None:
            assert self._cdll is not None
            self._pooled = pool.attach(self._cdll, tools)
        return self._pooled

    def _close(self) -> None:
        cdll, self._cdll = self._cdll, None
        if cdll is None or _dlclose is None:
            return
        handle = cdll._handle
        del cdll  # with every function object gone, nothing refers to the code any more
        try:
            _dlclose(handle)
        except OSError as exc:  # the mapping stays; nothing else is wrong
            log.warning("could not close native library %s: %s", self.path.name, exc)


_lock = threading.Lock()
_open: dict[Path, Library] = {}  # every open library, in use or idle
_idle: collections.OrderedDict[Path, Library] = collections.OrderedDict()  # users == 0, oldest first


def acquire(path: Path) -> Library:
    """The open library at ``path``, opened now if it is not open, with one more user. Raises OSError
    when the object cannot be loaded."""
    with _lock:
        library = _open.get(path)
        if library is None:
            library = _open[path] = Library(path)
        else:
            _idle.pop(path, None)
        library.users += 1
        return library


def release(library: Library) -> None:
    """One user fewer; the last one leaves the library idle, and the least recently idle beyond
    :data:`IDLE_LIBRARIES` are closed."""
    with _lock:
        if library.users <= 0 or _open.get(library.path) is not library:
            raise InternalError(f"native library {library.path.name} released more often than acquired")
        library.users -= 1
        if library.users:
            return
        _idle[library.path] = library
        while len(_idle) > IDLE_LIBRARIES:
            path, oldest = _idle.popitem(last=False)
            del _open[path]
            # Under the lock: an acquire of the same path opens it anew only once this one is closed.
            oldest._close()


def open_libraries() -> tuple[int, int]:
    """(libraries in use, idle libraries kept open): for tests and diagnostics."""
    with _lock:
        return len(_open) - len(_idle), len(_idle)
