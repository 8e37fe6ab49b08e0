"""Reading a whole file that a user or a guest names, with a bound on what it may cost.

Every file IronAccel reads on someone's say-so (a program, an input array, a test description) goes
through :func:`read_limited`, so ``/dev/zero``, a FIFO, a directory or a file larger than its kind allows
is refused with one clear error instead of blocking, or reading until the host runs out of memory.
"""

from __future__ import annotations

import errno
import os
import stat

from .errors import InvalidArgument, PermissionDenied, ResourceLimit

# O_NONBLOCK: opening a FIFO must not wait for a writer. O_NOCTTY: opening a terminal must not make it ours.
# Windows has neither (nor FIFOs); it needs O_BINARY instead.
if os.name == "nt":
    _OPEN_FLAGS = os.O_RDONLY | os.O_BINARY
else:
    _OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _kind(mode: int) -> str:
    for test, name in _KINDS:
        if test(mode):
            return name
    return f"not a regular file (mode {stat.S_IFMT(mode):#o})"


def _refuse_special(shown: str, what: str, mode: int) -> None:
    if not stat.S_ISREG(mode):
        raise InvalidArgument(f"{shown}: {what} must be a regular file; this is {_kind(mode)}")


def _refuse_size(shown: str, what: str, size: int, limit: int, knob: str) -> None:
    if size > limit:
        raise ResourceLimit(f"{shown}: {what} is {size} bytes, over the limit of {limit} bytes{knob}")


def _open_error(shown: str, what: str, exc: OSError) -> Exception:
    reason = exc.strerror or str(exc)
    if exc.errno in (errno.EACCES, errno.EPERM):
        return PermissionDenied(f"{shown}: cannot open {what}: {reason}")
    return InvalidArgument(f"{shown}: cannot open {what}: {reason}")


def read_limited(path: str | os.PathLike, limit: int, what: str, *, limit_name: str = "") -> bytes:
    """The whole content of the regular file at ``path``, at most ``limit`` bytes.

    ``what`` names the file's role in messages ("TOSA program", "input array"), and ``limit_name`` the
    setting that holds ``limit``, where there is one. Symbolic links are followed; what they lead to is
    judged.

    * A path that is not a regular file (a directory, FIFO, character or block device, socket) raises
      :class:`InvalidArgument` naming the path and what it is. The path is opened non-blocking, so a FIFO
      is refused at once instead of waiting for a writer, and is judged first by ``stat`` so a device
      file is never opened at all; the open descriptor's ``fstat`` is what decides.
    * A file of more than ``limit`` bytes raises :class:`ResourceLimit` naming the path, its size and the
      limit, before any buffer is allocated. At most ``limit + 1`` bytes are ever read, so a file that
      grows past the limit while it is read is refused the same way.
    * A missing path, or any other failure to open or read, raises :class:`InvalidArgument` naming the
      path and the system's reason; a permission failure raises :class:`PermissionDenied` (which is
      also a ``PermissionError``).
    """
    if type(limit) is not int or limit < 0:
        raise InvalidArgument(f"read_limited: limit must be a non-negative int, got {limit!r}")
    name = os.fspath(path)
    shown = os.fsdecode(name)
    knob = f" ({limit_name})" if limit_name else ""
    try:
        before = os.stat(name)
    except OSError as exc:
        raise _open_error(shown, what, exc) from None
    _refuse_special(shown, what, before.st_mode)
    _refuse_size(shown, what, before.st_size, limit, knob)
    try:
        fd = os.open(name, _OPEN_FLAGS)
    except OSError as exc:
        raise _open_error(shown, what, exc) from None
    try:
        # The path may have been replaced since the stat above: the open descriptor is the authority.
        st = os.fstat(fd)
        _refuse_special(shown, what, st.st_mode)
        _refuse_size(shown, what, st.st_size, limit, knob)
        return _read_bounded(fd, shown, what, st.st_size, limit, knob)
    finally:
        os.close(fd)


def _read_bounded(fd: int, shown: str, what: str, size: int, limit: int, knob: str) -> bytes:
    budget = limit + 1
    parts: list[bytes] = []
    total = 0
    while total < budget:
        # Ask for the rest of the file as fstat saw it (one read, one allocation in the usual case), then
        # for a little more to notice growth, never past the budget.
        want = min(budget - total, max(size + 1 - total, 1 << 16))
        try:
            chunk = os.read(fd, want)
        except OSError as exc:
            raise InvalidArgument(f"{shown}: cannot read {what}: {exc.strerror or exc}") from None
        if not chunk:
            break
        parts.append(chunk)
        total += len(chunk)
    if total > limit:
        raise ResourceLimit(f"{shown}: {what} grew past the limit of {limit} bytes{knob} while it was read")
    return parts[0] if len(parts) == 1 else b"".join(parts)
