"""One conformance test directory run on one device, through the public API.

A test directory holds ``desc.json`` (program file, input / output names and files, the profiles and
extensions it needs, whether an ERROR_IF is expected), the ``.tosa`` program and ``input-N.npy`` files.
:func:`run_case` loads the program through :meth:`Device.compile` (validation, admission, load), runs it
and writes each output where ``desc.json`` says, in the form the suite's verifier reads. It never raises
for a test's content: every outcome is a :class:`CaseResult`.

The program is validated against the implementation's whole claim — both profiles and every 1.0
extension, level 8K — not against the test's ``profiles_supported``: that field says which
implementations must run a test, and the suite relies on it (its PRO-FP WHILE_LOOP tests count
iterations with int32 GREATER, a PRO-INT type). Negative tests cannot depend on the profile either: the
reference model, whose verdicts they record, knows no profiles. What a device cannot run, its
admission refuses.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import threading
from pathlib import Path
from typing import Any

from ..core.errors import IronAccelError
from ..core.files import read_limited
from ..tosa.codec import DEFAULT_LIMITS, read
from ..tosa.errors import FormatError, LoweringError, ValidationError
from ..tosa.target import Extension, Profile, Target
from . import npy

_layers_lock = threading.Lock()


class Status(enum.Enum):
    VALID = "valid"  # ran; outputs written
    ERROR = "error"  # an ERROR_IF rule refused the program (or its data)
    UNPREDICTABLE = "unpredictable"  # a REQUIRE condition does not hold
    UNSUPPORTED = "unsupported"  # valid, but the device does not admit it
    FAILED = "failed"  # anything else: unreadable file, backend failure


@dataclasses.dataclass(frozen=True)
class CaseResult:
    status: Status
    message: str = ""


DESC_BYTES = 1 << 20  # a test description is a few hundred bytes of JSON


def read_desc(test: Path) -> dict[str, Any]:
    return json.loads(read_limited(test / "desc.json", DESC_BYTES, "test description"))


def implementation_target(level: str = "8k") -> Target:
    """Both profiles and every 1.0 extension at ``level``: what the suite's programs are checked against."""
    return Target.of(list(Profile), list(Extension), level)


def _refusal(exc: Exception) -> CaseResult:
    if isinstance(exc, ValidationError):
        # A program beyond the target's level is refused (the specification leaves it unpredictable,
        # which allows refusing; the suite, like the reference model, expects an error).
        unpredictable = exc.unpredictable and not exc.level
        return CaseResult(Status.UNPREDICTABLE if unpredictable else Status.ERROR, str(exc))
    if isinstance(exc, LoweringError):
        return CaseResult(Status.UNSUPPORTED, str(exc))
    return CaseResult(Status.FAILED, f"{type(exc).__name__}: {exc}")


def run_case(
    device: Any, test: Path, desc: dict[str, Any] | None = None, *, level: str = "8k", out: Path | None = None
) -> CaseResult:
    """Run the test in directory ``test`` on ``device`` (an ``ironaccel.Device``); outputs go to the files
    ``desc.json`` names, in ``out`` when given, else in ``test`` itself."""
    desc = desc if desc is not None else read_desc(test)
    try:
        payload = read_limited(test / desc["tosa_file"], DEFAULT_LIMITS.max_file_bytes, "program file")
        block = read(payload).main
        given = dict(zip(desc["ifm_name"], desc["ifm_file"], strict=True))
        inputs = [npy.load(test / given[name], block.tensor(name).dtype) for name in block.inputs]
    except (OSError, KeyError, ValueError, FormatError, IronAccelError) as exc:
        return CaseResult(Status.FAILED, f"unreadable test: {type(exc).__name__}: {exc}")
    try:
        exe = device.compile(payload, target=implementation_target(level))
    except (ValidationError, LoweringError, IronAccelError) as exc:
        return _refusal(exc)
    try:
        outputs = exe(*inputs)
    except Exception as exc:  # noqa: BLE001 - a data-dependent refusal or a backend failure, reported
        return _refusal(exc)
    finally:
        exe.close()
    files = dict(zip(desc["ofm_name"], desc["ofm_file"], strict=True))
    for name, value in zip(block.outputs, outputs, strict=True):
        npy.save((out or test) / files[name], value, block.tensor(name).dtype)
    return CaseResult(Status.VALID)


def layer_messages(spec: str) -> list[str]:
    """What the Vulkan layers (the validation layer, when the environment enables it) reported since the
    last call: process-wide, cleared by reading; always empty for a device that is not Vulkan."""
    if spec.partition(":")[0].strip().lower() != "vulkan":
        return []
    from ..backends.vulkan import instance  # only a Vulkan device has layers to ask

    with _layers_lock:
        messages = [str(m) for m in instance.validation_messages()]
        instance.clear_validation_messages()
    return messages
