"""PyTorch's front door: a ``torch.nn.Module`` exported to one TOSA 1.0 program with ExecuTorch's Arm TOSA
backend, with the metadata IronAccel reads beside a program (names, shapes, dtypes, int8 quantization).

Two entry points: ``ironaccel.torch.export(module, example_inputs, quantize=None | "int8")`` returns a
:class:`TosaExport` (its bytes, ``program``, ``metadata``, ``save(path)``); ``Device.compile(module,
example_inputs=...)`` exports (kept in this process by graph and weights: :func:`cached_export`) and
compiles. The command line's ``ironaccel export`` writes an export to files.

Needs ``torch`` and ``executorch`` (``pip install 'ironaccel[torch]'``), imported when an export starts:
importing this package imports neither, and ``import ironaccel`` never imports this package.

Layering (ADR 0035): this package makes programs and sits below the runtime, which consumes them; it
imports only core and tosa, and ``Device.compile`` reaches it from inside the function.
"""

from .cache import CacheInfo, cached_export, clear_export_cache, export_cache_info
from .errors import CaptureFailed, NotDelegated, OutsideOperator
from .export import TosaExport, export

__all__ = [
    "CacheInfo",
    "CaptureFailed",
    "NotDelegated",
    "OutsideOperator",
    "TosaExport",
    "cached_export",
    "clear_export_cache",
    "export",
    "export_cache_info",
]
