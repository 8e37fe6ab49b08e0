"""Shared helpers for probes that reach a vendor runtime through ctypes."""

from __future__ import annotations

import ctypes
import os
from collections.abc import Sequence

from ..core.backend import Unavailable


class LibraryNotFound(Unavailable):
    """No candidate library could be opened; ``tried`` lists each name with why it failed."""

    def __init__(self, reason: str, tried: str) -> None:
        super().__init__(reason)
        self.tried = tried


def load_library(
    family: str, candidates: Sequence[str], override: str | None = None, missing: str | None = None
) -> ctypes.CDLL:
    """Open the first loadable library among ``candidates`` (or exactly ``override`` when given).

    Raises :class:`LibraryNotFound` naming every name tried, so the user sees what to install. With
    ``missing`` (the library a user would install, e.g. ``libcuda.so.1``) the reason leads with it.
    """
    # dlopen alone searches LD_LIBRARY_PATH and the ld.so cache; ctypes.util.find_library would add
    # hundreds of milliseconds of ldconfig/gcc subprocesses per missing library for nothing more.
    names = [override] if override else list(candidates)
    errors: list[str] = []
    for name in names:
        try:
            return ctypes.CDLL(name)
        except OSError as exc:
            errors.append(f"{name} ({_short(exc)})")
    tried = ", ".join(errors)
    if missing:
        raise LibraryNotFound(f"{missing} not found (tried {tried})", tried)
    raise LibraryNotFound(f"{family} runtime library not found: tried {tried}", tried)


def _short(exc: OSError) -> str:
    text = str(exc)
    return "not found" if "No such file" in text or "cannot open shared object" in text else text


def bind(lib: ctypes.CDLL, name: str, restype: object, *argtypes: object) -> ctypes._CFuncPtr:
    """Look up ``name`` in ``lib`` and fix its signature; a missing symbol makes the family unavailable."""
    try:
        fn = getattr(lib, name)
    except AttributeError:
        raise Unavailable(f"{getattr(lib, '_name', 'library')} lacks symbol {name}") from None
    fn.restype = restype
    fn.argtypes = list(argtypes)
    return fn


def c_string(raw: bytes | bytearray) -> str:
    """A fixed-size C char array as text, cut at the first NUL."""
    return bytes(raw).split(b"\0", 1)[0].decode("utf-8", "replace").strip()


def uuid_text(raw: bytes) -> str:
    """16 raw bytes as the canonical 8-4-4-4-12 UUID form."""
    h = bytes(raw[:16]).hex()
    return f"{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def device_nodes(pattern_dir: str, prefix: str) -> list[str]:
    """Sorted device nodes in ``pattern_dir`` whose name starts with ``prefix`` (e.g. /dev, "neuron")."""
    try:
        names = os.listdir(pattern_dir)
    except OSError:
        return []
    return sorted(os.path.join(pattern_dir, n) for n in names if n.startswith(prefix))
