"""The user API's modules: Device, Executable and Run live one per module (runtime.device, .executable, .run,
with what they hold on the device in .holdings) and stay importable from runtime.session, the entry that
opens devices; and ``auto`` passes over a backend whose factory, once called, finds a module missing, saying
which one.
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import ironaccel
from ironaccel import runtime
from ironaccel.conformance import semantic
from ironaccel.runtime import backends
from ironaccel.runtime.registration import GROUP


def test_the_session_names_are_the_objects_of_their_modules():
    from ironaccel.runtime import device, executable, holdings, run, session

    assert session.Device is device.Device is runtime.Device
    assert session.Executable is executable.Executable is runtime.Executable
    assert session.Run is run.Run is runtime.Run
    assert session.SPARE_SETS == holdings.SPARE_SETS == 2
    assert set(session.__all__) >= {"Device", "Executable", "Run", "open_device", "compile_and_run"}


def test_a_call_through_the_queue_uses_each_module():
    with ironaccel.open("cpu") as dev:
        exe = dev.compile(semantic.add_program(4))
        a = np.arange(4, dtype=np.float32)
        with exe.submit(a, a) as pending:
            assert type(pending).__module__ == "ironaccel.runtime.run"
            (c,) = pending.wait()
        np.testing.assert_array_equal(c, 2 * a)
        assert type(exe._held).__module__ == "ironaccel.runtime.holdings"
        assert type(dev._held).__module__ == "ironaccel.runtime.holdings"


# A backend of another distribution whose factory imports a package only when called: here one that is absent.
LAZY = """
from ironaccel.runtime.registration import BackendRegistration

REGISTRATION = BackendRegistration(name="lazy", open="lazy_accel:open_accelerator", auto_rank=0)


def open_accelerator(selector=None):
    import lazy_accel_driver_absent  # noqa: F401

    raise AssertionError("unreachable: the driver package is absent")
"""


@pytest.fixture
def lazy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    (tmp_path / "lazy_accel.py").write_text(textwrap.dedent(LAZY))
    info = tmp_path / "lazy_accel-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: lazy-accel\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{GROUP}]\nlazy = lazy_accel:REGISTRATION\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    backends.rescan()
    yield tmp_path
    monkeypatch.undo()
    sys.modules.pop("lazy_accel", None)
    backends.rescan()


def test_auto_passes_over_a_factory_that_misses_a_module_and_names_it(lazy):
    assert backends.AUTO_ORDER[0] == "lazy"
    with ironaccel.open("auto") as dev:
        assert dev.name in ("vulkan", "cpu"), dev.why
        assert (
            "skipped lazy: not part of this installation"
            " (ModuleNotFoundError: No module named 'lazy_accel_driver_absent')" in dev.why
        ), dev.why
