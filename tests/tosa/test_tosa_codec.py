"""The .tosa codec on its own: IR round trips, constant packing, every refusal and limit, zero-copy reads."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import flatbuffers
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from ironaccel.core.errors import ResourceLimit
from ironaccel.tosa import (
    Block,
    DType,
    Limits,
    Op,
    Operator,
    Program,
    Region,
    Tensor,
    Version,
    load,
    read,
    save,
    write,
)
from ironaccel.tosa.attributes import ATTRIBUTE_OF, ClampAttribute, Conv2dAttribute, NanPropagationMode
from ironaccel.tosa.codec.constants import DataError, pack, unpack
from ironaccel.tosa.codec.writer import _Encoder
from ironaccel.tosa.errors import FormatError, NotTosa10Error
from ironaccel.tosa.schema import ATTRIBUTE_MEMBERS, TABLES
from tosa_fixtures import tosa_programs

MAIN = "regions[0].blocks[0]"


# -- helpers -------------------------------------------------------------------------------------------
def raw_file(blocks: list[dict], version=(1, 0, 0, False), **graph) -> bytes:
    """A flatbuffer from raw schema values, bypassing every IR check (to craft refused files)."""
    builder = flatbuffers.Builder(1024)
    major, minor, patch, draft = version
    values = {
        "version": {"_major": major, "_minor": minor, "_patch": patch, "_draft": draft},
        "regions": [{"name": "main", "blocks": blocks}],
        **graph,
    }
    builder.Finish(_Encoder(builder).table(TABLES["TosaGraph"], values), b"TOSA")
    return bytes(builder.Output())


def raw_block(tensors=(), operators=(), shapes=()) -> dict:
    return {"name": "main", "operators": list(operators), "tensors": list(tensors), "shapes": list(shapes)}


def raw_tensor(name="t", shape=(2, 2), dtype=DType.FP32, data=None, **extra) -> dict:
    return {"name": name, "shape": list(shape), "type": int(dtype), "data": data, **extra}


def raw_op(op: int, inputs=(), outputs=(), attribute=None) -> dict:
    values = {"op": op, "inputs": list(inputs), "outputs": list(outputs)}
    if attribute is not None:
        values["attribute"] = attribute
    return values


V1_0 = Version(1, 0, 0)


def program(*tensors: Tensor, operators=(), inputs=(), outputs=(), version=V1_0) -> Program:
    return Program((Region("main", (Block("main", operators, tensors, inputs, outputs),)),), version)


def refused(data: bytes, error=FormatError, **kwargs) -> str:
    with pytest.raises(error) as info:
        read(data, **kwargs)
    return str(info.value)


# -- schema --------------------------------------------------------------------------------------------
def test_attribute_records_mirror_schema_tables():
    for op, cls in ATTRIBUTE_OF.items():
        spec = TABLES[ATTRIBUTE_MEMBERS[op - 1]]
        assert [f.name for f in dataclasses.fields(cls)] == [f.name for f in spec.fields], cls.__name__
    assert len(ATTRIBUTE_MEMBERS) == max(Op)


# -- IR round trips --------------------------------------------------------------------------------------
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(tosa_programs())
def test_write_then_read_is_identity(prog: Program):
    data = write(prog)
    back = read(data)
    assert back == prog
    assert write(back) == data  # the writer is deterministic


def test_every_dtype_constant_round_trips_bit_exact():
    rng = np.random.default_rng(7)
    tensors = []
    for dtype in DType:
        if not dtype.is_tosa_1_0 or dtype is DType.SHAPE:
            continue
        raw = rng.integers(0, 256, size=5 * 3 * dtype.numpy.itemsize, dtype=np.uint8).tobytes()
        if dtype is DType.INT4:
            values = (np.frombuffer(raw, np.int8)[:15] % 16 - 8).astype(np.int8)
        elif dtype is DType.INT48:
            values = np.frombuffer(raw, np.int64)[:15] >> 16
        elif dtype is DType.BOOL:
            values = np.frombuffer(raw, np.uint8)[:15] % 2 == 1
        else:
            values = np.frombuffer(raw, dtype.numpy)[:15].copy()
        tensors.append(Tensor(f"c_{dtype}", (5, 3), dtype, values.reshape(5, 3)))
    tensors.append(Tensor("s", (4,), DType.SHAPE, np.array([1, -1, 2**62, -(2**63)], np.int64)))
    prog = program(*tensors, operators=[Operator(Op.CONST, (), (t.name,)) for t in tensors])
    assert read(write(prog)) == prog


# -- constants --------------------------------------------------------------------------------------------
def test_int4_packs_two_per_byte_low_nibble_first():
    values = np.array([1, -1, -8, 7, 3], np.int8)
    packed = pack(values, DType.INT4)
    assert packed.tobytes() == bytes([0xF1, 0x78, 0x03])
    assert unpack(packed.tobytes(), DType.INT4, 5).tolist() == values.tolist()


def test_int48_is_six_bytes_sign_extended():
    values = np.array([-1, 2**47 - 1, -(2**47), 5], np.int64)
    packed = pack(values, DType.INT48).tobytes()
    assert packed[:6] == b"\xff" * 6 and packed[18:] == b"\x05\0\0\0\0\0"
    assert unpack(packed, DType.INT48, 4).tolist() == values.tolist()


@pytest.mark.parametrize(
    ("dtype", "values", "message"),
    [
        (DType.INT4, np.array([8], np.int8), "INT4 values"),
        (DType.INT48, np.array([2**47], np.int64), "INT48 values"),
        (DType.FP32, np.array([1.0], np.float64), "expected float32"),
    ],
)
def test_pack_refuses_unrepresentable_values(dtype, values, message):
    with pytest.raises(DataError, match=message):
        pack(values, dtype)


def test_bool_bytes_other_than_0_1_are_refused():
    data = raw_file([raw_block([raw_tensor("b", (2,), DType.BOOL, b"\x01\x02")])])
    assert "BOOL values must be bytes 0 or 1" in refused(data)


# -- versions and 1.1-draft content --------------------------------------------------------------------
@pytest.mark.parametrize("version", [(1, 1, 0, True), (1, 1, 0, False), (2, 0, 0, False), (0, 80, 0, False)])
def test_other_versions_are_not_tosa_1_0(version):
    message = refused(raw_file([raw_block()], version), NotTosa10Error)
    assert "not TOSA 1.0" in message and f"{version[0]}.{version[1]}.{version[2]}" in message


def test_draft_flag_on_1_0_is_accepted_unless_strict():
    data = raw_file([raw_block()], (1, 0, 2, True))
    assert read(data).version == Version(1, 0, 2, True)
    assert "draft" in refused(data, NotTosa10Error, strict=True)


def test_draft_operator_is_named():
    data = raw_file([raw_block(operators=[raw_op(int(Op.MATMUL_T_BLOCK_SCALED))])])
    message = refused(data, NotTosa10Error)
    assert message == (f"{MAIN}.operators[0].op: not TOSA 1.0: operator MATMUL_T_BLOCK_SCALED is a 1.1-draft operator")


def test_draft_attribute_table_on_1_0_operator_is_named():
    data = raw_file([raw_block(operators=[raw_op(int(Op.IDENTITY), attribute=("DimAttribute", {"axis": 1}))])])
    assert "attribute DimAttribute is a 1.1-draft attribute" in refused(data, NotTosa10Error)


@pytest.mark.parametrize("dtype", [DType.FP6E2M3, DType.INT64, DType.MXINT8])
def test_draft_dtype_is_named(dtype):
    message = refused(raw_file([raw_block([raw_tensor(dtype=dtype)])]), NotTosa10Error)
    assert f"{MAIN}.tensors[0].type" in message and dtype.name in message


def test_draft_accumulator_type_is_refused():
    attr = ("Conv2dAttribute", {"acc_type": int(DType.INT64)})
    data = raw_file([raw_block(operators=[raw_op(int(Op.CONV2D), attribute=attr)])])
    assert "INT64" in refused(data, NotTosa10Error)


@pytest.mark.parametrize(
    "extra",
    [{"offset": 16}, {"size": 4}, {"scale_type": int(DType.FP8UE8M0)}, {"block_shape": 32}, {"scale_data": b"x"}],
)
def test_draft_tensor_fields_are_refused(extra):
    message = refused(raw_file([raw_block([raw_tensor(**extra)])]), NotTosa10Error)
    assert "1.1-draft" in message


def test_required_serialization_features_are_refused():
    data = raw_file([raw_block()], compatibility={"features": 2})
    assert "MXFP" in refused(data, NotTosa10Error)


@pytest.mark.parametrize(
    ("block", "message"),
    [
        (raw_block(operators=[raw_op(200)]), "unknown Op code 200"),
        (raw_block([raw_tensor(dtype=99)]), "unknown DType code 99"),
        (raw_block([raw_tensor(dtype=DType.UNKNOWN)]), "element type is UNKNOWN"),
        (raw_block(operators=[raw_op(0)]), "operator code 0"),
        (raw_block(operators=[raw_op(int(Op.MAXIMUM), attribute=("MaximumAttribute", {"nan_mode": 7}))]), "unknown"),
    ],
)
def test_unknown_codes_are_format_errors(block, message):
    with pytest.raises(FormatError) as error:
        read(raw_file([block]))
    assert not isinstance(error.value, NotTosa10Error)
    assert message in str(error.value)


# -- constants in files ---------------------------------------------------------------------------------
def test_constant_length_mismatch_names_the_tensor():
    data = raw_file([raw_block([raw_tensor("w", (2, 2), DType.FP32, bytes(12))])])
    assert refused(data) == f"{MAIN}.tensors[0].data: 12 bytes, expected 16 for fp32[2,2]"


def test_data_padded_to_eight_bytes_is_accepted():
    # tosa-opt (the C++ serializer) pads constant data to a multiple of 8 bytes
    data = raw_file([raw_block([raw_tensor("c", (3,), DType.INT16, b"\x01\0\x02\0\x03\0\0\0")])])
    assert read(data).main.tensors[0].data.tolist() == [1, 2, 3]


def test_const_output_without_data_is_refused():
    block = raw_block([raw_tensor("c", (2,), DType.INT8)], [raw_op(int(Op.CONST), outputs=["c"])])
    assert "constant has 0 bytes, expected 2 for int8[2]" in refused(raw_file([block]))


def test_zero_size_const_output_reads_as_empty_constant():
    block = raw_block([raw_tensor("c", (0, 3), DType.FP16)], [raw_op(int(Op.CONST), outputs=["c"])])
    tensor = read(raw_file([block])).main.tensors[0]
    assert tensor.data is not None and tensor.data.shape == (0, 3)


def test_dims_below_minus_one_read_by_default_refused_when_strict():
    data = raw_file([raw_block([raw_tensor(shape=(4, -3))])])
    assert read(data).main.tensors[0].shape == (4, -3)  # ERROR_IF conformance tests carry such dims
    assert "dims must be >= -1" in refused(data, strict=True)
    assert "dynamic shape" in refused(raw_file([raw_block([raw_tensor(shape=(-1, 2), data=bytes(8))])]))


def test_legacy_shape_typed_tensor_reads_as_shape_value():
    shapes = [{"name": "s2", "rank": 1, "data": bytes(8)}]
    tensors = [raw_tensor("s1", (2,), DType.SHAPE, np.array([3, 4], "<i8").tobytes()), raw_tensor("x")]
    block = raw_block(tensors, [raw_op(int(Op.CONST_SHAPE), outputs=["s1"])], shapes)
    prog = read(raw_file([block]))
    assert [t.name for t in prog.main.tensors] == ["x", "s1", "s2"]
    assert prog.main.tensors[1].data.tolist() == [3, 4]
    assert read(write(prog)) == prog


def test_clamp_bounds_stay_raw_bytes():
    attr = ClampAttribute(b"\0\0\x80\xbf\0\0\0\0", b"\0\0\x80\x3f", NanPropagationMode.IGNORE)
    prog = program(Tensor("x", (1,), DType.FP32), operators=[Operator(Op.CLAMP, ("x",), ("x",), attr)])
    assert read(write(prog)).main.operators[0].attribute == attr


# -- structural faults ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "too small"),
        (b"\x08\0\0\0TOSA", "too small"),
        (b"\x08\0\0\0TOSB" + bytes(8), "file identifier"),
        (b"\x09\0\0\0TOSA" + bytes(8), "aligned"),
        (b"\xf0\0\0\0TOSA" + bytes(8), "outside the file"),
    ],
)
def test_broken_headers(data, message):
    assert message in refused(data)


def test_every_truncation_of_a_valid_file_is_a_format_error():
    data = write(program(Tensor("x", (2,), DType.INT8, np.array([1, 2], np.int8)), outputs=("x",)))
    for end in range(len(data)):
        with pytest.raises(FormatError):
            read(data[:end])


def test_shared_tables_do_not_amplify_work():
    """100k operator offsets all pointing at one operator table: decoded once, read in linear time."""
    b = flatbuffers.Builder(1 << 20)
    enc = _Encoder(b)
    op = enc.table(TABLES["TosaOperator"], raw_op(int(Op.ADD), ["a", "b"], ["c"]))
    count = 100_000
    b.StartVector(4, count, 4)
    for _ in range(count):
        b.PrependUOffsetTRelative(op)
    ops = b.EndVector()
    name = b.CreateString("main")
    b.StartObject(6)
    b.PrependUOffsetTRelativeSlot(0, name, 0)
    b.PrependUOffsetTRelativeSlot(1, ops, 0)
    block = b.EndObject()
    blocks = enc._offsets([block])
    b.StartObject(2)
    b.PrependUOffsetTRelativeSlot(1, blocks, 0)
    region = b.EndObject()
    regions = enc._offsets([region])
    version = enc.table(TABLES["Version"], {"_major": 1, "_minor": 0, "_patch": 0, "_draft": False})
    b.StartObject(4)
    b.PrependUOffsetTRelativeSlot(0, version, 0)
    b.PrependUOffsetTRelativeSlot(1, regions, 0)
    b.Finish(b.EndObject(), b"TOSA")
    start = time.perf_counter()
    prog = read(bytes(b.Output()))
    assert time.perf_counter() - start < 5
    operators = prog.main.operators
    assert len(operators) == count and all(o is operators[0] for o in operators)


# -- limits ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("limits", "block", "message"),
    [
        (Limits(max_rank=2), raw_block([raw_tensor(shape=(1, 2, 3))]), "limit max_rank=2"),
        (Limits(max_tensors_per_block=1), raw_block([raw_tensor("a"), raw_tensor("b")]), "max_tensors_per_block=1"),
        (Limits(max_name_bytes=3), raw_block([raw_tensor("long")]), "max_name_bytes=3"),
        (Limits(max_tensor_bytes=8), raw_block([raw_tensor(data=bytes(16))]), "max_tensor_bytes=8"),
        (Limits(max_operator_inputs=1), raw_block(operators=[raw_op(15, ["a", "b"])]), "max_operator_inputs=1"),
        (Limits(max_shape_length=2), raw_block(shapes=[{"name": "s", "rank": 3}]), "max_shape_length=2"),
        (Limits(max_file_bytes=64), raw_block(), "max_file_bytes=64"),
    ],
)
def test_limits_are_enforced_and_named(limits, block, message):
    assert message in refused(raw_file([block]), limits=limits)


def test_limits_validate_themselves():
    with pytest.raises(ValueError, match="max_file_bytes"):
        Limits(max_file_bytes=3 << 30)
    with pytest.raises(ValueError, match="max_rank"):
        Limits(max_rank=-1)
    assert Limits().replace(max_rank=8).max_rank == 8


def test_load_checks_size_before_reading(tmp_path):
    path = tmp_path / "big.tosa"
    path.write_bytes(b"\0" * 4096)
    with pytest.raises(ResourceLimit, match=r"4096 bytes, over the limit of 100 bytes \(Limits.max_file_bytes\)"):
        load(path, limits=Limits(max_file_bytes=100))


# -- files and copies -----------------------------------------------------------------------------------------
def test_save_load_and_read_path(tmp_path):
    prog = program(Tensor("x", (3,), DType.BF16, np.zeros(3, DType.BF16.numpy)), outputs=("x",))
    save(prog, tmp_path / "p.tosa")
    assert load(tmp_path / "p.tosa") == prog == read(str(tmp_path / "p.tosa"))
    assert list(tmp_path.iterdir()) == [tmp_path / "p.tosa"]


def test_constants_view_immutable_input_and_copy_mutable_input():
    values = np.arange(1000, dtype=np.float32)
    data = write(program(Tensor("w", (1000,), DType.FP32, values)))
    view = read(data).main.tensors[0].data
    assert not view.flags.writeable and np.shares_memory(view, np.frombuffer(data, np.uint8))
    mutable = bytearray(data)
    copied = read(mutable).main.tensors[0].data
    assert not copied.flags.writeable and not np.shares_memory(copied, np.frombuffer(mutable, np.uint8))
    assert np.array_equal(copied, values)


@pytest.mark.parametrize("megabytes", [16, pytest.param(100, marks=pytest.mark.slow)])
def test_large_constant_reads_without_copies(megabytes):
    values = np.ones(megabytes << 18, np.float32)
    data = write(program(Tensor("w", values.shape, DType.FP32, values)))
    start = time.perf_counter()
    tensor = read(data).main.tensors[0]
    assert time.perf_counter() - start < 1.0
    assert np.shares_memory(tensor.data, np.frombuffer(data, np.uint8))


# -- writer refusals ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("prog", "error", "message"),
    [
        (program(version=Version(1, 1, 0)), NotTosa10Error, "cannot write version 1.1.0"),
        (program(operators=[Operator(Op.MATMUL_T, (), ())]), NotTosa10Error, "MATMUL_T is a 1.1-draft operator"),
        (program(Tensor("t", (1,), DType.FP4E2M1)), NotTosa10Error, "FP4E2M1"),
        (program(Tensor("t", (2,), DType.INT4, np.array([1, 9], np.int8))), FormatError, "INT4 values"),
        (program(Tensor("t", (3,), DType.INT8, np.zeros(2, np.int8))), FormatError, "2 values, expected 3"),
        (program(Tensor("t", (2,), DType.INT8, np.zeros(2, np.int16))), FormatError, "expected int8"),
        (program(Tensor("s", (2, 2), DType.SHAPE)), FormatError, "shape (rank,)"),
        (program(Tensor("t", (2**31,), DType.INT8)), FormatError, "not an int32"),
        (
            program(operators=[Operator(Op.CONV2D, (), (), Conv2dAttribute(acc_type=DType.MXINT8))]),
            NotTosa10Error,
            "MXINT8",
        ),
    ],
)
def test_writer_refuses_what_the_reader_would(prog, error, message):
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        write(prog)


def test_surplus_constant_data_is_read_up_to_size_unless_strict():
    # ExecuTorch writes per-channel zero points (OC bytes) for weight_zp tensors declared [1]
    data = raw_file([raw_block([raw_tensor("zp", (1,), DType.INT8, bytes([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]))])])
    assert read(data).main.tensors[0].data.tolist() == [0]
    assert "10 bytes, expected 1 for int8[1]" in refused(data, strict=True)


BUNDLED = sorted((Path(__file__).resolve().parents[2] / "src" / "ironaccel" / "models").glob("*.tosa"))


@pytest.mark.parametrize("path", BUNDLED, ids=[p.stem for p in BUNDLED])
def test_bundled_models_round_trip(path):
    prog = load(path)
    assert prog.version.is_tosa_1_0 and prog.main.operators
    assert read(write(prog)) == prog


def test_empty_constant_with_huge_other_dimensions_is_a_format_error():
    # Found by fuzzing: a zero dimension makes the data 0 bytes, but numpy cannot shape an array whose
    # other dimensions multiply past its index range.
    from ironaccel.tosa.errors import FormatError

    shape = (0, 2**31 - 1, 2**31 - 1, 2**31 - 1)
    block = Block("main", (Operator(Op.CONST, (), ("c",)),), (Tensor("c", shape, DType.FP32),), (), ("c",))
    prog = Program((Region("main", (block,)),))
    with pytest.raises(FormatError, match="too large to represent"):
        read(write(prog))


def test_zero_size_data_of_a_non_constant_reads_as_no_data():
    # Found by fuzzing: a file may carry (padding) bytes for a zero-element tensor no CONST produces; it
    # reads as a tensor without data, which is what the writer then emits, so reading is stable.
    empty = np.zeros((0,), np.int8)
    block = Block(
        "main",
        (Operator(Op.IDENTITY, ("x",), ("y",)),),
        (
            Tensor("x", (0,), DType.INT8, empty),
            Tensor("y", (0,), DType.INT8),
        ),
        ("x",),
        ("y",),
    )
    once = read(write(Program((Region("main", (block,)),))))
    assert once.main.tensor("x").data is None
    assert read(write(once)) == once
