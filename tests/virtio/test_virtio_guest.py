"""The guest client end to end: the runtime's semantic suite through the daemon, the bundled programs
from two guest processes at once with outputs identical to local runs, isolation between guests,
nothing left on the host after guests leave (or die), and the command line (serve, run, devices).
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ironaccel as ia
from ironaccel.conformance import semantic
from ironaccel.core.errors import (
    DeadlineExpired,
    DeviceLost,
    InvalidArgument,
    IronAccelError,
    ResourceLimit,
    Unsupported,
)
from ironaccel.runtime import BufferDesc, Device, ReleaseRejected
from ironaccel.runtime.backends import factory
from ironaccel.tosa import Op, ProgramBuilder
from ironaccel.virtio.guest import GROUP_BYTES, SEGMENT_BYTES, VirtioAccelerator, _segments
from ironaccel.virtio.transport_guest import GuestTransport
from ironaccel.virtio.wire import (
    HEADER_BYTES,
    AllocateBufferRequest,
    CreateContextRequest,
    ObjectPayload,
    Opcode,
    Request,
    Status,
    TransferBufferRequest,
    decode_response,
)
from virtio_guest import ZERO, Host

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "src" / "ironaccel" / "models"
NAMES = ["cnn_fp32", "attention_fp32", "cnn_int8"]
IRONACCEL = [sys.executable, "-m", "ironaccel.cli.main"]


def _input(name: str) -> np.ndarray:
    meta = json.loads((MODELS / f"{name}.json").read_text())
    with np.load(MODELS / f"{name}.torch.npz") as data:
        return data["input_int8" if meta["quantized"] else "input"]


def _local(name: str, x: np.ndarray | None = None) -> np.ndarray:
    with ia.open("cpu") as dev:
        (out,) = dev.compile(MODELS / f"{name}.tosa")(_input(name) if x is None else x)
    return out


def _eventually(predicate, timeout: float = 15.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


@pytest.fixture
def host(tmp_path):
    h = Host(str(tmp_path / "accel.sock"))
    yield h
    h.stop()
    assert not h.thread.is_alive()
    assert h.accelerator.live_resources() == ZERO


# ---- the contract ----------------------------------------------------------------------------------------


def test_runtime_semantic_suite_passes_through_the_daemon(host):
    guests: list[VirtioAccelerator] = []

    def factory() -> VirtioAccelerator:
        guests.append(VirtioAccelerator(host.path))
        return guests[-1]

    results = semantic.run(factory)
    failed = [f"{r.id}: {r.detail}" for r in results if r.status == "fail"]
    assert not failed, failed
    assert {r.id for r in results if r.status == "pass"} == set(semantic.CASES)  # CPU behind it: no skips
    for guest in guests:
        guest.close()
    assert _eventually(host.idle), host.accelerator.live_resources()


def test_the_device_describes_the_host_accelerator(host):
    guest = VirtioAccelerator(host.path)
    try:
        info = guest.device_info()
        assert info.kind == "virtio" and host.path in info.name
        assert info.cancellation is True and info.domains  # the CPU backend cancels and offers every domain
        assert info.limits.max_contexts == host.engine.info.max_contexts
        assert guest.supports_cancellation
    finally:
        guest.close()


@pytest.mark.parametrize("name", NAMES)
def test_bundled_programs_give_outputs_identical_to_local_runs(host, name):
    with ia.open(f"virtio:{host.path}") as dev:
        exe = dev.compile(MODELS / f"{name}.tosa")
        (out,) = exe(_input(name))
        run = exe.submit(_input(name))
        (again,) = run.wait(30)
    expected = _local(name)
    assert out.dtype == expected.dtype and out.shape == expected.shape
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(again, expected)


def test_large_transfers_are_split_into_frames_and_come_back_intact(host):
    guest = VirtioAccelerator(host.path, arena_bytes=8 << 20)
    try:
        ctx = guest.create_context()
        data = np.random.default_rng(1).integers(0, 256, 20 << 20, dtype=np.uint8)  # > one 16 MiB frame
        buf = guest.allocate_buffer(ctx, BufferDesc(data.nbytes))
        guest.write_buffer(buf, 0, data)
        back = np.empty_like(data)
        guest.read_buffer(buf, 0, data.nbytes, out=back)
        np.testing.assert_array_equal(back, data)
        assert bytes(guest.read_buffer(buf, (20 << 20) - 3, 3)) == data[-3:].tobytes()
        guest.free_buffer(buf)
        guest.destroy_context(ctx)
    finally:
        guest.close()


def test_transfers_from_and_into_guest_memory_are_served_in_place_and_come_back_intact(host, monkeypatch):
    """Arrays made by host_array live in the guest's shared memory: a WRITE_BUFFER chain carries their
    bytes as a descriptor of its own (never copied into the arena, never gathered by the daemon) and a
    READ_BUFFER names them as its second writable region. Frames larger than 16 MiB split; odd offsets
    and a short last piece land where they belong."""
    from ironaccel.virtio import daemon_connection

    guest = VirtioAccelerator(host.path, arena_bytes=4 << 20, heap_bytes=64 << 20)
    apart = []
    serve_apart = daemon_connection.GuestConnection._serve_apart

    def counted(self, chain, into):
        used = serve_apart(self, chain, into)
        apart.append((len(chain.readable), len(chain.writable), used))
        return used

    monkeypatch.setattr(daemon_connection.GuestConnection, "_serve_apart", counted)
    try:
        ctx = guest.create_context()
        n = (20 << 20) + 13  # over one frame, and more than the 4 MiB arena could stage at once
        data = guest.host_array((n,), np.uint8)
        data[:] = np.random.default_rng(2).integers(0, 256, n, dtype=np.uint8)
        assert guest.transport.guest_offset(memoryview(data)) is not None
        buf = guest.allocate_buffer(ctx, BufferDesc(n + 7))
        guest.write_buffer(buf, 7, data)
        back = guest.host_array((n,), np.uint8)
        back[:] = 0
        guest.read_buffer(buf, 7, n, out=back)
        np.testing.assert_array_equal(back, data)
        ordinary = np.empty(n, np.uint8)  # the same bytes through the arena
        guest.read_buffer(buf, 7, n, out=ordinary)
        np.testing.assert_array_equal(ordinary, data)
        writes = [a for a in apart if a[:2] == (2, 1) and a[2] is not None]
        reads = [a for a in apart if a[:2] == (1, 2) and a[2] is not None]
        assert len(writes) == 2 and len(reads) == 2  # 16 MiB frames: two each way
        chunk = guest.config.max_response_bytes - HEADER_BYTES  # one frame's data
        assert sorted(used for *_, used in reads) == sorted([HEADER_BYTES + chunk, HEADER_BYTES + n - chunk])
        guest.free_buffer(buf)
        guest.destroy_context(ctx)
        heap = guest.transport.heap
        del data, back
        assert heap.free_bytes == heap.size  # the arrays' room went back to the heap
    finally:
        guest.close()


def test_programs_run_on_guest_memory_arrays_give_local_outputs(host):
    with ia.open(f"virtio:{host.path}") as dev:
        x = _input("cnn_fp32")
        xs = dev.host_empty(x.shape, x.dtype)
        xs[...] = x
        out = dev.host_empty(dev.compile(MODELS / "cnn_fp32.tosa").outputs[0].shape, np.float32)
        exe = dev.compile(MODELS / "cnn_fp32.tosa")
        (y,) = exe(xs, out=out)
        assert y is out
        (z,) = exe.submit(xs).wait(30)
    np.testing.assert_array_equal(out, _local("cnn_fp32"))
    np.testing.assert_array_equal(z, _local("cnn_fp32"))


def test_submitted_calls_start_direct_runs_and_finish_in_any_order(host):
    """exe.submit through virtio starts a direct run (batch 1 now, batch 2 at wait): several in flight
    at once, each on a staging set of its own, waited for out of order, give the local outputs; the
    program stays pinned until every run is finished, and nothing is left on the host after close."""
    x = _input("cnn_fp32")
    expected = _local("cnn_fp32")
    with ia.open(f"virtio:{host.path}") as dev:
        exe = dev.compile(MODELS / "cnn_fp32.tosa")
        assert dev.accelerator.starts_direct(exe.program)
        with pytest.raises(InvalidArgument):  # checked before anything is sent; nothing stays pinned
            dev.accelerator.start_direct(exe.program, [x.astype(np.float64)])
        runs = [exe.submit(x * (i + 1)) for i in range(4)]
        assert all(r.event is None for r in runs)
        with pytest.raises(ReleaseRejected):
            dev.accelerator.unload_program(exe.program)  # pinned by the unfinished runs
        outs = [r.wait(30)[0] for r in reversed(runs)][::-1]
        assert runs[0].done and runs[0].wait() is runs[0].wait()
        (first,) = exe(x)
        np.testing.assert_array_equal(outs[0], expected)
        np.testing.assert_array_equal(first, expected)
        for i, out in enumerate(outs[1:], start=2):
            np.testing.assert_array_equal(out, _local("cnn_fp32", x * i))
    dev.accelerator.close()
    assert _eventually(host.idle), (host.daemon.guests, host.accelerator.live_resources())


def test_a_started_run_waited_for_too_briefly_can_be_waited_for_again(host):
    b = ProgramBuilder()
    a, c = b.input("a", (1, 768, 768), "fp32"), b.input("b", (1, 768, 768), "fp32")
    b.output(b.op(Op.MATMUL, [a, c, 0, 0], out_dtype="fp32"))
    x = np.random.default_rng(3).standard_normal((1, 768, 768)).astype(np.float32)
    with ia.open(f"virtio:{host.path}") as dev:
        exe = dev.compile(b.build())
        run = exe.submit(x, x)
        with pytest.raises(DeadlineExpired):
            run.wait(1e-6)  # the device lingers at most 0.5 ms on a fresh poll; the product takes longer
        (y,) = run.wait(60)
    (expected,) = ia.open("cpu").compile(b.build())(x, x)
    np.testing.assert_array_equal(y, expected)


def test_a_full_guest_memory_heap_is_a_resource_limit(host):
    guest = VirtioAccelerator(host.path, heap_bytes=1 << 20)
    try:
        kept = guest.host_array((1 << 19,), np.uint8)
        with pytest.raises(ResourceLimit, match="guest memory heap"):
            guest.host_array((1 << 20,), np.uint8)
        assert guest.host_array((0, 3), np.float32).shape == (0, 3)  # nothing to place
        del kept
        assert guest.host_array((1 << 20,), np.uint8).nbytes == 1 << 20
    finally:
        guest.close()


def test_transfers_of_several_groups_of_segments_land_at_their_offsets(host):
    """Pieces of a few MiB, posted in groups while the device copies the previous piece: a transfer
    spanning several groups, at an odd offset and with a short last piece, comes back byte for byte."""
    guest = VirtioAccelerator(host.path)
    try:
        ctx = guest.create_context()
        size = 2 * GROUP_BYTES + 3 * SEGMENT_BYTES + 5
        data = np.random.default_rng(2).integers(0, 256, size, dtype=np.uint8)
        buf = guest.allocate_buffer(ctx, BufferDesc(size + 7))
        guest.write_buffer(buf, 7, data)
        back = np.empty_like(data)
        guest.read_buffer(buf, 7, size, out=back)
        np.testing.assert_array_equal(back, data)
        guest.free_buffer(buf)
        guest.destroy_context(ctx)
    finally:
        guest.close()


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 1 << 28), st.integers(4096, 32 << 20), st.integers(1, 64 << 20))
def test_transfer_segments_cover_the_range_once_and_groups_fit_their_budget(total, chunk, budget):
    groups = list(_segments(total, chunk, budget))
    pieces = [piece for group in groups for piece in group]
    assert pieces[0][0] == 0 and sum(n for _, n in pieces) == total
    assert all(at + n == nxt for (at, n), (nxt, _) in itertools.pairwise(pieces))
    assert all(0 < n <= min(chunk, SEGMENT_BYTES) for _, n in pieces)
    # a group with more than one piece fits the budget with a frame's overhead per piece
    assert all(len(g) == 1 or sum(n + 256 for _, n in g) <= budget for g in groups)


# ---- isolation and cleanup ----------------------------------------------------------------------------------


def _command(t: GuestTransport, opcode: Opcode, body, rid: int, read: int | None = None):
    frame = Request(int(opcode), rid, body).encode()
    answer = t.request([frame], 16 + (read if read is not None else 76))
    return decode_response(answer, opcode, request_id=rid, read_bytes=read)


def test_one_guests_object_ids_are_refused_to_another(host):
    with GuestTransport(host.path) as a, GuestTransport(host.path) as b:
        ctx = _command(a, Opcode.CREATE_CONTEXT, CreateContextRequest(), 1).body.object_id
        alloc = AllocateBufferRequest(ctx, 64, 64, 3, usage=0b1111)
        buf = _command(a, Opcode.ALLOCATE_BUFFER, alloc, 2).body.object_id
        for rid, (opcode, body, read) in enumerate(
            [
                (Opcode.READ_BUFFER, TransferBufferRequest(buf, 0, 8), 8),
                (Opcode.FREE_BUFFER, ObjectPayload(buf), None),
                (Opcode.DESTROY_CONTEXT, ObjectPayload(ctx), None),
                (Opcode.ALLOCATE_BUFFER, AllocateBufferRequest(ctx, 64, 64, 3, usage=0b1111), None),
            ],
            start=10,
        ):
            status = _command(b, opcode, body, rid, read).status
            assert status == Status.PERMISSION_DENIED, (opcode.name, status)
        # A's objects are untouched by B's attempts.
        assert _command(a, Opcode.READ_BUFFER, TransferBufferRequest(buf, 0, 8), 20, 8).status == Status.OK
        assert _command(a, Opcode.FREE_BUFFER, ObjectPayload(buf), 21).status == Status.OK
        assert _command(a, Opcode.FREE_BUFFER, ObjectPayload(buf), 22).status == Status.STALE_OBJECT
    assert _eventually(host.idle)


def test_guests_that_leave_with_objects_alive_leave_nothing_on_the_host(host):
    leavers = [VirtioAccelerator(host.path) for _ in range(2)]
    alive = []  # held here: objects the user never released when their guest goes
    for guest in leavers:
        dev = Device(guest, "virtio")
        exe = dev.compile(MODELS / "cnn_fp32.tosa")
        alive.append((dev, exe, exe.submit(_input("cnn_fp32"))))  # submitted, never waited for
    assert host.accelerator.live_resources()["program"] == 2
    for guest in leavers:
        guest.close()
    assert _eventually(host.idle), host.accelerator.live_resources()


def test_a_guest_process_killed_mid_session_leaves_nothing_on_the_host(host):
    script = textwrap.dedent(
        f"""
        import numpy as np, ironaccel as ia
        dev = ia.open("virtio:{host.path}")
        exe = dev.compile({str(MODELS / "attention_fp32.tosa")!r})
        exe(np.zeros(exe.inputs[0].shape, np.float32))
        print("ready", flush=True)
        import time; time.sleep(120)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert proc.stdout.readline().strip() == "ready"
        assert host.accelerator.live_resources()["program"] == 1
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        assert _eventually(host.idle), host.accelerator.live_resources()
    finally:
        proc.kill()
        proc.wait()


def test_a_daemon_that_stops_is_device_lost_for_its_guests(tmp_path):
    host = Host(str(tmp_path / "s"))
    guest = VirtioAccelerator(host.path)
    ctx = guest.create_context()
    host.stop()
    with pytest.raises(DeviceLost):
        guest.allocate_buffer(ctx, BufferDesc(16))
    with pytest.raises(DeviceLost):  # poisoned: every later call says so at once
        guest.create_context()
    guest.close()
    assert host.accelerator.live_resources() == ZERO


def test_opening_virtio_without_a_socket_says_what_is_missing(tmp_path):
    with pytest.raises(InvalidArgument, match="socket path"):
        factory("virtio")()
    with pytest.raises(DeviceLost, match="cannot reach"):
        ia.open(f"virtio:{tmp_path / 'nobody-here.sock'}")


# ---- the daemon as a process, two guest processes, the command line -------------------------------------------

GUEST = textwrap.dedent(
    """
    import json, sys
    import numpy as np, ironaccel as ia
    socket, out_dir, names = sys.argv[1], sys.argv[2], sys.argv[3:]
    models = {models!r}
    with ia.open("virtio:" + socket) as dev:
        exes = {{name: dev.compile(f"{{models}}/{{name}}.tosa") for name in names}}
        for round in range(3):
            for name in names:
                meta = json.load(open(f"{{models}}/{{name}}.json"))
                x = np.load(f"{{models}}/{{name}}.torch.npz")["input_int8" if meta["quantized"] else "input"]
                (y,) = exes[name](x)
                np.save(f"{{out_dir}}/{{name}}-{{round}}.npy", y)
    print("done", flush=True)
    """
)


@pytest.fixture
def served(tmp_path):
    """``ironaccel serve`` as a separate process."""
    path = tmp_path / "served.sock"
    proc = subprocess.Popen(
        [*IRONACCEL, "serve", "--device", "cpu", "--socket", str(path)],
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert _eventually(path.exists, 30), "the daemon did not start listening"
        yield path, proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def test_a_daemon_process_serves_two_guest_processes_at_once(served, tmp_path):
    path, daemon = served
    outs = [tmp_path / "a", tmp_path / "b"]
    guests = []
    for out in outs:
        out.mkdir()
        guests.append(
            subprocess.Popen(
                [sys.executable, "-c", GUEST.format(models=str(MODELS)), str(path), str(out), *NAMES],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                cwd=ROOT,
            )
        )
    for guest in guests:
        out, err = guest.communicate(timeout=240)
        assert guest.returncode == 0 and out.strip() == "done", err
    for name in NAMES:
        expected = _local(name)
        for out in outs:
            for r in range(3):
                np.testing.assert_array_equal(np.load(out / f"{name}-{r}.npy"), expected)
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(30) == 0
    log = daemon.stderr.read()
    assert "guest 1" in log and "guest 2" in log and "stopped after serving 2 guest(s)" in log
    assert "'context': 0, 'buffer': 0, 'program': 0" in log  # nothing left on the host
    assert not path.exists()


def test_run_with_compare_against_a_running_daemon(served, tmp_path):
    path, daemon = served
    x = tmp_path / "x.npy"
    y = tmp_path / "y.npy"
    np.save(x, _input("cnn_int8"))
    cmd = [*IRONACCEL, "run", str(MODELS / "cnn_int8.tosa"), "-i", str(x), "-o", str(y)]
    done = subprocess.run(
        [*cmd, "--device", f"virtio:{path}", "--compare", "cpu"], capture_output=True, text=True, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    assert "0 differing elements" in done.stdout and "virtio-accel" in done.stdout
    np.testing.assert_array_equal(np.load(y), _local("cnn_int8"))
    daemon.send_signal(signal.SIGINT)
    assert daemon.wait(30) == 0


def test_serve_refuses_a_socket_a_daemon_already_serves(served):
    path, _ = served
    done = subprocess.run([*IRONACCEL, "serve", "--socket", str(path)], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 2 and f"cannot listen on {path}: a daemon is already serving it" in done.stderr
    assert os.path.exists(path)


def test_devices_lists_the_virtio_device_the_environment_names(served, tmp_path):
    path, _ = served
    env = {**os.environ, "IRONACCEL_VIRTIO_SOCKET": str(path)}
    run = lambda *argv, env=env: subprocess.run(  # noqa: E731
        [*IRONACCEL, *argv], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120
    )
    listing = json.loads(run("devices", "--json", "--family", "cpu").stdout)
    (entry,) = listing["virtio"]
    assert entry["available"] is True and entry["device"]["id"] == f"virtio:{path}"
    assert entry["device"]["memory_domains"] == ["device", "host", "shared"]
    assert entry["device"]["limits"]["max_contexts"] >= 1
    table = run("devices", "--family", "cpu").stdout
    assert "virtio-accel devices" in table and "device host shared" in table
    opened = subprocess.run(
        [sys.executable, "-c", "import ironaccel as ia; d = ia.open('virtio'); print(d.info.kind); d.close()"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )
    assert opened.stdout.strip() == "virtio", opened.stderr
    gone = json.loads(
        run("devices", "--json", "--family", "cpu", env={**env, "IRONACCEL_VIRTIO_SOCKET": str(tmp_path / "x")}).stdout
    )
    assert gone["virtio"][0]["available"] is False and "cannot reach" in gone["virtio"][0]["reason"]
    assert "virtio" not in json.loads(run("devices", "--json", "--family", "cpu", env=dict(os.environ)).stdout)


LAVAPIPE_GUEST = GUEST.replace(
    'print("done", flush=True)',
    textwrap.dedent(
        """
        try:
            dev.compile(out_dir + "/../rfft.tosa")
            print("rfft loaded", flush=True)
        except ia.IronAccelError as exc:
            print("rfft refused:", type(exc).__name__, flush=True)
        print("done", flush=True)
        """
    ).replace("\n", "\n    ").rstrip(),
)


def _rfft_program() -> bytes:
    """A program the Vulkan backend does not lower (RFFT2D): the refusal a guest must see."""
    from ironaccel.tosa import ProgramBuilder
    from ironaccel.tosa.codec import write

    b = ProgramBuilder()
    real, imag = b.rfft2d(b.input("x", (1, 4, 8), "fp32"))
    b.output(real, imag)
    return write(b.build())


def test_vulkan_behind_the_daemon_on_lavapipe(tmp_path):
    """Any backend serves: Mesa's software Vulkan driver behind ``ironaccel serve``. The semantic suite
    passes through the guest client; two guest processes at once run the bundled programs (fp32 and
    int8) with outputs identical to local lavapipe runs; a program the backend does not lower (RFFT2D)
    is refused at load (Unsupported), as it is locally."""
    try:
        from ironaccel.backends.vulkan import open_accelerator

        open_accelerator("lavapipe").close()
    except (ImportError, IronAccelError) as exc:
        pytest.skip(f"lavapipe unavailable: {exc}")
    path = tmp_path / "vk.sock"
    daemon = subprocess.Popen(
        [*IRONACCEL, "serve", "--device", "vulkan:lavapipe", "--socket", str(path)],
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert _eventually(path.exists, 60), "the daemon did not start listening"
        guests: list[VirtioAccelerator] = []
        results = semantic.run(lambda: guests.append(VirtioAccelerator(str(path))) or guests[-1])
        for guest in guests:
            guest.close()
        failed = [f"{r.id}: {r.detail}" for r in results if r.status == "fail"]
        assert not failed, failed
        (tmp_path / "rfft.tosa").write_bytes(_rfft_program())
        outs = [tmp_path / "a", tmp_path / "b"]
        procs = []
        for out in outs:
            out.mkdir()
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-c", LAVAPIPE_GUEST.format(models=str(MODELS)), str(path), str(out), *NAMES],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    cwd=ROOT,
                )
            )
        for proc in procs:
            out, err = proc.communicate(timeout=300)
            last = out.strip().split("\n")[-2:]
            assert proc.returncode == 0 and last == ["rfft refused: Unsupported", "done"], (out, err)
        with ia.open("vulkan:lavapipe") as dev:
            for name in NAMES:
                (expected,) = dev.compile(MODELS / f"{name}.tosa")(_input(name))
                for out in outs:
                    for r in range(3):
                        np.testing.assert_array_equal(np.load(out / f"{name}-{r}.npy"), expected)
            with pytest.raises(IronAccelError) as local_refusal:
                dev.compile(tmp_path / "rfft.tosa")
        assert isinstance(local_refusal.value, Unsupported)  # the class of the device's UNSUPPORTED
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(60) == 0
        log = daemon.stderr.read()
        assert "stopped after serving" in log and "'context': 0, 'buffer': 0, 'program': 0" in log
    finally:
        if daemon.poll() is None:
            daemon.kill()
        daemon.wait()
