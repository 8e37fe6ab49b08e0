"""The error a malformed NVFP4 artifact raises: a header field out of its rule, named.

It is both a :class:`~ironaccel.tosa.errors.FormatError` (the bytes or arguments are malformed) and a
:class:`~ironaccel.tosa.errors.LoweringError` (what ``load_program`` raises for anything it cannot
lower), so callers catching either see it.
"""

from __future__ import annotations

from ..tosa.errors import FormatError, LoweringError


class HeaderError(FormatError, LoweringError):
    """A field of an NVFP4 projection (``field``: its name, e.g. ``"k"`` or ``"header.total_bytes"``)
    breaks its rule: out of bounds, inconsistent with another field, or the data is truncated."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(message, f"nvfp4 {field}")
