"""A pool of compiled programs across a Ray cluster: one actor per replica, each holding one device and one
compiled program, fed by :meth:`Pool.map` with a bounded window of work in flight.

Placement is Ray's: a replica asks for one unit (or ``per_replica``) of its backend's resource,
``ironaccel_<backend>``, which only nodes started with :func:`~.resources.node_resources` have. Inputs and
outputs travel through Ray's object store: each batch of inputs is put there once (a retry reuses it) and
numpy arrays come back as zero-copy, read-only views of the store.

Faults lose nothing: when a replica dies (its process killed, its node gone) or loses its device, every
batch it had in flight runs again on another replica, each input still yields exactly one output, in order
when asked, and the failure is recorded in :attr:`Pool.failures` and announced as a
:class:`ReplicaFailed` warning. A replica is never restarted in place: a lost device is not tried again.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import math
import warnings
from collections.abc import Iterable, Iterator
from typing import Any

from ..core.errors import DeadlineExpired, InvalidArgument, IronAccelError, Unsupported
from .replica import Replica, ReplicaLost, check_threads, pack_program
from .resources import advertised, resource_name

PER_DEVICE = "per-device"
_CLOSE_WAIT_S = 10.0  # a replica gets this long to close its device before it is killed


class PoolExhausted(IronAccelError):
    """Work is left and no replica is: every one failed, or one input failed on too many replicas."""


class ReplicaFailed(RuntimeWarning):
    """A replica of a pool failed; its inputs were run again on the others (see ``Pool.failures``)."""


@dataclasses.dataclass
class ReplicaFailure:
    """One replica's failure: which, where, why, and how many inputs it had in flight (run again elsewhere)."""

    replica: int
    device: str
    node: str
    reason: str
    retried: int = 0


@dataclasses.dataclass
class _Replica:
    index: int
    backend: str
    device: str
    actor: Any
    node: str = "?"
    info: dict[str, Any] = dataclasses.field(default_factory=dict)
    in_flight: int = 0
    alive: bool = True


@dataclasses.dataclass
class _Batch:
    index: int
    ref: Any  # the inputs in the object store
    size: int
    attempts: int = 0
    replica: int = -1


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
    when none starts.
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
    ) -> None:
        import ray

        if not ray.is_initialized():
            raise InvalidArgument("connect to a Ray cluster first: ray.init(address=...)")
        self._ray = ray
        self.retries = retries
        self.failures: list[ReplicaFailure] = []
        self._replicas: list[_Replica] = []
        self._closed = False
        self._turn = itertools.count()
        chosen = plan(device, replicas, per_replica, ray.cluster_resources())
        payload, metadata = pack_program(program)
        program_ref = ray.put(payload)
        share = max(1, round(1 / per_replica)) if per_replica < 1 else 1
        remote = ray.remote(Replica)
        for index, (backend, spec) in enumerate(chosen):
            options: dict[str, Any] = {
                "num_cpus": 0,
                "resources": {resource_name(backend): per_replica},
                "max_restarts": 0,
                "max_task_retries": 0,
            }
            if label_selector:
                options["label_selector"] = label_selector
            actor = remote.options(**options).remote(program_ref, metadata, spec, check_threads(threads), share)
            self._replicas.append(_Replica(index, backend, spec, actor))
        self._start(start_timeout)

    # ---- starting and stopping -----------------------------------------------------------------------

    def _start(self, timeout: float) -> None:
        ray = self._ray
        asked = {r.actor.describe.remote(): r for r in self._replicas}
        ready, waiting = ray.wait(list(asked), num_returns=len(asked), timeout=timeout)
        first_error: BaseException | None = None
        for ref in ready:
            replica = asked[ref]
            try:
                replica.info = ray.get(ref)
                replica.node = replica.info["node"]
                replica.device = replica.info["device"]
            except Exception as exc:  # noqa: BLE001 - a replica that cannot start is a failure, reported
                first_error = first_error or exc
                self._retire(replica, f"did not start: {_reason(exc)}")
        if waiting:
            names = sorted({resource_name(asked[ref].backend) for ref in waiting})
            self.close()
            raise DeadlineExpired(
                f"{len(waiting)} of {len(asked)} replicas were not placed and ready within {timeout:g} s: the"
                f" cluster has no free {' / '.join(names)} for them (another pool holds it, or no node offers it)"
            )
        if not self.live:
            self.close()
            assert first_error is not None
            raise first_error

    def close(self) -> None:
        """Close every replica's device and end its actor; Ray's resources are free again once they have
        exited (idempotent)."""
        if self._closed:
            return
        self._closed = True
        ray = self._ray
        closing = [r.actor.close.remote() for r in self._replicas if r.alive]
        if closing:
            ray.wait(closing, num_returns=len(closing), timeout=_CLOSE_WAIT_S)
        for replica in self._replicas:
            replica.alive = False
            ray.kill(replica.actor, no_restart=True)

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- what it holds -------------------------------------------------------------------------------

    @property
    def live(self) -> list[dict[str, Any]]:
        """Each running replica: index, backend, device id, node, and what it reported at start."""
        return [
            {"replica": r.index, "backend": r.backend, "device": r.device, "node": r.node, **r.info}
            for r in self._replicas
            if r.alive
        ]

    @property
    def actors(self) -> list[Any]:
        """The Ray actor handles of the running replicas, in replica order."""
        return [r.actor for r in self._replicas if r.alive]

    def stats(self) -> list[dict[str, Any]]:
        """Each running replica's items run and seconds spent in the program's calls."""
        live = [r for r in self._replicas if r.alive]
        return [
            {"replica": r.index, "device": r.device, **s}
            for r, s in zip(live, self._ray.get([r.actor.stats.remote() for r in live]), strict=True)
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
        the replicas) are sent or waiting to be yielded at once. Output arrays are read-only views of Ray's
        object store. An error an input raises in the program (a wrong shape) is raised here."""
        if self._closed:
            raise InvalidArgument("the pool was closed")
        if not isinstance(batch_size, int) or batch_size < 1:
            raise InvalidArgument(f"batch_size must be a positive int, got {batch_size!r}")
        window = max_in_flight if max_in_flight is not None else 2 * max(1, len(self.live))
        if not isinstance(window, int) or window < 1:
            raise InvalidArgument(f"max_in_flight must be a positive int, got {max_in_flight!r}")
        return self._map(iter(inputs), ordered, window, batch_size)

    def _map(self, source: Iterator[Any], ordered: bool, window: int, batch_size: int) -> Iterator[list[Any]]:
        ray = self._ray
        pending: dict[Any, _Batch] = {}
        again: collections.deque[_Batch] = collections.deque()
        done: dict[int, list[list[Any]]] = {}
        numbers = itertools.count()
        next_out = 0
        exhausted = False
        while True:
            while len(pending) + len(done) < window:
                if again:
                    batch = again.popleft()
                elif not exhausted:
                    items = list(itertools.islice(source, batch_size))
                    if not items:
                        exhausted = True
                        continue
                    batch = _Batch(next(numbers), ray.put(items), len(items))
                else:
                    break
                pending[self._send(batch)] = batch
            if not pending:
                break
            [ref], _ = ray.wait(list(pending), num_returns=1)
            batch = pending.pop(ref)
            replica = self._replicas[batch.replica]
            replica.in_flight -= 1
            try:
                outputs = ray.get(ref)
            except (ReplicaLost, *_replica_errors(ray)) as exc:
                self._failed(replica, exc, batch)
                again.append(batch)
                continue
            if not ordered:
                yield from outputs
                continue
            done[batch.index] = outputs
            while next_out in done:
                yield from done.pop(next_out)
                next_out += 1

    def _send(self, batch: _Batch) -> Any:
        live = [r for r in self._replicas if r.alive]
        if not live:
            raise PoolExhausted(
                f"every replica of the pool has failed; {len(self.failures)} failure(s): "
                + "; ".join(f"replica {f.replica} ({f.device} on {f.node}): {f.reason}" for f in self.failures)
            )
        if batch.attempts > self.retries:
            raise PoolExhausted(
                f"a batch of {batch.size} input(s) (batch {batch.index}) failed on {batch.attempts} replicas; the last"
                f" failure: {self.failures[-1].reason if self.failures else 'unknown'}"
            )
        turn = next(self._turn)
        replica = min(live, key=lambda r: (r.in_flight, (r.index - turn) % len(self._replicas)))
        batch.attempts += 1
        batch.replica = replica.index
        replica.in_flight += 1
        return replica.actor.run.remote(batch.ref)

    def _failed(self, replica: _Replica, exc: BaseException, batch: _Batch) -> None:
        if replica.alive:
            self._retire(replica, _reason(exc))
        failure = next((f for f in reversed(self.failures) if f.replica == replica.index), None)
        if failure is not None:
            failure.retried += batch.size

    def _retire(self, replica: _Replica, reason: str) -> None:
        replica.alive = False
        self.failures.append(ReplicaFailure(replica.index, replica.device, replica.node, reason))
        warnings.warn(
            f"replica {replica.index} ({replica.device} on node {replica.node[:12]}) failed and was retired: {reason};"
            " its inputs run on the other replicas",
            ReplicaFailed,
            stacklevel=4,
        )
        # Never restarted in place: a lost device must not be tried again, and a killed process stays gone.
        self._ray.kill(replica.actor, no_restart=True)


def _replica_errors(ray: Any) -> tuple[type[BaseException], ...]:
    """Ray's errors for a replica that is gone: its actor died or is unreachable, its worker crashed, or the
    output it made was lost with its node."""
    e = ray.exceptions
    return (e.RayActorError, e.WorkerCrashedError, e.ObjectLostError, e.NodeDiedError)


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = next((line for line in reversed(text) if line.strip()), type(exc).__name__) if text else type(exc).__name__
    return f"{type(exc).__name__}: {first.strip()[:300]}"
