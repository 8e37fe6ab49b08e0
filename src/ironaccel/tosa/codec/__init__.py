"""Read and write TOSA 1.0 flatbuffers (``.tosa`` files) as :class:`~ironaccel.tosa.ir.Program`.

``read`` / ``load`` verify every byte they use and raise only :class:`~ironaccel.tosa.errors.FormatError`
(or its subclass :class:`~ironaccel.tosa.errors.NotTosa10Error`) for bad content, within the
:class:`Limits` given. ``write`` / ``save`` produce files that tosa-tools' reference model runs.
"""

from .limits import DEFAULT_LIMITS, HARD_MAX_FILE_BYTES, Limits
from .reader import load, read
from .writer import save, write

__all__ = ["DEFAULT_LIMITS", "HARD_MAX_FILE_BYTES", "Limits", "load", "read", "save", "write"]
