"""How a pool reports what went wrong: a record per failed replica, a warning as each happens, and the error
``map`` raises when work is left and no replica can take it, naming every input that did not finish."""

from __future__ import annotations

import dataclasses
from typing import Any

from ..core.errors import IronAccelError


@dataclasses.dataclass
class ReplicaFailure:
    """One replica's failure: which replica, where, why, what it had in flight (run again on other replicas),
    and what became of the replica started in its place.

    ``retried``: how many inputs it had in flight; ``retried_inputs``: their positions in the input stream of
    the ``map`` call that ran them. ``replacement``: the index of the replica started in its place, or None
    when none was; ``replacement_status``: ``"starting"``, ``"running"``, or why there is none (the bound
    ``max_replacements`` reached, no room found in time, the replacement itself failed)."""

    replica: int
    device: str
    node: str
    reason: str
    retried: int = 0
    retried_inputs: list[int] = dataclasses.field(default_factory=list)
    replacement: int | None = None
    replacement_status: str = "none"

    def describe(self) -> str:
        where = f"replica {self.replica} ({self.device} on node {self.node[:12]})"
        again = f"; {self.retried} input(s) run again elsewhere" if self.retried else ""
        if self.replacement is None:
            instead = f"; no replacement: {self.replacement_status}"
        else:
            instead = f"; replacement replica {self.replacement}: {self.replacement_status}"
        return f"{where}: {self.reason}{again}{instead}"


class ReplicaFailed(RuntimeWarning):
    """A replica of a pool failed (its inputs run again on the others), or a replacement for one could not be
    started; ``Pool.failures`` keeps the details."""


class PoolExhausted(IronAccelError):
    """Work is left and no replica can take it: every replica failed and none could be replaced, or one
    batch failed on too many replicas.

    ``failures``: the pool's failures so far. ``not_done``: the positions (in the ``map`` call's input stream)
    of the inputs taken from it that yielded no output. ``not_taken_from``: the first position never taken
    from the input iterator; the iterator is left there, so those inputs were not read at all. Every input
    before it either yielded its output or is listed in ``not_done``."""

    def __init__(
        self,
        message: str,
        failures: list[ReplicaFailure] | None = None,
        not_done: list[int] | None = None,
        not_taken_from: int = 0,
    ) -> None:
        self.failures = list(failures or [])
        self.not_done = sorted(not_done or [])
        self.not_taken_from = not_taken_from
        if self.failures:
            message += "; failures: " + "; ".join(f.describe() for f in self.failures)
        if not_done is not None:
            message += (
                f"; {len(self.not_done)} input(s) taken and not done: positions {_ranges(self.not_done)};"
                f" inputs from position {not_taken_from} on were not taken from the iterator"
            )
        super().__init__(message)


def replica_errors(ray: Any) -> tuple[type[BaseException], ...]:
    """Ray's errors for a replica that is gone: its actor died or is unreachable (ActorUnavailableError is a
    RayActorError), its worker crashed, or the output it made was lost with its node."""
    e = ray.exceptions
    return (e.RayActorError, e.WorkerCrashedError, e.ObjectLostError, e.NodeDiedError)


def reason(exc: BaseException) -> str:
    """The exception's type and the last non-empty line of its text (Ray's errors end with the cause)."""
    text = str(exc).strip().splitlines()
    first = next((line for line in reversed(text) if line.strip()), type(exc).__name__) if text else type(exc).__name__
    return f"{type(exc).__name__}: {first.strip()[:300]}"


def _ranges(positions: list[int]) -> str:
    """``[0, 1, 2, 5, 7, 8]`` as ``0-2, 5, 7-8``, cut short past 20 runs."""
    runs: list[tuple[int, int]] = []
    for p in positions:
        if runs and p == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], p)
        else:
            runs.append((p, p))
    text = ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs[:20])
    return text + (f", ... ({len(runs) - 20} more runs)" if len(runs) > 20 else "") if runs else "none"
