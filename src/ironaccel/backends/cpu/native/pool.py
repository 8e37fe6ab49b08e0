"""The process's pool of helper threads for native programs (:file:`pool.c`), built and started once.

Programs with an operator worth splitting export ``ia_set_pool``; :func:`attach` hands them the pool's
``ia_pool_for``, which they call from inside their own run. Until a program is attached, or where the
pool cannot be built, its operators run on the calling thread: the results are the same either way.

How many threads a split may use follows :func:`..parallel.split_threads` (the caller plus one per idle
CPU), read before each run and passed down only when it changes.
"""

from __future__ import annotations

import ctypes
import logging
import threading
from importlib import resources

from ..parallel import split_threads, workers
from .toolchain import BuildError, Toolchain, build

log = logging.getLogger("ironaccel.cpu.native")

_lock = threading.Lock()
_library: ctypes.CDLL | None = None
_failed = False
_limit_now = 0


def _load(tools: Toolchain) -> ctypes.CDLL | None:
    global _library, _failed
    with _lock:
        if _library is None and not _failed:
            source = resources.files(__package__).joinpath("pool.c").read_text()
            try:
                library = ctypes.CDLL(str(build(source, tools, ("-pthread",))))
            except (BuildError, OSError) as exc:
                log.warning("native programs run on one thread: the helper pool failed to build: %s", exc)
                _failed = True
                return None
            library.ia_pool_start.argtypes, library.ia_pool_start.restype = [ctypes.c_int], ctypes.c_int
            library.ia_pool_limit.argtypes, library.ia_pool_limit.restype = [ctypes.c_int], None
            library.ia_pool_start(workers() - 1)
            _library = library
        return _library


def attach(program: ctypes.CDLL, tools: Toolchain) -> bool:
    """Give ``program`` (a loaded native program that exports ``ia_set_pool``) the pool; False when there
    is none (its operators then run on the calling thread). Nothing of ``program`` is kept: the setter is
    looked up by item (ctypes caches attribute lookups on the CDLL) and dropped, so the program's
    library can be closed later (:mod:`.library`)."""
    library = _load(tools)
    if library is None:
        return False
    setter = program["ia_set_pool"]
    setter.argtypes, setter.restype = [ctypes.c_void_p], None
    setter(ctypes.cast(library.ia_pool_for, ctypes.c_void_p))
    return True


def update_limit() -> None:
    """Tell the pool how many threads a split may use now (a cheap check when nothing changed)."""
    global _limit_now
    threads = split_threads()
    if threads != _limit_now and _library is not None:
        _library.ia_pool_limit(threads)
        _limit_now = threads
