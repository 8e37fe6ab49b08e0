"""The ExecuTorch side of an export: a captured program quantized (PT2E, the Arm TOSA quantizer) when asked,
then lowered by ExecuTorch's Arm TOSA partitioner and backend into delegated TOSA flatbuffers.

Every function here imports torch and ExecuTorch when called, never when this module is imported.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any

from .errors import CaptureFailed

FP_PROFILE = "TOSA-1.0+FP"
INT_PROFILE = "TOSA-1.0+INT"


@dataclasses.dataclass
class Lowered:
    """What ExecuTorch made of a module: the edge program whose graph calls the delegates, and what the
    partitioner said about each node it rejected (by node name)."""

    edge: Any  # executorch.exir.EdgeProgramManager
    reasons: dict[str, str]
    quantized_module: Any = None  # int8: the converted PT2E module, what ExecuTorch computes end to end

    @property
    def program(self) -> Any:
        """The lowered torch.export.ExportedProgram."""
        return self.edge.exported_program()


def capture(module: Any, inputs: Sequence[Any]) -> Any:
    """``module`` captured by torch.export (strict: dynamo traces it, so every node keeps the stack trace
    of the user's code that made it)."""
    import torch

    try:
        return torch.export.export(module, tuple(inputs), strict=True)
    except Exception as exc:  # torch.export raises many types; the cause stays chained
        raise CaptureFailed(f"torch.export could not capture {type(module).__name__}: {_first_line(exc)}") from exc


def lower(captured: Any, inputs: Sequence[Any], profile: str, calibration: Iterable[Sequence[Any]] | None) -> Lowered:
    """Quantize ``captured`` (taking ``inputs``) when ``calibration`` is given, then lower it for ``profile``."""
    import torch
    from executorch.backends.arm.tosa.compile_spec import TosaCompileSpec
    from executorch.exir import to_edge_transform_and_lower

    spec = TosaCompileSpec(profile)
    quantized_module = None
    if calibration is not None:
        quantized_module, captured = _quantize(captured, inputs, spec, calibration)
    partitioner = _partitioner_class()(spec)
    try:
        with torch.no_grad():
            edge = to_edge_transform_and_lower(captured, partitioner=[partitioner])
    except Exception as exc:  # ExecuTorch's passes raise many types; the cause stays chained
        raise CaptureFailed(f"ExecuTorch could not lower the module to {profile}: {_first_line(exc)}") from exc
    return Lowered(edge, partitioner.reasons, quantized_module)


def _quantize(captured: Any, inputs: Sequence[Any], spec: Any, calibration: Iterable[Sequence[Any]]) -> tuple[Any, Any]:
    """Per-tensor symmetric int8 quantization of ``captured`` (PT2E with the Arm TOSA quantizer), calibrated
    on each input tuple of ``calibration``; returns the converted module and its own capture."""
    import torch
    from executorch.backends.arm.quantizer import TOSAQuantizer, get_symmetric_quantization_config
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    quantizer = TOSAQuantizer(spec, use_composable_quantizer=True)
    quantizer.set_global(get_symmetric_quantization_config())
    try:
        prepared = prepare_pt2e(captured.module(check_guards=False), quantizer)
        seen = 0
        with torch.no_grad():
            for batch in calibration:
                prepared(*batch)
                seen += 1
        if not seen:
            raise ValueError("no calibration inputs were given")
        converted = convert_pt2e(prepared)
        return converted, torch.export.export(converted, tuple(inputs))
    except Exception as exc:  # torchao and torch.export raise many types
        raise CaptureFailed(f"int8 quantization failed: {_first_line(exc)}") from exc


_PARTITIONER: Any = None


def _partitioner_class() -> Any:
    """ExecuTorch's TOSAPartitioner, keeping the reasons it gives for each node it rejects (it only logs
    them), so that an export that leaves operators outside can say why."""
    global _PARTITIONER
    if _PARTITIONER is None:
        from executorch.backends.arm.tosa.partitioner import TOSAPartitioner

        class ReasonsKept(TOSAPartitioner):
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, **kwargs)
                self.reasons: dict[str, str] = {}

            def _tag_module(self, module: Any, containing_program: Any, reporter: Any, *args: Any) -> Any:
                try:
                    return super()._tag_module(module, containing_program, reporter, *args)
                finally:
                    rejected = getattr(reporter, "_rejected_nodes", {})
                    self.reasons.update({node.name: str(why) for node, why in rejected.items()})

        _PARTITIONER = ReasonsKept
    return _PARTITIONER


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


__all__ = ["FP_PROFILE", "INT_PROFILE", "Lowered", "capture", "lower"]
