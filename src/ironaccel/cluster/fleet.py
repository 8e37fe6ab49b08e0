"""The replicas of one pool as Ray actors: started, watched, retired when they fail, and replaced.

A replica that fails is retired and, up to ``max_replacements`` for the pool, a replacement actor is asked
for with the same resource request (backend resource, amount, label selector): Ray places it wherever such
a resource is free, which is another node when the failed replica's node is gone. A replacement that is not
placed and ready within ``replace_timeout`` seconds is given up (its request withdrawn) and the pool goes on
with the replicas it has.

A replica that lost its device is not ended at once: its actor keeps Ray's resource unit and its slot on the
node until the pool closes, so neither Ray nor the node's slot claim hands the lost device to its
replacement. A replica whose process or node is gone is killed at once (with no restart).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import time
import warnings
from typing import Any

from .failures import ReplicaFailed, ReplicaFailure, reason
from .replica import ReplicaLost
from .resources import resource_name

_CLOSE_WAIT_S = 10.0  # a replica gets this long to close its device before it is killed

STARTING, LIVE, HELD, GONE = "starting", "live", "held", "gone"


@dataclasses.dataclass
class Member:
    """One replica actor and what the pool knows of it."""

    index: int
    backend: str
    spec: str  # the device asked for ("cpu", "vulkan", "vulkan:1")
    options: dict[str, Any]  # Ray's actor options: the resource request a replacement repeats
    actor: Any
    ready: Any  # the ref of its first describe() call: resolves once it opened its device and compiled
    deadline: float = math.inf
    replaces: int | None = None
    state: str = STARTING
    device: str = ""
    node: str = "?"
    info: dict[str, Any] = dataclasses.field(default_factory=dict)
    in_flight: int = 0


class Fleet:
    """Every replica a pool started, in start order (a replica's index is its place here)."""

    def __init__(self, ray: Any, args: tuple[Any, ...], max_replacements: int, replace_timeout: float) -> None:
        from .replica import Replica

        self._ray = ray
        self._remote = ray.remote(Replica)
        self._args = args  # the Replica constructor's arguments after the device: program ref, metadata, ...
        self.max_replacements = max_replacements
        self.replace_timeout = replace_timeout
        self.replacements = 0
        self.members: list[Member] = []
        self.failures: list[ReplicaFailure] = []
        self.released: dict[int, dict[str, int]] = {}
        self.closed = False
        self._turn = itertools.count()

    # ---- starting ------------------------------------------------------------------------------------

    def spawn(self, backend: str, spec: str, options: dict[str, Any], timeout: float = math.inf) -> Member:
        payload, metadata, threads, share = self._args
        actor = self._remote.options(**options).remote(payload, metadata, spec, threads, share)
        member = Member(len(self.members), backend, spec, options, actor, actor.describe.remote())
        member.device = spec
        member.deadline = time.monotonic() + timeout
        self.members.append(member)
        return member

    def started(self, member: Member) -> BaseException | None:
        """Take in a starting replica whose ready ref resolved: live, or failed to start (the error, after
        it is retired)."""
        try:
            member.info = self._ray.get(member.ready)
        except Exception as exc:  # noqa: BLE001 - a replica that cannot start is a failure, reported
            why = f"did not start: {reason(exc)}"
            if member.replaces is not None:
                self._failure_of(member.replaces).replacement_status = f"{why} (see replica {member.index})"
            # A replacement that cannot start is replaced in turn, within the same bound; a replica of the
            # pool's first start is not (the pool reports it, and fails only when none starts).
            self.retire(member, why, replace=member.replaces is not None)
            return exc
        member.state = LIVE
        member.node, member.device = member.info["node"], member.info["device"]
        if member.replaces is not None:
            self._failure_of(member.replaces).replacement_status = "running"
        return None

    def starting(self) -> list[Member]:
        return [m for m in self.members if m.state == STARTING]

    def live(self) -> list[Member]:
        return [m for m in self.members if m.state == LIVE]

    def next_deadline(self) -> float | None:
        """Seconds until the first starting replacement is due (None when none is starting)."""
        due = [m.deadline for m in self.starting()]
        return max(0.0, min(due) - time.monotonic()) if due else None

    def poll(self, timeout: float = 0.0) -> None:
        """Take in the replacements that are up, waiting up to ``timeout`` for all of them, and give up those
        past their deadline."""
        waiting = self.starting()
        if waiting:
            refs = [m.ready for m in waiting]
            ready, _ = self._ray.wait(refs, num_returns=len(refs), timeout=timeout)
            by_ref = {m.ready: m for m in waiting}
            for ref in ready:
                self.started(by_ref[ref])
        self.expire()

    def expire(self) -> None:
        """Give up the replacements past their deadline: the request is withdrawn, the pool goes on."""
        now = time.monotonic()
        for member in self.starting():
            if member.deadline > now:
                continue
            member.state = GONE
            self._ray.kill(member.actor, no_restart=True)
            failure = self._failure_of(member.replaces) if member.replaces is not None else None
            if failure is not None:
                failure.replacement_status = (
                    f"not placed and ready within {self.replace_timeout:g} s (no free"
                    f" {resource_name(member.backend)} that matches); the pool goes on with {len(self.live())}"
                    " replica(s)"
                )
            warnings.warn(
                f"no replacement for replica {member.replaces} could be placed and ready within"
                f" {self.replace_timeout:g} s; the pool goes on with {len(self.live())} replica(s)",
                ReplicaFailed,
                stacklevel=2,
            )

    # ---- failing -------------------------------------------------------------------------------------

    def choose(self) -> Member:
        """The live replica with the fewest batches in flight, ties taken in turn."""
        live = self.live()
        turn = next(self._turn)
        return min(live, key=lambda m: (m.in_flight, (m.index - turn) % len(self.members)))

    def failed(self, member: Member, exc: BaseException, positions: range) -> None:
        """A call to ``member`` failed with one of Ray's replica errors or ReplicaLost: retire it (once) and
        note the inputs of that call as run again."""
        if member.state == LIVE:
            self.retire(member, reason(exc), hold=isinstance(exc, ReplicaLost))
        failure = self._failure_of(member.index)
        failure.retried += len(positions)
        failure.retried_inputs.extend(positions)

    def retire(self, member: Member, why: str, *, hold: bool = False, replace: bool = True) -> None:
        member.state = HELD if hold else GONE
        failure = ReplicaFailure(member.index, member.device, member.node, why)
        self.failures.append(failure)
        if not hold:
            # Never restarted in place (max_restarts=0 as well): a killed process or lost node stays gone.
            self._ray.kill(member.actor, no_restart=True)
        if replace:
            self._replace(member, failure)
        else:
            failure.replacement_status = "a replica of the pool's first start is not replaced"
        instead = (
            f"replica {failure.replacement} starts in its place"
            if failure.replacement is not None
            else f"no replacement ({failure.replacement_status})"
        )
        warnings.warn(
            f"replica {member.index} ({member.device} on node {member.node[:12]}) failed: {why}; what it had in"
            f" flight runs on the other replicas; {instead}",
            ReplicaFailed,
            stacklevel=4,
        )

    def _replace(self, member: Member, failure: ReplicaFailure) -> None:
        if self.closed:
            failure.replacement_status = "the pool is closed"
            return
        if self.replacements >= self.max_replacements:
            failure.replacement_status = f"the pool has made max_replacements={self.max_replacements} already"
            return
        self.replacements += 1
        new = self.spawn(member.backend, member.spec, member.options, self.replace_timeout)
        new.replaces = member.index
        failure.replacement, failure.replacement_status = new.index, "starting"

    def _failure_of(self, index: int) -> ReplicaFailure:
        return next(f for f in reversed(self.failures) if f.replica == index)

    # ---- closing -------------------------------------------------------------------------------------

    def close(self) -> dict[int, dict[str, int]]:
        """Close every replica's device, end every actor (starting ones too); each closed replica's
        ``live_resources()`` after closing, by replica index."""
        if self.closed:
            return self.released
        self.closed = True
        ray = self._ray
        closing = {m.actor.close.remote(): m for m in self.members if m.state in (LIVE, HELD)}
        if closing:
            ready, _ = ray.wait(list(closing), num_returns=len(closing), timeout=_CLOSE_WAIT_S)
            for ref in ready:
                try:
                    self.released[closing[ref].index] = ray.get(ref)
                except Exception:  # noqa: BLE001 - a replica that died while closing has nothing left open
                    pass
        for member in self.members:
            if member.state != GONE:
                member.state = GONE
                ray.kill(member.actor, no_restart=True)
        return self.released
