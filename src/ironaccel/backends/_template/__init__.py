"""The backend kit: a complete execution backend with no kernels, registered as ``null``.

Every part of the execution contract a backend provides works here over host memory: contexts, buffers in
the three memory domains, transfers, queues, events, host gates, prepared launches. Its capability
descriptor admits no operator, so every program is refused when it is loaded ("the template backend runs
no operator: ..."). Opened as ``ironaccel.open("null")`` it is a device for tests of the contract that need
no kernels (``auto`` never picks it); copied, it is where a new backend starts: docs/adding-a-backend.md
walks from the copy to a first operator.

The roles, one module each, named as in every bundled backend:

- :mod:`.registration`: the registration (plain data, the entry point: reading it imports nothing else);
- :mod:`.device`: opening the device (identity, limits, memory domains);
- :mod:`.accelerator`: the Accelerator joining the roles below, and the factory the registration names;
- :mod:`.memory`: buffers: allocation, write, read and free;
- :mod:`.program`: loading: lowering each operator of an admitted program into what the device runs;
- :mod:`.submit`: queues and submission: running a loaded program on bound buffers in order, ending events;
- :mod:`.capability`: what ``load_program`` admits (the capability descriptor);
- ``ops/``: the kernels or lowerings, one module per TOSA operator group (the kit has none; a backend adds
  it with its first operator).

This package imports nothing itself: ``NAME``, ``REGISTRATION`` and ``open_accelerator`` are read from their
modules when first asked for.

Design notes (they hold for any backend built from this one):

1. The runtime checks every public call before a hook runs (``runtime/hooks.py`` says what each hook may
   assume and which lock it runs under); hooks trust their input and raise the errors of
   ``core/errors.py``.
2. A program is refused when it is loaded, never when it is submitted: capability.py says what is admitted,
   and program.py lowers everything admitted.
3. ``_submit`` never waits: the queue runs the work and ends its event (complete, failed, cancelled).
4. Cancellation and deadlines reach running work at checkpoints between steps (``event.checkpoint``).
5. The only copies are ``write_buffer`` and ``read_buffer``; a bound buffer is used in place.

``# TODO(backend):`` marks each place where a real backend replaces host memory and host code with its
device's calls.
"""

from __future__ import annotations

from ...core.lazy import lazy_names

# Where each name the package offers lives; imported on first use, so importing the package stays cheap.
_LAZY = {
    "NAME": "registration",
    "REGISTRATION": "registration",
    "TemplateAccelerator": "accelerator",
    "open_accelerator": "accelerator",
}
__getattr__, __dir__ = lazy_names(__name__, _LAZY)


__all__ = ["NAME", "REGISTRATION", "TemplateAccelerator", "open_accelerator"]
