"""ONNX's front door: an ONNX model converted to one TOSA 1.0 program by torch-mlir's ONNX importer and
tosa-opt (ADR 0046).

``ironaccel.onnx.export(path_or_model, shapes=None) -> tosa.Program``, which ``Device.compile`` takes; the
program's inputs and outputs carry the ONNX graph's names and shapes. The command line's ``ironaccel export
model.onnx -o model.tosa`` writes one to a file.

The tools live in a virtual environment of their own (``make onnx-env`` builds ``.venv-onnx``;
``$IRONACCEL_ONNX_ENV`` names another) and run as subprocesses: importing this package imports none of
torch-mlir, onnx or onnxruntime, and ``import ironaccel`` never imports this package. A failure names its
stage and, where the tool says it, the operator it failed on (:class:`ConversionFailed`).
"""

from .environment import Tools, available, find_tools
from .errors import STAGES, ConversionFailed, OnnxEnvironmentMissing
from .export import export

__all__ = ["STAGES", "ConversionFailed", "OnnxEnvironmentMissing", "Tools", "available", "export", "find_tools"]
