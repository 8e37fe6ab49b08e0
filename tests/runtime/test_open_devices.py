"""Every device id a user sees opens, and the ones that cannot say why and what to use instead.

``runtime.backends.resolve`` turns a spec ("cpu:0", "vulkan:lavapipe", a descriptor) into the execution
backend to open; ``ironaccel devices`` shows, per device, the id it opens under and what ``auto`` picks.
Here: every cpu and vulkan id the CLI prints resolves and opens (lavapipe stands in for a GPU), malformed
specs are refused with the accepted forms, and a device of a family no backend runs names its Vulkan
counterpart (same UUID, else PCI bus id, else vendor and name).
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ironaccel
from ironaccel.conformance import semantic
from ironaccel.core import (
    BackendKind,
    BackendReport,
    DeviceDescriptor,
    DeviceId,
    InvalidArgument,
    PciAddress,
    Unsupported,
    Vendor,
)
from ironaccel.runtime.backends import (
    ACCEPTED_FORMS,
    AUTO,
    EXECUTION_BACKENDS,
    Resolved,
    open_resolved,
    resolve,
)
from ironaccel.runtime.same_hardware import bus_key, counterparts, uuid_key
from ironaccel.runtime.session import Device

H100 = "NVIDIA H100 80GB HBM3"
MI300X = "AMD Instinct MI300X"
UUID_A = "a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf"
UUID_B = "b0b1b2b3-b4b5-b6b7-b8b9-babbbcbdbebf"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    code = "import sys; from ironaccel.cli.main import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def listing() -> dict:
    done = _cli("devices", "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _dev(kind: BackendKind, ordinal: int, name: str = H100, vendor: Vendor = Vendor.NVIDIA, **kw) -> DeviceDescriptor:
    return DeviceDescriptor(DeviceId(kind, ordinal), vendor, name, **kw)


def _reports(*devices: DeviceDescriptor) -> list[BackendReport]:
    by_kind: dict[BackendKind, list[DeviceDescriptor]] = {}
    for d in devices:
        by_kind.setdefault(d.kind, []).append(d)
    return [
        BackendReport(kind, kind in by_kind, None if kind in by_kind else "not here", tuple(by_kind.get(kind, ())), 0.0)
        for kind in BackendKind
    ]


def _runs_a_program(resolved: Resolved) -> Device:
    """The device ``resolved`` names, opened, after it ran ``a + b``."""
    dev = Device(open_resolved(resolved), resolved.label)
    a = np.arange(4, dtype=np.float32)
    (c,) = dev.compile(semantic.add_program(4))(a, a)
    np.testing.assert_array_equal(c, 2 * a)
    return dev


# ---- what the CLI prints opens -----------------------------------------------------------------------


def test_every_cpu_and_vulkan_id_the_cli_prints_resolves_and_opens(listing):
    shown = {d["id"]: d for b in listing["backends"] for d in b["devices"]}
    ids = [i for i in shown if i.split(":")[0] in ("cpu", "vulkan")]
    assert "cpu:0" in ids and any(i.startswith("vulkan:") for i in ids), sorted(shown)
    for device_id in ids:
        entry = shown[device_id]
        assert entry["runs_programs"] and entry["execution_id"] == device_id, entry
        resolved = resolve(entry["execution_id"])
        assert resolved.backend == device_id.split(":")[0] and resolved.label == device_id
        with _runs_a_program(resolved) as dev:
            if resolved.backend == "vulkan":
                assert dev.info.name == entry["name"]
                assert dev.info.uuid.hex() == uuid_key(entry["uuid"])


def test_cli_reports_auto_and_per_device_execution_ids(listing):
    auto = listing["auto"]
    assert auto["id"] and auto["why"].startswith("picked"), auto
    # lavapipe is software: auto prefers the CPU to it, and says so.
    shown = {d["id"]: d for b in listing["backends"] for d in b["devices"]}
    if all(d["software"] for i, d in shown.items() if i.startswith("vulkan:")):
        assert auto["id"] == "cpu:0" and "skipped " in auto["why"] and "vulkan: " in auto["why"]
    for entry in shown.values():
        assert {"runs_programs", "execution_id", "why_not"} <= entry.keys()
        assert entry["runs_programs"] == (entry["execution_id"] is not None)
        if entry["runs_programs"]:
            assert entry["execution_id"].split(":")[0] in ("cpu", "vulkan"), entry
        else:
            assert entry["why_not"], entry


def test_cli_refuses_an_unknown_family_in_one_line():
    done = _cli("devices", "--family", "gpu")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "unknown accelerator family 'gpu'" in lines[0] and "cuda" in lines[0] and "level-zero" in lines[0]
    assert done.stdout == ""


def test_unknown_family_error_is_invalid_argument():
    with pytest.raises(InvalidArgument, match="unknown accelerator family 'opencl'; known: cuda"):
        BackendKind.parse("opencl")


# ---- descriptors from ironaccel.devices() ------------------------------------------------------------


def test_descriptors_from_discovery_resolve():
    reports = ironaccel.describe()
    devices = [d for r in reports for d in r.devices]
    cpu = next(d for d in devices if d.kind is BackendKind.CPU)
    assert resolve(cpu) == Resolved("cpu", None, "cpu:0")
    vulkan = [d for d in devices if d.kind is BackendKind.VULKAN]
    assert vulkan, "lavapipe is expected in CI"
    for d in vulkan:
        resolved = resolve(d, reports)
        assert resolved.backend == "vulkan" and resolved.label == str(d.id)
        # By UUID: the same device however the loader orders them next time.
        assert uuid_key(resolved.selector) == uuid_key(d.uuid)
        with _runs_a_program(resolved) as dev:
            assert dev.info.uuid.hex() == uuid_key(d.uuid)
    for d in devices:
        if d.kind not in (BackendKind.CPU, BackendKind.VULKAN):
            with pytest.raises(Unsupported, match=f"no execution backend runs '{d.kind.value}' devices"):
                resolve(d, reports)


def test_a_rocm_device_with_the_uuid_of_a_vulkan_device_names_it():
    reports = ironaccel.describe()
    lavapipe = next(d for r in reports if r.kind is BackendKind.VULKAN for d in r.devices)
    rocm = _dev(BackendKind.ROCM, 0, MI300X, Vendor.AMD, uuid=lavapipe.uuid)
    with pytest.raises(Unsupported) as caught:
        resolve(rocm, reports)
    message = str(caught.value)
    assert message.startswith("no execution backend runs 'rocm' devices")
    assert f"rocm:0 ({MI300X}) runs as {lavapipe.id}: open('{lavapipe.id}')" in message
    assert "available execution backends" not in message


# ---- specs ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("auto", Resolved(AUTO, None, "auto")),
        (" Auto ", Resolved(AUTO, None, "auto")),
        ("cpu", Resolved("cpu", None, "cpu")),
        ("cpu:0", Resolved("cpu", None, "cpu:0")),
        ("CPU:00", Resolved("cpu", None, "cpu:0")),
        ("vulkan", Resolved("vulkan", None, "vulkan")),
        ("vulkan:1", Resolved("vulkan", "1", "vulkan:1")),
        ("vulkan: lavapipe", Resolved("vulkan", "lavapipe", "vulkan:lavapipe")),
        ("vulkan:" + UUID_A, Resolved("vulkan", UUID_A, "vulkan:" + UUID_A)),
        ("virtio", Resolved("virtio", None, "virtio")),
        ("virtio:/run/a:b.sock", Resolved("virtio", "/run/a:b.sock", "virtio:/run/a:b.sock")),
    ],
)
def test_accepted_specs(spec, expected):
    assert resolve(spec, reports=[]) == expected


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ("auto:gpu", "auto takes no selector, got 'auto:gpu'"),
        ("auto:", "empty selector"),
        ("cpu:1", "the CPU backend has one device, cpu:0; got 'cpu:1'"),
        ("cpu:x", "the CPU backend has one device"),
        ("cpu:" + "9" * 5000, "the CPU backend has one device"),  # no 5000-digit int is ever made
        ("gpu", "no execution backend 'gpu' and no accelerator family of that name (for the best GPU"),
        ("tpux", "no execution backend 'tpux'"),
        ("vulkan:", "device spec 'vulkan:' has an empty selector after ':'; write 'vulkan'"),
        ("vulkan:  ", "empty selector"),
        ("virtio:", "empty selector"),
        ("", "empty device spec ''"),
        (":0", "empty device spec"),
        (3, "a device spec is a string or a DeviceDescriptor, got int"),
    ],
)
def test_refused_specs_list_the_accepted_forms(spec, why):
    with pytest.raises(InvalidArgument) as caught:
        resolve(spec, reports=[])
    message = str(caught.value)
    assert why in message and ACCEPTED_FORMS in message, message


def test_a_long_spec_is_quoted_short():
    with pytest.raises(InvalidArgument) as caught:
        resolve("x" * 100_000, reports=[])
    assert len(str(caught.value)) < 1000


def test_a_descriptor_resolves_by_family():
    assert resolve(_dev(BackendKind.CPU, 0, "EPYC", Vendor.AMD)) == Resolved("cpu", None, "cpu:0")
    with pytest.raises(InvalidArgument, match="one device, cpu:0; got a descriptor of cpu:1"):
        resolve(_dev(BackendKind.CPU, 1, "EPYC", Vendor.AMD))
    assert resolve(_dev(BackendKind.VULKAN, 2, uuid=UUID_A)) == Resolved("vulkan", UUID_A, "vulkan:2")
    # No UUID, or the all-zero one of drivers without: the loader's index.
    assert resolve(_dev(BackendKind.VULKAN, 2)) == Resolved("vulkan", "2", "vulkan:2")
    zeros = "00000000-0000-0000-0000-000000000000"
    assert resolve(_dev(BackendKind.VULKAN, 3, uuid=zeros)) == Resolved("vulkan", "3", "vulkan:3")


# ---- families no backend runs -----------------------------------------------------------------------


def _unsupported(spec, reports) -> str:
    with pytest.raises(Unsupported) as caught:
        resolve(spec, reports)
    return str(caught.value)


def test_a_foreign_spec_names_its_vulkan_counterpart():
    reports = _reports(
        _dev(BackendKind.ROCM, 0, MI300X, Vendor.AMD, uuid=UUID_A),
        _dev(BackendKind.ROCM, 1, MI300X, Vendor.AMD, uuid=UUID_B),
        _dev(BackendKind.VULKAN, 0, uuid=UUID_B.upper()),
        _dev(BackendKind.VULKAN, 1, uuid=UUID_A),
    )
    message = _unsupported("rocm:0", reports)
    assert message == f"no execution backend runs 'rocm' devices; rocm:0 ({MI300X}) runs as vulkan:1: open('vulkan:1')"
    # Without an ordinal: every device of the family.
    message = _unsupported("ROCM", reports)
    assert f"rocm:0 ({MI300X}) runs as vulkan:1" in message and "rocm:1 (" in message
    assert "runs as vulkan:0: open('vulkan:0')" in message


def test_a_foreign_spec_without_a_counterpart_lists_the_backends():
    reports = _reports(_dev(BackendKind.ROCM, 0, "AMD Instinct MI300X", Vendor.AMD), _dev(BackendKind.VULKAN, 0))
    message = _unsupported("rocm:0", reports)
    assert message == (
        "no execution backend runs 'rocm' devices; rocm:0 (AMD Instinct MI300X) has no Vulkan counterpart here;"
        " available execution backends: cuda, cpu, vulkan, virtio"
    )
    message = _unsupported("rocm:4", reports)
    assert "discovery found no rocm:4 (1 rocm device(s))" in message and "cuda, cpu, vulkan, virtio" in message
    message = _unsupported("level_zero", reports)
    assert message.startswith("no execution backend runs 'level-zero' devices (discovery found no level-zero device:")


def test_counterparts_prefer_uuid_then_bus_then_name():
    on_bus = PciAddress(bus_id="0000:1b:00.0")
    cuda = _dev(BackendKind.CUDA, 0, uuid="GPU-" + UUID_A, pci=PciAddress(bus_id="00000000:1B:00.0"))
    twin = _dev(BackendKind.VULKAN, 0, pci=on_bus)  # same name, same bus
    exact = _dev(BackendKind.VULKAN, 1, uuid=UUID_A)
    assert counterparts(cuda, [twin, exact]) == ("uuid", [exact])
    assert counterparts(cuda, [twin, _dev(BackendKind.VULKAN, 1, uuid=UUID_B)]) == ("pci bus id", [twin])
    named = _dev(BackendKind.VULKAN, 2, name="  nvidia  H100 80gb hbm3")
    assert counterparts(_dev(BackendKind.CUDA, 0), [named]) == ("vendor and name", [named])
    other_vendor = _dev(BackendKind.VULKAN, 3, vendor=Vendor.OTHER)
    assert counterparts(_dev(BackendKind.CUDA, 0), [other_vendor]) == ("", [])
    # Two identical GPUs known by name alone: both, and the message says it cannot tell them apart.
    pair = [_dev(BackendKind.VULKAN, 0), _dev(BackendKind.VULKAN, 1)]
    assert counterparts(_dev(BackendKind.OPENGL, 0), pair)[1] == pair
    message = _unsupported("opengl:0", _reports(_dev(BackendKind.OPENGL, 0), *pair))
    assert "is one of vulkan:0 or vulkan:1 (same vendor and name" in message


def test_uuid_and_bus_keys():
    assert uuid_key("GPU-" + UUID_A.upper()) == UUID_A.replace("-", "")
    assert uuid_key("00000000-0000-0000-0000-000000000000") is None
    assert uuid_key("not-a-uuid") is None and uuid_key(None) is None
    assert bus_key(_dev(BackendKind.CUDA, 0, pci=PciAddress(bus_id="00000000:1B:00.0"))) == (0, 0x1B, 0, 0)
    assert bus_key(_dev(BackendKind.CUDA, 0, pci=PciAddress(bus_id="1b:00.1"))) == (0, 0x1B, 0, 1)
    assert bus_key(_dev(BackendKind.CUDA, 0, pci=PciAddress(bus_id="garbage"))) is None


# ---- hostile specs ----------------------------------------------------------------------------------

_NAMES = st.sampled_from(["auto", "cpu", "vulkan", "virtio", "cuda", "opengl", "gpu", "CPU", " vulkan", ""])


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=40), st.builds(lambda n, s: f"{n}:{s}", _NAMES, st.text(max_size=20))))
def test_any_text_resolves_or_is_refused_and_a_label_resolves_to_itself(spec):
    try:
        resolved = resolve(spec, reports=[])
    except (InvalidArgument, Unsupported) as exc:
        assert str(exc)
        return
    assert resolved.backend in EXECUTION_BACKENDS or resolved.backend == AUTO
    assert resolved.selector is None or resolved.selector.strip()
    again = resolve(resolved.label, reports=[])
    assert (again.backend, again.selector) == (resolved.backend, resolved.selector)


def test_resolving_imports_no_backend_and_runs_no_discovery():
    code = (
        "import sys, ironaccel; from ironaccel.runtime.backends import resolve; "
        "[resolve(s) for s in ('auto', 'cpu:0', 'vulkan:1', 'virtio:/x')]; "
        "print(ironaccel._registry is None, sorted(m for m in sys.modules if m.startswith('ironaccel.backends')"
        " or m.startswith('ironaccel.probe')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "True []"
