"""Exports kept in this process, so that compiling the same module again skips ExecuTorch's lowering.

The key is a digest of what decides the program: the captured graph's code, every parameter's, buffer's
and constant's name, dtype, shape and values (a module trained further is a new program), the example
inputs' shapes and dtypes (and, for int8, the calibration values, which decide the scales), the input
names, the quantize mode and the module's class (which the description names). torch.export's capture
still runs on each call, since the key is computed from it; the lowering it saves is most of an export's
time.
"""

from __future__ import annotations

import collections
import hashlib
import threading
from collections.abc import Sequence
from typing import Any, NamedTuple

from .errors import require_torch
from .export import TosaExport, eval_mode, example_tuple, export_captured
from .lower import capture

MAX_ENTRIES = 8  # each holds a program's bytes, constants included

_lock = threading.Lock()
_entries: collections.OrderedDict[str, TosaExport] = collections.OrderedDict()
_counts = {"hits": 0, "misses": 0}


class CacheInfo(NamedTuple):
    hits: int
    misses: int  # exports lowered (ExecuTorch ran)
    size: int
    max_size: int


def cached_export(
    module: Any,
    example_inputs: Any,
    quantize: str | None = None,
    *,
    names: Sequence[str] | None = None,
    device: Any = None,
) -> TosaExport:
    """``export(module, example_inputs, quantize, names=names)``, from this process's cache when the same
    graph with the same weights was exported before (the least recently used of ``MAX_ENTRIES`` goes)."""
    torch = require_torch()
    inputs = example_tuple(example_inputs)
    with eval_mode(module), torch.no_grad():
        captured = capture(module, inputs)
    key = export_key(captured, inputs, quantize, names, type(module).__qualname__)
    with _lock:
        found = _entries.get(key)
        if found is not None:
            _entries.move_to_end(key)
            _counts["hits"] += 1
            return found
    made = export_captured(module, captured, inputs, quantize, names, None, None, device)
    with _lock:
        _counts["misses"] += 1
        _entries[key] = made
        while len(_entries) > MAX_ENTRIES:
            _entries.popitem(last=False)
    return made


def export_key(
    captured: Any, inputs: Sequence[Any], quantize: str | None, names: Sequence[str] | None, label: str = ""
) -> str:
    """The digest that tells one export from another (see the module's docstring); ``label`` (the module's
    class, which the metadata's description names) is part of it."""
    digest = hashlib.sha256()

    def add(*parts: Any) -> None:
        for part in parts:
            data = part if isinstance(part, bytes) else repr(part).encode()
            digest.update(len(data).to_bytes(8, "little") + data)

    add(label, quantize, None if names is None else tuple(names), captured.graph_module.code)
    state = {**captured.state_dict, **captured.constants}
    for name in sorted(state):
        value = state[name]
        if hasattr(value, "detach"):
            add(name, str(value.dtype), tuple(value.shape), _tensor_bytes(value))
        else:  # a script object or another constant: its repr is what can be told apart
            add(name, value)
    for tensor in inputs:
        add(str(tensor.dtype), tuple(tensor.shape))
        if quantize is not None:  # the calibration data: it decides the scales
            add(_tensor_bytes(tensor))
    return digest.hexdigest()


def _tensor_bytes(tensor: Any) -> bytes:
    import torch

    flat = tensor.detach().to("cpu").contiguous().reshape(-1)
    return flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""


def export_cache_info() -> CacheInfo:
    with _lock:
        return CacheInfo(_counts["hits"], _counts["misses"], len(_entries), MAX_ENTRIES)


def clear_export_cache() -> None:
    with _lock:
        _entries.clear()
        _counts.update(hits=0, misses=0)


__all__ = ["CacheInfo", "cached_export", "clear_export_cache", "export_cache_info", "export_key"]
