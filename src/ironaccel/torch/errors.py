"""Why a module was not exported: the operators ExecuTorch's TOSA partitioner left outside the program, each
with where the user's code calls it, and the errors for missing packages and failed captures."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from ..core.errors import Unsupported

INSTALL = "pip install 'ironaccel[torch]'"


@dataclasses.dataclass(frozen=True)
class OutsideOperator:
    """One operator of the lowered graph that no TOSA partition took."""

    node: str  # the fx node's name in the lowered graph
    operator: str  # e.g. "aten.sort.default"
    location: str | None  # "file.py:LINE" of the user's code that calls it, when the graph recorded it
    code: str | None  # that line's source
    module: str | None  # the submodule it belongs to, "layer1.0.conv1 (Conv2d)", when not the root
    reason: str | None  # what the partitioner said about it

    def __str__(self) -> str:
        text = self.operator
        text += f" at {self.location}" if self.location else " (no source location recorded)"
        if self.code:
            text += f" `{self.code}`"
        if self.module:
            text += f" in {self.module}"
        return text + (f" (ExecuTorch: {self.reason})" if self.reason else "")


class NotDelegated(Unsupported):
    """The module does not lower to exactly one TOSA program: ``operators`` lists what stayed outside."""

    def __init__(self, what: str, profile: str, operators: Sequence[OutsideOperator], partitions: int, device: Any):
        self.operators = tuple(operators)
        self.partitions = partitions
        if partitions == 0:
            head = f"{what} has no part that lowers to TOSA ({profile})"
        elif partitions == 1:
            head = f"{what} does not lower to TOSA whole ({profile})"
        else:
            head = f"{what} lowers to {partitions} TOSA programs, not one ({profile})"
        count = len(self.operators)
        lines = [f"{head}, {count} operator(s) stay outside" if count else f"{head}."]
        lines += [f"  {op}" for op in self.operators]
        where = f"{device.name} ({device.info.name})" if device is not None else "an IronAccel device"
        lines.append(
            f"IronAccel runs a module as one TOSA program on {where} or not at all: these operators could run only "
            "in PyTorch on the host CPU; move them out of the module (before or after it) or replace them"
        )
        super().__init__("\n".join(lines))


class CaptureFailed(Unsupported):
    """torch.export or ExecuTorch's lowering failed on the module; the cause is chained."""


def require_torch() -> Any:
    """The torch module, or Unsupported naming the install when torch or ExecuTorch is missing."""
    try:
        import torch
        from executorch import exir  # noqa: F401  (its top level is a namespace package: any folder passes)
    except ImportError as exc:
        raise Unsupported(f"exporting from PyTorch needs torch and executorch ({exc}): {INSTALL}") from None
    return torch


__all__ = ["CaptureFailed", "NotDelegated", "OutsideOperator", "require_torch"]
