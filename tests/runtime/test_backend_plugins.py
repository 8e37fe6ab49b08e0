"""Execution backends are plugins (ADR 0030): each registers through an entry point of the group
``ironaccel.backends`` naming a BackendRegistration, and ``open`` / ``auto`` / ``ironaccel devices`` learn of
them from there.

Here a distribution made at test time (a ``*.dist-info`` with ``entry_points.txt`` in a directory put on
sys.path) adds a backend that ``ironaccel.open`` opens by name and ``auto`` tries at its rank; one whose
registration cannot be read is reported with the reason, by ``open``, by ``auto``'s choice and by the
``devices`` command, never crashing them. The installed metadata carries the entry points pyproject.toml
declares, reading them stays lazy, and reading a registration imports nothing of its backend.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import subprocess
import sys
import textwrap
import tomllib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ironaccel
from ironaccel.conformance import semantic
from ironaccel.core import BackendKind, DeviceDescriptor, DeviceId, Vendor
from ironaccel.core.errors import InvalidArgument, Unsupported
from ironaccel.runtime import backends
from ironaccel.runtime.backends import AUTO_ORDER, EXECUTION_BACKENDS, Resolved, resolve
from ironaccel.runtime.registration import GROUP, BackendRegistration, Registry, load_target, unavailable

ROOT = Path(__file__).resolve().parents[2]
DECLARED = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"][GROUP]

# A backend package of another distribution: its registration module imports only the runtime's type, and its
# factory opens the CPU backend's accelerator (a real device, so programs run), recording the selector.
PLUGIN = """
from ironaccel.runtime.registration import BackendRegistration

REGISTRATION = BackendRegistration(
    name="fake", open="fake_accel:open_accelerator", auto_rank={rank}, why_not="fake_accel:why_not",
    one_device={one_device}, family={family!r}, summary="a backend from another distribution",
)
OPENED = []


def open_accelerator(selector=None):
    from ironaccel.backends.cpu.accelerator import CpuAccelerator

    OPENED.append(selector)
    return CpuAccelerator()


def why_not():
    return {why_not!r}
"""


def _distribution(where: Path, name: str, points: dict[str, str], modules: dict[str, str]) -> None:
    """An installed distribution in ``where``: its modules and a dist-info declaring ``points``."""
    for module, source in modules.items():
        (where / f"{module}.py").write_text(textwrap.dedent(source))
    info = where / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    lines = "".join(f"{key} = {value}\n" for key, value in points.items())
    (info / "entry_points.txt").write_text(f"[{GROUP}]\n{lines}")


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A directory on sys.path for distributions made by the test; the registry reads them afresh."""
    monkeypatch.syspath_prepend(str(tmp_path))
    backends.rescan()
    yield tmp_path
    monkeypatch.undo()
    for module in [m for m in sys.modules if m.startswith(("fake_accel", "broken_accel"))]:
        del sys.modules[module]
    backends.rescan()


def _fake(where: Path, rank: int | None = 0, one_device: bool = False, family=None, why_not=None) -> None:
    source = PLUGIN.format(rank=rank, one_device=one_device, family=family, why_not=why_not)
    _distribution(where, "fake-accel", {"fake": "fake_accel:REGISTRATION"}, {"fake_accel": source})


# ---- a backend from another distribution ------------------------------------------------------------------


def test_an_installed_backend_opens_by_name_and_runs(installed):
    _fake(installed)
    assert "fake" in EXECUTION_BACKENDS and EXECUTION_BACKENDS["fake"] == "fake_accel:REGISTRATION"
    assert resolve("fake:left", reports=[]) == Resolved("fake", "left", "fake:left")
    with ironaccel.open("fake") as dev:
        a = np.arange(4, dtype=np.float32)
        (c,) = dev.compile(semantic.add_program(4))(a, a)
        np.testing.assert_array_equal(c, 2 * a)
    ironaccel.open("fake:left").close()
    assert sys.modules["fake_accel"].OPENED == [None, "left"]


def test_auto_tries_an_installed_backend_at_its_rank(installed):
    _fake(installed, rank=0)
    assert tuple(AUTO_ORDER) == ("fake", "cuda", "vulkan", "cpu")
    with ironaccel.open("auto") as dev:
        assert dev.name == "fake" and dev.why.startswith("picked fake"), dev.why
    (installed / "fake_accel.py").write_text(PLUGIN.format(rank=50, one_device=False, family=None, why_not=None))
    sys.modules.pop("fake_accel", None)
    backends.rescan()
    assert tuple(AUTO_ORDER) == ("cuda", "vulkan", "fake", "cpu")


def test_a_backend_with_no_rank_is_never_tried_by_auto(installed):
    _fake(installed, rank=None)
    assert "fake" not in AUTO_ORDER and "fake" in EXECUTION_BACKENDS


def test_a_one_device_backend_refuses_other_selectors(installed):
    _fake(installed, one_device=True)
    ironaccel.open("fake:0").close()
    with pytest.raises(InvalidArgument, match="the fake backend has one device, fake:0; got 'fake:2'"):
        ironaccel.open("fake:2")
    assert sys.modules["fake_accel"].OPENED == [None]  # the refused one never reached the factory


def test_a_family_opens_on_the_backend_registered_for_it(installed):
    """Discovery's family links to the backend that declares it: a ROCm descriptor or "rocm:1" opens there."""
    _fake(installed, family="rocm")
    assert resolve("rocm:1", reports=[]) == Resolved("fake", "1", "fake:1")
    uuid = "a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf"
    rocm = DeviceDescriptor(DeviceId(BackendKind.ROCM, 3), Vendor.AMD, "M", uuid=uuid)
    assert resolve(rocm, reports=[]) == Resolved("fake", uuid, "rocm:3")
    assert backends.backend_for(BackendKind.ROCM).name == "fake"
    assert backends.backend_for(BackendKind.LEVEL_ZERO) is None


def test_why_not_comes_from_the_registration(installed):
    _fake(installed, why_not="no fake driver here")
    entry = next(e for e in backends.registrations() if e.name == "fake")
    assert entry.distribution == "fake-accel 1.0"
    assert unavailable(entry.registration) == "no fake driver here"


# ---- registrations that cannot be read ---------------------------------------------------------------------

BROKEN = {
    "missing": ("broken_accel_absent:REGISTRATION", "cannot be read: ModuleNotFoundError"),
    "raising": ("broken_accel:REGISTRATION", "cannot be read: RuntimeError: the driver exploded"),
    "wrong": ("broken_accel_wrong:REGISTRATION", "is a dict, not a BackendRegistration"),
    "renamed": ("broken_accel_renamed:REGISTRATION", "registers the name 'other' under the entry point 'renamed'"),
}
BROKEN_MODULES = {
    "broken_accel": "raise RuntimeError('the driver exploded')\n",
    "broken_accel_wrong": "REGISTRATION = {'name': 'wrong'}\n",
    "broken_accel_renamed": (
        "from ironaccel.runtime.registration import BackendRegistration\n"
        "REGISTRATION = BackendRegistration(name='other', open='os:getcwd')\n"
    ),
}


@pytest.fixture
def broken(installed: Path) -> Path:
    _distribution(installed, "broken-accel", {k: v for k, (v, _) in BROKEN.items()}, BROKEN_MODULES)
    return installed


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_an_unreadable_registration_is_refused_with_its_reason(broken, name):
    _, why = BROKEN[name]
    with pytest.raises(Unsupported, match=why):
        ironaccel.open(name)
    entry = next(e for e in backends.registrations() if e.name == name)
    assert entry.registration is None and why in entry.error, entry


def test_auto_passes_over_unreadable_registrations_and_says_why(broken):
    assert set(AUTO_ORDER[:4]) == set(BROKEN) and tuple(AUTO_ORDER[4:]) == ("cuda", "vulkan", "cpu")
    with ironaccel.open("auto") as dev:
        assert dev.name in ("cuda", "vulkan", "cpu") and "; skipped " in dev.why, dev.why
        skipped = dev.why.partition("; skipped ")[2]
        for name, (_, why) in BROKEN.items():
            assert f"{name}: execution backend {name!r} (broken-accel 1.0) cannot be used: " in skipped, skipped
            assert why in skipped, skipped


def test_the_devices_command_lists_unreadable_registrations(broken):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(broken), os.environ.get("PYTHONPATH", "")])}
    code = "import sys; from ironaccel.cli.main import main; sys.exit(main(sys.argv[1:]))"
    done = subprocess.run(
        [sys.executable, "-c", code, "devices", "--json"], capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 0, done.stderr
    listed = {b["name"]: b for b in json.loads(done.stdout)["execution_backends"]}
    for name, (_, why) in BROKEN.items():
        assert not listed[name]["available"] and why in listed[name]["why_not"], listed[name]
    assert listed["cpu"]["available"] and listed["cpu"]["auto_rank"] == 100
    assert listed["null"]["available"] and not listed["null"]["runs_programs"]
    assert not listed["virtio"]["available"] or os.environ.get("IRONACCEL_VIRTIO_SOCKET")


def test_a_name_taken_twice_keeps_the_first_and_reports_the_second():
    found = [("x", "os:getcwd", "first 1.0"), ("x", "os:getpid", "second 2.0"), ("x", "os:getcwd", "first 1.0")]
    registry = Registry(lambda: iter(found))
    assert registry.names() == {"x": "os:getcwd"}
    clash = [e for e in registry.entries() if e.error and "taken" in e.error]
    assert len(clash) == 1 and clash[0].distribution == "second 2.0", registry.entries()


def test_a_registry_reads_the_metadata_once_until_rescanned():
    calls = []

    def scan():
        calls.append(1)
        return iter([("cpu", "ironaccel.backends.cpu.registration:REGISTRATION", "ironaccel")])

    registry = Registry(scan)
    assert registry.names() == registry.names() and len(calls) == 1
    assert registry.entry("cpu").registration.name == "cpu" and registry.entry("gpu") is None
    registry.rescan()
    registry.names()
    assert len(calls) == 2


# ---- what a registration may say ----------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    name=st.one_of(st.text(max_size=40), st.sampled_from(["auto", "cpu", "a" * 33, "x-1", "Cuda", "9x"])),
    target=st.one_of(st.text(max_size=40), st.sampled_from(["m:f", "a.b:c.d", "m:", ":f", "m f:g"])),
    family=st.one_of(st.none(), st.text(max_size=12), st.sampled_from([k.value for k in BackendKind])),
    rank=st.one_of(st.none(), st.integers(), st.booleans(), st.floats(allow_nan=True)),
)
def test_a_registration_is_checked_when_made(name, target, family, rank):
    try:
        made = BackendRegistration(name=name, open=target, family=family, auto_rank=rank)
    except InvalidArgument as exc:
        assert str(exc).startswith("backend registration"), exc
        return
    assert re.fullmatch(r"[a-z][a-z0-9_-]{0,31}", made.name) and made.name != "auto", made
    assert re.fullmatch(r"[\w.]+:[\w.]+", made.open, flags=re.ASCII), made
    assert made.family is None or BackendKind.parse(made.family).value == made.family
    assert made.auto_rank is None or type(made.auto_rank) is int


def test_load_target_refuses_what_is_not_a_target():
    assert load_target("os.path:join") is os.path.join
    with pytest.raises(InvalidArgument, match="not 'module:attribute'"):
        load_target("os.path.join")


# ---- the installed metadata and the cost of reading it --------------------------------------------------------


def test_the_installed_metadata_declares_what_pyproject_declares():
    """A stale install (metadata older than pyproject.toml) would open nothing: `pip install -e .` again."""
    points = importlib.metadata.distribution("ironaccel").entry_points.select(group=GROUP)
    assert {p.name: p.value for p in points} == DECLARED


@pytest.mark.parametrize("name", sorted(DECLARED))
def test_each_bundled_registration_opens_what_it_names(name):
    registration = load_target(DECLARED[name])
    assert isinstance(registration, BackendRegistration) and registration.name == name
    assert callable(load_target(registration.open))
    assert registration.why_not is None or callable(load_target(registration.why_not))


def test_the_bundled_auto_order_and_families():
    assert tuple(AUTO_ORDER) == ("cuda", "vulkan", "cpu")  # the vendor's own path first on NVIDIA
    assert backends.backend_for(BackendKind.CUDA).name == "cuda"
    assert backends.backend_for(BackendKind.VULKAN).name == "vulkan"
    assert backends.backend_for(BackendKind.CPU).name == "cpu"
    assert backends.backend_for(BackendKind.OPENGL) is None


def test_import_ironaccel_reads_no_entry_point():
    code = (
        "import sys, ironaccel; import ironaccel.runtime.backends as b; "
        "print(b.INSTALLED._points is None, 'importlib.metadata' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "True False"


@pytest.mark.parametrize("name", sorted(DECLARED))
def test_reading_a_registration_imports_nothing_of_its_backend(name):
    """Where the runtime reads registrations (itself imported), reading one may add only its module, its
    packages and core modules."""
    module = DECLARED[name].partition(":")[0]
    code = (
        "import sys, importlib, json; import ironaccel.runtime.backends; before = set(sys.modules); "
        f"importlib.import_module({module!r}); print(json.dumps(sorted(set(sys.modules) - before)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    parts = module.split(".")
    allowed = {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
    extra = [m for m in json.loads(out) if m not in allowed and not m.startswith("ironaccel.core.")]
    assert not extra, f"reading {DECLARED[name]} imported {extra}"


def test_a_package_run_from_its_checkout_without_metadata_finds_its_backends(monkeypatch):
    """``PYTHONPATH=src`` (a machine without network, the conformance runner's environment): no metadata,
    so the checkout's pyproject.toml declares the bundled backends."""
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **_: [])
    registry = Registry()
    assert registry.names() == DECLARED
    entry = registry.entry("cpu")
    assert "source checkout" in entry.distribution and entry.registration is not None, entry
