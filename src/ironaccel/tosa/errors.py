"""Errors of the TOSA layer: unreadable files, invalid programs, programs a backend cannot run."""

from __future__ import annotations

from ..core.errors import Incompatible, InvalidArgument, Unsupported


class FormatError(InvalidArgument):
    """The bytes are not a well-formed TOSA 1.0 flatbuffer. ``where`` locates the fault in the file
    (for example ``regions[0].blocks[1].tensors[7].shape``)."""

    def __init__(self, message: str, where: str = "") -> None:
        self.where = where
        super().__init__(f"{where}: {message}" if where else message)


class NotTosa10Error(FormatError, Incompatible):
    """The file is readable but uses a version, operator or type that TOSA 1.0 does not have."""


class ValidationError(InvalidArgument):
    """The program breaks a rule of the specification (an ERROR_IF, a profile or level rule).

    ``unpredictable`` is True when the rule is a REQUIRE condition: the specification then leaves the
    result unpredictable rather than making the program an error. ``level`` marks a LEVEL_CHECK (a
    limit of the target's level, such as MAX_RANK); the specification makes those unpredictable too,
    and loaders refuse them as errors, as the reference model does.
    """

    def __init__(
        self,
        rule: str,
        *,
        op_index: int | None = None,
        op: str | None = None,
        tensor: str | None = None,
        block: str | None = None,
        unpredictable: bool = False,
        level: bool = False,
    ) -> None:
        self.rule = rule
        self.level = level
        self.op_index = op_index
        self.op = op
        self.tensor = tensor
        self.block = block
        self.unpredictable = unpredictable
        where = []
        if block:
            where.append(f"block {block!r}")
        if op_index is not None:
            where.append(f"operator #{op_index}")
        if op:
            where.append(op)
        if tensor:
            where.append(f"tensor {tensor!r}")
        prefix = " ".join(where)
        kind = "unpredictable" if unpredictable else "invalid"
        super().__init__(f"{prefix}: {kind}: {rule}" if prefix else f"{kind}: {rule}")


class LoweringError(Unsupported):
    """A valid program uses something the target backend does not support (named in the message)."""
