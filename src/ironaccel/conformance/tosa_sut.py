"""A system under test for Arm's TOSA conformance runner, generic over the IronAccel device.

    tosa_verif_run_tests --sut-module ironaccel.conformance.tosa_sut \\
        --sut-module-args ironaccel.conformance.tosa_sut:device=cpu -t TEST_DIR ...

The runner lives in the tosa-tools environment and imports this module there, so IronAccel must be
importable in that interpreter (``ironaccel conformance`` arranges it; by hand, put the directory that
holds the ``ironaccel`` package on ``PYTHONPATH``). The runner executes the reference model in precise
mode first and checks our outputs against it with ``tosa_verify`` (ULP and dot-product bounds), so this
module only has to run the test and report how the graph ended.

Arguments (``ironaccel.conformance.tosa_sut:KEY=VALUE``): ``device`` (default ``cpu``; any spec
``ironaccel.open`` takes, e.g. ``vulkan:lavapipe``). Each runner thread opens its own device, so tests
run in parallel. ``replay=RESULTS`` judges outputs recorded on another machine instead
(:mod:`.bundle`): each test's recorded outputs are put in its directory and its recorded outcome is
returned; no device is opened. A test the device's capability descriptor does not advertise is skipped
as not applicable (:mod:`.applicability`), never run as a failure; ``ironaccel conformance`` leaves such tests
out before starting the runner, so the reference model does not run for them either. On a Vulkan
device, a message from the Vulkan layers (the validation layer, when the environment enables it) fails
the test that was running when it came.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from runner.tosa_test_runner import TosaTestRunner  # only importable inside the tosa-tools environment

from ..runtime.session import Device, open_device
from .applicability import NOT_APPLICABLE, reason
from .bundle import LAYERS_FAILED, recorded
from .case import Status, layer_messages, run_case

_local = threading.local()
_LEVELS = {"EIGHTK": "8k", "NONE": "none"}
_GRAPH_RESULT = {
    Status.VALID: TosaTestRunner.TosaGraphResult.TOSA_VALID,
    Status.ERROR: TosaTestRunner.TosaGraphResult.TOSA_ERROR,
    Status.UNPREDICTABLE: TosaTestRunner.TosaGraphResult.TOSA_UNPREDICTABLE,
}


def _options(runner_args: list[str]) -> dict[str, str]:
    options = {"device": "cpu", "replay": ""}
    for item in runner_args:
        key, sep, value = item.partition("=")
        if not sep or key not in options:
            raise ValueError(
                f"ironaccel.conformance.tosa_sut: unknown argument {item!r} (expected device=SPEC or replay=DIR)"
            )
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

    def skipTest(self) -> tuple[bool, str]:
        skip, why = super().skipTest()
        if skip:
            return skip, why
        if self.options["replay"]:
            _, record = recorded(self.options["replay"]).result(Path(self.testDirPath))
            applies = record.get("status") != NOT_APPLICABLE
            return (False, "") if applies else (True, f"{NOT_APPLICABLE} ({record.get('message')})")
        descriptor = _device(self.options["device"]).accelerator.capabilities()
        found = reason(Path(self.testDirPath), descriptor, self.testDesc)
        return (True, f"{NOT_APPLICABLE} ({found})") if found else (False, "")

    def runTestGraph(self) -> tuple[Any, str | None]:
        if self.options["replay"]:
            return self._replay()
        level = _LEVELS.get(str(getattr(self.args, "tosa_level", "EIGHTK")).upper(), "8k")
        spec = self.options["device"]
        result = run_case(_device(spec), self.testDirPath, self.testDesc, level=level)
        graph = _GRAPH_RESULT.get(result.status, TosaTestRunner.TosaGraphResult.OTHER_ERROR)
        message = f"{result.status.value}: {result.message}" if result.message else None
        layers = layer_messages(spec)
        if layers:  # a test that made the Vulkan validation layer speak fails, whatever it computed
            return TosaTestRunner.TosaGraphResult.OTHER_ERROR, "Vulkan layers reported: " + " | ".join(layers)
        return graph, message

    def _replay(self) -> tuple[Any, str | None]:
        results = recorded(self.options["replay"])
        test = Path(self.testDirPath)
        ident, record = results.result(test)
        status, message = str(record.get("status")), str(record.get("message") or "")
        if status == LAYERS_FAILED:
            return TosaTestRunner.TosaGraphResult.OTHER_ERROR, f"Vulkan layers reported on {results.device}: {message}"
        try:
            graph = _GRAPH_RESULT[Status(status)]
        except (KeyError, ValueError):
            return TosaTestRunner.TosaGraphResult.OTHER_ERROR, f"{status}: {message}"
        if graph == TosaTestRunner.TosaGraphResult.TOSA_VALID:
            results.restore_outputs(ident, test, self.testDesc)
        return graph, (f"{status}: {message}" if message else None)
