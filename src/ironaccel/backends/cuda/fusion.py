"""Plan passes over the lowered steps: elementwise chains fused into one kernel, and launches that read
every operand in order given the contiguous variant of their kernel.

Fusion (:func:`fuse`). A launch of a pure elementwise kernel (one whose :class:`~.ops.common.Kernel`
carries an :class:`~.ops.common.Elementwise` record) absorbs the launch that produced one of its operands
when nothing but the consumer can notice that the intermediate is never written:

* the consumer reads the producer's whole result, in order, over the same coalesced extents (no broadcast,
  no reshape between them), and the producer's types agree with the consumer's operand;
* no other step reads those bytes before something overwrites them all, and they are no graph input or
  output (:func:`_sole_readers`);
* the producer's computation moves to the consumer's place in the order, so no step between them writes
  what the producer reads, and the fused kernel's result does not overlap what it reads (except the very
  same place read in order: each thread reads its element before writing it);
* the fused kernel's distinct operands (equal place, strides and type are one) fit the argument block's
  three, and the parts' scalar words its sixteen (each part's ``a.scalars[n]`` renumbered).

A fused kernel evaluates its parts in order, each into a temporary that is rounded exactly as storing
and reloading it would round it (the intermediate type's store then load conversion), so the results are
the unfused plan's bit for bit. An fp32 temporary passes through an IEEE addition of -0 that the compiler
may not contract into a fused multiply-add with the consumer's arithmetic (a NaN goes around it, keeping
its payload), since the unfused kernels never contract across a store either. Chains are absorbed
greedily in step order; a producer whose result is fused keeps its arena bytes, now unwritten.

Contiguous launches (:func:`contiguous_launches`): a pure elementwise launch over one coalesced dimension
whose operands all have stride 1 or 0 runs :func:`.ops.elementwise.contiguous`'s variant of its kernel
(several results per thread, vector loads), chosen here so the general kernel stays as it is.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Sequence

from ...tosa.dtypes import DType
from .ops.common import Copy, Elementwise, Launch, Place, Step
from .ops.elementwise import contiguous, ctype, template
from .prelude import MAX_OPERANDS, SCALARS

_OPERAND = re.compile(r"(?<![A-Za-z0-9_.])x(\d+)(?![A-Za-z0-9_])")
_SCALAR = re.compile(r"\ba\.scalars\[(\d+)\]")
_SIZES = {"long long": 8, "float": 4, "int": 4, "unsigned short": 2, "short": 2, "signed char": 1, "unsigned char": 1}


def _overlap(a: Place, b: Place) -> bool:
    return a.buffer == b.buffer and a.offset < b.offset + b.size and b.offset < a.offset + a.size


def _identity(dims: tuple[int, ...]) -> tuple[int, ...]:
    """The element strides of a tensor laid out in order over ``dims``."""
    strides, step = [], 1
    for extent in reversed(dims):
        strides.append(step)
        step *= extent
    return tuple(reversed(strides))


def _pure(step: Step) -> Elementwise | None:
    """The record of a launch of a pure elementwise kernel whose operands are exactly its reads."""
    if not isinstance(step, Launch) or step.kernel.per_thread != 1:
        return None
    record = step.kernel.elementwise
    if record is None or len(step.reads) != len(record.inputs) or len(step.strides) != len(step.reads):
        return None
    return record


def _written(step: Step) -> tuple[str, int, int] | None:
    """The bytes ``step`` certainly writes in full (buffer, start, end), where that is known."""
    if isinstance(step, Copy):
        return step.dst.buffer, step.dst.offset, step.dst.offset + step.dst.size
    record = _pure(step)
    size = _SIZES.get(ctype(record.output).storage) if record is not None else None
    if record is None or size is None:
        return None
    assert isinstance(step, Launch)
    return step.write.buffer, step.write.offset, step.write.offset + min(step.write.size, step.count * size)


def _covered(spans: list[tuple[int, int]], start: int, end: int) -> bool:
    """Whether the union of ``spans`` holds [start, end)."""
    for low, high in sorted(spans):
        if low > start:
            return False
        start = max(start, high)
        if start >= end:
            return True
    return start >= end


def _sole_readers(steps: Sequence[Step], protected: Sequence[Place]) -> dict[int, int]:
    """Producer index -> the one step that reads the bytes the producer wrote before they are all written
    again, for the pure launches whose result is no graph input or output."""
    found: dict[int, int] = {}
    for p, producer in enumerate(steps):
        if _pure(producer) is None:
            continue
        assert isinstance(producer, Launch)
        place = producer.write
        if any(_overlap(place, q) for q in protected):
            continue
        readers: set[int] = set()
        spans: list[tuple[int, int]] = []
        for s in range(p + 1, len(steps)):
            for read in steps[s].reads:
                if not _overlap(read, place):
                    continue
                low, high = max(read.offset, place.offset), min(read.offset + read.size, place.offset + place.size)
                if not _covered(spans, low, high):
                    readers.add(s)
            written = _written(steps[s])
            if written is not None and written[0] == place.buffer:
                spans.append(written[1:])
                if _covered(spans, place.offset, place.offset + place.size):
                    break
        if len(readers) == 1:
            found[p] = readers.pop()
    return found


@dataclasses.dataclass(eq=False)
class _Part:
    """One launch's expression inside a fused kernel: its arguments are operand keys (place, strides,
    type) or the parts whose results it reads."""

    record: Elementwise
    args: list[tuple[Place, tuple[int, ...], DType] | _Part]
    scalars: tuple[int, ...]

    def walk(self) -> list[_Part]:
        """The parts this one reads, then itself (the order a fused kernel evaluates them in), each once."""
        order: dict[int, _Part] = {}
        for arg in self.args:
            if isinstance(arg, _Part):
                order.update((id(p), p) for p in arg.walk())
        order[id(self)] = self
        return list(order.values())

    def span(self) -> int:
        """The scalar words the expression uses (the launch's own, padded with the zeros it relies on)."""
        used = [int(n) for n in _SCALAR.findall(self.record.expression)]
        return max(used, default=-1) + 1


@dataclasses.dataclass
class _Group:
    """Launches fused into one: ``root`` is the original index of the launch whose result it writes."""

    root: int
    launch: Launch
    part: _Part

    @property
    def writes(self) -> tuple[Place, ...]:
        return (self.launch.write,)

    def operands(self) -> list[tuple[Place, tuple[int, ...], DType]]:
        keys = [arg for p in self.part.walk() for arg in p.args if not isinstance(arg, _Part)]
        return list(dict.fromkeys(keys))

    def fits(self) -> bool:
        if len(self.operands()) > MAX_OPERANDS or sum(p.span() for p in self.part.walk()) > SCALARS:
            return False
        # The result may share bytes with an operand only where each thread reads its element first.
        write, dims = self.launch.write, self.launch.dims
        return all(
            not _overlap(place, write) or (place == write and strides == _identity(dims))
            for place, strides, _ in self.operands()
        )


def _group(index: int, launch: Launch, record: Elementwise) -> _Group:
    args: list = [(launch.reads[k], tuple(launch.strides[k]), record.inputs[k]) for k in range(len(launch.reads))]
    return _Group(index, launch, _Part(record, args, tuple(launch.scalars)))


def _absorb(entries: list[Step | _Group], group: _Group, k: int, readers: dict[int, int], index: int) -> _Group | None:
    """``group`` with the producer of its root's operand ``k`` fused in, or None where that is not safe."""
    launch, record = group.launch, group.part.record
    place = launch.reads[k]
    at = next((j for j in range(len(entries) - 1, -1, -1) if any(_overlap(w, place) for w in entries[j].writes)), None)
    if at is None or not isinstance(entries[at], _Group):
        return None
    producer = entries[at]
    assert isinstance(producer, _Group)
    made = producer.launch
    if readers.get(producer.root) != index or made.write != place or made.dims != launch.dims:
        return None
    if made.count != launch.count or producer.part.record.output is not record.inputs[k]:
        return None
    identity = _identity(launch.dims)
    for j, read in enumerate(launch.reads):  # every read of those bytes is the whole result, in order
        if _overlap(read, place) and (read != place or tuple(launch.strides[j]) != identity):
            return None
    moved = {key[0] for key in producer.operands()}
    if any(_overlap(w, r) for entry in entries[at + 1 :] for w in entry.writes for r in moved):
        return None
    args = [producer.part if arg == (place, identity, record.inputs[k]) else arg for arg in group.part.args]
    fused = _Group(group.root, launch, _Part(record, args, group.part.scalars))
    if not fused.fits():
        return None
    del entries[at]
    return fused


def _rounded(value: str, dtype: DType) -> str:
    """``value`` (a compute-type C value of ``dtype``'s kernels) as storing and reloading it gives it."""
    t = ctype(dtype)
    if t.storage == "float" and t.compute == "float":
        return f"({value} != {value} ? {value} : __fadd_rn({value}, -0.0f))"
    return f"({t.compute})({t.load.format(f'({t.storage})({t.store.format(value)})')})"


def _kernel(group: _Group) -> Launch:
    """The one launch of a fused group."""
    operands = group.operands()
    names: dict[int, str] = {}
    body: list[str] = []
    scalars: list[int] = []
    expression = ""
    parts = group.part.walk()
    for n, part in enumerate(parts):
        args = [f"x{operands.index(a)}" if not isinstance(a, _Part) else names[id(a)] for a in part.args]
        base, span = len(scalars), part.span()
        scalars += list(part.scalars[:span]) + [0] * (span - len(part.scalars[:span]))
        text = _OPERAND.sub(lambda m, args=args: args[int(m.group(1))], part.record.expression)
        text = _SCALAR.sub(lambda m, base=base: f"a.scalars[{int(m.group(1)) + base}]", text)
        if part is group.part:
            expression = text
            continue
        compute = ctype(part.record.output).compute
        body.append(f"const {compute} t{n} = {text};")
        body.append(f"const {compute} v{n} = {_rounded(f't{n}', part.record.output)};")
        names[id(part)] = f"v{n}"
    record = Elementwise(tuple(d for _, _, d in operands), group.part.record.output, expression, tuple(body))
    digest = hashlib.sha256(repr(record).encode()).hexdigest()[:16]
    kernel = template(f"ia_fused{len(parts)}_{digest}", record)
    launch = group.launch
    strides = tuple(s for _, s, _ in operands)
    return Launch(kernel, tuple(p for p, _, _ in operands), launch.write, launch.count, launch.dims, strides,
                  tuple(scalars))  # fmt: skip


def fuse(steps: Sequence[Step], protected: Sequence[Place]) -> list[Step]:
    """``steps`` with elementwise chains fused (see the module's rules); ``protected`` are the places of
    the graph's inputs and outputs, which every run must see written."""
    readers = _sole_readers(steps, protected)
    entries: list[Step | _Group] = []
    for index, step in enumerate(steps):
        record = _pure(step)
        if record is None:
            entries.append(step)
            continue
        assert isinstance(step, Launch)
        group = _group(index, step, record)
        for k in range(len(step.reads)):
            if isinstance(group.part.args[k], _Part):  # the same result read again, already fused
                continue
            group = _absorb(entries, group, k, readers, index) or group
        entries.append(group)
    result: list[Step] = []
    for entry in entries:
        if isinstance(entry, _Group):
            result.append(entry.launch if len(entry.part.walk()) == 1 else _kernel(entry))
        else:
            result.append(entry)
    return result


def contiguous_launches(steps: Sequence[Step]) -> list[Step]:
    """``steps`` with each pure elementwise launch over one dimension whose operands all have stride 1
    or 0 given the contiguous variant of its kernel."""
    result: list[Step] = []
    for step in steps:
        if _pure(step) is not None and isinstance(step, Launch) and len(step.dims) == 1:
            strides = tuple(s[0] for s in step.strides)
            if set(strides) <= {0, 1}:
                step = dataclasses.replace(step, kernel=contiguous(step.kernel, strides))
        result.append(step)
    return result


__all__ = ["contiguous_launches", "fuse"]
