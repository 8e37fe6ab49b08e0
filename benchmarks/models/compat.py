"""torchvision where its compiled operators do not load, for the zoo's image models and for transformers,
which imports torchvision whenever it is installed."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

_KEEP: list[Any] = []  # the declared schemas live as long as their library object


def import_torchvision() -> Any:
    """torchvision, also where its compiled operators do not load: PyPI's torchvision wheel is built against
    the CUDA torch, and with the CPU torch its meta registrations of ``nms``/``qnms`` fail on the missing
    schemas. The classification models use none of those operators, so their schemas are declared, empty."""
    import importlib.util

    import torch

    if "torchvision" in sys.modules:
        return sys.modules["torchvision"]
    spec = importlib.util.find_spec("torchvision")
    if spec is None or spec.origin is None:
        raise ImportError("torchvision is not installed (make export-env)")
    library = next(Path(spec.origin).parent.glob("_C*.so"), None)
    try:
        if library is not None:
            torch.ops.load_library(str(library))
    except OSError:
        fragment = torch.library.Library("torchvision", "FRAGMENT")
        fragment.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        fragment.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        _KEEP.append(fragment)  # the schemas live as long as their library object
    import torchvision

    return torchvision
