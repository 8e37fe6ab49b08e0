"""The operator rules against tosa-tools' conformance tests: every positive test validates, every negative
(ERROR_IF) test is refused.

Operators: the data-layout, scatter/gather, image, type-conversion, data-node and control-flow groups.
The default run checks a few sets (one of them shared with the codec tests, so usually cached); the whole
suite of both profiles is judged by ``-m slow`` in test_tosa_cts_validate.py.

The target enables both profiles, every extension the tests use and level 8K (the level the conformance
suite is written for: its "WrongRank" tests use rank 7 and 8). Both profiles, because the generator's
PRO-FP WHILE_LOOP tests count iterations with int32 GREATER, which the 1.0 type tables only give PRO-INT:
a profile question for the type tables, not for these rules.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from ironaccel.tosa import read
from ironaccel.tosa.errors import ValidationError
from ironaccel.tosa.target import Target
from ironaccel.tosa.validate import validate
from tosa_fixtures import cts_dir, cts_tests

pytestmark = pytest.mark.tosa_tools

OPERATORS = (
    "concat", "pad", "reshape", "reverse", "slice", "tile", "transpose", "gather", "scatter", "resize", "cast",
    "rescale", "const", "identity", "cond_if", "while_loop",
)  # fmt: skip
INT_EXT = ("tosa-ext-int16", "tosa-ext-int4", "tosa-ext-controlflow", "tosa-ext-doubleround", "tosa-ext-inexactround")
FP_EXT = ("tosa-ext-bf16", "tosa-ext-fp8e4m3", "tosa-ext-fp8e5m2", "tosa-ext-controlflow")
DEFAULT_SETS = {
    # The codec tests' default INT set (same cache entry).
    "int-shared": (
        "tosa-pro-int",
        ("slice", "tile", "table", "const", "cond_if", "while_loop"),
        ("tosa-ext-int4", "tosa-ext-int16", "tosa-ext-controlflow"),
    ),
    "int-rules": ("tosa-pro-int", ("rescale", "pad", "concat", "transpose", "reshape", "reverse"), INT_EXT),
    "fp-rules": ("tosa-pro-fp", ("resize", "gather", "scatter", "cast"), FP_EXT),
}
TARGET = Target.of(["pro-int", "pro-fp"], {*INT_EXT, *FP_EXT}, level="8k")


def check_all(tests: list[Path]) -> tuple[Counter, list[str]]:
    """Validate every test; returns counts by (positive/negative, right/wrong) and the wrong ones."""
    counts: Counter = Counter()
    wrong = []
    for test in tests:
        desc = json.loads((test / "desc.json").read_text())
        negative = bool(desc.get("expected_failure"))
        try:
            validate(read(test / "test.tosa"), TARGET)
            why = None
        except ValidationError as error:
            why = str(error)
        right = (why is not None) == negative
        counts["negative" if negative else "positive", right] += 1
        if not right:
            expected = desc.get("test_details", {}).get("ERRORIF") or "valid"
            wrong.append(f"{test.name} (expected {expected}): {why or 'accepted'}")
    return counts, wrong


def run_set(profile: str, operators: tuple[str, ...], extensions: tuple[str, ...]) -> Counter:
    tests = cts_tests(cts_dir(profile, operators, extensions))
    assert tests, f"no conformance tests generated for {profile} {operators}"
    counts, wrong = check_all(tests)
    assert not wrong, f"{len(wrong)} of {len(tests)} conformance tests judged wrongly:\n" + "\n".join(wrong[:40])
    return counts


@pytest.mark.parametrize("name", list(DEFAULT_SETS))
def test_conformance_verdicts(name):
    counts = run_set(*DEFAULT_SETS[name])
    assert counts["positive", True] > 0 and counts["negative", True] > 0

