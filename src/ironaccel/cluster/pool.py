"""A pool of compiled programs across a Ray cluster: one actor per replica, each holding one device and one
compiled program, fed by :meth:`Pool.map` with a bounded window of work in flight.

Placement is Ray's: a replica asks for one unit (or ``per_replica``) of its backend's resource,
``ironaccel_<backend>``, which only nodes started with :func:`~.resources.node_resources` have. Inputs and
outputs travel as the task's arguments and results: Ray carries a small batch inside the task itself and
a large one through its object store (the pool keeps each batch until it is answered, for a retry), and
numpy arrays come back as zero-copy, read-only views of what Ray received. A batch whose items share one form travels
stacked, one array per input and per output (:mod:`.batches`), so Ray handles a few buffers per batch
rather than one per array.

Faults lose nothing: when a replica dies (its process killed, its node gone) or loses its device, every
batch it had in flight runs again on another replica, each input still yields exactly one output, in order
when asked, and the failure is recorded in :attr:`Pool.failures` and announced as a
:class:`ReplicaFailed` warning. A replica is never restarted in place (a lost device is not tried again);
a replacement is started with the same resource request instead, up to ``max_replacements``, and takes
work as soon as it is up (see :mod:`.fleet`). When no replica is left, ``map`` raises
:class:`PoolExhausted` naming the failures and every input that did not finish.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import math
from collections.abc import Iterable, Iterator
from typing import Any

from ..core.errors import DeadlineExpired, InvalidArgument, Unsupported
from .batches import Stacked, pack
from .failures import PoolExhausted, ReplicaFailure, replica_errors
from .fleet import STARTING, Fleet
from .replica import ReplicaLost, check_threads, pack_program
from .resources import advertised, resource_name

PER_DEVICE = "per-device"


@dataclasses.dataclass
class _Batch:
    index: int
    first: int  # the position of its first input in the map's input stream
    inputs: Any  # what travels: a Stacked batch or the list of items (kept for a retry)
    size: int
    attempts: int = 0
    replica: int = -1

    @property
    def positions(self) -> range:
        return range(self.first, self.first + self.size)


def plan(device: str, replicas: int | str, per_replica: float, resources: dict[str, Any]) -> list[tuple[str, str]]:
    """(backend, device spec) for each replica to start, given the cluster's resources.

    ``device``: ``"auto"`` takes the backends the cluster advertises, best first (cuda, vulkan, then cpu);
    a backend (``"vulkan"``) or a device id (``"vulkan:1"``) keeps to that backend's resource. ``replicas``:
    a count, or ``"per-device"``, as many as the advertised amount holds (``per_replica`` each)."""
    if not isinstance(per_replica, int | float) or not 0 < per_replica:
        raise InvalidArgument(f"per_replica must be a positive number, got {per_replica!r}")
    offered = advertised(resources)
    if device == "auto":
        backends = list(offered)
    else:
        backend = device.partition(":")[0].strip().lower()
        if backend in ("auto", "virtio", ""):
            raise InvalidArgument(f"a pool's device is 'auto', a backend or a device id; got {device!r}")
        backends = [backend]
    room = {b: math.floor(offered.get(b, 0.0) / per_replica + 1e-9) for b in backends}
    if not any(room.values()):
        wanted = " or ".join(resource_name(b) for b in backends) if backends else "ironaccel_*"
        raise Unsupported(
            f"no node of the cluster advertises {wanted} (at least {per_replica} of it): start nodes with"
            " ironaccel.cluster.node_resources() (python -m ironaccel.cluster prints the ray start options)"
        )
    spec = (lambda b: b) if device == "auto" else (lambda b: device)
    if replicas == PER_DEVICE:
        return [(b, spec(b)) for b in backends for _ in range(room[b])]
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 1:
        raise InvalidArgument(f"replicas must be a positive int or {PER_DEVICE!r}, got {replicas!r}")
    if replicas > sum(room.values()):
        held = ", ".join(f"{resource_name(b)}: {offered.get(b, 0.0):g}" for b in backends)
        raise InvalidArgument(
            f"{replicas} replicas of {per_replica} each do not fit what the cluster advertises ({held})"
        )
    chosen: list[tuple[str, str]] = []
    for b in backends:
        take = min(room[b], replicas - len(chosen))
        chosen += [(b, spec(b))] * take
    return chosen


class Pool:
    """Replicas of one compiled program across a Ray cluster (``ray.init`` first).

    ``program``: a path to a .tosa file (read here, with its .json sidecar), its bytes, a ``tosa.Program``
    or an NVFP4 projection. ``device``, ``replicas``, ``per_replica``: see :func:`plan`; ``per_replica`` below
    1 lets replicas share a device. ``threads``: a CPU replica's threads (1: pinned to a core of its own;
    None: the CPU backend's default, every core). ``label_selector``: Ray node labels the replicas' nodes
    must have (``{"ironaccel/cuda-0-tier": "datacenter"}``). ``retries``: how many replicas one batch may be
    tried on before :class:`PoolExhausted`. ``start_timeout``: seconds to wait for every replica to open its
    device and compile; replicas that fail to start are reported like any failure, and the pool fails only
    when none starts. ``max_replacements``: how many replacement replicas the pool may start over its life
    for replicas that failed (default: the replica count; 0: never, the pool only shrinks).
    ``replace_timeout``: seconds a replacement gets to be placed and ready before the pool gives it up and
    goes on with the replicas it has.
    """

    def __init__(
        self,
        program: Any,
        device: str = "auto",
        replicas: int | str = 1,
        *,
        per_replica: float = 1.0,
        threads: int | None = 1,
        label_selector: dict[str, str] | None = None,
        retries: int = 3,
        start_timeout: float = 120.0,
        max_replacements: int | None = None,
        replace_timeout: float = 60.0,
    ) -> None:
        import ray

        if not ray.is_initialized():
            raise InvalidArgument("connect to a Ray cluster first: ray.init(address=...)")
        chosen = plan(device, replicas, per_replica, ray.cluster_resources())
        bound = len(chosen) if max_replacements is None else max_replacements
        if not isinstance(bound, int) or isinstance(bound, bool) or bound < 0:
            raise InvalidArgument(f"max_replacements must be an int >= 0 or None, got {max_replacements!r}")
        if not isinstance(replace_timeout, int | float) or not replace_timeout > 0:
            raise InvalidArgument(f"replace_timeout must be a positive number of seconds, got {replace_timeout!r}")
        self._ray = ray
        self.retries = retries
        payload, metadata = pack_program(program)
        share = max(1, round(1 / per_replica)) if per_replica < 1 else 1
        args = (ray.put(payload), metadata, check_threads(threads), share)
        self._fleet = Fleet(ray, args, bound, float(replace_timeout))
        for backend, spec in chosen:
            options: dict[str, Any] = {
                "num_cpus": 0,
                "resources": {resource_name(backend): per_replica},
                "max_restarts": 0,
                "max_task_retries": 0,
            }
            if label_selector:
                options["label_selector"] = label_selector
            self._fleet.spawn(backend, spec, options)
        self._start(start_timeout)

    # ---- starting and stopping -----------------------------------------------------------------------

    def _start(self, timeout: float) -> None:
        fleet = self._fleet
        asked = {m.ready: m for m in fleet.members}
        ready, waiting = self._ray.wait(list(asked), num_returns=len(asked), timeout=timeout)
        first_error: BaseException | None = None
        for ref in ready:
            error = fleet.started(asked[ref])
            first_error = first_error or error
        if waiting:
            names = sorted({resource_name(asked[ref].backend) for ref in waiting})
            self.close()
            raise DeadlineExpired(
                f"{len(waiting)} of {len(asked)} replicas were not placed and ready within {timeout:g} s: the"
                f" cluster has no free {' / '.join(names)} for them (another pool holds it, or no node offers it)"
            )
        if not fleet.live():
            self.close()
            assert first_error is not None
            raise first_error

    def close(self) -> dict[int, dict[str, int]]:
        """Close every replica's device and end its actor (replacements still starting too); Ray's resources
        are free again once they have exited. Returns each closed replica's device ``live_resources()`` after
        its close, by replica index: all zero when the replica left nothing open. Idempotent."""
        return self._fleet.close()

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- what it holds -------------------------------------------------------------------------------

    @property
    def failures(self) -> list[ReplicaFailure]:
        """Every replica failure so far, in order: which replica, why, what it had in flight, and its
        replacement (see :class:`ReplicaFailure`)."""
        return self._fleet.failures

    @property
    def max_replacements(self) -> int:
        return self._fleet.max_replacements

    @property
    def replacements(self) -> int:
        """How many replacement replicas the pool has started (placed or not)."""
        return self._fleet.replacements

    @property
    def live(self) -> list[dict[str, Any]]:
        """Each running replica: index, backend, device id, node, and what it reported at start (replacements
        that have come up since the last look are taken in first)."""
        if not self._fleet.closed:
            self._fleet.poll()
        return [
            {"replica": m.index, "backend": m.backend, "device": m.device, "node": m.node, **m.info}
            for m in self._fleet.live()
        ]

    @property
    def actors(self) -> list[Any]:
        """The Ray actor handles of the running replicas, in replica order."""
        return [m.actor for m in self._fleet.live()]

    def wait_for_replacements(self, timeout: float | None = None) -> list[dict[str, Any]]:
        """Wait until every replacement still starting is up or given up (``timeout``: at most this long, and
        never past a replacement's own ``replace_timeout``); then :attr:`live`."""
        due = self._fleet.next_deadline()
        if due is not None:
            self._fleet.poll(due if timeout is None else min(timeout, due))
        return self.live

    def stats(self) -> list[dict[str, Any]]:
        """Each running replica's items run and seconds spent in the program's calls."""
        live = self._fleet.live()
        return [
            {"replica": m.index, "device": m.device, **s}
            for m, s in zip(live, self._ray.get([m.actor.stats.remote() for m in live]), strict=True)
        ]

    # ---- work ----------------------------------------------------------------------------------------

    def run(self, item: Any) -> list[Any]:
        """The outputs of one call (``item``: an array, a tuple of arrays, or a mapping by input name)."""
        return next(self.map([item]))

    def map(
        self, inputs: Iterable[Any], ordered: bool = True, max_in_flight: int | None = None, batch_size: int = 1
    ) -> Iterator[list[Any]]:
        """Each input's outputs (the list ``exe(...)`` returns), as they come: in input order when
        ``ordered``, else as they finish. Inputs are taken from ``inputs`` only as room frees up:
        ``batch_size`` inputs go to a replica in one call, and at most ``max_in_flight`` batches (default twice
        the replicas) are sent or waiting to be yielded at once. Output arrays are views of what Ray returned
        for their batch, and may be read-only. An error an input raises in the program (a wrong shape) is
        raised here; when no replica is left (and none is starting), :class:`PoolExhausted` lists the
        failures and the inputs not done."""
        if self._fleet.closed:
            raise InvalidArgument("the pool was closed")
        if not isinstance(batch_size, int) or batch_size < 1:
            raise InvalidArgument(f"batch_size must be a positive int, got {batch_size!r}")
        window = max_in_flight if max_in_flight is not None else 2 * max(1, len(self.live))
        if not isinstance(window, int) or window < 1:
            raise InvalidArgument(f"max_in_flight must be a positive int, got {max_in_flight!r}")
        return self._map(iter(inputs), ordered, window, batch_size)

    def _map(self, source: Iterator[Any], ordered: bool, window: int, batch_size: int) -> Iterator[list[Any]]:
        ray, fleet = self._ray, self._fleet
        errors = (ReplicaLost, *replica_errors(ray))
        pending: dict[Any, _Batch] = {}
        again: collections.deque[_Batch] = collections.deque()
        done: dict[int, tuple[_Batch, list[list[Any]]]] = {}
        numbers = itertools.count()
        taken = next_out = 0
        exhausted = False

        def stuck(message: str, *extra: _Batch) -> PoolExhausted:
            left = [*pending.values(), *again, *(b for b, _ in done.values()), *extra]
            return PoolExhausted(message, fleet.failures, [p for b in left for p in b.positions], taken)

        while True:
            while len(pending) + len(done) < window and (again or not exhausted):
                if not fleet.live():
                    if fleet.starting():
                        break  # a replacement is on its way: wait for it
                    raise stuck(
                        f"no replica of the pool is left: {len(fleet.failures)} failure(s), {fleet.replacements}"
                        f" replacement(s) started of max_replacements={fleet.max_replacements}"
                    )
                if again:
                    batch = again.popleft()
                    if batch.attempts > self.retries:
                        raise stuck(f"batch {batch.index} failed on {batch.attempts} replicas", batch)
                else:
                    items = list(itertools.islice(source, batch_size))
                    if not items:
                        exhausted = True
                        continue
                    batch = _Batch(next(numbers), taken, pack(items), len(items))
                    taken += len(items)
                member = fleet.choose()
                batch.attempts += 1
                batch.replica = member.index
                member.in_flight += 1
                pending[member.actor.run.remote(batch.inputs)] = batch
            if not pending and not again and exhausted:
                break
            starting = {m.ready: m for m in fleet.starting()}
            # Replacements first: ray.wait returns ready refs in the order given.
            ready, _ = ray.wait([*starting, *pending], num_returns=1, timeout=fleet.next_deadline())
            fleet.expire()
            if not ready or ready[0] in starting:
                if ready and starting[ready[0]].state == STARTING:  # not given up by expire() meanwhile
                    fleet.started(starting[ready[0]])
                continue
            batch = pending.pop(ready[0])
            member = fleet.members[batch.replica]
            member.in_flight -= 1
            try:
                outputs = ray.get(ready[0])
                if isinstance(outputs, Stacked):
                    outputs = outputs.outputs()
            except errors as exc:
                fleet.failed(member, exc, batch.positions)
                again.append(batch)
                continue
            if not ordered:
                yield from outputs
                continue
            done[batch.index] = (batch, outputs)
            while next_out in done:
                yield from done.pop(next_out)[1]
                next_out += 1
