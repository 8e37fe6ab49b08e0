"""Deadlines and refusals of the virtio-accel device: a guest never waits forever on a stopped daemon,
connections that never finish set-up give their slot back, a full daemon says so, and ``serve`` names
the socket path it cannot serve."""

from __future__ import annotations

import ctypes
import errno
import importlib
import logging
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from ironaccel.backends.cpu.accelerator import CpuAccelerator
from ironaccel.cli.main import main as cli_main
from ironaccel.core.errors import Busy, DeadlineExpired, InvalidArgument, ResourceLimit
from ironaccel.core.settings import Settings
from ironaccel.runtime import ArtifactRef, Binding, BufferDesc, Device, MemoryDomain, SubmitIndeterminate
from ironaccel.virtio import DeviceEngine
from ironaccel.virtio import transport as tp
from ironaccel.virtio.daemon import Daemon, for_engine
from ironaccel.virtio.daemon_connection import DeviceOptions
from ironaccel.virtio.guest import VirtioAccelerator
from ironaccel.virtio.transport import Request
from ironaccel.virtio.transport_guest import GuestTransport
from virtio_guest import add_program

settings_module = importlib.import_module("ironaccel.core.settings")  # the package exports the instance
ROOT = Path(__file__).resolve().parents[2]
IRONACCEL = [sys.executable, "-m", "ironaccel.cli.main"]
IO = 0x1F


def _eventually(predicate, timeout: float = 15.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def _in_thread(fn, limit: float):
    """Run ``fn`` on a thread; return whether it finished within ``limit`` s and [its result or exception,
    the seconds it took] (empty while it still runs)."""
    out: list = []

    def body() -> None:
        start = time.monotonic()
        try:
            out.append(fn())
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            out.append(exc)
        out.append(time.monotonic() - start)

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    thread.join(limit)
    return (not thread.is_alive()), out


# ---- a stopped daemon --------------------------------------------------------------------------------------


def _stop(proc: subprocess.Popen) -> None:
    """SIGSTOP ``proc`` and return once every thread of it has stopped. kill returns with the stop still to
    come: one thread takes the signal when it next runs and only then stops the others, so on a loaded
    machine a connection thread could serve a chain meant to go unanswered."""
    os.kill(proc.pid, signal.SIGSTOP)

    def stopped() -> bool:
        states = []
        for task in Path(f"/proc/{proc.pid}/task").iterdir():
            try:
                states.append(task.joinpath("stat").read_text().rsplit(")", 1)[1].split()[0])
            except (FileNotFoundError, ProcessLookupError):  # a thread that ended meanwhile
                continue
        return all(state in "tT" for state in states)

    assert _eventually(stopped, 60), "the daemon did not stop"


@pytest.fixture
def daemon_process(tmp_path):
    """``ironaccel serve`` as a process of its own, which the test may stop (SIGSTOP) and resume."""
    path = tmp_path / "stopped.sock"
    proc = subprocess.Popen(
        [*IRONACCEL, "serve", "--device", "cpu", "--socket", str(path)],
        stderr=subprocess.DEVNULL,
        cwd=ROOT,
    )
    try:
        assert _eventually(path.exists, 60), "the daemon did not start listening"
        yield path, proc
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        proc.terminate()
        proc.wait(30)


def test_calls_to_a_stopped_daemon_end_at_their_deadline_and_work_again_once_it_resumes(daemon_process):
    path, proc = daemon_process
    deadline, margin = 1.0, 2.0
    # The short deadline holds only while the daemon is stopped: set-up and the calls after it run under
    # the default one, which a loaded machine cannot overrun.
    guest = VirtioAccelerator(str(path))
    usual = guest.transport.timeout_s
    dev = Device(guest, "virtio")
    exe = dev.compile(add_program())
    a, b = np.arange(4, dtype=np.float32), np.full(4, 10, np.float32)
    np.testing.assert_array_equal(exe(a, b)[0], a + b)

    guest.transport.timeout_s = deadline
    _stop(proc)
    try:
        # The user API's call: its first batch (DESTROY_EVENT, WRITE_BUFFER, SUBMIT) goes unanswered.
        done, out = _in_thread(lambda: exe(a, b), deadline + margin)
        assert done, f"exe(x) against a stopped daemon was still waiting after {deadline + margin} s"
        error, took = out
        assert isinstance(error, DeadlineExpired), error
        assert f"no answer from the virtio-accel daemon at {path} within 1 s" in str(error)
        assert "SUBMIT" in str(error) and took < deadline + margin
        # One command of the contract: the opcode leads the message.
        done, out = _in_thread(guest.create_context, deadline + margin)
        assert done and isinstance(out[0], DeadlineExpired), out
        assert str(out[0]).startswith("CREATE_CONTEXT: no answer from the virtio-accel daemon")
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        guest.transport.timeout_s = usual

    # The chains given up on come back once the daemon runs again; later calls work.
    for _ in range(3):
        np.testing.assert_array_equal(exe(a, b)[0], a + b)
    dev.close()


def test_a_submit_without_an_answer_is_indeterminate_and_fails_its_event(daemon_process):
    path, proc = daemon_process
    # Set up with the default deadline (a loaded machine may take longer than the short one to load a
    # program); only the SUBMIT to the stopped daemon runs under 0.5 s.
    guest = VirtioAccelerator(str(path))
    ctx = guest.create_context()
    program = guest.load_program(ctx, ArtifactRef(add_program(), 1 << 20))
    bufs = [guest.allocate_buffer(ctx, BufferDesc(16, MemoryDomain.SHARED, IO)) for _ in range(3)]
    queue = guest.create_queue(ctx)
    bindings = [Binding(i, buf, 0, 16) for i, buf in enumerate(bufs)]
    guest.transport.timeout_s = 0.5
    _stop(proc)
    try:
        done, out = _in_thread(lambda: guest.submit(queue, program, bindings), 3.0)
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    assert done, "SUBMIT to a stopped daemon was still waiting after 3 s"
    error = out[0]
    # The device may have taken the work: acceptance is unknown, and the event carries the deadline's error.
    assert isinstance(error, SubmitIndeterminate), error
    assert isinstance(error.error, DeadlineExpired) and str(error.error).startswith("SUBMIT: no answer")
    assert error.event is not None and isinstance(guest.event_error(error.event), DeadlineExpired)
    guest.destroy_event(error.event)
    assert guest.device_info().kind == "virtio"  # the transport works on
    guest.close()


def test_the_default_deadline_comes_from_the_environment_and_bad_values_are_named(monkeypatch):
    assert Settings.from_env({}).virtio_timeout_s == 30.0
    assert Settings.from_env({"IRONACCEL_VIRTIO_TIMEOUT": "2.5"}).virtio_timeout_s == 2.5
    for bad in ("soon", "0", "-1", "inf"):
        assert math.isnan(Settings.from_env({"IRONACCEL_VIRTIO_TIMEOUT": bad}).virtio_timeout_s), bad
    monkeypatch.setattr(settings_module, "settings", Settings.from_env({"IRONACCEL_VIRTIO_TIMEOUT": "soon"}))
    with pytest.raises(InvalidArgument, match="IRONACCEL_VIRTIO_TIMEOUT must be a positive, finite number"):
        GuestTransport("/nonexistent/accel.sock")
    with pytest.raises(InvalidArgument, match="timeout_s must be a positive, finite number of seconds, got 0"):
        GuestTransport("/nonexistent/accel.sock", timeout_s=0)


def test_the_environment_deadline_is_the_one_a_guest_uses(monkeypatch, tmp_path):
    """A daemon that accepts and sets up but never serves a chain: the wait ends at the configured deadline."""

    class Silent:
        def process(self, request: bytes, capacity: int) -> bytes:
            time.sleep(1)
            return b""

        def close(self) -> None:
            pass

    monkeypatch.setattr(settings_module, "settings", Settings.from_env({"IRONACCEL_VIRTIO_TIMEOUT": "0.3"}))
    path = str(tmp_path / "silent.sock")
    d = Daemon(path, Silent, DeviceOptions(config=bytes(16)))
    d.listen()
    thread = threading.Thread(target=d.serve)
    thread.start()
    try:
        with GuestTransport(path) as guest:
            assert guest.timeout_s == 0.3
            start = time.monotonic()
            with pytest.raises(DeadlineExpired, match=r"within 0\.3 s"):
                guest.request([b"x"], 16)
            assert time.monotonic() - start < 3
    finally:
        d.stop()
        thread.join(20)


# ---- set-up deadlines and a full daemon ----------------------------------------------------------------------


@pytest.fixture
def small_daemon(tmp_path):
    """A CPU engine behind a daemon of 4 guest slots and a 1 s set-up deadline, on a thread here."""
    engine = DeviceEngine(CpuAccelerator())
    path = str(tmp_path / "small.sock")
    d = for_engine(path, engine, max_guests=4, device={"setup_timeout_s": 1.0})
    d.listen()
    thread = threading.Thread(target=d.serve)
    thread.start()
    yield d
    d.stop()
    thread.join(30)
    assert not thread.is_alive()
    assert engine.accelerator.live_resources()["context"] == 0


def _refusal(sock: socket.socket) -> str:
    """The daemon's refusal on ``sock`` (a guest's view: its first request answered with a reason)."""
    with pytest.raises(tp.DaemonRefusal) as info:
        tp.expect_reply(sock, Request.GET_FEATURES)
    return str(info.value)


def test_idle_connections_give_their_slot_back_after_the_setup_deadline(small_daemon):
    d = small_daemon
    idle = []
    try:
        for _ in range(64):  # connect, never set up
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(d.path)  # blocking: waits while the daemon's backlog is full
            sock.settimeout(10)
            idle.append(sock)
        assert _eventually(lambda: d.guests == 4, 5)
        start = time.monotonic()
        with pytest.raises(ResourceLimit, match=r"refused this guest: daemon full \(4 guests\)") as full:
            GuestTransport(d.path)
        assert time.monotonic() - start < 1.0
        assert d.path in str(full.value)
        # Once the set-up deadline passes, the idle four are told why and closed; a real guest gets in.
        assert _eventually(lambda: d.guests == 0, 5), f"{d.guests} idle connections still hold a slot"
        guest = VirtioAccelerator(d.path)
        assert guest.device_info().kind == "virtio"
        guest.close()
        reasons = [_refusal(sock) for sock in idle]
        assert reasons.count("set-up not finished within 1 s") == 4
        assert reasons.count("daemon full (4 guests)") == 60
    finally:
        for sock in idle:
            sock.close()


def test_the_guest_past_max_guests_is_told_the_daemon_is_full_within_a_second(small_daemon):
    d = small_daemon
    guests = [VirtioAccelerator(d.path) for _ in range(4)]
    try:
        start = time.monotonic()
        with pytest.raises(ResourceLimit, match=r"daemon full \(4 guests\)"):
            VirtioAccelerator(d.path)
        assert time.monotonic() - start < 1.0
        # Guests that set up in time keep their slot past the set-up deadline.
        time.sleep(1.2)
        assert all(g.device_info().kind == "virtio" for g in guests) and d.guests == 4
        guests.pop().close()
        assert _eventually(lambda: d.guests == 3)
        guests.append(VirtioAccelerator(d.path))
    finally:
        for g in guests:
            g.close()


def test_peers_that_connect_and_leave_at_once_never_stall_the_accept_loop(small_daemon):
    d = small_daemon
    for _ in range(100):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(d.path)
        sock.close()
    guest = VirtioAccelerator(d.path)
    assert guest.device_info().kind == "virtio"
    guest.close()


def test_a_refusal_is_bounded_and_printable_both_ways(tmp_path):
    frame = tp.encode_refusal("x" * 10_000)
    assert len(frame) == tp.HEADER.size + tp.MAX_REASON
    # A hostile "daemon" sends a long refusal with control characters: the guest cuts and cleans it.
    path = str(tmp_path / "liar.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)

    def liar() -> None:
        conn, _ = server.accept()
        reason = ("\x1b[2J" + "y" * 4000).encode()
        conn.sendall(tp.HEADER.pack(tp.REFUSAL, tp.VERSION | tp.REPLY, len(reason)) + reason)
        conn.close()

    thread = threading.Thread(target=liar)
    thread.start()
    try:
        with pytest.raises(ResourceLimit) as info:
            GuestTransport(path, setup_timeout_s=5)
    finally:
        thread.join(10)
        server.close()
    reason = str(info.value).split("refused this guest: ", 1)[1]
    assert len(reason) == tp.MAX_REASON and reason.isprintable() and reason.startswith("?[2J")


# ---- serve: the socket path in every error ---------------------------------------------------------------------


@pytest.fixture
def cli_logging():
    """The command line configures the ironaccel loggers; give later tests back what they had."""
    logger = logging.getLogger("ironaccel")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    yield
    logger.handlers[:], logger.level, logger.propagate = saved[0], saved[1], saved[2]


def _serve_error(capsys, *argv: str) -> str:
    """Run ``serve`` here; its exit status must be 2 and its error one line (log records of this test's
    own daemon may share stderr)."""
    assert cli_main(["serve", "--device", "cpu", *argv]) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("ironaccel serve:")]
    assert len(lines) == 1, err
    return lines[0]


def test_serve_names_the_socket_path_it_cannot_serve(tmp_path, capsys, cli_logging):
    missing = tmp_path / "no-such-dir" / "accel.sock"
    err = _serve_error(capsys, "--socket", str(missing))
    assert str(missing) in err and "does not exist" in err

    regular = tmp_path / "a-file"
    regular.write_text("keep me")
    err = _serve_error(capsys, "--socket", str(regular))
    assert str(regular) in err and "not a socket" in err
    assert regular.read_text() == "keep me"

    live = str(tmp_path / "live.sock")
    d = Daemon(live, lambda: None)
    d.listen()
    try:
        err = _serve_error(capsys, "--socket", live)
        assert live in err and "already serving" in err
    finally:
        d._shutdown()


def _without_dac_override() -> None:
    """In the child, before exec: drop the capabilities that let root ignore file permissions."""
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, from the bounding set (PR_CAPBSET_DROP)
        if libc.prctl(24, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def test_serve_names_the_socket_path_it_has_no_permission_for(tmp_path):
    folder = tmp_path / "locked"
    folder.mkdir(mode=0o500)
    path = folder / "accel.sock"
    try:
        done = subprocess.run(
            [*IRONACCEL, "serve", "--device", "cpu", "--socket", str(path)],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=120,
            preexec_fn=_without_dac_override if os.geteuid() == 0 else None,
        )
    except subprocess.SubprocessError as exc:
        pytest.skip(f"cannot drop root's permission override here: {exc}")
    finally:
        folder.chmod(0o700)
    lines = [line for line in done.stderr.splitlines() if line.startswith("ironaccel serve:")]
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and str(path) in lines[0] and "permission denied" in lines[0], done.stderr


def test_the_socket_path_appears_only_once_the_daemon_listens(tmp_path, monkeypatch):
    """Clients and init scripts wait for the socket file and then connect; a file there before ``listen`` would
    refuse them, and a second daemon would take it for a stale one and remove it."""
    path = str(tmp_path / "accel.sock")
    seen: list[str] = []
    real_listen = socket.socket.listen

    def listen_late(sock: socket.socket, *args) -> None:
        # What a client finds in the window between bind and listen, however long a loaded machine makes it.
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(path)
            seen.append("connected")
        except FileNotFoundError:
            seen.append("no file yet")
        except ConnectionRefusedError:
            seen.append("refused")
        finally:
            probe.close()
        real_listen(sock, *args)

    monkeypatch.setattr(socket.socket, "listen", listen_late)
    daemon = Daemon(path, lambda: None)
    daemon.listen()
    monkeypatch.undo()
    try:
        assert seen == ["no file yet"]
        assert os.listdir(tmp_path) == ["accel.sock"]  # nothing left beside it
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        client.connect(path)  # queued until accept: never refused once the path is there
        client.close()
        with pytest.raises(Busy, match="already serving"):
            Daemon(path, lambda: None).listen()
    finally:
        daemon._shutdown()
    assert not os.path.exists(path)


def test_a_file_system_without_hard_links_still_gets_its_socket(tmp_path, monkeypatch):
    def no_links(src, dst, *args, **kwargs):
        raise PermissionError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    path = str(tmp_path / "accel.sock")
    daemon = Daemon(path, lambda: None)
    daemon.listen()  # bound at the path itself, as where there is no room for a hidden name
    try:
        assert os.listdir(tmp_path) == ["accel.sock"]
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        client.connect(path)
        client.close()
    finally:
        daemon._shutdown()
