"""The working set known at load: known answers on hand-built programs (chains, diamonds, views, COND_IF,
WHILE_LOOP, nesting), programs over their caller's bounds refused at load before anything is allocated,
constant folding held to the estimate, the bundled models, and (property-tested) a CPU interpreter run
never holding more intermediate bytes than the estimate."""

from __future__ import annotations

import contextlib
import sys
import time
import weakref
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ironaccel
from ironaccel.backends.cpu import interpreter
from ironaccel.backends.cpu.accelerator import CpuAccelerator
from ironaccel.core.errors import ResourceLimit
from ironaccel.runtime import TOSA_FORMAT, ArtifactRef
from ironaccel.runtime.types import Quota
from ironaccel.tosa import ATTRIBUTE_OF, Block, DType, Op, Operator, Program, ProgramBuilder, Region, Tensor, write
from ironaccel.tosa.analysis import storage_size
from ironaccel.tosa.codec import read
from ironaccel.tosa.errors import ValidationError
from ironaccel.tosa.target import Target
from ironaccel.tosa.working_set import NO_BOUND, NUMPY_SHARING, estimate

F32 = DType.FP32
KIB = 1024
MODELS = sorted((Path(ironaccel.__file__).parent / "models").glob("*.tosa"))


# -- known answers ----------------------------------------------------------------------------------------
def _chain():
    """x[256] -> ABS a -> TILE x2 t[512] -> ABS u[512] -> REDUCE_SUM s[1] (the output)."""
    b = ProgramBuilder()
    x = b.input("x", (256,), "fp32")
    a = b.abs(x, name="a")
    t = b.tile(a, [2], name="t")
    u = b.abs(t, name="u")
    b.output(b.reduce_sum(u, 0, name="s"))
    return b.build()


def test_a_chain_peaks_where_two_neighbours_are_live():
    ws = estimate(_chain())
    # a + t at TILE: 1 + 2 KiB; t + u at the second ABS: 2 + 2 KiB; u + s at REDUCE_SUM
    assert ws.peak_bytes == 4 * KIB
    assert (ws.tensor, ws.tensor_bytes, ws.block) == ("t", 2 * KIB, "main")
    assert ws.operator == "TILE" and ws.operator_index == 2  # after the CONST_SHAPE of the multiples
    assert ws.constant_bytes == 8 and ws.total_bytes == 4 * KIB + 8  # the multiples, one int64
    assert ws.bounded and ws.variable_bytes == 0
    assert ws.describe() == "4.00 KiB at tensor 't' (TILE, operator #2 of block 'main') + 8 B of constants"


def test_a_diamond_holds_both_sides_until_they_meet():
    b = ProgramBuilder()
    x = b.input("x", (1, 256), "fp32")
    left = b.abs(x, name="left")  # 1 KiB, read again at the end
    right = b.tile(x, [3, 1], name="right")  # 3 KiB
    mid = b.negate(right, name="mid")  # 3 KiB
    b.output(b.add(left, mid, name="out"))  # 3 KiB
    ws = estimate(b.build())
    # at NEGATE: left + right + mid = 7 KiB; at ADD: left + mid + out = 7 KiB (first reached at NEGATE)
    assert ws.peak_bytes == 7 * KIB and ws.operator == "TILE" and ws.tensor == "right"


def test_views_cost_nothing_but_keep_their_root_live():
    b = ProgramBuilder()
    x = b.input("x", (256,), "fp32")
    a = b.abs(x, name="a")
    r = b.reshape(a, (16, 16), name="r")  # a view of a: a lives as long as r
    c = b.negate(b.negate(x, name="b"), name="c")
    b.output(b.add(r, b.reshape(c, (16, 16), name="c2"), name="d"))
    program = b.build()
    ws = estimate(program)
    assert ws.peak_bytes == 3 * KIB  # a (stretched by r) + b + c at the second NEGATE; r and c2 add nothing
    # A backend whose RESHAPE may copy (numpy) counts the copy, and still the root it may view.
    assert estimate(program, sharing=NUMPY_SHARING).peak_bytes == 5 * KIB  # a, r, c, c2, d at ADD


def test_a_reshape_of_a_constant_is_the_constant():
    b = ProgramBuilder()
    x = b.input("x", (64, 64), "fp32")
    w = b.reshape(b.const(np.ones(4096, np.float32), name="w"), (64, 64), name="w2")
    b.output(b.add(x, w, name="y"))
    ws = estimate(b.build())
    assert ws.constant_bytes == 16 * KIB + 16 and ws.peak_bytes == 16 * KIB and ws.tensor == "y"


def test_a_numpy_slice_keeps_its_whole_source_live():
    b = ProgramBuilder()
    x = b.input("x", (1, 256), "fp32")
    big = b.tile(x, [64, 1], name="big")  # 64 KiB
    small = b.slice(big, [0, 0], [1, 256], name="small")  # 1 KiB, a view of all of big on numpy
    b.output(b.add(b.abs(x, name="late"), small, name="y"))
    program = b.build()
    assert estimate(program).peak_bytes == 65 * KIB  # big + small at SLICE
    assert estimate(program, sharing=NUMPY_SHARING).peak_bytes == 66 * KIB  # big + late + y at ADD


def test_variables_are_stored_once_and_copied_at_every_write():
    b = ProgramBuilder()
    x = b.input("x", (256,), "fp32")
    v = b.variable("state", (256,), "fp32")
    b.variable_write(v, b.add(b.variable_read(v, name="r"), x, name="a"))
    b.variable_write(v, b.abs(x, name="again"))
    b.output(b.negate(x, name="y"))
    ws = estimate(b.build())
    assert ws.variable_bytes == KIB and ws.constant_bytes == KIB + 4  # its initial value, NEGATE's zero point
    assert ws.peak_bytes == 2 * KIB  # r + a at ADD; a + the stored copy at the first write
    assert ws.total_bytes == 4 * KIB + 4


def _cond_if():
    b = ProgramBuilder()
    c = b.input("c", (1,), "bool")
    x = b.input("x", (256,), "fp32")
    w = b.abs(x, name="w")

    def then(g, v):
        return g.slice(g.tile(v, [3], name="t"), [0], [256], name="s")  # t: 3 KiB, s: 1 KiB

    def other(g, v):
        return g.abs(v, name="e")  # 1 KiB

    (y,) = b.cond_if(c, [x], then, other, name="y")
    b.output(b.add(w, y, name="z"))
    return b.build()


def test_a_cond_if_costs_what_is_live_around_it_plus_its_larger_branch():
    ws = estimate(_cond_if())
    assert ws.peak_bytes == 1 * KIB + 4 * KIB  # w, then t + s
    assert (ws.tensor, ws.operator, ws.operator_index, ws.block) == ("t", "TILE", 1, "then_0")


def _while_loop():
    b = ProgramBuilder()
    x = b.input("x", (256,), "fp32")

    def cond(g, i, v):
        return g.greater(g.const(np.array([3], np.int32)), i, name="more")

    def body(g, i, v):
        t = g.tile(v, [2], name="t2")  # 2 KiB
        return g.add(i, g.const(np.array([1], np.int32)), name="i1"), g.slice(t, [0], [256], name="v1")

    _, v = b.while_loop([np.array([0], np.int32), x], cond, body)
    b.output(b.abs(v, name="out"))
    return b.build()


def test_a_while_loop_counts_its_carried_values_once_plus_its_larger_graph():
    program = _while_loop()
    ws = estimate(program)
    # carried i, v (4 B + 1 KiB), the previous iteration's while the body computes t2 + i1 + v1
    assert ws.peak_bytes == (4 + KIB) + (2 * KIB + 4 + KIB)
    assert (ws.tensor, ws.block) == ("t2", "body_0")
    (out,) = interpreter.load(program).run([np.arange(256, dtype=np.float32)])
    assert out.tolist() == list(range(256))


def test_nested_graphs_add_up():
    b = ProgramBuilder()
    c = b.input("c", (1,), "bool")
    x = b.input("x", (256,), "fp32")
    a = b.abs(x, name="a")  # 1 KiB, live across the outer COND_IF

    def inner(g, v):
        return g.slice(g.tile(v, [4], name="deep"), [0], [256])  # 4 KiB + 1 KiB

    def outer(g, v):
        keep = g.negate(v, name="keep")  # 1 KiB, live across the inner COND_IF
        (r,) = g.cond_if(c, [v], inner, lambda h, u: h.abs(u))
        return g.add(keep, r)

    (y,) = b.cond_if(c, [x], outer, lambda g, v: g.abs(v))
    b.output(b.add(a, y))
    ws = estimate(b.build())
    assert ws.peak_bytes == KIB + KIB + 5 * KIB and ws.tensor == "deep"


def _nested(depth: int, fan: int = 1) -> Program:
    """``depth`` blocks each running the next ``fan`` times through COND_IF; each holds one KiB across
    its COND_IFs, the innermost makes one KiB."""
    f32, cond_if = (256,), ATTRIBUTE_OF[Op.COND_IF]
    blocks = []
    for level in range(depth + 1):
        name, inner = f"b{level}", f"b{level + 1}"
        tensors = [Tensor("c", (1,), DType.BOOL), Tensor("x", f32, F32), Tensor("a", f32, F32)]
        ops = [Operator(Op.ABS, ("x",), ("a",))]
        if level < depth:
            outs = [f"y{k}" for k in range(fan)]
            tensors += [Tensor(n, f32, F32) for n in outs]
            ops += [Operator(Op.COND_IF, ("c", "c", "a"), (n,), cond_if(inner, inner)) for n in outs]
            result = outs[-1]
        else:
            result = "a"
        blocks.append(Block(name, ops, tensors, ("c", "x"), (result,)))
    return Program(tuple(Region(b.name, (b,)) for b in blocks))


def test_256_levels_of_nesting_and_a_hostile_fan_out_are_summarised_once_each():
    limit = sys.getrecursionlimit()
    ws = estimate(_nested(256))
    assert ws.peak_bytes == 257 * KIB and ws.block == "b256" and sys.getrecursionlimit() == limit
    start = time.perf_counter()
    ws = estimate(_nested(64, fan=2))  # 2^64 paths through the graphs, 65 blocks
    assert time.perf_counter() - start < 2.0
    # a block holds a and its first COND_IF's result across the second one
    assert ws.peak_bytes == 2 * KIB * 64 + KIB


def test_shapes_without_a_size_and_recursion_mean_no_bound():
    tensors = [Tensor("x", (-1, 4), F32), Tensor("y", (-1, 4), F32)]
    dynamic = Program((Region("main", (Block("main", [Operator(Op.ABS, ("x",), ("y",))], tensors, ("x",), ("y",)),)),))
    ws = estimate(dynamic)
    assert not ws.bounded and (ws.unbounded_tensor, ws.unbounded_block) == ("y", "main")
    assert "tensor 'y' of block 'main' has no static shape" in ws.describe()
    looped = _nested(2)
    last = looped.regions[-1].blocks[0]
    cond_if = Operator(Op.COND_IF, ("c", "c", "a"), ("again",), ATTRIBUTE_OF[Op.COND_IF]("b0", "b0"))
    last = Block(
        last.name, (*last.operators, cond_if), (*last.tensors, Tensor("again", (256,), F32)), last.inputs, ("a",)
    )
    recursive = Program((*looped.regions[:-1], Region(last.name, (last,))))
    ws = estimate(recursive)
    assert not ws.bounded and "block 'b0' runs itself" in ws.unbounded_reason
    missing = Program((*looped.regions[:-1],))
    with pytest.raises(ValidationError, match="missing block 'b2'"):
        estimate(missing)


def test_hostile_sizes_are_exact_python_integers():
    tensors = [Tensor("x", (1,), F32), Tensor("y", (1 << 40, 1 << 40, 1 << 20), F32)]
    multiples = Tensor("m", (3,), DType.SHAPE, np.array([1 << 40, 1 << 40, 1 << 20]))
    ops = [Operator(Op.CONST_SHAPE, (), ("m",)), Operator(Op.TILE, ("x", "m"), ("y",))]
    ws = estimate(Program((Region("main", (Block("main", ops, [*tensors, multiples], ("x",), ("y",)),)),)))
    assert ws.peak_bytes == 4 << 100 and ws.describe().startswith("4503599627370496.00 PiB at tensor 'y'")


# -- refused at load ---------------------------------------------------------------------------------------
def _issue_program() -> Program:
    """COND_IF around a TILE of a one-element tensor to 2^28 elements, then REDUCE_SUM: 1 GiB in a branch."""
    b = ProgramBuilder()
    c = b.input("c", (1,), "bool")
    x = b.input("x", (1,), "fp32")

    def then(g, v):
        return g.reduce_sum(g.tile(v, [1 << 28], name="tiled"), 0, name="summed")

    (y,) = b.cond_if(c, [x], then, lambda g, v: g.identity(v))
    b.output(y)
    return b.build()


def _peak_rss() -> int:
    """The process's resident high-water mark (bytes), reset first where the kernel allows."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def test_the_issue_program_is_refused_at_load_by_the_artifact_bound_and_by_the_quota():
    payload = write(_issue_program())
    acc = CpuAccelerator()
    ctx = acc.create_context()
    before = _peak_rss()
    with pytest.raises(ResourceLimit, match=r"'tiled' \(TILE, operator #1 of block 'then_0'\)") as info:
        acc.load_program(ctx, ArtifactRef(payload, 4096))
    assert "1.00 GiB" in str(info.value) and "resident bound is 4096 bytes" in str(info.value)
    small = acc.create_context(Quota(program_bytes=1 << 20))
    with pytest.raises(ResourceLimit, match=r"'tiled'.*the context quota has 1048576 left"):
        acc.load_program(small, ArtifactRef(payload, NO_BOUND))
    assert _peak_rss() - before < 64 << 20
    assert acc.live_resources()["program"] == 0


def test_loading_never_folds_more_than_it_checked():
    # Four TILEs of a constant to 64 MiB each: foldable one by one, 256 MiB in all, while at most one of
    # them is live at a time. Refused on its shapes before anything is folded.
    b = ProgramBuilder()
    x = b.input("x", (1,), "fp32")
    total = x
    for k in range(4):
        tiled = b.tile(b.const(np.array([k + 1.0], np.float32)), [1 << 24], name=f"tiled{k}")
        total = b.add(total, b.reduce_sum(tiled, 0))
    b.output(total)
    program = b.build()
    ws = estimate(program)
    assert ws.peak_bytes < (64 << 20) + 64 and ws.tensor.startswith("tiled")
    acc = CpuAccelerator()
    before = _peak_rss()
    with pytest.raises(ResourceLimit, match="at tensor 'tiled"):
        acc.load_program(acc.create_context(), ArtifactRef(write(program), 4096))
    assert _peak_rss() - before < 32 << 20


def test_constant_folding_is_held_to_the_estimated_peak():
    b = ProgramBuilder()
    x = b.input("x", (1,), "fp32")
    total = x
    for k in range(6):
        tiled = b.tile(b.const(np.array([k + 1.0], np.float32)), [1 << 18], name=f"tiled{k}")  # 1 MiB each
        total = b.add(total, b.reduce_sum(tiled, 0))
    b.output(total)
    program = b.build()
    compiled = interpreter.load(program)
    assert 1 << 20 <= compiled.folded_bytes <= estimate(program).peak_bytes < 2 << 20
    (y,) = compiled.run([np.array([0.5], np.float32)])
    assert y.tolist() == [0.5 + 21 * (1 << 18)]


class _Recording(CpuAccelerator):
    """Records what ``_load`` reports as resident."""

    def _load(self, context, program, limit):
        native, resident = super()._load(context, program, limit)
        self.resident = resident
        return native, resident


def test_the_cpu_charges_its_interpreters_working_set():
    for program in (_cond_if(), _while_loop(), _issue_program()):
        acc = _Recording()
        loaded = acc.load_program(acc.create_context(), ArtifactRef(write(program), NO_BOUND))
        assert acc.resident >= estimate(program, sharing=NUMPY_SHARING).total_bytes
        acc.unload_program(loaded)
    # What a backend reports after load is checked too: here it is above what the shapes alone gave.
    program = _issue_program()
    room = estimate(program).total_bytes + 64
    acc = _Recording()
    with pytest.raises(ResourceLimit, match=r"keeps \d+ bytes resident"):
        acc.load_program(acc.create_context(Quota(program_bytes=room)), ArtifactRef(write(program), NO_BOUND))


def test_a_program_without_a_bound_loads_only_without_one():
    tensors = [Tensor("x", (-1,), F32), Tensor("y", (-1,), F32)]
    block = Block("main", [Operator(Op.ABS, ("x",), ("y",))], tensors, ("x",), ("y",))
    payload = write(Program((Region("main", (block,)),)))
    acc = CpuAccelerator()
    ctx = acc.create_context()
    with pytest.raises(ResourceLimit, match=r"no bound \(tensor 'y' of block 'main' has no static shape"):
        acc.load_program(ctx, ArtifactRef(payload, 1 << 20))
    acc.unload_program(acc.load_program(ctx, ArtifactRef(payload, NO_BOUND)))


def test_the_virtio_device_answers_resource_limit():
    from ironaccel.virtio import DeviceEngine
    from ironaccel.virtio import wire as w
    from virtio_guest import Guest

    guest = Guest(DeviceEngine(CpuAccelerator()).connect())
    ctx = guest.context()
    load = w.LoadProgram.of(ctx, TOSA_FORMAT, Target().encode(), write(_issue_program()), 4096)
    response = guest.call(w.Opcode.LOAD_PROGRAM, load)
    assert w.status_name(response.status) == "RESOURCE_LIMIT"
    guest.session.close()


# -- the bundled models ------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", MODELS, ids=lambda p: p.stem)
def test_the_bundled_models_load_with_the_default_bounds_and_plausible_estimates(path):
    program = read(path.read_bytes())
    ws = estimate(program)
    main = program.main
    produced = {n for op in main.operators for n in op.outputs} - {t.name for t in main.tensors if t.data is not None}
    sizes = [storage_size(main.tensor(n)) for n in produced]
    assert max(sizes) <= ws.peak_bytes <= sum(sizes)  # at least its largest intermediate, at most all of them
    assert ws.constant_bytes == sum(t.data.nbytes for t in main.tensors if t.data is not None)
    assert ws.bounded and main.tensor(ws.tensor) is not None
    with ironaccel.open("cpu") as dev:
        exe = dev.compile(path)
        rng = np.random.default_rng(0)
        inputs = [rng.standard_normal(t.shape).astype(t.dtype.numpy) for t in main.input_tensors]
        assert all(np.isfinite(y).all() for y in exe(*inputs) if y.dtype.kind == "f")


# -- a CPU interpreter run, measured --------------------------------------------------------------------
def _root(array: np.ndarray) -> np.ndarray:
    """The array that owns ``array``'s bytes."""
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array


class _LiveBytes:
    """Wraps the interpreter's kernels (test-only) to measure, after every kernel call of a run, the bytes
    of the distinct arrays kernels made during that run which are still alive. Arrays that existed before
    the run (constants, folded results, the inputs) are not counted."""

    def __init__(self) -> None:
        self.tracked: dict[int, weakref.ref] = {}
        self.before: list[np.ndarray] = []
        self.peak = 0

    def wrap(self, kernel):
        def measured(ctx, inputs):
            results = kernel(ctx, inputs)
            for value in results:
                if isinstance(value, np.ndarray):
                    root = _root(value)
                    known = self.tracked.get(id(root))
                    if known is None or known() is None:
                        self.tracked[id(root)] = weakref.ref(root)
            self.peak = max(self.peak, self.live())
            return results

        return measured

    def live(self) -> int:
        before = {id(a) for a in self.before}
        return sum(r.nbytes for key, ref in self.tracked.items() if (r := ref()) is not None and key not in before)

    @contextlib.contextmanager
    def run(self, owned) -> Iterator[None]:
        """Around a run: what is alive now, and ``owned`` (inputs, constants), is the program's or the
        caller's."""
        self.before = [r for ref in self.tracked.values() if (r := ref()) is not None]
        self.before += [_root(a) for a in owned]
        self.tracked = {id(a): weakref.ref(a) for a in self.before}
        self.peak = 0
        yield


def _measured_run(program, inputs) -> int:
    live = _LiveBytes()
    original = interpreter.kernel_for
    with mock.patch.object(interpreter, "kernel_for", lambda op: live.wrap(original(op))):
        compiled = interpreter.load(program)
    with live.run([*inputs, *(t.data for b in program.blocks() for t in b.tensors if t.data is not None)]):
        compiled.run(inputs)
    return live.peak


# -- random programs --------------------------------------------------------------------------------------
_MAX_ELEMENTS = 2048
_KINDS = ("abs", "negate", "add", "mul", "tile", "slice", "transpose", "reverse", "reshape", "reduce", "concat")
_KINDS += ("identity", "cond_if", "while_loop")


def _grow(data, g: ProgramBuilder, pool: list, depth: int) -> None:
    """Append a few random operators to ``g`` reading values of ``pool`` (rank-2 fp32)."""
    kinds = _KINDS if depth < 2 else _KINDS[:-2]
    for _ in range(data.draw(st.integers(1, 5))):
        kind = data.draw(st.sampled_from(kinds))
        v = data.draw(st.sampled_from(pool))
        a, b = v.shape
        same = [w for w in pool if w.shape == v.shape]
        if kind == "abs":
            out = g.abs(v)
        elif kind == "negate":
            out = g.negate(v)
        elif kind in ("add", "mul"):
            w = data.draw(st.sampled_from(same))
            out = g.add(v, w) if kind == "add" else g.mul(v, w)
        elif kind == "tile":
            k, m = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4))
            if a * b * k * m > _MAX_ELEMENTS:
                k = m = 1
            out = g.tile(v, [k, m])
        elif kind == "slice":
            h, w = data.draw(st.integers(1, a)), data.draw(st.integers(1, b))
            out = g.slice(v, [data.draw(st.integers(0, a - h)), data.draw(st.integers(0, b - w))], [h, w])
        elif kind == "transpose":
            out = g.transpose(v, [1, 0])
        elif kind == "reverse":
            out = g.reverse(v, data.draw(st.integers(0, 1)))
        elif kind == "reshape":
            out = g.reshape(v, data.draw(st.sampled_from([(b, a), (1, a * b), (a * b, 1)])))
        elif kind == "reduce":
            out = g.reduce_sum(v, data.draw(st.integers(0, 1)))
        elif kind == "concat":
            rows = [w for w in pool if w.shape[1] == b]
            out = g.concat([v, data.draw(st.sampled_from(rows))], 0)
        elif kind == "identity":
            out = g.identity(v)
        elif kind == "cond_if":
            flag = g.greater(g.reduce_sum(g.reduce_sum(v, 0), 1), g.const(np.zeros((1, 1), np.float32)))
            (out,) = g.cond_if(flag, [v], _graph(data, depth, v.shape), _graph(data, depth, v.shape))
        else:
            count = g.const(np.array([data.draw(st.integers(0, 3))], np.int32))
            _, out = g.while_loop([np.array([0], np.int32), v], *_loop(data, depth, count))
        if out.rank == 2 and out.dtype is F32 and out.shape[0] * out.shape[1] <= _MAX_ELEMENTS:
            pool.append(out)


def _loop(data, depth: int, count):
    """cond and body of a loop over (i, x) that runs ``count`` times."""

    def cond(inner, i, x):
        return inner.greater(count, i)

    def body(inner, i, x):
        return inner.add(i, inner.const(np.array([1], np.int32))), _graph(data, depth, x.shape)(inner, x)

    return cond, body


def _graph(data, depth: int, shape):
    """A random graph body taking one value and returning one of ``shape``."""

    def build(g, x, *rest):
        pool = [x]
        _grow(data, g, pool, depth + 1)
        return data.draw(st.sampled_from([w for w in pool if w.shape == shape]))

    return build


@st.composite
def _programs(draw):
    data = _Draw(draw)
    b = ProgramBuilder()
    pool = [b.input(f"x{i}", (draw(st.integers(1, 6)), draw(st.integers(1, 6))), "fp32") for i in range(2)]
    _grow(data, b, pool, 0)
    b.output(pool[-1], *draw(st.lists(st.sampled_from(pool), max_size=2)))
    return b.build()


class _Draw:
    def __init__(self, draw) -> None:
        self.draw = draw


_PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_PROPERTY
@given(_programs(), st.integers(0, 2**32 - 1))
def test_a_cpu_interpreter_run_never_holds_more_than_the_estimate(program, seed):
    rng = np.random.default_rng(seed)
    inputs = [rng.standard_normal(t.shape).astype(np.float32) for t in program.main.input_tensors]
    held = _measured_run(program, inputs)
    assert held <= estimate(program, sharing=NUMPY_SHARING).peak_bytes
