"""The arrays a run of the interpreter takes from its caller and gives back, and its stop hook.

A run checks its inputs against the main graph's declarations (:func:`check_inputs_in_detail` names
the first that does not match; arrays that match take a faster check in the interpreter itself), accepts
the caller's output buffers where an operator may write a result straight into one
(:func:`destination_slots`), and returns outputs the caller owns (:func:`owned`): never a view of an
input or a constant, never one array twice. :func:`with_deadline` folds a deadline into the check hook
the run calls before every operator.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np

from ...core.errors import DeadlineExpired, InvalidArgument
from ...tosa.ir import Tensor
from .block_plan import BlockPlan

# Called before every operator and loop iteration; raises to abandon the run.
Check = Callable[[], None]


def check_inputs_in_detail(decls: Sequence[Tensor], inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``inputs`` as a list when each is a numpy array of its declaration's storage dtype and shape (a
    dynamic dimension takes any size); InvalidArgument naming the first input that is not."""
    if len(inputs) != len(decls):
        names = ", ".join(repr(t.name) for t in decls)
        raise InvalidArgument(f"the program takes {len(decls)} inputs ({names}), got {len(inputs)}")
    args = []
    for index, (decl, value) in enumerate(zip(decls, inputs, strict=True)):
        if not isinstance(value, np.ndarray):
            raise InvalidArgument(f"input #{index} {decl.name!r}: expected a numpy array, got {type(value).__name__}")
        if value.dtype != decl.dtype.numpy:
            raise InvalidArgument(
                f"input #{index} {decl.name!r}: expected {decl.dtype} (numpy {decl.dtype.numpy}), got {value.dtype}"
            )
        if not decl.unranked and (
            value.ndim != len(decl.shape)
            or any(d >= 0 and d != v for d, v in zip(decl.shape, value.shape, strict=True))
        ):
            raise InvalidArgument(
                f"input #{index} {decl.name!r}: expected shape {list(decl.shape)}, got {list(value.shape)}"
            )
        args.append(value)
    return args


def destination_slots(
    plan: BlockPlan, decls: Sequence[Tensor], destinations: Sequence[np.ndarray | None]
) -> dict[int, np.ndarray] | None:
    """Main-graph output slot -> the caller's buffer for it, for the buffers a kernel may write into: of the
    declared dtype and shape, writeable, for an output an operator produces (not an input, a constant or
    a variable), once. None when there is none."""
    if len(destinations) != len(plan.outputs):
        raise InvalidArgument(f"{len(destinations)} destinations for {len(plan.outputs)} outputs")
    found: dict[int, np.ndarray] = {}
    for slot, decl, dest in zip(plan.outputs, decls, destinations, strict=True):
        if dest is None or not isinstance(slot, int) or slot in found or slot not in plan.produced:
            continue
        if dest.dtype == decl.dtype.numpy and dest.shape == tuple(decl.shape) and dest.flags.writeable:
            found[slot] = dest
    return found or None


def owned(
    outputs: list[np.ndarray], args: Sequence[np.ndarray], destinations: Sequence[np.ndarray | None] | None = None
) -> list[np.ndarray]:
    """Outputs the caller may keep and modify: no views of inputs or constants, no array twice. An output
    written into its destination is the caller's own array already."""
    seen: set[int] = set()
    result = []
    for index, value in enumerate(outputs):
        if destinations and destinations[index] is value and id(value) not in seen:
            seen.add(id(value))
            result.append(value)
            continue
        shared = (
            value.base is not None
            or not value.flags.writeable
            or id(value) in seen
            or any(value is a or np.may_share_memory(value, a) for a in args)
        )
        if shared:
            value = np.array(value, copy=True, order="C")
        seen.add(id(value))
        result.append(value)
    return result


def with_deadline(check: Check | None, deadline: float) -> Check:
    """A check hook that raises DeadlineExpired once :func:`time.monotonic` is past ``deadline``, then calls
    ``check`` (if any)."""

    def hook() -> None:
        if time.monotonic() > deadline:
            raise DeadlineExpired("the program ran past its deadline")
        if check is not None:
            check()

    return hook
