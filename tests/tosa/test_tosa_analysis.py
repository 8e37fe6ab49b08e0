"""Graph analysis and the arena planner: orders, liveness, views, folding, dead code; the memory plan
never lets two simultaneously live tensors share bytes (property-tested on random DAGs)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ironaccel.core.errors import InvalidArgument
from ironaccel.tosa import Block, DType, Op, Operator, Program, ProgramBuilder, Region, Tensor
from ironaccel.tosa.analysis import Interval, analyze, plan_memory, storage_size
from ironaccel.tosa.attributes import ATTRIBUTE_OF
from ironaccel.tosa.errors import ValidationError

F32 = DType.FP32


def block(ops, tensors, inputs, outputs, name="main") -> Block:
    return Block(name, tuple(ops), tuple(tensors), tuple(inputs), tuple(outputs))


def chain(n: int, shape=(64,)) -> Block:
    """x -> ABS -> t0 -> ABS -> t1 ... -> t{n-1} (the graph output)."""
    names = ["x", *(f"t{i}" for i in range(n))]
    ops = [Operator(Op.ABS, (a,), (b,)) for a, b in itertools.pairwise(names)]
    return block(ops, [Tensor(n_, shape, F32) for n_ in names], ["x"], [names[-1]])


def test_chain_order_intervals_and_ping_pong_plan():
    a = analyze(chain(5))
    assert a.order == (0, 1, 2, 3, 4) and a.end == 5 and a.dead == ()
    assert a.intervals["x"] == Interval(-1, 0)
    assert a.intervals["t0"] == Interval(0, 1)
    assert a.intervals["t4"] == Interval(4, 5)  # graph output: to the end
    assert a.producers["t2"] == 2 and a.consumers["t2"] == (3,) and a.use_counts["t2"] == 1
    plan = plan_memory(a)  # t0..t3 planned, x and t4 are caller-bound
    assert set(plan.offsets) == {"t0", "t1", "t2", "t3"}
    assert plan.total_bytes == 256 + 256  # two 256-byte slots, alternating
    assert plan.offsets["t0"] == plan.offsets["t2"] != plan.offsets["t1"] == plan.offsets["t3"]
    with_io = plan_memory(a, alignment=1, include_io=True)
    assert set(with_io.offsets) == {"x", "t0", "t1", "t2", "t3", "t4"} and with_io.total_bytes == 2 * 256


def test_order_is_topological_and_stable():
    ops = [
        Operator(Op.ADD, ("a", "b"), ("c",)),  # needs b, produced below
        Operator(Op.ABS, ("x",), ("a",)),
        Operator(Op.ABS, ("x",), ("b",)),
    ]
    tensors = [Tensor(n, (4,), F32) for n in "xabc"]
    a = analyze(block(ops, tensors, ["x"], ["c"]))
    assert a.order == (1, 2, 0) and a.position(0) == 2
    assert a.intervals["a"] == Interval(0, 2) and a.intervals["c"] == Interval(2, 3)


def test_cycles_and_double_definitions_are_errors():
    tensors = [Tensor(n, (4,), F32) for n in "xab"]
    cyclic = [Operator(Op.ADD, ("x", "b"), ("a",)), Operator(Op.ABS, ("a",), ("b",))]
    with pytest.raises(ValidationError, match="cycle"):
        analyze(block(cyclic, tensors, ["x"], ["b"]))
    twice = [Operator(Op.ABS, ("x",), ("a",)), Operator(Op.NEGATE, ("x",), ("a",))]
    with pytest.raises(ValidationError, match="already produced by operator #0"):
        analyze(block(twice, tensors, ["x"], ["a"]))


def test_views_constants_folding_and_dead_code():
    b = ProgramBuilder()
    x = b.input("x", (2, 6), "fp32")
    h = b.abs(x)
    v1 = b.reshape(h, (3, 4))  # view of h
    v2 = b.identity(v1)  # view of a view: same storage as h
    out = b.reshape(b.exp(v2), (12,))  # a graph output: not a view
    k = b.add(b.const(np.ones((2, 6), np.float32)), b.const(np.ones((2, 6), np.float32)))  # foldable
    b.exp(x)  # dead
    b.output(out, b.reshape(x, (12,)), b.add(h, k))
    main = b.build().main
    a = analyze(main)
    assert a.views == {v1.name: h.name, v2.name: h.name}
    by_op = {i: o.op for i, o in enumerate(main.operators)}
    assert [by_op[i] for i in a.dead] == [Op.EXP]
    assert {by_op[i] for i in a.foldable} == {Op.CONST, Op.CONST_SHAPE, Op.ADD}
    assert k.name in a.folded and k.name not in a.constants and h.name not in a.folded
    plan = plan_memory(a)
    assert plan.offsets[v1.name] == plan.offsets[v2.name] == plan.offsets[h.name]
    assert plan.intervals[h.name].end >= a.intervals[v2.name].end  # the root lives as long as its views
    assert k.name in plan.offsets and k.name not in plan_memory(a, fold=True).offsets
    assert not (a.constants & set(plan.offsets))


def test_variables_keep_their_order_stay_alive_and_out_of_the_arena():
    var = Tensor("v", (4,), F32, np.zeros(4, np.float32), variable=True, variable_name="state")
    ops = [
        Operator(Op.ABS, ("x",), ("y",)),
        Operator(Op.IDENTITY, ("v",), ("old",)),  # read
        Operator(Op.IDENTITY, ("y",), ("v",)),  # write: must stay after the read, keeps ABS alive
        Operator(Op.NEGATE, ("x",), ("unused",)),
    ]
    tensors = [var, *(Tensor(n, (4,), F32) for n in ("x", "y", "old", "unused"))]
    a = analyze(block(ops, tensors, ["x"], ["old"]))
    assert a.position(1) < a.position(2) and a.dead == (3,)
    assert a.variables == {"v"} and a.intervals["v"] == Interval(-1, a.end)
    assert "v" not in a.views.values() and "old" not in a.views
    assert 1 not in a.foldable and 2 not in a.foldable
    assert "v" in plan_memory(a).external


def test_tensors_read_by_nested_graphs_count_as_read_by_the_control_flow_operator():
    then = block([Operator(Op.ADD, ("a", "w"), ("r",))], [Tensor(n, (3,), F32) for n in "ar"], ["a"], ["r"], "then")
    other = block([Operator(Op.IDENTITY, ("a",), ("r",))], [Tensor(n, (3,), F32) for n in "ar"], ["a"], ["r"], "else")
    cond_if = ATTRIBUTE_OF[Op.COND_IF](then_graph="then", else_graph="else")
    ops = [
        Operator(Op.ABS, ("x",), ("w",)),
        Operator(Op.COND_IF, ("c", "x"), ("y",), cond_if),
        Operator(Op.ABS, ("x",), ("dead",)),
    ]
    tensors = [Tensor("c", (1,), DType.BOOL), *(Tensor(n, (3,), F32) for n in ("x", "w", "y", "dead"))]
    main = block(ops, tensors, ["c", "x"], ["y"])
    program = Program((Region("main", (main,)), Region("then", (then,)), Region("else", (other,))))
    a = analyze(main, program)
    assert a.intervals["w"] == Interval(0, 1) and a.consumers["w"] == (1,) and a.dead == (2,)
    blind = analyze(main)  # without the program the graphs' reads are unknown
    assert blind.intervals["w"] == Interval(0, 0) and blind.dead == (0, 2)
    inner = analyze(then, program)
    assert inner.captures == {"w"} and "w" in plan_memory(inner).external


def test_sizes_alignment_and_unknown_shapes():
    a = analyze(chain(3, shape=(3,)))
    plan = plan_memory(a, alignment=1)
    assert plan.sizes["t0"] == storage_size(Tensor("t", (3,), F32)) == 12
    custom = plan_memory(a, alignment=64, sizes=lambda t: 100)
    assert all(o % 64 == 0 for o in custom.offsets.values()) and custom.total_bytes == 128 + 100
    ops = [Operator(Op.ABS, ("x",), ("y",)), Operator(Op.ABS, ("y",), ("z",))]
    dynamic = block(ops, [Tensor(n, (-1,), F32) for n in "xyz"], ["x"], ["z"])
    with pytest.raises(InvalidArgument, match="no static shape"):
        plan_memory(analyze(dynamic))
    with pytest.raises(InvalidArgument, match="alignment"):
        plan_memory(a, alignment=0)


def test_builder_program_plan_is_smaller_than_the_sum():
    b = ProgramBuilder()
    x = b.input("x", (1, 16, 16, 8), "fp32")
    y = x
    for _ in range(6):
        y = b.clamp(b.conv2d(y, np.ones((8, 3, 3, 8), np.float32), pad=(1, 1, 1, 1)), 0.0, 6.0)
    b.output(y)
    a = analyze(b.build().main)
    plan = plan_memory(a)
    assert len(plan.offsets) == 11 and plan.total_bytes == 2 * 8192  # ping-pong between two buffers
    assert sum(plan.sizes.values()) == 11 * 8192


# -- properties on random DAGs -------------------------------------------------------------------------
@st.composite
def dags(draw) -> Block:
    """Random blocks of ABS / ADD / RESHAPE / IDENTITY / CONST over tensors of random sizes, operators in
    a random order (not necessarily topological), random graph outputs."""
    n_inputs = draw(st.integers(1, 3))
    tensors = {f"in{i}": Tensor(f"in{i}", (draw(st.integers(1, 300)),), F32) for i in range(n_inputs)}
    ops = []
    for i in range(draw(st.integers(1, 24))):
        kind = draw(st.sampled_from([Op.ABS, Op.ADD, Op.RESHAPE, Op.IDENTITY, Op.CONST]))
        out = f"t{i}"
        if kind is Op.CONST:
            size = draw(st.integers(1, 300))
            tensors[out] = Tensor(out, (size,), F32, np.zeros(size, np.float32))
            ops.append(Operator(Op.CONST, (), (out,)))
            continue
        names = sorted(tensors)
        args = [draw(st.sampled_from(names)) for _ in range(2 if kind is Op.ADD else 1)]
        src = tensors[args[0]]
        shape = (1, src.size) if kind is Op.RESHAPE else src.shape
        tensors[out] = Tensor(out, shape, F32)
        ops.append(Operator(kind, tuple(args), (out,)))
    outputs = draw(st.lists(st.sampled_from(sorted(tensors)), min_size=1, max_size=3, unique=True))
    order = draw(st.permutations(range(len(ops))))
    return block([ops[i] for i in order], tensors.values(), [f"in{i}" for i in range(n_inputs)], outputs)


@settings(max_examples=300, deadline=None)
@given(dags(), st.sampled_from([1, 16, 256]), st.booleans(), st.booleans())
def test_plans_of_random_dags_are_sound(blk, alignment, include_io, fold):
    a = analyze(blk)
    pos = {op: p for p, op in enumerate(a.order)}
    assert sorted(a.order) == list(range(len(blk.operators)))
    for i, op in enumerate(blk.operators):  # topological, and liveness covers every use
        for name in op.inputs:
            if name in a.producers:
                assert pos[a.producers[name]] < pos[i]
            assert a.intervals[name].start < pos[i] <= a.intervals[name].end
        assert all(a.intervals[o].start == pos[i] for o in op.outputs)
    assert all(a.intervals[n].end == a.end for n in blk.outputs)
    assert all(a.intervals[n].start == -1 for n in blk.inputs)
    plan = plan_memory(a, alignment, include_io=include_io, fold=fold)
    root = {n: plan.views.get(n, n) for n in plan.offsets}
    for view, src in plan.views.items():  # views alias their source exactly
        assert plan.offsets[view] == plan.offsets[src] and src not in plan.views and plan.sizes[view] == plan.sizes[src]
    assert all(o % alignment == 0 for o in plan.offsets.values())
    for x, y in itertools.combinations(plan.offsets, 2):
        if root[x] != root[y] and a.intervals[x].overlaps(a.intervals[y]):
            (x0, x1), (y0, y1) = plan.range(x), plan.range(y)
            assert x1 <= y0 or y1 <= x0, (x, y, plan.range(x), plan.range(y))
    aligned = sum(-(-plan.sizes[n] // alignment) * alignment for n in plan.offsets if n not in plan.views)
    assert plan.total_bytes <= aligned
    assert not (a.constants & set(plan.offsets))
    if not include_io:
        assert not (set(blk.inputs) | set(blk.outputs)) & set(plan.offsets)


@settings(max_examples=200, deadline=None)
@given(dags())
def test_dead_operators_reach_no_output(blk):
    a = analyze(blk)
    live = set(range(len(blk.operators))) - set(a.dead)
    needed = set(blk.outputs)
    for i in sorted(live, key=a.position, reverse=True):
        needed |= set(blk.operators[i].inputs)
    for i in a.dead:
        assert not set(blk.operators[i].outputs) & needed
    for i in live:
        assert set(blk.operators[i].outputs) & needed


def test_graphs_shared_by_both_branches_at_every_level_are_analysed_once_each():
    # then and else name the same graph at each of 60 levels: 2^60 paths through 60 graphs, which a walk
    # per path would never finish.
    from ironaccel.tosa.analysis import _graph_accesses
    from nested_graphs import step_block as _step

    n = 60
    names = [f"g{i}" for i in range(n)]
    nxt = [names[i + 1] if i + 1 < n else None for i in range(n)]
    blocks = [_step("main", names[0], names[0]), *(_step(names[i], nxt[i], nxt[i]) for i in range(n))]
    program = Program((Region("main", tuple(blocks)),))
    memo: dict = {}
    _graph_accesses(program, names[0], memo)
    assert set(memo) == set(names)  # each graph summarised once
    assert analyze(program.main, program).order
