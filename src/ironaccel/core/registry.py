"""The registry: one discovery backend per family, and a report on all of them that nothing can hide."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterator
from typing import Any

from .backend import Backend
from .descriptor import DeviceDescriptor
from .kinds import BackendKind


@dataclasses.dataclass(frozen=True)
class BackendReport:
    """What one family said when asked: devices, or the reason there are none."""

    kind: BackendKind
    available: bool
    reason: str | None
    devices: tuple[DeviceDescriptor, ...]
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "available": self.available,
            "reason": self.reason,
            "probe_seconds": round(self.seconds, 6),
            "devices": [d.to_json() for d in self.devices],
        }


class BackendRegistry:
    """Discovery backends keyed by family; the first registered for a family wins."""

    def __init__(self) -> None:
        self._backends: dict[BackendKind, Backend] = {}
        self._lock = threading.Lock()

    def register(self, backend: Backend) -> bool:
        """Add ``backend``; returns False (and keeps the existing one) when its family is taken."""
        with self._lock:
            if backend.kind in self._backends:
                return False
            self._backends[backend.kind] = backend
            return True

    def get(self, kind: BackendKind | str) -> Backend | None:
        key = kind if isinstance(kind, BackendKind) else BackendKind.parse(kind)
        return self._backends.get(key)

    def iter(self) -> Iterator[Backend]:
        """Backends in BackendKind declaration order (stable output for people and tests)."""
        order = list(BackendKind)
        return iter(sorted(self._backends.values(), key=lambda b: order.index(b.kind)))

    def __iter__(self) -> Iterator[Backend]:
        return self.iter()

    def __len__(self) -> int:
        return len(self._backends)

    def available(self) -> list[Backend]:
        return [b for b in self.iter() if _safe_available(b)[0]]

    def describe_all(self, timeout: float | None = None) -> list[BackendReport]:
        """Probe every family concurrently and report each one.

        A probe that raises is reported with its error as the reason; one that does not finish within
        ``timeout`` seconds is reported as timed out (its thread is a daemon and is left behind, since
        a native call cannot be interrupted). None: ``settings.probe_timeout_s`` (IRONACCEL_PROBE_TIMEOUT).
        """
        if timeout is None:
            from .settings import settings

            timeout = settings.probe_timeout_s
        backends = list(self.iter())
        results: dict[BackendKind, BackendReport] = {}

        def worker(backend: Backend) -> None:
            start = time.perf_counter()
            ok, reason = _safe_available(backend)
            devices: tuple[DeviceDescriptor, ...] = ()
            if ok:
                try:
                    devices = tuple(backend.enumerate())
                except Exception as exc:  # noqa: BLE001 - reported, never raised
                    ok, reason = False, f"enumerate failed: {type(exc).__name__}: {exc}"
            results[backend.kind] = BackendReport(
                backend.kind, ok, reason, devices, time.perf_counter() - start
            )

        threads = [
            threading.Thread(target=worker, args=(b,), name=f"probe-{b.kind.value}", daemon=True)
            for b in backends
        ]
        deadline = time.perf_counter() + timeout
        for t in threads:
            t.start()
        for t in threads:
            t.join(max(0.0, deadline - time.perf_counter()))
        reports = []
        for b in backends:
            report = results.get(b.kind)
            if report is None:
                report = BackendReport(b.kind, False, f"probe timed out after {timeout:g} s", (), timeout)
            reports.append(report)
        return reports


def _safe_available(backend: Backend) -> tuple[bool, str | None]:
    try:
        ok = bool(backend.is_available())
    except Exception as exc:  # noqa: BLE001 - a broken backend must not hide the others
        return False, f"is_available failed: {type(exc).__name__}: {exc}"
    reason = None if ok else (getattr(backend, "reason", None) or "unavailable (no reason given)")
    return ok, reason
