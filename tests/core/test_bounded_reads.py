"""Every file IronAccel reads on a user's say-so is bounded, must be regular, and is refused in one clear error.

Covers :func:`ironaccel.core.files.read_limited` itself, the paths that use it (``Device.compile(path)``,
the TOSA reader, the ``.npy`` / ``.npz`` loaders, ``run``'s desc.json) and the command line's handling of
the refusals (one line on stderr, exit status 2, no traceback unless asked for).
"""

from __future__ import annotations

import io
import json
import os
import pickle
import socket
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ironaccel
from ironaccel.cli.main import main as ironaccel_main
from ironaccel.conformance import npy
from ironaccel.core import files
from ironaccel.core.errors import InvalidArgument, PermissionDenied, ResourceLimit
from ironaccel.tosa import Block, DType, Op, Operator, Program, Region, Tensor, Version, save
from ironaccel.tosa.codec import load, read
from ironaccel.tosa.codec.limits import DEFAULT_LIMITS, Limits

CLI = [sys.executable, "-c", "import sys; from ironaccel.cli.main import main; sys.exit(main())"]


def finishes(call, timeout: float = 10.0):
    """Run ``call`` on a daemon thread: its result or exception, failing the test if it blocks (a FIFO)."""
    outcome: dict = {}

    def target() -> None:
        try:
            outcome["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            outcome["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), f"still blocked after {timeout} s"
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def refused(call, kind: type[Exception] = InvalidArgument) -> str:
    with pytest.raises(kind) as info:
        finishes(call)
    return str(info.value)


def add_program(path: Path) -> Path:
    block = Block(
        "main",
        (Operator(Op.ADD, ("a", "b"), ("c",)),),
        (Tensor("a", (2,), DType.FP32), Tensor("b", (2,), DType.FP32), Tensor("c", (2,), DType.FP32)),
        ("a", "b"),
        ("c",),
    )
    save(Program((Region("main", (block,)),), Version(1, 0, 2)), path)
    return path


def npy_bytes(array: np.ndarray, allow_pickle: bool = False) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=allow_pickle)
    return buffer.getvalue()


def raw_npy(header: str, data: bytes = b"") -> bytes:
    """A version 1.0 .npy with ``header`` as its header text, as written, and ``data`` after it."""
    text = header.encode("latin1") + b"\n"
    return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text + data


class _Marker:
    """Unpickling this creates a file: proof that a loader ran code from the data."""

    path = ""

    def __reduce__(self):
        return (Path.touch, (Path(self.path),))


@pytest.fixture
def special(tmp_path):
    """Paths that are not regular files, by what the refusal must call them."""
    fifo = tmp_path / "pipe.tosa"
    os.mkfifo(fifo)
    link = tmp_path / "zero.tosa"
    link.symlink_to("/dev/zero")
    directory = tmp_path / "dir.tosa"
    directory.mkdir()
    return {
        "character device": Path("/dev/zero"),
        "FIFO": fifo,
        "directory": directory,
        "character device (through a link)": link,
    }


@pytest.fixture
def sparse(tmp_path):
    """A file one byte over the program limit, with no data written (truncate makes it sparse)."""
    path = tmp_path / "huge.tosa"
    with open(path, "wb") as f:
        f.truncate(DEFAULT_LIMITS.max_file_bytes + 1)
    return path


# -- read_limited ---------------------------------------------------------------------------------------------
def test_reads_a_regular_file_whole(tmp_path):
    path = tmp_path / "a.bin"
    path.write_bytes(b"0123456789")
    assert files.read_limited(path, 10, "test file") == b"0123456789"
    assert files.read_limited(str(path), 1 << 30, "test file") == b"0123456789"
    (tmp_path / "empty").write_bytes(b"")
    assert files.read_limited(tmp_path / "empty", 0, "test file") == b""


def test_reads_files_whose_size_is_not_known_in_advance():
    """procfs files report size 0 and still have content: the read goes on until end of file."""
    assert b"Name:" in files.read_limited("/proc/self/status", 1 << 20, "status")


@pytest.mark.parametrize("name", ["character device", "FIFO", "directory", "character device (through a link)"])
def test_refuses_what_is_not_a_regular_file(special, name):
    path = special[name]
    message = refused(lambda: files.read_limited(path, 1 << 20, "test input"))
    assert str(path) in message and "test input must be a regular file" in message
    assert name.split(" (")[0] in message


def test_refuses_a_socket(tmp_path):
    path = tmp_path / "s"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        assert "socket" in refused(lambda: files.read_limited(path, 100, "test input"))


def test_refuses_an_oversize_file_before_reading(tmp_path):
    """A 1 TiB sparse file with a limit one byte short: refused with its size, nothing allocated or read."""
    path = tmp_path / "tera"
    with open(path, "wb") as f:
        f.truncate(1 << 40)
    message = refused(lambda: files.read_limited(path, (1 << 40) - 1, "test input"), ResourceLimit)
    assert message == f"{path}: test input is {1 << 40} bytes, over the limit of {(1 << 40) - 1} bytes"
    small = tmp_path / "eleven"
    small.write_bytes(bytes(11))
    message = refused(lambda: files.read_limited(small, 10, "x", limit_name="Limits.y"), ResourceLimit)
    assert "11 bytes, over the limit of 10 bytes (Limits.y)" in message
    assert files.read_limited(small, 11, "x") == bytes(11)


def test_a_file_growing_past_the_limit_while_read_is_refused_reading_at_most_limit_plus_one(tmp_path, monkeypatch):
    """stat and fstat say 4 bytes, the file holds 100: the read stops at limit + 1 and refuses."""
    path = tmp_path / "growing"
    path.write_bytes(bytes(100))
    real_stat, real_fstat, real_read = os.stat, os.fstat, os.read

    def small(result: os.stat_result) -> os.stat_result:
        fields = list(result)
        fields[6] = 4  # st_size
        return os.stat_result(fields)

    asked: list[int] = []

    def counting_read(fd: int, n: int) -> bytes:
        asked.append(n)
        return real_read(fd, n)

    monkeypatch.setattr(files.os, "stat", lambda p: small(real_stat(p)))
    monkeypatch.setattr(files.os, "fstat", lambda fd: small(real_fstat(fd)))
    monkeypatch.setattr(files.os, "read", counting_read)
    message = refused(lambda: files.read_limited(path, 10, "test input"), ResourceLimit)
    assert "grew past the limit of 10 bytes" in message and str(path) in message
    assert sum(asked) <= 11


def test_missing_and_forbidden_files_name_the_path(tmp_path):
    missing = tmp_path / "nope.tosa"
    message = refused(lambda: files.read_limited(missing, 10, "TOSA file"))
    assert message == f"{missing}: cannot open TOSA file: No such file or directory"
    if os.geteuid() != 0:  # root reads anything
        locked = tmp_path / "locked"
        locked.write_bytes(b"x")
        locked.chmod(0)
        message = refused(lambda: files.read_limited(locked, 10, "TOSA file"), PermissionDenied)
        assert str(locked) in message and "Permission denied" in message


def test_limit_must_be_a_non_negative_int(tmp_path):
    for limit in (-1, 1.5, True):
        with pytest.raises(InvalidArgument, match="limit must be a non-negative int"):
            files.read_limited(tmp_path, limit, "x")


# -- through Device.compile and the TOSA reader ---------------------------------------------------------------
@pytest.fixture(scope="module")
def cpu():
    with ironaccel.open("cpu") as dev:
        yield dev


@pytest.mark.parametrize("name", ["character device", "FIFO", "directory", "character device (through a link)"])
def test_compile_refuses_special_paths(cpu, special, name):
    message = refused(lambda: cpu.compile(special[name]))
    assert str(special[name]) in message and "program file must be a regular file" in message


def test_compile_refuses_an_oversize_program(cpu, sparse):
    message = refused(lambda: cpu.compile(sparse), ResourceLimit)
    assert f"{sparse}: program file is {DEFAULT_LIMITS.max_file_bytes + 1} bytes" in message


def test_compile_still_reads_a_program_path(cpu, tmp_path):
    exe = cpu.compile(add_program(tmp_path / "add.tosa"))
    (c,) = exe(np.float32([1, 2]), np.float32([3, 4]))
    assert c.tolist() == [4, 6]
    exe.close()


@pytest.mark.parametrize("name", ["character device", "FIFO", "directory", "character device (through a link)"])
def test_reader_refuses_special_paths(special, name):
    for call in (load, read):
        message = refused(lambda call=call: call(special[name]))
        assert str(special[name]) in message and "TOSA file must be a regular file" in message


def test_reader_refuses_an_oversize_file_naming_the_limit(sparse, tmp_path):
    message = refused(lambda: read(sparse), ResourceLimit)
    assert f"over the limit of {DEFAULT_LIMITS.max_file_bytes} bytes (Limits.max_file_bytes)" in message
    program = add_program(tmp_path / "add.tosa")
    size = program.stat().st_size
    assert "Limits.max_file_bytes" in refused(
        lambda: load(program, limits=Limits(max_file_bytes=size - 1)), ResourceLimit
    )
    assert load(program, limits=Limits(max_file_bytes=size)).main.inputs == ("a", "b")


# -- .npy and .npz ------------------------------------------------------------------------------------------
def test_npy_round_trip_keeps_values_and_gives_writable_arrays(tmp_path):
    for array in (
        np.arange(6, dtype=np.float32).reshape(2, 3),
        np.asfortranarray(np.ones((3, 2), np.int16)),
        np.zeros((0, 4), np.int8),
        np.float64(2.5),
        np.array([True, False]),
    ):
        path = tmp_path / "a.npy"
        path.write_bytes(npy_bytes(array))
        got = npy.read_file(path)
        assert got.dtype == array.dtype and got.shape == array.shape and np.array_equal(got, array)
        assert got.flags.writeable


def test_npy_refuses_object_arrays_without_running_their_pickle(tmp_path):
    marker = tmp_path / "ran"
    _Marker.path = str(marker)
    path = tmp_path / "x.npy"
    path.write_bytes(npy_bytes(np.array([_Marker(), 1], dtype=object), allow_pickle=True))
    assert (
        refused(lambda: npy.load(path, DType.FP32)) == f"{path}: object arrays are not accepted "
        "(they hold pickled Python objects)"
    )
    path.write_bytes(pickle.dumps(_Marker()))  # a bare pickle under a .npy name
    assert refused(lambda: npy.load(path, DType.FP32)).startswith(f"{path}: not a .npy file (starts with b'\\x80")
    assert not marker.exists()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            npy_bytes(np.arange(10, dtype=np.int32))[:-3],
            "truncated: shape (10,) of int32 takes 40 bytes of data, the file holds 37",
        ),
        (npy_bytes(np.arange(10, dtype=np.int32))[:40], "malformed .npy header"),
        (npy_bytes(np.arange(3, dtype=np.int32)) + b"tail", "4 bytes follow the 12 bytes of array data"),
        (npy_bytes(np.zeros(2, dtype=[("a", "<i4")])), "structured arrays are not accepted"),
        (npy_bytes(np.array(["ab"])), "holds <U2 values; only numeric arrays are accepted"),
        (b"PK\x03\x04 not an npy", "not a .npy file (starts with b'PK\\x03\\x04 not'"),
        (b"\x93NUMPY\x03\x00" + bytes(8), ".npy format version 3.0 is not accepted"),
        (raw_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }"), "shape (-2,) has a negative"),
        (raw_npy(f"{{'descr': '<f4', 'fortran_order': False, 'shape': (0, {1 << 70}), }}"), "cannot be an array"),
    ],
)
def test_npy_refuses_malformed_files_naming_the_fault(tmp_path, data, message):
    path = tmp_path / "x.npy"
    path.write_bytes(data)
    text = refused(lambda: npy.read_file(path))
    assert text.startswith(f"{path}: ") and message in text


def test_npy_inputs_are_bounded_and_regular(tmp_path, special):
    for path in special.values():
        assert str(path) in refused(lambda path=path: npy.load(path, DType.FP32))
    big = tmp_path / "big.npy"
    with open(big, "wb") as f:
        f.truncate(npy.MAX_ARRAY_FILE_BYTES + 1)
    assert f"over the limit of {npy.MAX_ARRAY_FILE_BYTES} bytes" in refused(
        lambda: npy.load(big, DType.FP32), ResourceLimit
    )


def _valid_npy_prefixes() -> st.SearchStrategy[bytes]:
    arrays = st.sampled_from([np.arange(5, dtype=np.float32), np.ones((2, 3), np.int8), np.zeros((), np.uint16)])
    return arrays.map(npy_bytes)


def _mutated(data: bytes, cut: int, flips: list[tuple[int, int]]) -> bytes:
    out = bytearray(data[: max(0, len(data) - cut)])
    for position, value in flips:
        if out:
            out[position % len(out)] = value
    return bytes(out)


_headers = st.builds(
    lambda version, text: (
        b"\x93NUMPY" + version + len(text).to_bytes(2 if version == b"\x01\x00" else 4, "little") + text
    ),
    st.sampled_from([b"\x01\x00", b"\x02\x00"]),
    st.one_of(
        st.binary(max_size=80),
        st.builds(
            lambda descr, fortran, shape: repr({"descr": descr, "fortran_order": fortran, "shape": shape}).encode(),
            st.one_of(
                st.sampled_from(["<f4", "|O", "<V2", "|b1", ">i8", "<U3", "(2,)<i4", "", "<q9"]),
                st.lists(st.tuples(st.text(max_size=3), st.sampled_from(["<i4", "|O"])), max_size=2),
            ),
            st.one_of(st.booleans(), st.integers(0, 2)),
            st.one_of(
                st.lists(st.integers(0, 4), max_size=3).map(tuple),
                st.lists(st.integers(-3, 1 << 62), max_size=4).map(tuple),
                st.integers(),
            ),
        ),
    ),
)
_npy_files = st.one_of(
    st.binary(max_size=200),
    st.builds(
        _mutated,
        _valid_npy_prefixes(),
        st.one_of(st.just(0), st.integers(0, 200)),
        st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 255)), max_size=3),
    ),
    st.builds(
        lambda header, size, fill: header + fill * size,
        _headers,
        st.sampled_from([0, 1, 2, 3, 4, 8, 12, 16, 24, 32, 48, 64]),
        st.sampled_from([b"\0", b"\xff", b"\x7f"]),
    ),
)


@settings(max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=_npy_files)
def test_any_bytes_under_a_npy_name_load_or_are_refused_by_the_project(tmp_path, data):
    path = tmp_path / "fuzz.npy"
    path.write_bytes(data)
    try:
        array = npy.read_file(path)
    except InvalidArgument as exc:
        assert str(exc).startswith(f"{path}: ")
        return
    assert isinstance(array, np.ndarray) and not array.dtype.hasobject and array.dtype.names is None


@settings(max_examples=100, deadline=None, database=None)
@given(
    array=hnp.arrays(
        st.one_of(hnp.boolean_dtypes(), hnp.integer_dtypes(), hnp.floating_dtypes(), hnp.complex_number_dtypes()),
        hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4),
    ),
    fortran=st.booleans(),
)
def test_every_plain_numeric_npy_reads_back_bit_for_bit(array, fortran):
    array = np.asfortranarray(array) if fortran else array
    got = npy.read_array(npy_bytes(array), "x.npy")
    assert got.dtype == array.dtype and got.shape == array.shape
    assert got.tobytes(order="A") == array.tobytes(order="A") and got.flags.writeable


def _zip(path: Path, members: dict[str, bytes], compression: int = zipfile.ZIP_DEFLATED) -> Path:
    with zipfile.ZipFile(path, "w", compression) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def test_npz_loads_its_arrays_by_name(tmp_path):
    np.savez_compressed(tmp_path / "ref.npz", input=np.ones((2, 2), np.float32), output=np.arange(3))
    arrays = npy.load_npz(tmp_path / "ref.npz")
    assert sorted(arrays) == ["input", "output"] and arrays["output"].tolist() == [0, 1, 2]


def test_npz_is_bounded_and_checked(tmp_path, special):
    for path in special.values():
        assert str(path) in refused(lambda path=path: npy.load_npz(path))
    big = _zip(tmp_path / "big.npz", {"a.npy": npy_bytes(np.zeros(1000, np.float64))})
    assert big.stat().st_size < 1000  # compressed: only the declared size can be over the limit
    message = refused(lambda: npy.load_npz(big, limit=4000), ResourceLimit)
    assert f"{big}: members declare {len(npy_bytes(np.zeros(1000, np.float64)))} bytes" in message
    many = _zip(tmp_path / "many.npz", {f"m{i}.npy": b"" for i in range(npy.MAX_NPZ_MEMBERS + 1)}, zipfile.ZIP_STORED)
    assert f"more than {npy.MAX_NPZ_MEMBERS} members" in refused(lambda: npy.load_npz(many), ResourceLimit)
    other = _zip(tmp_path / "other.npz", {"notes.txt": b"hello"})
    assert "member 'notes.txt' is not a .npy array" in refused(lambda: npy.load_npz(other))
    objects = _zip(tmp_path / "objects.npz", {"o.npy": npy_bytes(np.array([None]), allow_pickle=True)})
    assert f"{objects}[o.npy]: object arrays are not accepted" in refused(lambda: npy.load_npz(objects))
    corrupt = tmp_path / "corrupt.npz"
    corrupt.write_bytes(b"PK\x03\x04" + bytes(40))
    assert f"{corrupt}: not a readable .npz archive" in refused(lambda: npy.load_npz(corrupt))


# -- the command line ---------------------------------------------------------------------------------------
def run_cli(*argv: str, env: dict | None = None) -> tuple[int, str, int]:
    """(exit status, stderr, peak RSS in KiB) of the command run in a child of a child, timed out at 60 s."""
    report = (
        "import resource, subprocess, sys; p = subprocess.run(sys.argv[1:], timeout=60); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(p.returncode)"
    )
    done = subprocess.run(
        [sys.executable, "-c", report, *CLI, *argv],
        capture_output=True,
        text=True,
        timeout=90,
        env={**os.environ, **(env or {})},
    )
    return done.returncode, done.stderr, int(done.stdout.split()[-1])


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """Files a user might give ``run``, and the program to give them to."""
    root = tmp_path_factory.mktemp("hostile")
    program = add_program(root / "add.tosa")
    fifo = root / "pipe.tosa"
    os.mkfifo(fifo)
    link = root / "zero.tosa"
    link.symlink_to("/dev/zero")
    sparse_file = root / "huge.tosa"
    with open(sparse_file, "wb") as f:
        f.truncate(DEFAULT_LIMITS.max_file_bytes + 1)
    (root / "object.npy").write_bytes(npy_bytes(np.array([1.0, None]), allow_pickle=True))
    (root / "truncated.npy").write_bytes(npy_bytes(np.ones(2, np.float32))[:-1])
    (root / "good.npy").write_bytes(npy_bytes(np.ones(2, np.float32)))
    return root, program


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "/dev/zero"], "/dev/zero: program file must be a regular file; this is a character device"),
        (["run", "{root}/pipe.tosa"], "{root}/pipe.tosa: program file must be a regular file; this is a FIFO"),
        (["run", "{root}/zero.tosa"], "{root}/zero.tosa: program file must be a regular file; this is a character"),
        (["run", "{root}/huge.tosa"], "{root}/huge.tosa: program file is 536870913 bytes, over the limit of"),
        (
            ["run", "{root}/add.tosa", "-i", "{root}/object.npy", "-i", "{root}/good.npy"],
            "{root}/object.npy: object arrays are not accepted",
        ),
        (
            ["run", "{root}/add.tosa", "-i", "{root}/good.npy", "-i", "{root}/truncated.npy"],
            "{root}/truncated.npy: truncated: shape (2,) of float32 takes 8 bytes",
        ),
        (["run", "{root}/add.tosa", "-i", "/dev/zero", "-i", "{root}/good.npy"], "/dev/zero: .npy array file must be"),
    ],
)
def test_cli_refuses_in_one_line_with_status_2_quickly_and_small(hostile, argv, message):
    root, _ = hostile
    argv = [a.format(root=root) for a in argv]
    status, stderr, rss_kib = run_cli(*argv, "--device", "cpu")
    assert status == 2
    assert stderr.count("\n") == 1 and stderr.startswith(f"ironaccel run: {message.format(root=root)}"), stderr
    assert rss_kib < 400 * 1024  # the unbounded read of /dev/zero reached 23.7 GB before the host killed it


def test_cli_validate_and_inspect_report_special_files_without_blocking(hostile, capsys):
    root, _ = hostile
    assert finishes(lambda: ironaccel_main(["validate", str(root / "pipe.tosa"), "/dev/zero"])) == 1
    out = capsys.readouterr().out.splitlines()
    fifo = f"{root}/pipe.tosa"
    assert out == [
        f"{fifo}: unreadable: {fifo}: TOSA file must be a regular file; this is a FIFO (named pipe)",
        "/dev/zero: unreadable: /dev/zero: TOSA file must be a regular file; this is a character device",
    ]
    assert finishes(lambda: ironaccel_main(["inspect", str(root / "pipe.tosa")])) == 1
    assert capsys.readouterr().err == (
        f"ironaccel inspect: cannot read {fifo}: TOSA file must be a regular file; this is a FIFO (named pipe)\n"
    )


def test_cli_run_reads_a_test_description_bounded_and_checked(tmp_path, capsys):
    test = tmp_path / "test"
    test.mkdir()
    os.mkfifo(test / "desc.json")
    assert finishes(lambda: ironaccel_main(["run", str(test), "--device", "cpu"])) == 2
    assert capsys.readouterr().err == (
        f"ironaccel run: {test}/desc.json: test description must be a regular file; this is a FIFO (named pipe)\n"
    )
    (test / "desc.json").unlink()
    for desc, fault in (
        ("[1, 2]", "holds a JSON list, not an object"),
        ('{"ifm_name": ["a"]}', "'tosa_file' must name the program file, got None"),
        ('{"tosa_file": "t.tosa", "ifm_name": ["a"], "ifm_file": []}', "1 ifm_name entries but 0 ifm_file entries"),
        ("{", "not JSON"),
    ):
        (test / "desc.json").write_text(desc)
        assert ironaccel_main(["run", str(test), "--device", "cpu"]) == 2
        assert capsys.readouterr().err.startswith(f"ironaccel run: {test}/desc.json: {fault}")


def test_cli_run_still_runs(hostile, tmp_path, capsys):
    root, program = hostile
    out = tmp_path / "c.npy"
    argv = ["run", str(program), "-i", str(root / "good.npy"), "-i", str(root / "good.npy"), "-o", str(out)]
    assert ironaccel_main([*argv, "--device", "cpu"]) == 0
    assert np.load(out).tolist() == [2.0, 2.0]


def test_debug_shows_the_traceback(hostile, monkeypatch, capsys):
    root, _ = hostile
    argv = ["run", str(root / "pipe.tosa"), "--device", "cpu"]
    monkeypatch.delenv("IRONACCEL_DEBUG", raising=False)
    assert finishes(lambda: ironaccel_main(argv)) == 2
    with pytest.raises(InvalidArgument, match="FIFO"):
        finishes(lambda: ironaccel_main(["--debug", *argv]))
    monkeypatch.setenv("IRONACCEL_DEBUG", "1")
    with pytest.raises(InvalidArgument, match="FIFO"):
        finishes(lambda: ironaccel_main(argv))
    monkeypatch.setenv("IRONACCEL_DEBUG", "0")
    assert finishes(lambda: ironaccel_main(argv)) == 2


@pytest.mark.parametrize(
    ("raised", "status", "err"),
    [
        (KeyboardInterrupt(), 130, ""),
        (BrokenPipeError(), 0, ""),
        (
            FileNotFoundError(2, "No such file or directory", "out/x.npy"),
            2,
            "ironaccel run: out/x.npy: No such file or directory\n",
        ),
        (ValueError("first\nsecond"), 2, "ironaccel run: first; second\n"),
    ],
)
def test_main_maps_exceptions_to_exit_statuses(monkeypatch, capsys, raised, status, err):
    from ironaccel.cli import run as run_command

    def fail(args):
        raise raised

    monkeypatch.setattr(run_command, "run", fail)
    monkeypatch.delenv("IRONACCEL_DEBUG", raising=False)
    assert ironaccel_main(["run", "x.tosa"]) == status
    assert capsys.readouterr().err == err


def test_a_bug_is_not_dressed_as_a_user_mistake(monkeypatch):
    from ironaccel.cli import run as run_command

    def fail(args):
        raise RuntimeError("an invariant broke")

    monkeypatch.setattr(run_command, "run", fail)
    with pytest.raises(RuntimeError):
        ironaccel_main(["run", "x.tosa"])


def test_demo_reads_a_model_description_bounded(tmp_path):
    from ironaccel.cli import demo

    meta = tmp_path / "m.json"
    os.mkfifo(meta)
    message = refused(lambda: demo._description(meta))
    assert message == f"{meta}: model description must be a regular file; this is a FIFO (named pipe)"
    meta.unlink()
    meta.write_text(json.dumps([1]))
    assert "holds a JSON list, not an object" in refused(lambda: demo._description(meta))
    meta.write_text(json.dumps({"description": "d"}))
    assert demo._description(meta) == {"description": "d"}
