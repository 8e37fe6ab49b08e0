"""Where generated code looks at its run's control block: between operators, and inside long loops.

A queued run can be cancelled, or run past its deadline, while it is inside native code (the control
block, :mod:`.control`; the C side is the "stopping a run" part of :file:`prelude.h`). The code learns
of it by polling: reading the stop word (about a nanosecond) and, where the run has a deadline, the
clock (``clock_gettime`` through the vDSO, about 25 ns here). A poll must come often enough that a
stop is seen within a small, bounded stretch of work, whatever the shapes, and rarely enough that it
costs nothing measurable. Every shape is a constant of the generated code, so the generator counts the
work of each loop and places the polls:

* A loop nest whose whole work is within one budget has no poll inside: the check after its operator
  is enough (:func:`between`).
* Otherwise the outermost loop one iteration of which is within the budget polls, on one iteration in
  ``budget // work per iteration`` (:func:`plan`): through a countdown (one decrement per iteration,
  the poll itself rarely), or, for the loops of elementwise operators, copies and reductions, which
  hold the hot loops themselves, in blocks of that many iterations (:func:`blocked`).
* Where even one iteration of the innermost loop level that may be split is over the budget, that
  loop is run in chunks of a budget each, with a poll per chunk (:func:`chunked`); the chunk's own
  loop is unchanged, so it vectorises as before.

Budgets are counted in the operator's own units of work, and sized from what this machine does in
them: the vector product kernels (CONV2D, MATMUL) about 50 G multiply-adds per second on one core, so
:data:`PRODUCT_WORK` is about 0.2 ms between polls (2 ms on a machine ten times slower); elementwise
loops, copies, reductions and pools from 0.1 ns per element (a vectorised add) to 5 ns (a function
evaluated in double), so :data:`ELEMENT_WORK` is 25 us to 1.3 ms. One poll per budget is then below
0.1% of the work. Between operators the word alone is read, and the clock only once the operators
since the last clock read add up to a budget, so a program of many small operators pays about a
nanosecond per operator.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

PRODUCT_WORK = 1 << 23  # multiply-adds of the CONV2D / MATMUL kernels between two polls
DEPTHWISE_WORK = 1 << 21  # multiply-adds of DEPTHWISE_CONV2D (vectors over channels, memory-bound)
ELEMENT_WORK = 1 << 18  # element operations of every other loop

COPY_BYTES = 1 << 20  # bytes a plain copy moves between two polls (50 to 100 us here)

COUNTER = "ia_left"  # the countdown a polled loop decrements (declared by declare())


@dataclasses.dataclass(frozen=True)
class Nest:
    """Where a loop nest polls: the loop at ``level`` (0: the outermost) polls once every ``every`` of
    its iterations; at the innermost level the loop is run in chunks of ``every`` iterations, a poll
    per chunk (see :func:`chunked`)."""

    level: int
    every: int
    innermost: bool


def plan(counts: Sequence[int], budget: int, unit: int = 1) -> Nest | None:
    """Where a nest of loops polls (see the module doc). ``counts``: iterations of each loop, outermost
    first (an estimate where a bound varies); ``unit``: work of one iteration of the innermost loop.
    None when the whole nest is within one budget."""
    counts = [max(1, int(n)) for n in counts]
    per = [unit] * len(counts)  # work of one iteration of each loop
    for level in range(len(counts) - 2, -1, -1):
        per[level] = per[level + 1] * counts[level + 1]
    if not counts or per[0] * counts[0] <= budget:
        return None
    for level, work in enumerate(per):
        if work <= budget:
            return Nest(level, max(1, budget // work), level == len(counts) - 1)
    return Nest(len(counts) - 1, 1, True)  # one innermost iteration is over the budget: poll each one


def countdown(iterations: int, per_iteration: int, budget: int | None = None) -> tuple[str, str]:
    """For one loop of ``iterations`` of ``per_iteration`` work each: the countdown's declaration (before
    the loop) and the poll (first in its body) that poll it once per budget (None: ELEMENT_WORK); two
    empty strings when the whole loop is within one budget."""
    budget = ELEMENT_WORK if budget is None else budget
    if iterations * per_iteration <= budget:
        return "", ""
    return declare(), poll(max(1, budget // max(1, per_iteration)))


def declare(name: str = COUNTER) -> str:
    """The declaration of a countdown, before the loops that poll through it."""
    return f"ptrdiff_t {name} = 1;"


def poll(every: int, name: str = COUNTER) -> str:
    """The statement that polls on one call in ``every`` (1: every call)."""
    return "IA_POLL();" if every <= 1 else f"IA_POLL_EVERY({name}, {every});"


def chunked(var: str, start: str, stop: str, chunk: int, step: int = 1) -> tuple[list[str], str]:
    """The head of a loop of ``var`` over [start, stop) by ``step``, run in chunks of ``chunk`` values
    with a poll before each chunk, and the line that closes it. The loop statement comes last in the
    head, so the caller's body follows it as before."""
    c, e = f"{var}_c", f"{var}_e"
    advance = f"{var}++" if step == 1 else f"{var} += {step}"
    head = [
        f"for (ptrdiff_t {c} = {start}; {c} < {stop}; {c} += {chunk}) {{",
        "    IA_POLL();",
        f"    const ptrdiff_t {e} = ({stop}) - {c} < {chunk} ? ({stop}) : {c} + {chunk};",
        f"    for (ptrdiff_t {var} = {c}; {var} < {e}; {advance})",
    ]
    return head, "}"


def outer_loops(counts: Sequence[int], nest: Nest | None, inner: list[str]) -> list[str]:
    """The loops ``for (i<d> = 0; i<d> < counts[d]; ...)`` over the outer dimensions of a nest, around
    ``inner`` (lines of one statement or block, which may read every i<d>), with the poll of ``nest``
    where it is at one of these loops (in blocks of its iterations: see :func:`blocked`)."""

    def level(d: int) -> list[str]:
        if d == len(counts):
            return inner
        rest = level(d + 1)
        if nest is not None and not nest.innermost and nest.level == d:
            return blocked(f"i{d}", 0, counts[d], nest.every, rest)
        return [f"for (ptrdiff_t i{d} = 0; i{d} < {counts[d]}; i{d}++)", *rest]

    return level(0)


def innermost_loop(var: str, count: int, nest: Nest | None) -> tuple[list[str], str]:
    """The head of the innermost loop of a nest (``var`` over [0, count)), in chunks with a poll each
    where ``nest`` polls there, and what closes it after the body (see polls.chunked)."""
    if nest is not None and nest.innermost:
        return chunked(var, "0", str(count), nest.every)
    return [f"for (ptrdiff_t {var} = 0; {var} < {count}; {var}++)"], ""


def blocked(var: str, start: int, stop: int, chunk: int, body: list[str]) -> list[str]:
    """A loop of ``var`` over [start, stop) running ``body`` (lines, a statement or a block), in chunks of
    ``chunk`` iterations with a poll before each, then the iterations left (fewer than a chunk) without.
    For loops that hold loops of their own: each chunk's loop has a constant trip count, so the compiler
    still unrolls and jams it. A countdown there kept GCC from doing so (a reduction over the rows of an
    8192 x 8192 matrix ran 45% slower), and chunks with a variable bound cost it 3%."""
    chunk = _dividing(stop - start, chunk)
    full = start + (stop - start) // chunk * chunk
    lines = [
        f"for (ptrdiff_t {var}_c = {start}; {var}_c < {full}; {var}_c += {chunk}) {{",
        "    IA_POLL();",
        f"    for (ptrdiff_t {var} = {var}_c; {var} < {var}_c + {chunk}; {var}++)",
        *(f"    {line}" for line in body),
        "}",
    ]
    if full < stop:
        lines += [f"for (ptrdiff_t {var} = {full}; {var} < {stop}; {var}++)", *body]
    return lines


def _dividing(count: int, chunk: int) -> int:
    """A chunk of at most ``chunk`` and at least half of it that divides ``count`` (no iterations left
    over, so no second copy of the body), else ``chunk``."""
    for size in range(min(chunk, count), max(1, chunk // 2) - 1, -1):
        if count % size == 0:
            return size
    return chunk


def copy(target: str, source: str, nbytes: int, in_run: bool = False) -> str:
    """A statement copying ``nbytes`` from ``source`` to ``target`` (C pointers): one memcpy up to
    :data:`COPY_BYTES`, else pieces with a poll before each, returning (from an operator's function, or
    with the stop word from ia_run when ``in_run``) when one sees a stop."""
    if nbytes <= COPY_BYTES:
        return f"memcpy({target}, {source}, {nbytes});"
    call = f"ia_copy({target}, {source}, {nbytes}, {COPY_BYTES}, ctl)"
    if in_run:
        return f"{{ const int64_t stop = {call}; if (stop) return (int)stop; }}"
    return f"if ({call}) return;"


def between(work: float) -> str:
    """The statement after an operator that did ``work`` budgets' worth since the last clock read
    (the caller keeps the sum and starts it again after a clock read): the stop word alone below one
    budget, the clock too from one on. It returns the word from ia_run when it is set."""
    read = "ia_stopped" if work < 1.0 else "ia_poll"
    return f"{{ const int64_t stop = {read}(ctl); if (stop) return (int)stop; }}"
