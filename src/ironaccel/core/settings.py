"""Every environment variable IronAccel reads, read in one place.

Backends and probes take their configuration from :data:`settings`, never from ``os.environ``, so a
test can build a :class:`Settings` of its own and the full list of knobs lives here.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping


def _flag(env: Mapping[str, str], name: str, default: bool) -> bool:
    value = env.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() not in ("0", "false", "no", "off")


def _seconds(value: str | None, default: float) -> float:
    if value is None or not value.strip():
        return default
    try:
        seconds = float(value)
    except ValueError:
        return math.nan
    return seconds if 0 < seconds < math.inf else math.nan


@dataclasses.dataclass(frozen=True)
class Settings:
    # Explicit library paths per family (tests point these at fake drivers); None = search the usual names.
    libraries: Mapping[str, str] = dataclasses.field(default_factory=dict)
    # Families switched off by IRONACCEL_<FAMILY>=0.
    disabled: frozenset[str] = frozenset()
    probe_timeout_s: float = 10.0
    # The daemon socket "virtio" opens when no path is given, and `ironaccel devices` lists
    # (IRONACCEL_VIRTIO_SOCKET); None: no virtio device is assumed.
    virtio_socket: str | None = None
    # How long a virtio guest waits for the daemon's answer to one command, in seconds
    # (IRONACCEL_VIRTIO_TIMEOUT). A value that is not a positive number is kept as NaN, so that opening a
    # virtio device refuses it by name instead of importing IronAccel failing.
    virtio_timeout_s: float = 30.0
    # The CPU backend's generated native code (IRONACCEL_CPU_NATIVE): "auto" (where a C compiler is found),
    # "off" (0 / false / no / off), or "require" (a program the code generator takes must compile: for tests).
    cpu_native: str = "auto"
    # Where compiled programs are kept (IRONACCEL_CPU_NATIVE_CACHE); None: $XDG_CACHE_HOME/ironaccel/cpu-native.
    cpu_native_cache: str | None = None
    # The command line shows the traceback of a failed command instead of one line (IRONACCEL_DEBUG=1).
    debug: bool = False
    # How much IronAccel logs (IRONACCEL_LOG_LEVEL: debug, info, warning, error; default warning), as the
    # command line's -v / -q set it for one command.
    log_level: str = "warning"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        from .kinds import BackendKind

        libraries: dict[str, str] = {}
        disabled = set()
        for kind in BackendKind:
            key = kind.value.upper().replace("-", "_")
            lib = env.get(f"IRONACCEL_{key}_LIBRARY")
            if lib:
                libraries[kind.value] = lib
            if not _flag(env, f"IRONACCEL_{key}", True):
                disabled.add(kind.value)
        timeout = _seconds(env.get("IRONACCEL_PROBE_TIMEOUT"), 10.0)
        timeout = 10.0 if math.isnan(timeout) else timeout  # a malformed value must not stop discovery
        native = (env.get("IRONACCEL_CPU_NATIVE") or "auto").strip().lower()
        if native != "require":
            native = "auto" if _flag(env, "IRONACCEL_CPU_NATIVE", True) else "off"
        return cls(
            libraries=libraries,
            disabled=frozenset(disabled),
            probe_timeout_s=timeout,
            cpu_native=native,
            cpu_native_cache=env.get("IRONACCEL_CPU_NATIVE_CACHE") or None,
            virtio_socket=env.get("IRONACCEL_VIRTIO_SOCKET") or None,
            virtio_timeout_s=_seconds(env.get("IRONACCEL_VIRTIO_TIMEOUT"), 30.0),
            debug=_flag(env, "IRONACCEL_DEBUG", False),
            log_level=(env.get("IRONACCEL_LOG_LEVEL") or "warning").strip().lower(),
        )

    def library(self, kind: str) -> str | None:
        return self.libraries.get(kind)


settings = Settings.from_env()
