"""A backend-independent suite for the execution contract.

``run(factory)`` creates a fresh accelerator per case (``factory()``), runs every case and returns
one :class:`CaseResult` each. Case ids are stable (``memory.shared``, ``buffer.segmented-transfer-bounds``)
so results can be compared across backends and releases. Mandatory cases never skip; a capability
case (cancellation) skips only with a recorded reason. A backend whose capability descriptor admits no
operator (the backend kit's null device) loads no program, so every case that needs one skips with "no
program admitted: " and the refusal; on any other backend a refused program fails the case. Every case
ends by checking that ``live_resources()`` is back to zero.

The cases live by what they exercise (:mod:`.semantic_cases_objects`, :mod:`.semantic_cases_work`,
:mod:`.semantic_cases_arrays`), on what they share (:mod:`.semantic_fixtures`); this module runs them, and
its names stay the suite's entry.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterable

from ..runtime import Accelerator
from . import (  # noqa: F401 - each registers its cases
    semantic_cases_arrays,
    semantic_cases_objects,
    semantic_cases_reset,
    semantic_cases_work,
)
from .semantic_fixtures import (
    CASES,
    IO,
    CaseResult,
    Skip,
    add_program,
    admits_nothing,
    case,
    endless_program,
)
from .semantic_fixtures import Fixture as _Fixture


def run(factory: Callable[[], Accelerator], only: Iterable[str] | None = None) -> list[CaseResult]:
    """Run every case (or those in ``only``) on a fresh accelerator each."""
    results = []
    for name, fn in CASES.items():
        if only is not None and name not in only:
            continue
        acc = factory()
        try:
            fn(acc)
            leaks = {k: v for k, v in acc.live_resources().items() if v}
            if leaks:
                raise AssertionError(f"resources left live: {leaks}")
        except Skip as exc:
            results.append(CaseResult(name, "skip", str(exc)))
        except Exception as exc:  # noqa: BLE001 - each case reports its own failure
            detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            results.append(CaseResult(name, "fail", detail))
        else:
            results.append(CaseResult(name, "pass"))
    return results


__all__ = [
    "CASES",
    "IO",
    "CaseResult",
    "Skip",
    "_Fixture",
    "add_program",
    "admits_nothing",
    "case",
    "endless_program",
    "run",
]
