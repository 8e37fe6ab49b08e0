"""Where a run's bound ranges can stand in for the arena's input and output places, so that no copy moves
them in or out; the ranges in host memory are copied in and out whatever the others do.

The planner gives the graph's inputs and outputs bytes no other tensor shares (``exclusive_io``), so every
arena place inside an input's or an output's range belongs to that tensor or to a view of it. Pointing
those places at the caller's memory changes no other tensor. :func:`direct_addresses` does so when it is
safe, and otherwise returns None; the run then copies.

It is not safe, and the run copies, when:

* a range is not bound whole (every input and output bound, its length the tensor's bytes);
* an output is a constant (no command writes it: the run copies it out);
* an address is not aligned to the arena's alignment (the kernels' vector loads and cuBLASLt's algorithm,
  chosen at load, assume it);
* two of the program's input and output places share bytes (an output that is a view of an input);
* a bound output overlaps another bound range (the kernels would read what they have begun to write).
  Inputs may overlap each other, as they are only read;

A range in host memory (a HOST or SHARED buffer, pinned and mapped) never stands in, and the others still
may: kernels would reach it across the bus on every access, and most read an input many times (a GEMV reads
x once per block of rows, a product its operands once per tile), so one copy of it into device memory costs
less than reading it in place, while weights bound from device memory are read where they are.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ...runtime.accelerator import BoundRange
from ...tosa.arena import Place
from .plan import ALIGNMENT, Plan


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[0] + b[1] and b[0] < a[0] + a[1]


def direct_addresses(
    plan: Plan, ranges: Sequence[BoundRange], loaded: Callable[[Place], int]
) -> tuple[Callable[[Place], int], frozenset[int]] | None:
    """Each place's address with the bound ranges of device memory in place of the inputs' and outputs'
    bytes, every other place where ``loaded`` (the program's own addresses) puts it, and the slots bound in
    place (the run copies the others); None where the run must copy every range (module doc)."""
    places = (*plan.inputs, *plan.outputs)
    if any(p.buffer != "arena" for p in places):  # an output that is a constant: only a copy writes it
        return None
    bound: dict[int, int] = {}
    for r in ranges:
        if r.slot >= len(places) or r.length != places[r.slot].size or r.slot in bound:
            return None
        address = r.native.device + r.offset
        if address % ALIGNMENT:
            return None
        bound[r.slot] = address
    if len(bound) != len(places):
        return None
    spans = [(p.offset, p.size) for p in places]
    if any(_overlap(spans[i], spans[j]) for i in range(len(spans)) for j in range(i)):
        return None
    held = [(bound[slot], places[slot].size) for slot in range(len(places))]
    for k in range(len(plan.inputs), len(places)):
        if any(j != k and _overlap(held[k], held[j]) for j in range(len(held))):
            return None
    in_place = frozenset(r.slot for r in ranges if not r.native.host)
    if not in_place:
        return None
    regions = [(p.offset, p.offset + p.size, bound[slot]) for slot, p in enumerate(places) if slot in in_place]

    def address(place: Place) -> int:
        if place.buffer == "arena":
            for start, end, base in regions:
                if start <= place.offset < end:
                    return base + place.offset - start
        return loaded(place)

    return address, in_place


__all__ = ["direct_addresses"]
