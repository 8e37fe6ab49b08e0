"""A system under test for Arm's TOSA conformance runner, generic over the IronAccel device.

    tosa_verif_run_tests --sut-module ironaccel.conformance.tosa_sut \\
        --sut-module-args ironaccel.conformance.tosa_sut:device=cpu -t TEST_DIR ...

The runner lives in the tosa-tools environment and imports this module there, so IronAccel must be
importable in that interpreter (``ironaccel conformance`` arranges it; by hand, put the directory that
holds the ``ironaccel`` package on ``PYTHONPATH``). The runner executes the reference model in precise
mode first and checks our outputs against it with ``tosa_verify`` (ULP and dot-product bounds), so this
module only has to run the test and report how the graph ended.

Arguments (``ironaccel.conformance.tosa_sut:KEY=VALUE``): ``device`` (default ``cpu``; any spec
``ironaccel.open`` takes). Each runner thread opens its own device, so tests run in parallel.
"""

from __future__ import annotations

import threading
from typing import Any

from runner.tosa_test_runner import TosaTestRunner  # only importable inside the tosa-tools environment

from ..runtime.session import Device, open_device
from .case import Status, run_case

_local = threading.local()
_LEVELS = {"EIGHTK": "8k", "NONE": "none"}
_GRAPH_RESULT = {
    Status.VALID: TosaTestRunner.TosaGraphResult.TOSA_VALID,
    Status.ERROR: TosaTestRunner.TosaGraphResult.TOSA_ERROR,
    Status.UNPREDICTABLE: TosaTestRunner.TosaGraphResult.TOSA_UNPREDICTABLE,
}


def _options(runner_args: list[str]) -> dict[str, str]:
    options = {"device": "cpu"}
    for item in runner_args:
        key, sep, value = item.partition("=")
        if not sep or key not in options:
            raise ValueError(f"ironaccel.conformance.tosa_sut: unknown argument {item!r} (expected device=SPEC)")
        options[key] = value
    return options


def _device(spec: str) -> Device:
    devices: dict[str, Device] = _local.__dict__.setdefault("devices", {})
    if spec not in devices:
        devices[spec] = open_device(spec)
    return devices[spec]


class TosaSUTRunner(TosaTestRunner):
    """Runs one conformance test on an IronAccel device."""

    def __init__(self, args: Any, runnerArgs: list[str], testDirPath: Any) -> None:
        super().__init__(args, runnerArgs, testDirPath)
        self.options = _options(runnerArgs)

    def runTestGraph(self) -> tuple[Any, str | None]:
        level = _LEVELS.get(str(getattr(self.args, "tosa_level", "EIGHTK")).upper(), "8k")
        result = run_case(_device(self.options["device"]), self.testDirPath, self.testDesc, level=level)
        graph = _GRAPH_RESULT.get(result.status, TosaTestRunner.TosaGraphResult.OTHER_ERROR)
        message = f"{result.status.value}: {result.message}" if result.message else None
        return graph, message
