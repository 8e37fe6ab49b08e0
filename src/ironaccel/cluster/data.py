"""Ray Data: a callable class for ``Dataset.map_batches`` that runs a program on every row of a batch.

    ds = ray.data.from_numpy(images)                       # a column "data" of (3, 32, 32) rows
    ds = ds.map_batches(
        IronAccelPredictor,
        fn_constructor_kwargs={"program": program_bytes, "device": "cpu", "input_columns": ["data"]},
        concurrency=4,
        resources={"ironaccel_cpu": 1},                    # placed where the device is, like a Pool replica
        batch_format="numpy",
    )

Each Ray Data actor opens its device and compiles once (as a :class:`~.replica.Replica`: a core of its own on
the CPU, a free device slot of its node on a GPU backend); every row of a batch is one call. A row is
reshaped to the program's input shape (a row of (3, 32, 32) feeds an input of (1, 3, 32, 32)); an output
with a leading dimension of 1 loses it, so a column holds one row per input row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..core.errors import InvalidArgument
from .replica import Replica, check_threads, pack_program


class IronAccelPredictor:
    """``program``: a path (read on the worker: pass bytes on a cluster whose nodes lack the file), bytes or a
    ``tosa.Program``. ``input_columns`` feed the program's inputs in order (default: their names);
    ``output_columns`` name its outputs (default: their names). ``device``, ``threads``, ``per_device``: as
    for a pool's replica."""

    def __init__(
        self,
        program: Any,
        device: str = "cpu",
        input_columns: Sequence[str] | None = None,
        output_columns: Sequence[str] | None = None,
        threads: int | None = 1,
        per_device: int = 1,
    ) -> None:
        payload, metadata = pack_program(program)
        self._replica = Replica(payload, metadata, device, check_threads(threads), per_device)
        exe = self._replica.executable
        self._inputs = exe.inputs
        self._outputs = exe.outputs
        self.input_columns = list(input_columns or [s.name for s in exe.inputs])
        self.output_columns = list(output_columns or [s.name for s in exe.outputs])
        if len(self.input_columns) != len(exe.inputs) or len(self.output_columns) != len(exe.outputs):
            self._replica.close()
            raise InvalidArgument(
                f"the program takes {len(exe.inputs)} input(s) and gives {len(exe.outputs)} output(s); got"
                f" input_columns={self.input_columns} and output_columns={self.output_columns}"
            )

    @property
    def device(self) -> str:
        return self._replica.device_id

    def __call__(self, batch: Mapping[str, Any]) -> dict[str, np.ndarray]:
        missing = [c for c in self.input_columns if c not in batch]
        if missing:
            raise InvalidArgument(f"the batch has no column {missing}; it has {sorted(batch)}")
        columns = [np.asarray(batch[c]) for c in self.input_columns]
        rows = len(columns[0])
        items = [
            tuple(
                np.ascontiguousarray(column[i], dtype=spec.numpy_dtype).reshape(spec.shape)
                for column, spec in zip(columns, self._inputs, strict=True)
            )
            for i in range(rows)
        ]
        results = self._replica.run(items)
        out: dict[str, np.ndarray] = {}
        for k, (name, spec) in enumerate(zip(self.output_columns, self._outputs, strict=True)):
            shape = tuple(spec.shape)
            row = shape[1:] if shape and shape[0] == 1 else shape
            out[name] = np.stack([r[k].reshape(row) for r in results]) if results else np.empty((0, *row))
        return out

    def __del__(self) -> None:
        replica = getattr(self, "_replica", None)
        if replica is not None:
            replica.close()
