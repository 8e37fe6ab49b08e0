"""The virtio-accel device engine: protocol 1.0 commands from any number of guests, served by one
runtime :class:`~ironaccel.runtime.Accelerator` (CPU, Vulkan, any backend of the contract).

Interface (what a transport calls)::

    engine = DeviceEngine(accelerator, limits=None)      # limits: the WireConfig to offer (None: 1.0 maxima)
    engine.config                                        # that WireConfig; engine.config.pack() = the 16 bytes
    session = engine.connect()                           # one GuestSession per guest connection
    used = session.process(request, response_capacity)  # response bytes, len <= capacity; b"": used length 0
    session.reset()                                      # the guest reset its device: its ids go stale
    session.close()                                      # the guest is gone: everything it owned is released
    session.needs_reset                                  # virtio DEVICE_NEEDS_RESET for this guest
    engine.reset()                                       # every session reset at once (host side)
    engine.lose_device(error)                            # the backend is gone: commands answer DEVICE_LOST
    engine.reclaim()                                     # release what closed guests left with work running

``request`` is the chain's readable bytes, concatenated; ``process`` writes nothing itself: the transport
copies the answer to the start of the chain's writable regions and reports its length as used.

Design choices:
1. One namespace per connection. Ids are generational and tagged with the connection, resolved only in
   that connection's table (:mod:`.ids`): a guest cannot name another guest's objects, a stale id
   never resolves again (STALE_OBJECT), another connection's id answers PERMISSION_DENIED.
2. Everything the protocol checks is checked before the runtime is called, in the specification's order;
   the runtime then checks its own contract again. A refusal before the runtime call changes nothing.
3. Quotas per guest (:class:`GuestQuota`): counts per context (advertised to the guest) and across the
   guest's contexts, buffer backing bytes (what the backend really allocated) and declared program
   resident bytes. Objects held back by a reset stay charged until they are released. The same bytes
   are charged to one daemon-wide account (:class:`HostAccount`, cap ``max_bytes``) before the runtime
   is called, and given back on every release, reset, close and reclamation: all guests together never
   hold more than the cap. Each submission runs under a deadline of at most the quota's
   ``max_run_seconds``, so no SUBMIT reaches the runtime without a finite timeout.
4. Nothing waits long on the guest's behalf: SUBMIT admits and returns the event; POLL_EVENT waits
   for work only within ``poll_linger`` seconds of its SUBMIT (once per event), so a small program's
   first poll finds it done; reset cancels or quarantines instead of waiting. Only ``close`` gives
   running work a bounded time.
5. Device loss is sticky: once the runtime reports it (or the host calls ``lose_device``), every
   command but GET_DEVICE_INFO answers DEVICE_LOST, teardown makes no backend call, and the host must
   replace the accelerator and the engine.
"""

from __future__ import annotations

import logging
import threading

from ..core.errors import DeviceLost, InvalidArgument, IronAccelError, ResourceLimit
from ..runtime import Accelerator
from .engine_account import HostAccount, default_max_bytes
from .engine_objects import GuestObject, ObjectCounts, ResetReport, Teardown
from .engine_policy import GuestQuota, advertised_info
from .engine_session import GuestSession
from .ids import MAX_TAG, ObjectKind
from .wire_constants import PROTOCOL_MINOR
from .wire_frames import DecodeLimits
from .wire_structs import WireConfig

log = logging.getLogger("ironaccel.virtio.engine")

# How long after its SUBMIT a POLL_EVENT may wait for work to end. Without it, a backend that runs work
# on its own thread (the CPU queue) has to win the interpreter from the thread serving the guest's polls,
# and a small program's call costs a round of polls instead of one answer (ADR 0010 gives the figures).
POLL_LINGER_S = 500e-6


class DeviceEngine:
    """The host side of the device. Thread-safe: sessions run in parallel on the shared accelerator."""

    def __init__(
        self,
        accelerator: Accelerator,
        limits: WireConfig | None = None,
        *,
        quota: GuestQuota | None = None,
        close_wait: float = 5.0,
        poll_linger: float = POLL_LINGER_S,
        max_bytes: int | None = None,
    ) -> None:
        """``max_bytes``: what all guests together may hold (buffer backing + declared program bytes);
        None: HOST_MEMORY_FRACTION of the host's MemAvailable now (no cap where that is unknown)."""
        config = WireConfig.baseline() if limits is None else limits
        config.check()
        if config.protocol_minor != PROTOCOL_MINOR:
            raise InvalidArgument(f"a 1.0 device reports minor version 0, not {config.protocol_minor}")
        self.accelerator = accelerator
        self.config = config
        self.quota = quota or GuestQuota()
        self.account = HostAccount(default_max_bytes() if max_bytes is None else max_bytes)
        self.info = advertised_info(accelerator, self.quota, config)
        self.info_payload = self.info.pack()  # GET_DEVICE_INFO's answer never changes: packed once
        self.decode_limits = DecodeLimits.negotiated(config, self.info)
        if not 0 <= poll_linger <= 1.0:
            raise InvalidArgument(f"poll_linger must be between 0 and 1 s, got {poll_linger}")
        self.close_wait = close_wait
        self.poll_linger = poll_linger
        self._per_context = {
            ObjectKind.BUFFER: self.info.max_buffers_per_context,
            ObjectKind.PROGRAM: self.info.max_programs_per_context,
            ObjectKind.QUEUE: self.info.max_queues_per_context,
            ObjectKind.EVENT: self.info.max_events_per_context,
        }
        self._lock = threading.Lock()
        self._sessions: dict[int, GuestSession] = {}
        self._next_tag = 1
        self._orphans: list[GuestObject] = []
        self._lost: IronAccelError | None = None

    def per_context_limit(self, kind: ObjectKind) -> int:
        return self._per_context[kind]

    # ---- sessions ---------------------------------------------------------------------------------
    def connect(self) -> GuestSession:
        """A new guest connection with an empty namespace. ResourceLimit when every tag is in use."""
        self.reclaim()
        with self._lock:
            for _ in range(MAX_TAG):
                tag = self._next_tag
                self._next_tag = tag % MAX_TAG + 1
                if tag not in self._sessions:
                    session = GuestSession(self, tag)
                    self._sessions[tag] = session
                    return session
        raise ResourceLimit(f"{MAX_TAG} guest connections are open")

    @property
    def sessions(self) -> tuple[GuestSession, ...]:
        with self._lock:
            return tuple(self._sessions.values())

    def _detach(self, session: GuestSession, leftover: list[GuestObject]) -> None:
        with self._lock:
            self._sessions.pop(session.tag, None)
            self._orphans.extend(leftover)
        if leftover:
            self.reclaim()

    def reset(self) -> ResetReport:
        """Reset every session (each one's ids go stale, its objects are released or quarantined)."""
        report = ResetReport()
        for session in self.sessions:
            report = report + session.reset()
        return report

    # ---- what closed sessions left behind ---------------------------------------------------------
    def reclaim(self) -> ObjectCounts:
        """Release whatever closed sessions left with work still running, where that work has ended.
        Returns what is still held. Never waits."""
        with self._lock:
            orphans, self._orphans = self._orphans, []
        if not orphans:
            return ObjectCounts()
        kept = Teardown(self.accelerator, self._reclaimed, self.lose_device, self._lost is not None).run(
            orphans, cancel=False
        )
        with self._lock:
            self._orphans.extend(kept)
            return ObjectCounts.of(self._orphans)

    def _reclaimed(self, obj: GuestObject) -> None:
        self.account.release(obj.charge)  # its session is gone: only the daemon-wide charge is left

    def orphaned(self) -> ObjectCounts:
        with self._lock:
            return ObjectCounts.of(self._orphans)

    # ---- device loss ------------------------------------------------------------------------------
    @property
    def lost(self) -> IronAccelError | None:
        """Why the device is lost, or None while it works."""
        return self._lost

    def lose_device(self, error: IronAccelError | str) -> None:
        """Mark the backend lost (the runtime reported it, or the host knows). Sticky: from now on every
        command but GET_DEVICE_INFO answers DEVICE_LOST and teardown makes no backend call."""
        if isinstance(error, str):
            error = DeviceLost(error)
        with self._lock:
            if self._lost is not None:
                return
            self._lost = error
        log.error("virtio device lost: %s", error)


__all__ = ["DeviceEngine", "GuestQuota", "GuestSession", "HostAccount", "ResetReport"]
