"""Conformance: suites any backend can be judged by.

- :mod:`.semantic` — the execution contract's behaviour (lifetimes, bounds, permissions, events),
  backend-independent, with stable case ids.
- :mod:`.tosa_sut` — a system under test for Arm's TOSA conformance runner, generic over the device.
"""
