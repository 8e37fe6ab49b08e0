"""The guest's buffer arena: request and response space inside the shared region.

First fit over a sorted list of free ranges, neighbours merged on free. Every block is aligned to 64
bytes (a cache line), so two in-flight commands never share a line. The books live in the guest
process only; the device never sees them. Not thread-safe: the transport holds its lock around it.
"""

from __future__ import annotations

from ..core.errors import InvalidArgument

ALIGN = 64


class Arena:
    def __init__(self, offset: int, size: int) -> None:
        self.offset = offset
        self.size = size
        self._free: list[list[int]] = [[offset, size]]  # [start, length], sorted by start
        self._used: dict[int, int] = {}

    @property
    def free_bytes(self) -> int:
        return sum(n for _, n in self._free)

    def alloc(self, n: int) -> int | None:
        """The start of ``n`` bytes (rounded up to 64), or None when no free range is large enough."""
        if n <= 0:
            raise InvalidArgument(f"arena blocks are at least one byte, asked for {n}")
        n = (n + ALIGN - 1) & -ALIGN
        if n > self.size:
            raise InvalidArgument(f"{n} bytes exceed the whole arena of {self.size}")
        for i, (start, length) in enumerate(self._free):
            if length >= n:
                if length == n:
                    del self._free[i]
                else:
                    self._free[i] = [start + n, length - n]
                self._used[start] = n
                return start
        return None

    def free(self, start: int) -> None:
        n = self._used.pop(start)
        i = 0
        while i < len(self._free) and self._free[i][0] < start:
            i += 1
        self._free.insert(i, [start, n])
        if i + 1 < len(self._free) and start + n == self._free[i + 1][0]:
            self._free[i][1] += self._free.pop(i + 1)[1]
        if i > 0 and self._free[i - 1][0] + self._free[i - 1][1] == start:
            self._free[i - 1][1] += self._free.pop(i)[1]
