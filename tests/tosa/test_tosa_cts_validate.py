"""The validator against tosa-tools' conformance tests: every positive test is valid for an
implementation of both profiles and every 1.0 extension at level 8K, every negative (ERROR_IF) test is
refused.

Level 8K because the conformance suite is written for it (its WrongRank tests use rank 7). The default
run checks the tensor, activation, element-wise, comparison and reduction operators of two sets other
test modules generate too (so the cache is usually warm); ``-m slow`` sweeps the whole suite of both
profiles with every extension.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from ironaccel.conformance.case import implementation_target
from ironaccel.tosa import read
from ironaccel.tosa.errors import FormatError, ValidationError
from ironaccel.tosa.operators import Group, Op
from ironaccel.tosa.validate import validate
from tosa_fixtures import cts_dir, cts_tests

pytestmark = pytest.mark.tosa_tools

GROUPS = (
    Group.TENSOR,
    Group.ACTIVATION,
    Group.ELEMENTWISE_BINARY,
    Group.ELEMENTWISE_UNARY,
    Group.ELEMENTWISE_TERNARY,
    Group.COMPARISON,
    Group.REDUCTION,
)
OPERATORS = tuple(op.name.lower() for op in Op if op.is_tosa_1_0 and op.group in GROUPS)
INT_EXT = (
    "tosa-ext-int16",
    "tosa-ext-int4",
    "tosa-ext-doubleround",
    "tosa-ext-inexactround",
    "tosa-ext-variable",
    "tosa-ext-controlflow",
    "tosa-ext-dynamic",
)
FP_EXT = (
    "tosa-ext-bf16",
    "tosa-ext-fp8e4m3",
    "tosa-ext-fp8e5m2",
    "tosa-ext-fft",
    "tosa-ext-variable",
    "tosa-ext-controlflow",
    "tosa-ext-dynamic",
)
DEFAULT_SETS = {
    # The same sets as the codec round-trip tests (one cache entry each); only our operators are judged.
    "int": (
        "tosa-pro-int",
        ("argmax", "avg_pool2d", "clamp", "conv2d", "gather", "mul", "pad", "rescale", "reshape", "transpose"),
        ("tosa-ext-controlflow", "tosa-ext-int16", "tosa-ext-int4"),
    ),
    "fp": ("tosa-pro-fp", ("add", "const", "matmul"), ("tosa-ext-bf16", "tosa-ext-fp8e4m3", "tosa-ext-fp8e5m2")),
}
# The whole suite of each profile with every 1.0 extension (the same cache entries as `make conformance`).
SLOW_SETS = {"int-all": ("tosa-pro-int", (), INT_EXT), "fp-all": ("tosa-pro-fp", (), FP_EXT)}


# What an implementation of both profiles and every extension checks programs against (see
# ironaccel.conformance.case for why not the test's own profiles_supported).
TARGET = implementation_target("8k")


def judge(tests: list[Path], operators: tuple[str, ...] | None = OPERATORS) -> tuple[Counter, list[str]]:
    """Counts by (positive / negative, judged right) over the tests of ``operators`` (None: all), and
    the wrong ones."""
    counts: Counter = Counter()
    wrong = []
    for test in tests:
        desc = json.loads((test / "desc.json").read_text())
        if operators is not None and desc.get("test_details", {}).get("operator", "").lower() not in operators:
            continue
        negative = bool(desc.get("expected_failure"))
        try:
            validate(read(test / "test.tosa"), TARGET)
            why = None
        except (ValidationError, FormatError) as error:
            why = str(error)
        right = (why is not None) == negative
        counts["negative" if negative else "positive", right] += 1
        if not right:
            expected = desc.get("test_details", {}).get("ERRORIF") or "valid"
            wrong.append(f"{test.name} (expected {expected}): {why or 'accepted'}")
    return counts, wrong


def run_set(profile: str, operators: tuple[str, ...], extensions: tuple[str, ...]) -> Counter:
    tests = cts_tests(cts_dir(profile, operators, extensions))
    counts, wrong = judge(tests, operators or None)
    assert not wrong, f"{len(wrong)} conformance tests judged wrongly:\n" + "\n".join(wrong[:40])
    return counts


@pytest.mark.parametrize("name", list(DEFAULT_SETS))
def test_conformance_verdicts(name):
    counts = run_set(*DEFAULT_SETS[name])
    assert counts["positive", True] > 0 and counts["negative", True] > 0


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SLOW_SETS))
def test_all_conformance_verdicts(name):
    counts = run_set(*SLOW_SETS[name])
    total = counts["positive", True] + counts["negative", True]
    print(
        f"{name}: positives valid {counts['positive', True]}/{counts['positive', True] + counts['positive', False]},"
        f" negatives rejected {counts['negative', True]}/{counts['negative', True] + counts['negative', False]}"
    )
    assert total > 1000
