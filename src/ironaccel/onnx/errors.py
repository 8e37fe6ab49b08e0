"""Why an ONNX model was not converted: the environment holding the tools is missing, or one stage of the
conversion failed on an operator it names."""

from __future__ import annotations

from ..core.errors import Unsupported

SETUP = "make onnx-env (scripts/onnx-env) builds .venv-onnx; IRONACCEL_ONNX_ENV names another environment"

# The stages in the order they run, each with what does the work.
STAGES = {
    "prepare": "onnx and onnxruntime (shape checks, shape arithmetic folded into constants)",
    "import": "torch-mlir's ONNX importer",
    "lower": "torch-mlir-opt (ONNX -> torch -> TOSA MLIR)",
    "serialize": "tosa-opt (TOSA MLIR validation and flatbuffer)",
    "read": "IronAccel's TOSA reader and validator",
}


class OnnxEnvironmentMissing(Unsupported):
    """The environment with torch-mlir, onnx, onnxruntime and tosa-opt was not found or is incomplete."""


class ConversionFailed(Unsupported):
    """One stage of ONNX -> TOSA failed. ``stage`` is a key of :data:`STAGES`; ``operator`` is the operator
    it failed on (``onnx.Transpose``, ``torch.aten.sort``, ``arith.constant``, ``tosa.cast``) when the tool
    names one; ``detail`` is the tool's own message (its first errors)."""

    def __init__(self, model: str, stage: str, detail: str, operator: str | None = None) -> None:
        self.model = model
        self.stage = stage
        self.operator = operator
        self.detail = detail
        what = f" on {operator}" if operator else ""
        super().__init__(f"{model}: the {stage} stage ({STAGES[stage]}) failed{what}:\n{detail}")


__all__ = ["SETUP", "STAGES", "ConversionFailed", "OnnxEnvironmentMissing"]
