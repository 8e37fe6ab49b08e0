"""What one guest holds and owes: its ids, its counts and charged bytes, and how its objects are torn down.

:class:`GuestBook` is the ledger under a :class:`~.engine_session.GuestSession`. An object enters it only
after the runtime created it (``_insert``, once ``_admit`` counted the quotas and reserved an id), and
leaves it once the runtime released it (``_uncharge``). Its bytes are charged to the guest's own budget and
to the daemon-wide account, and given back to both together.

Teardown (reset, close) releases what it can without waiting (:class:`~.engine_objects.Teardown`); what it
cannot is *quarantined*: its ids are gone, but it stays charged to this guest until a later pass (at the
guest's next command, or at close) finds its work over. Everything here runs under ``_lock``, which the
session holds around each command.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from typing import TYPE_CHECKING

from ..core.errors import IronAccelError
from .engine_objects import GuestObject, ObjectCounts, ResetReport, Teardown
from .engine_policy import Refused
from .ids import ObjectKind, ObjectTable
from .wire_constants import Status

if TYPE_CHECKING:
    from .engine import DeviceEngine

log = logging.getLogger("ironaccel.virtio.engine")


class GuestBook:
    """The ledger of one guest connection (see the module's description)."""

    def __init__(self, engine: DeviceEngine, tag: int) -> None:
        self.engine = engine
        self.acc = engine.accelerator
        self.tag = tag
        self._lock = threading.Lock()  # the guest's commands run one at a time under it
        self._table = ObjectTable(tag)
        self._used: collections.Counter[ObjectKind] = collections.Counter()  # live + quarantined, by kind
        self._bytes: collections.Counter[ObjectKind] = collections.Counter()  # charged bytes, by kind
        self._quarantine: list[GuestObject] = []
        self._limits_logged: set[str] = set()
        self._broken = False  # an engine defect left this book in doubt: reset needed

    # ---- what the guest holds ---------------------------------------------------------------------
    def live_objects(self) -> ObjectCounts:
        """Objects the guest can name now (quarantined ones excluded)."""
        with self._lock:
            return ObjectCounts.of(obj for _, _, obj in self._table.items())

    def quarantined(self) -> ObjectCounts:
        with self._lock:
            return ObjectCounts.of(self._quarantine)

    # ---- objects in and out -----------------------------------------------------------------------
    def _get(self, object_id: int, kind: ObjectKind) -> GuestObject:
        return self._table.get(object_id, kind)

    def _admit(self, kind: ObjectKind, context: GuestObject | None = None) -> None:
        """Count quotas before anything is created: guest-wide, then per context (the advertised limit)."""
        quota = self.engine.quota
        if self._used[kind] >= quota.total(kind):
            raise Refused(Status.RESOURCE_LIMIT, f"guest holds {self._used[kind]} {kind.name.lower()}s (its quota)")
        if context is not None:
            limit = self.engine.per_context_limit(kind)
            if context.children[kind] >= limit:
                raise Refused(Status.RESOURCE_LIMIT, f"context holds {limit} {kind.name.lower()}s (the limit)")
        self._table.reserve()

    def _insert(self, obj: GuestObject) -> int:
        """Give ``obj`` an id and charge it (only after the runtime created it)."""
        object_id = self._table.insert(obj.kind, obj)
        self._used[obj.kind] += 1
        self._bytes[obj.kind] += obj.charge
        obj.attach()
        return object_id

    def _uncharge(self, obj: GuestObject) -> None:
        self._used[obj.kind] -= 1
        self._bytes[obj.kind] -= obj.charge
        if obj.charge:
            self.engine.account.release(obj.charge)

    def _refuse_bytes(self, limit: str, message: str) -> Refused:
        """A byte limit's refusal (RESOURCE_LIMIT), logged for the host's operator once per limit and
        session: the wire carries only the status."""
        message = f"{message} (limit: {limit})"
        if limit not in self._limits_logged:
            self._limits_logged.add(limit)
            log.warning("guest %d: %s; further refusals by this limit are not logged", self.tag, message)
        return Refused(Status.RESOURCE_LIMIT, message)

    def _charge_host(self, nbytes: int, what: str) -> None:
        """Charge the daemon-wide account, before the backend runs (RESOURCE_LIMIT when over its cap)."""
        try:
            self.engine.account.charge(nbytes, what)
        except Refused as exc:
            raise self._refuse_bytes("--max-bytes", str(exc)) from None

    # ---- teardown ---------------------------------------------------------------------------------
    def _teardown(self) -> ResetReport:
        objects = [obj for _, obj in self._table.clear()]
        pass_ = self._pass()
        kept = pass_.run(objects, cancel=True)
        self._quarantine.extend(kept)
        self._broken = False
        reusable = not self._quarantine and self.engine.lost is None
        return ResetReport(ObjectCounts.of(pass_.released), ObjectCounts.of(kept), reusable)

    def _reclaim(self) -> None:
        self._quarantine = self._pass().run(self._quarantine, cancel=False)

    def _drain(self, wait: float) -> None:
        """Give quarantined work up to ``wait`` seconds to end, then reclaim what it held."""
        end = time.monotonic() + wait
        for obj in self._quarantine:
            remaining = end - time.monotonic()
            if obj.kind is not ObjectKind.EVENT or remaining <= 0 or self.engine.lost is not None:
                continue
            try:
                self.acc.wait(obj.handle, remaining)
            except IronAccelError:
                continue  # still pending, or gone with the device: left to the engine
        if self._quarantine:
            self._reclaim()

    def _pass(self) -> Teardown:
        return Teardown(self.acc, self._uncharge, self.engine.lose_device, self.engine.lost is not None)


__all__ = ["GuestBook"]
