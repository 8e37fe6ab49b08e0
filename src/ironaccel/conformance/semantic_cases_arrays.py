"""The semantic suite's cases on device arrays: data uploaded once, calls that bind it in place, outputs that
stay on the device for the next call, and everything released with the device. They go through the user API
(:class:`~ironaccel.runtime.Device` over the accelerator under test), so a backend passes them by
implementing the contract, nothing more. Registered into :data:`~.semantic_fixtures.CASES` on import
(:mod:`.semantic` imports this).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from ..core.errors import InvalidArgument
from ..runtime import Accelerator, Device, DeviceArray
from .semantic_fixtures import Skip, add_program, admits_nothing, case, expect


@contextmanager
def _transfers(acc: Accelerator) -> Iterator[list[str]]:
    """The contract's copies (``write_buffer`` / ``read_buffer``) made while the block runs, by name, in
    order. The accelerator's methods are wrapped for the block's length only."""
    seen: list[str] = []
    originals: dict[str, Callable[..., Any]] = {}
    for name in ("write_buffer", "read_buffer"):
        method = getattr(acc, name)
        originals[name] = method

        def counted(*args: Any, _name: str = name, _method: Callable[..., Any] = method, **kw: Any) -> Any:
            seen.append(_name)
            return _method(*args, **kw)

        setattr(acc, name, counted)
    try:
        yield seen
    finally:
        for name in originals:
            delattr(acc, name)  # the instance attribute goes; the class's method shows again


def _device(acc: Accelerator) -> Device:
    return Device(acc, "suite")


@case("arrays.round-trip")
def _round_trip(acc: Accelerator) -> None:
    dev = _device(acc)
    try:
        for values in (np.arange(12, dtype=np.float32).reshape(3, 4), np.array([-128, 0, 127], np.int8)):
            made = dev.array(values)
            assert isinstance(made, DeviceArray) and made.shape == values.shape and made.dtype == values.dtype
            np.testing.assert_array_equal(made.numpy(), values)
            made.close()
            made.close()  # idempotent
        empty = dev.empty((2, 5), np.float32)
        assert empty.shape == (2, 5) and empty.numpy().shape == (2, 5)
        empty.close()
    finally:
        dev.close()


@case("arrays.chain-stays-on-device")
def _chain(acc: Accelerator) -> None:
    if admits_nothing(acc):
        raise Skip("no program admitted: nothing to chain")
    dev = _device(acc)
    try:
        exe = dev.compile(add_program())
        a, b = dev.array(np.arange(4, dtype=np.float32)), dev.array(np.full(4, 10, np.float32))
        exe(a, b)  # the first call may set up what later calls reuse
        with _transfers(acc) as seen:
            (c,) = exe(a, b)
            (d,) = exe(c, b)  # an output fed straight back as an input
        assert isinstance(c, DeviceArray) and isinstance(d, DeviceArray), (type(c), type(d))
        assert seen == [], f"device-resident operands moved through the host: {seen}"
        np.testing.assert_array_equal(d.numpy(), np.arange(4, dtype=np.float32) + 20)
        out = dev.empty((4,), np.float32)
        with _transfers(acc) as seen:
            exe(a, b, out=[out])
        assert seen == [], f"an out= device array was read back: {seen}"
        np.testing.assert_array_equal(out.numpy(), np.arange(4, dtype=np.float32) + 10)
        wrong = dev.array(np.zeros(5, np.float32))
        expect((InvalidArgument, ValueError), lambda: exe(wrong, b), "a device array of the wrong shape")
    finally:
        dev.close()


@case("arrays.released-with-the-device")
def _released(acc: Accelerator) -> None:
    baseline = {k: v for k, v in acc.live_resources().items() if v}
    dev = _device(acc)
    kept = [dev.array(np.ones(8, np.float32)) for _ in range(3)]
    assert acc.live_resources().get("buffer", 0) >= 3
    dev.close()  # frees the arrays it made, whoever still holds them
    live = {k: v for k, v in acc.live_resources().items() if v}
    assert live == baseline, f"left live after the device closed: {live} (before: {baseline})"
    assert len(kept) == 3
