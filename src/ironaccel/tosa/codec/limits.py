"""Resource limits the reader enforces before it trusts (or allocates from) any count in a file.

These are *format* limits: they keep a hostile or corrupt file from costing unbounded memory or time.
They are deliberately looser than the specification's levels (TOSA 1.0 level 8K has MAX_RANK 6; level
"none" has no rank limit), which the validator enforces on the decoded program.
"""

from __future__ import annotations

import dataclasses

MiB = 1 << 20
GiB = 1 << 30

# flatbuffers offsets are 32-bit: no well-formed buffer reaches 2 GiB.
HARD_MAX_FILE_BYTES = 2 * GiB - 1


@dataclasses.dataclass(frozen=True)
class Limits:
    """Upper bounds on what one file may contain. Override per call: ``read(data, limits=Limits(max_rank=8))``
    or ``DEFAULT_LIMITS.replace(max_file_bytes=GiB)``."""

    max_file_bytes: int = 512 * MiB
    max_regions: int = 1024
    max_blocks_per_region: int = 4096
    max_operators_per_block: int = 1 << 20
    max_tensors_per_block: int = 1 << 20  # TosaTensor entries; the same bound applies to TosaShape entries
    max_block_io: int = 1 << 16  # names in a block's inputs / outputs
    max_operator_inputs: int = 1 << 16
    max_operator_outputs: int = 1 << 16
    max_rank: int = 64  # dims of one tensor
    max_shape_length: int = 128  # entries of one shape value (PAD's padding holds 2 x rank)
    max_name_bytes: int = 4096  # every name-like string: tensors, blocks, regions, graphs, variables
    max_location_bytes: int = 1 << 16  # an operator's source location text (MLIR locations can be long)
    max_attribute_values: int = 1024  # int32 entries of one attribute list (pad, stride, perms, ...)
    max_attribute_bytes: int = 1 << 20  # CLAMP min/max, CUSTOM implementation_attrs
    max_tensor_bytes: int = 512 * MiB  # the data of one constant
    max_total_constant_bytes: int = HARD_MAX_FILE_BYTES  # all distinct constant data of the file

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"Limits.{field.name} must be a non-negative int, got {value!r}")
        if self.max_file_bytes > HARD_MAX_FILE_BYTES:
            raise ValueError(f"Limits.max_file_bytes cannot exceed {HARD_MAX_FILE_BYTES} (flatbuffers are < 2 GiB)")

    def replace(self, **changes: int) -> Limits:
        """A copy with some limits changed."""
        return dataclasses.replace(self, **changes)


DEFAULT_LIMITS = Limits()

# Which limit bounds each vector or string of the schema, by (table, field). Vectors and strings not
# listed here fall back to the generic bounds at the bottom.
FIELD_LIMITS: dict[tuple[str, str], str] = {
    ("TosaGraph", "regions"): "max_regions",
    ("TosaRegion", "blocks"): "max_blocks_per_region",
    ("TosaBasicBlock", "operators"): "max_operators_per_block",
    ("TosaBasicBlock", "tensors"): "max_tensors_per_block",
    ("TosaBasicBlock", "shapes"): "max_tensors_per_block",
    ("TosaBasicBlock", "inputs"): "max_block_io",
    ("TosaBasicBlock", "outputs"): "max_block_io",
    ("TosaOperator", "inputs"): "max_operator_inputs",
    ("TosaOperator", "outputs"): "max_operator_outputs",
    ("TosaTensor", "shape"): "max_rank",
    ("TosaTensor", "data"): "max_tensor_bytes",
    ("TosaTensor", "scale_data"): "max_tensor_bytes",
    ("TosaShape", "data"): "max_tensor_bytes",
    ("OpLocation", "text"): "max_location_bytes",
    ("CustomAttribute", "implementation_attrs"): "max_attribute_bytes",
    ("ClampAttribute", "min_val"): "max_attribute_bytes",
    ("ClampAttribute", "max_val"): "max_attribute_bytes",
}
GENERIC_STRING_LIMIT = "max_name_bytes"
GENERIC_INT32_VECTOR_LIMIT = "max_attribute_values"
GENERIC_UBYTE_VECTOR_LIMIT = "max_attribute_bytes"
GENERIC_STRING_VECTOR_LIMIT = "max_block_io"
GENERIC_TABLE_VECTOR_LIMIT = "max_tensors_per_block"
