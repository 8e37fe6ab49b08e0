"""How a pool's batch travels: stacked when its items share one form, as the list otherwise."""

from __future__ import annotations

import types

import numpy as np

from ironaccel.cluster.batches import Stacked, output_arrays, pack
from ironaccel.cluster.replica import Replica


def _items(count: int) -> list[np.ndarray]:
    return [np.full((2, 3), i, np.float32) for i in range(count)]


def test_arrays_of_one_shape_travel_as_one_array() -> None:
    items = _items(4)
    batch = pack(items)
    assert isinstance(batch, Stacked) and batch.count == 4 and batch.single
    assert len(batch.arrays) == 1 and batch.arrays[0].shape == (4, 2, 3)
    for i, item in enumerate(items):
        np.testing.assert_array_equal(batch.item(i), item)


def test_tuples_and_mappings_keep_their_form() -> None:
    tuples = pack([(np.zeros(3, np.int8) + i, np.ones((2,), np.float32) * i) for i in range(3)])
    assert isinstance(tuples, Stacked) and not tuples.single and tuples.names is None
    a, b = tuples.item(2)
    assert a.dtype == np.int8 and list(a) == [2, 2, 2] and list(b) == [2.0, 2.0]
    named = pack([{"x": np.arange(2) + i, "y": np.zeros(1)} for i in range(2)])
    assert isinstance(named, Stacked) and named.names == ("x", "y")
    item = named.item(1)
    assert set(item) == {"x", "y"} and list(item["x"]) == [1, 2]


def test_mixed_batches_travel_as_lists() -> None:
    assert isinstance(pack([np.zeros(3), np.zeros(4)]), list)
    assert isinstance(pack([np.zeros(3), np.zeros(3, np.float16)]), list)
    assert isinstance(pack([np.zeros(3), (np.zeros(3),)]), list)
    assert isinstance(pack([{"x": np.zeros(1)}, {"y": np.zeros(1)}]), list)
    assert isinstance(pack([[1.0, 2.0], [3.0, 4.0]]), list)  # not arrays: exe converts them itself
    assert pack([]) == []


def test_a_replica_answers_a_stacked_batch_stacked() -> None:
    """The replica's outputs for a stacked batch are the outputs of each item's call, in order."""
    replica = Replica(_add_one_program(), None, "cpu", threads=None)
    try:
        items = [np.full((4,), float(i), np.float32) for i in range(5)]
        answer = replica.run(pack(items))
        assert isinstance(answer, Stacked) and answer.count == 5
        expected = replica.run(items)
        for got, want in zip(answer.outputs(), expected, strict=True):
            np.testing.assert_array_equal(got[0], want[0])
        assert [float(o[0][0]) for o in answer.outputs()] == [1.0, 2.0, 3.0, 4.0, 5.0]
        assert replica.stats()["items"] == 10
    finally:
        replica.close()


def test_output_arrays_have_the_specs_shapes() -> None:
    specs = [types.SimpleNamespace(shape=(2, 3), numpy_dtype=np.dtype(np.int32))]
    (out,) = output_arrays(specs, 7)
    assert out.shape == (7, 2, 3) and out.dtype == np.int32


def _add_one_program() -> bytes:
    from ironaccel.tosa.builder import ProgramBuilder
    from ironaccel.tosa.codec.writer import write

    b = ProgramBuilder()
    x = b.input("x", (4,), "fp32")
    b.output(b.add(x, b.const(np.ones(4, np.float32))))
    return write(b.build())
