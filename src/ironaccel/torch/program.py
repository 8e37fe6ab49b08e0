"""Renaming a TOSA program's inputs and outputs: ExecuTorch names them after its graph's nodes
(``quantized_decomposed_quantize_per_tensor_default``, ``tosa_reshape_default``); an export names them
as the module's caller knows them."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ..tosa.ir import Block, Program


def rename_io(program: Program, inputs: Sequence[str], outputs: Sequence[str]) -> Program:
    """``program`` with its main block's inputs and outputs called ``inputs`` and ``outputs`` (in order);
    another tensor of that block already called so is renamed out of the way. ``program`` itself when
    every name already matches."""
    main = program.main
    if len(inputs) != len(main.inputs) or len(outputs) != len(main.outputs):
        raise ValueError(
            f"{len(inputs)} input and {len(outputs)} output names for a program of "
            f"{len(main.inputs)} inputs and {len(main.outputs)} outputs"
        )
    mapping = dict(zip(main.inputs, inputs, strict=True))
    for old, new in zip(main.outputs, outputs, strict=True):
        if mapping.setdefault(old, new) != new:  # one tensor both an input and an output
            raise ValueError(f"tensor {old!r} is both input and output of the program; it cannot take two names")
    if len(set(mapping.values())) != len(mapping):
        raise ValueError(f"the names {[*inputs, *outputs]} are not distinct")
    if all(old == new for old, new in mapping.items()):
        return program
    taken = set(mapping.values()) | {t.name for t in main.tensors}
    for tensor in main.tensors:
        if tensor.name not in mapping and tensor.name in mapping.values():
            fresh = tensor.name
            while fresh in taken:
                fresh += "_"
            mapping[tensor.name] = fresh
            taken.add(fresh)

    def name(old: str) -> str:
        return mapping.get(old, old)

    block = Block(
        main.name,
        tuple(
            dataclasses.replace(op, inputs=tuple(map(name, op.inputs)), outputs=tuple(map(name, op.outputs)))
            for op in main.operators
        ),
        tuple(dataclasses.replace(t, name=name(t.name)) for t in main.tensors),
        tuple(map(name, main.inputs)),
        tuple(map(name, main.outputs)),
    )
    regions = tuple(
        dataclasses.replace(region, blocks=tuple(block if b is main else b for b in region.blocks))
        for region in program.regions
    )
    return dataclasses.replace(program, regions=regions)


__all__ = ["rename_io"]
