"""The Vulkan backend on lavapipe (Mesa's software Vulkan driver, a real driver that runs in CI).

The contract: the semantic suite, memory domains (mapped and staged), the submission ring, device
selection and unavailability, admission, planning (barriers, views, folded constants), the checked-in
SPIR-V. Every test ends with no live resources and no message from the Vulkan layers; ``make test``
runs with ``VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation``, so those are the validation layer's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ironaccel
from ironaccel.backends import vulkan
from ironaccel.backends.vulkan import binding, device, instance, recording
from ironaccel.backends.vulkan import plan as planning
from ironaccel.backends.vulkan.capability import ALL_OPERATORS
from ironaccel.backends.vulkan.ops import LOWERINGS
from ironaccel.backends.vulkan.ops.common import Copy, Dispatch, Place
from ironaccel.conformance import semantic
from ironaccel.core.errors import Busy, InvalidArgument, ResourceLimit, Unsupported
from ironaccel.core.settings import Settings
from ironaccel.runtime import (
    ArtifactRef,
    Binding,
    BufferDesc,
    BufferUsage,
    EventCore,
    EventState,
    MemoryDomain,
)
from ironaccel.tosa import ProgramBuilder, write
from ironaccel.tosa.errors import LoweringError

ROOT = Path(__file__).resolve().parents[3]
SHADERS = ROOT / "src" / "ironaccel" / "backends" / "vulkan" / "shaders"
IO = semantic.IO


def _lavapipe_reason() -> str | None:
    try:
        acc = vulkan.open_accelerator("llvmpipe", settings=Settings())
    except Unsupported as exc:
        return f"lavapipe unavailable: {exc}"
    acc.close()
    return None


_REASON = _lavapipe_reason()
needs_lavapipe = pytest.mark.skipif(_REASON is not None, reason=_REASON or "")


@pytest.fixture(autouse=True)
def no_validation_messages():
    instance.clear_validation_messages()
    yield
    messages = instance.validation_messages()
    instance.clear_validation_messages()
    assert not messages, "Vulkan layers reported:\n" + "\n".join(map(str, messages))


@pytest.fixture
def opened():
    """Opens lavapipe accelerators; at the end each must hold nothing, then it is closed."""
    made = []

    def open_one(**kwargs):
        acc = vulkan.open_accelerator("llvmpipe", settings=Settings(), **kwargs)
        made.append(acc)
        return acc

    yield open_one
    for acc in made:
        leaks = {k: v for k, v in acc.live_resources().items() if v}
        acc.close()
        assert not leaks, f"resources left live: {leaks}"


# ---- the execution contract ------------------------------------------------------------------------
@needs_lavapipe
@pytest.mark.parametrize("case_id", list(semantic.CASES))
def test_semantic_suite_on_lavapipe(case_id, opened):
    (result,) = semantic.run(opened, only=[case_id])
    if case_id in ("event.cancel-race", "event.cancel-stops-running-work"):
        assert result.status == "skip", result  # a capability case: submitted Vulkan work is not cancellable
    elif case_id in ("event.deadline-stops-running-work", "reset.ends-running-work", "reset.admission-stops"):
        assert result.status == "skip" and "WHILE_LOOP" in result.detail, result  # control flow is not admitted
    else:
        assert result.status == "pass", result.detail


@needs_lavapipe
def test_device_info_names_lavapipe_as_software(opened):
    info = opened().device_info()
    assert info.kind == "vulkan" and info.software == "lavapipe"
    assert info.domains == frozenset(MemoryDomain)
    assert not info.cancellation


@needs_lavapipe
@pytest.mark.parametrize("domain", list(MemoryDomain))
def test_buffers_are_mapped_where_the_device_allows(opened, domain):
    acc = opened()
    ctx = acc.create_context()
    buf = acc.allocate_buffer(ctx, BufferDesc(100, domain, IO))
    assert buf.info.host_visible  # lavapipe's one memory type is host-visible
    assert not buf.info.direct_binding  # submissions copy bound ranges into the program's arena
    assert buf.info.allocation_bytes >= 100 and buf.info.alignment >= 64
    acc.write_buffer(buf, 10, bytes(range(50)))
    assert bytes(acc.read_buffer(buf, 10, 50)) == bytes(range(50))
    acc.free_buffer(buf)
    acc.destroy_context(ctx)


@needs_lavapipe
def test_device_memory_through_staging_runs_programs(opened):
    acc = opened(staging=True)
    ctx = acc.create_context()
    big = acc.allocate_buffer(ctx, BufferDesc(9 << 20, MemoryDomain.DEVICE, IO))
    assert not big.info.host_visible
    data = np.random.default_rng(1).integers(0, 256, 9 << 20, dtype=np.uint8)  # three staging chunks
    acc.write_buffer(big, 0, data)
    np.testing.assert_array_equal(np.frombuffer(acc.read_buffer(big, 0, 9 << 20), np.uint8), data)
    acc.free_buffer(big)
    program = acc.load_program(ctx, ArtifactRef(semantic.add_program(4), 1 << 20))
    bufs = [acc.allocate_buffer(ctx, BufferDesc(16, MemoryDomain.DEVICE, IO)) for _ in range(3)]
    acc.write_buffer(bufs[0], 0, np.arange(4, dtype=np.float32))
    acc.write_buffer(bufs[1], 0, np.full(4, 10, np.float32))
    queue = acc.create_queue(ctx)
    ev = acc.submit(queue, program, [Binding(i, b) for i, b in enumerate(bufs)])
    assert acc.wait(ev, 30) is EventState.COMPLETE
    np.testing.assert_array_equal(np.frombuffer(acc.read_buffer(bufs[2], 0, 16), np.float32), np.arange(4) + 10)
    acc.destroy_event(ev)
    for b in bufs:
        acc.free_buffer(b)
    acc.unload_program(program)
    acc.destroy_queue(queue)
    acc.destroy_context(ctx)


@needs_lavapipe
def test_reads_from_uncached_mappings_are_staged_from_the_threshold(opened, monkeypatch):
    """On a discrete GPU, device-local memory mapped through the bus is read a few bytes per round trip;
    such reads of STAGED_READ_BYTES or more go through the stager's cached memory instead (lavapipe's
    memory is cached, so the test marks every mapping uncached). A program's output read this way is
    the program's result: the staging copy waits for the device's writes."""
    from ironaccel.backends.vulkan import memory as vk_memory

    acc = opened()
    memory = acc._native.memory
    monkeypatch.setattr(type(memory), "uncached", lambda self, a: True)
    staged: list[int] = []
    real_read = vk_memory.Stager.read

    def spied_read(self, a, offset, out):
        staged.append(out.nbytes)
        real_read(self, a, offset, out)

    monkeypatch.setattr(vk_memory.Stager, "read", spied_read)
    ctx = acc.create_context()
    n = 512  # 2 KiB per tensor
    program = acc.load_program(ctx, ArtifactRef(semantic.add_program(n), 1 << 20))
    bufs = [acc.allocate_buffer(ctx, BufferDesc(4 * n, MemoryDomain.SHARED, IO)) for _ in range(3)]
    assert all(b.info.host_visible for b in bufs)
    acc.write_buffer(bufs[0], 0, np.arange(n, dtype=np.float32))
    acc.write_buffer(bufs[1], 0, np.full(n, 10, np.float32))
    queue = acc.create_queue(ctx)
    ev = acc.submit(queue, program, [Binding(i, b) for i, b in enumerate(bufs)])
    assert acc.wait(ev, 30) is EventState.COMPLETE
    out = np.frombuffer(acc.read_buffer(bufs[2], 0, 4 * n), np.float32)
    np.testing.assert_array_equal(out, np.arange(n) + 10)
    assert staged == [4 * n]
    small = np.frombuffer(acc.read_buffer(bufs[2], 4, vk_memory.STAGED_READ_BYTES - 4), np.float32)
    np.testing.assert_array_equal(small, np.arange(1, vk_memory.STAGED_READ_BYTES // 4) + 10)
    assert staged == [4 * n]  # below the threshold: read from the mapping
    acc.destroy_event(ev)
    for b in bufs:
        acc.free_buffer(b)
    acc.unload_program(program)
    acc.destroy_queue(queue)
    acc.destroy_context(ctx)


@needs_lavapipe
def test_many_submissions_of_one_program_in_flight(opened):
    """Submissions share the program's arena: queue order and the leading barrier keep them apart."""
    acc = opened()
    ctx = acc.create_context()
    program = acc.load_program(ctx, ArtifactRef(semantic.add_program(1024), 1 << 24))
    queue = acc.create_queue(ctx)
    runs = []
    for k in range(20):
        bufs = [acc.allocate_buffer(ctx, BufferDesc(4096, MemoryDomain.SHARED, IO)) for _ in range(3)]
        acc.write_buffer(bufs[0], 0, np.full(1024, k, np.float32))
        acc.write_buffer(bufs[1], 0, np.arange(1024, dtype=np.float32))
        runs.append((k, bufs, acc.submit(queue, program, [Binding(i, b) for i, b in enumerate(bufs)])))
    for k, bufs, ev in runs:
        assert acc.wait(ev, 30) is EventState.COMPLETE
        out = np.frombuffer(acc.read_buffer(bufs[2], 0, 4096), np.float32)
        np.testing.assert_array_equal(out, np.arange(1024) + k)
        acc.destroy_event(ev)
        for b in bufs:
            acc.free_buffer(b)
    acc.unload_program(program)
    acc.destroy_queue(queue)
    acc.destroy_context(ctx)


@needs_lavapipe
def test_input_and_output_may_share_a_buffer(opened):
    """Copy-in happens before the kernels and copy-out after them, so in-place binding is well defined."""
    acc = opened()
    ctx = acc.create_context()
    program = acc.load_program(ctx, ArtifactRef(semantic.add_program(4), 1 << 20))
    buf = acc.allocate_buffer(ctx, BufferDesc(32, MemoryDomain.SHARED, IO | BufferUsage.MUTABLE_STATE))
    acc.write_buffer(buf, 0, np.array([1, 2, 3, 4, 10, 20, 30, 40], np.float32))
    queue = acc.create_queue(ctx)
    ev = acc.submit(queue, program, [Binding(0, buf, 0, 16), Binding(1, buf, 16, 16), Binding(2, buf, 0, 16)])
    assert acc.wait(ev, 30) is EventState.COMPLETE
    expected = [11, 22, 33, 44, 10, 20, 30, 40]
    np.testing.assert_array_equal(np.frombuffer(acc.read_buffer(buf, 0, 32), np.float32), expected)
    acc.destroy_event(ev)
    acc.free_buffer(buf)
    acc.unload_program(program)
    acc.destroy_queue(queue)
    acc.destroy_context(ctx)


@needs_lavapipe
def test_a_full_ring_is_busy_and_poll_retires_through_the_fence(opened):
    from ironaccel.backends.vulkan.submit import Ring

    acc = opened()
    f = semantic._Fixture(acc)
    f.write_inputs(np.ones(4), np.ones(4))
    ranges, _ = acc._bind(f.program, f.bindings())
    loaded = acc._objects[f.program.id].native
    ring = Ring(acc._native.device, slots=1)
    first = EventCore(None)
    ring.submit(loaded, ranges, first)
    with pytest.raises(Busy):
        ring.submit(loaded, ranges, EventCore(None))
    assert ring.wait(first, 30) == [first]  # retired: the slot is free again
    assert ring.idle()
    ring.destroy()
    f.close()


@needs_lavapipe
def test_events_complete_without_a_worker_thread(opened):
    acc = opened()
    f = semantic._Fixture(acc)
    f.write_inputs(np.ones(4), np.full(4, 2.0))
    ev = acc.submit(f.queue, f.program, f.bindings())
    for _ in range(10000):  # poll_event alone drives it to completion (vkGetFenceStatus)
        if acc.poll_event(ev) is EventState.COMPLETE:
            break
    assert acc.poll_event(ev) is EventState.COMPLETE
    np.testing.assert_array_equal(f.output(), np.full(4, 3, np.float32))
    acc.destroy_event(ev)
    f.close()


@needs_lavapipe
def test_release_retires_finished_work_first(opened):
    """free_buffer after the device finished, with nobody having polled: the release observes the fence."""
    acc = opened()
    f = semantic._Fixture(acc)
    ev = acc.submit(f.queue, f.program, f.bindings())
    acc._native.device.wait_idle()
    acc.destroy_event(ev)  # terminal once observed; no poll or wait happened before
    f.close()


# ---- selection and availability --------------------------------------------------------------------
def test_switched_off_by_the_environment(monkeypatch):
    monkeypatch.setenv("IRONACCEL_VULKAN", "0")
    with pytest.raises(Unsupported, match="IRONACCEL_VULKAN=0"):
        vulkan.open_accelerator()
    with pytest.raises(Unsupported, match="IRONACCEL_VULKAN=0"):
        ironaccel.open("vulkan:llvmpipe")
    assert "IRONACCEL_VULKAN=0" in vulkan.available()
    dev = ironaccel.open("auto")
    assert dev.accelerator.device_info().kind == "cpu" and "IRONACCEL_VULKAN=0" in dev.why
    dev.close()


def test_missing_package_is_unsupported_not_an_import_error(monkeypatch):
    monkeypatch.setattr(binding, "_module", None)
    monkeypatch.setattr(instance, "_instance", None)
    monkeypatch.setitem(sys.modules, "vulkan", None)  # `import vulkan` now raises ImportError
    with pytest.raises(Unsupported, match="`vulkan` Python package is not installed"):
        vulkan.open_accelerator(settings=Settings())
    with pytest.raises(Unsupported, match="not installed"):
        ironaccel.open("vulkan")


@needs_lavapipe
def test_auto_prefers_hardware_and_falls_back_to_the_cpu():
    dev = ironaccel.open("auto")
    kinds = [d.device_type for d in device.describe_all(instance.instance())]
    if all(k == "cpu" for k in kinds):  # only software Vulkan here: the CPU backend wins
        assert dev.accelerator.device_info().kind == "cpu"
        assert "only a software device (lavapipe)" in dev.why
    else:
        assert dev.accelerator.device_info().kind == "vulkan"
    dev.close()


def _fake(index, name, device_type="discrete", software=None, api=(1, 3), nan=True, features=None):
    feats = {f"{s}.{f}": True for s, f in device._REQUIRED}
    feats.update(features or {})
    return device.PhysicalDevice(
        handle=None,
        index=index,
        name=name,
        uuid=bytes([index]) * 16,
        vendor_id=0x10DE,
        device_id=index,
        device_type=device_type,
        api_version=(api[0] << 22) | (api[1] << 12),
        software=software,
        limits=None,
        memory_types=(),
        compute_family=0,
        features=feats,
        nan_preserve=nan,
    )


def test_selection_prefers_hardware_and_takes_software_only_when_asked():
    soft = _fake(0, "llvmpipe (LLVM 15.0.6, 256 bits)", "cpu", "lavapipe")
    gpu = _fake(1, "NVIDIA H200")
    old = _fake(2, "Old GPU", api=(1, 2))
    other = _fake(3, "NVIDIA H100", "integrated")
    devices = [soft, gpu, old, other]
    assert device.choose(devices, None) is gpu
    assert device.choose(devices, "llvmpipe") is soft
    assert device.choose(devices, "lavapipe") is soft
    assert device.choose(devices, "0") is soft
    assert device.choose(devices, 1) is gpu
    assert device.choose(devices, "h200") is gpu
    assert device.choose(devices, ("01" * 16)[:32]) is gpu
    assert device.choose([soft], None) is soft  # nothing else exists
    with pytest.raises(Unsupported, match=r"1\.3 needed"):
        device.choose(devices, "old gpu")
    with pytest.raises(Unsupported, match="no Vulkan device matches 'tpu'"):
        device.choose(devices, "tpu")
    with pytest.raises(InvalidArgument, match="ambiguous"):
        device.choose(devices, "nvidia")
    with pytest.raises(Unsupported, match="shaderSignedZeroInfNanPreserveFloat32"):
        device.choose([_fake(0, "X", nan=False)], None)
    with pytest.raises(Unsupported, match="synchronization2"):
        device.choose([_fake(0, "X", features={"v13.synchronization2": False})], None)
    with pytest.raises(Unsupported, match="lists no physical device"):
        device.choose([], None)


@needs_lavapipe
def test_open_through_the_user_api_and_unknown_selectors():
    with ironaccel.open("vulkan:llvmpipe") as dev:
        assert dev.info.software == "lavapipe"
    with pytest.raises(Unsupported, match="no Vulkan device matches"):
        ironaccel.open("vulkan:no-such-gpu")


# ---- admission and planning ------------------------------------------------------------------------
def test_the_descriptor_lists_exactly_what_is_lowered():
    assert set(ALL_OPERATORS) == set(LOWERINGS)


@needs_lavapipe
@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda b, x: b.resize(
                b.reshape(b.cast(x, "int16"), (1, 2, 3, 1)), (2, 1, 2, 1), mode="nearest", out_dtype="int16"
            ),
            "RESIZE",
        ),
        (lambda b, x: b.matmul(*(b.reshape(b.cast(x, "int16"), s) for s in ((1, 2, 3), (1, 3, 2)))), "MATMUL"),
        (lambda b, x: b.op("RFFT2D", [b.reshape(b.pad(x, [0, 0, 0, 1], 0.0), (1, 2, 4))])[0], "RFFT2D"),
    ],
)
def test_unsupported_programs_are_refused_at_load_naming_the_operator(opened, build, message):
    b = ProgramBuilder()
    x = b.input("x", (2, 3), "fp32")
    b.output(build(b, x))
    acc = opened()
    ctx = acc.create_context()
    with pytest.raises(LoweringError, match=message):
        acc.load_program(ctx, ArtifactRef(write(b.build()), 1 << 20))
    acc.destroy_context(ctx)


def _plan(build, shapes, **kw):
    b = ProgramBuilder()
    xs = [b.input(f"x{i}", s, "fp32") for i, s in enumerate(shapes)]
    outs = build(b, *xs)
    b.output(*(outs if isinstance(outs, tuple) else (outs,)))
    return planning.build(b.build(), **kw)


def test_barriers_only_where_a_step_depends_on_an_earlier_one():
    # Two independent kernels, then one reading both: a single barrier, before the third. (x and y are
    # outputs too, so they stay live and no result reuses their bytes.)
    p = _plan(lambda b, x, y: (b.add(b.exp(x), b.log(y)), x, y), [(64,), (64,)])
    assert [s.shader for s in p.steps] == ["unary", "unary", "binary"]
    assert p.barriers[:2] == [None, None] and p.barriers[2] is not None
    # it makes both results visible, and names the inputs the two read as well (every range accessed)
    touched = {(place.offset, place.size) for s in p.steps[:2] for place in (*s.reads, *s.writes)}
    assert p.barriers[2].ranges == planning._merged(sorted(touched)) and not p.barriers[2].execution_only


def test_reusing_a_dead_tensors_bytes_waits_for_its_reader():
    # log(y) may take x's bytes (x is dead after exp): the plan orders exp's read before log's write.
    p = _plan(lambda b, x, y: b.add(b.exp(x), b.log(y)), [(64,), (64,)])
    if p.steps[1].writes[0] == p.inputs[0]:
        assert p.barriers[1] is not None


def test_write_after_read_gets_an_execution_dependency():
    steps = [
        Dispatch("unary", (), (Place("arena", 0, 256),), (Place("arena", 256, 256),), b"", (1, 1, 1)),
        Dispatch("unary", (), (Place("arena", 512, 256),), (Place("arena", 0, 256),), b"", (1, 1, 1)),
    ]
    barriers = planning.place_barriers(steps)
    assert barriers[0] is None and barriers[1] is not None
    # The first step's write is pending, so the barrier makes it visible; it names the range read
    # before the reuse too (everything accessed since the last barrier).
    assert barriers[1].ranges == ((0, 512),)
    # Nothing written yet, only read: the reuse needs an execution dependency alone.
    war = [
        Dispatch("unary", (), (Place("arena", 0, 256),), (Place("const", 0, 256),), b"", (1, 1, 1)),
        Copy(Place("arena", 512, 256), Place("arena", 0, 256)),
    ]
    assert planning.place_barriers(war)[1] == planning.Barrier(((0, 256),), execution_only=True)


def test_barrier_ranges_cover_whole_words_and_every_access_since_the_last_barrier():
    steps = [
        Dispatch("cast", (), (Place("arena", 0, 140),), (Place("arena", 256, 35),), b"", (1, 1, 1)),
        Dispatch("cast", (), (Place("arena", 512, 64),), (Place("arena", 768, 64),), b"", (1, 1, 1)),
        # reads the 35 bytes the first step wrote, as 9 words, and writes over what it read
        Dispatch("cast", (), (Place("arena", 256, 35),), (Place("arena", 0, 64),), b"", (1, 1, 1)),
    ]
    barriers = planning.place_barriers(steps)
    assert barriers[:2] == [None, None]
    # the first step's last word is written whole (36 bytes), and every read range is named
    assert barriers[2] == planning.Barrier(((0, 140), (256, 36), (512, 64), (768, 64)))


def test_views_and_folded_constants_move_no_data():
    def build(b, x):
        y = b.exp(x)
        z = b.reshape(y, (4, 16))  # an intermediate reshaped: a view of y's bytes
        c = b.reshape(b.const(np.ones(64, np.float32)), (4, 16))  # a constant reshaped: folded at load
        return b.add(z, c)

    p = _plan(build, [(64,)])
    assert [type(s).__name__ for s in p.steps] == ["Dispatch", "Dispatch"]
    assert p.const_bytes and len(p.constants) == 1
    assert p.steps[1].reads[0] == p.steps[0].writes[0]  # the view
    assert p.steps[1].reads[1].buffer == "const"


def test_reshape_of_a_graph_input_is_one_copy():
    p = _plan(lambda b, x: b.reshape(x, (8, 8)), [(64,)])
    assert len(p.steps) == 1 and isinstance(p.steps[0], Copy)
    assert p.steps[0].src == p.inputs[0] and p.steps[0].dst == p.outputs[0]


def test_an_arena_beyond_the_device_limit_is_refused():

    with pytest.raises(ResourceLimit, match="one buffer"):
        _plan(lambda b, x: b.exp(x), [(1024, 1024)], max_buffer_bytes=1 << 20)


def test_a_driver_loop_cap_refuses_what_it_would_cut_short():
    """lavapipe ends an invocation's loops after 65535 iterations: planning for such a cap splits long
    axes across a workgroup, and refuses a reduction that would still exceed it."""
    plan = _plan(lambda b, x: b.reduce_sum(x, 1), [(2, 100_000)], max_loop_iterations=65535)
    (step,) = plan.steps
    assert step.spec[0] == 256 and step.spec[-1] == 1  # a workgroup per output
    with pytest.raises(ResourceLimit, match="65535 loop iterations"):
        _plan(lambda b, x: b.reduce_any(b.greater(x, 0.0), 0), [(40_000_000, 1)], max_loop_iterations=65535)


# ---- shaders ---------------------------------------------------------------------------------------
@pytest.mark.skipif(shutil.which("glslangValidator") is None, reason="glslangValidator not installed")
def test_checked_in_spirv_is_what_the_sources_compile_to(tmp_path):
    subprocess.run([str(ROOT / "scripts" / "build-shaders"), str(tmp_path)], check=True, capture_output=True)
    sources = sorted(p.stem for p in SHADERS.glob("*.comp"))
    assert sources and sorted(p.stem for p in SHADERS.glob("*.spv")) == sources
    built = sorted(p.stem for p in tmp_path.glob("*.spv"))
    # cooperative-matrix shaders need glslang 13+, which build-shaders skips them without
    assert all(name.endswith("_coop") for name in set(sources) - set(built)), built
    for name in built:
        fresh, shipped = (tmp_path / f"{name}.spv").read_bytes(), (SHADERS / f"{name}.spv").read_bytes()
        assert fresh == shipped, f"{name}.spv is stale: run scripts/build-shaders"


@pytest.mark.skipif(shutil.which("spirv-val") is None, reason="spirv-val not installed")
def test_shipped_spirv_validates_for_vulkan_1_3():
    for spv in SHADERS.glob("*.spv"):
        if spv.stem.endswith("_coop"):  # SPV_KHR_cooperative_matrix: newer than Debian 12's spirv-val
            continue
        subprocess.run(["spirv-val", "--target-env", "vulkan1.3", str(spv)], check=True)


@needs_lavapipe
def test_the_messenger_records_validation_errors(opened):
    """Proof that a silent run means something: a deliberate misuse is reported, when validation is on."""
    if "VK_LAYER_KHRONOS_validation" not in os.environ.get("VK_INSTANCE_LAYERS", ""):
        pytest.skip("VK_INSTANCE_LAYERS does not enable validation (make test sets it)")
    acc = opened()
    vk = binding.load()
    dev = acc._native.device.handle
    info = vk.VkBufferCreateInfo(size=0, usage=vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT)  # size 0 is invalid
    try:
        buf = vk.vkCreateBuffer(dev, info, None)
        vk.vkDestroyBuffer(dev, buf, None)
    except vk.VkError:
        pass
    messages = instance.validation_messages()
    instance.clear_validation_messages()
    assert any(m.kind == "validation" and m.severity == "error" for m in messages), messages


@needs_lavapipe
def test_synchronization_validation_reports_a_missing_barrier(opened):
    """Proof that the barriers are checked: a copy reading what a fill wrote, with no barrier between
    them, is reported as a hazard when synchronization validation is on (make test turns it on)."""
    if "SYNCHRONIZATION_VALIDATION" not in os.environ.get("VK_LAYER_ENABLES", ""):
        pytest.skip("VK_LAYER_ENABLES does not enable synchronization validation (make test sets it)")
    acc = opened()
    native = acc._native
    vk, dev = native.device.vk, native.device.handle
    a = native.memory.allocate(256, MemoryDomain.HOST)
    b = native.memory.allocate(256, MemoryDomain.HOST)
    info = vk.VkCommandPoolCreateInfo(queueFamilyIndex=native.device.queue_family)
    pool = binding.call(vk.vkCreateCommandPool, dev, info, None, what="vkCreateCommandPool")
    try:
        alloc = vk.VkCommandBufferAllocateInfo(
            commandPool=pool, level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=1
        )
        cb = binding.call(vk.vkAllocateCommandBuffers, dev, alloc, what="vkAllocateCommandBuffers")[0]
        recording.begin(vk, cb, 0)
        vk.lib.vkCmdFillBuffer(cb, a.buffer, 0, 256, 7)
        recording.copy(vk, cb, a.buffer, 0, b.buffer, 0, 256)  # reads what the fill wrote: no barrier
        recording.end(vk, cb)
    finally:
        vk.vkDestroyCommandPool(dev, pool, None)
        native.memory.free(a)
        native.memory.free(b)
    messages = instance.validation_messages()
    instance.clear_validation_messages()
    assert any("SYNC-HAZARD-READ-AFTER-WRITE" in m.id_name for m in messages), messages


@needs_lavapipe
def test_close_with_live_objects_fails_pending_work_and_keeps_releases_working():
    acc = vulkan.open_accelerator("llvmpipe", settings=Settings())
    f = semantic._Fixture(acc)
    gate = acc.host_gate(f.ctx)
    ev = acc.submit(f.queue, f.program, f.bindings(), after=(gate, 1))
    acc.close()
    assert acc.poll_event(ev) is EventState.FAILED
    from ironaccel.core.errors import DeviceLost

    assert isinstance(acc.event_error(ev), DeviceLost)
    with pytest.raises(DeviceLost):
        acc.allocate_buffer(f.ctx, BufferDesc(16))
    gate.signal(1)  # the parked work was failed: nothing reaches the destroyed device
    acc.destroy_event(ev)
    f.close()  # releases after close only drop the bookkeeping
    assert not any(acc.live_resources().values())


@needs_lavapipe
def test_a_plan_over_the_allowed_resident_bytes_is_refused_before_device_memory_is_allocated(opened):
    acc = opened()
    b = ProgramBuilder()
    b.output(b.abs(b.input("x", (1 << 22,), "fp32")))  # 16 MiB in, 16 MiB out: the arena holds both
    program = write(b.build())
    ctx = acc.create_context()
    memory = acc._native.memory
    allocations = []
    allocate = memory.allocate
    memory.allocate = lambda size, domain: allocations.append(size) or allocate(size, domain)
    with pytest.raises(ResourceLimit, match=r"the program's plan keeps \d+ bytes .*; 20971520 allowed"):
        acc.load_program(ctx, ArtifactRef(program, 20 << 20))
    assert allocations == []  # refused on the plan: no device memory was asked for
    assert acc.live_resources()["program"] == 0
    loaded = acc.load_program(ctx, ArtifactRef(program, 64 << 20))
    acc.unload_program(loaded)
    acc.destroy_context(ctx)
