"""The CPU backend's native path: a whole program as one generated C function, compiled once per machine.

For small programs the numpy interpreter spends more time dispatching operators in Python than
computing them. So, where a C compiler is found, the CPU backend lowers a loaded program's main graph
(after the interpreter's constant folding) into C with every shape a constant
(:mod:`.codegen`, one lowering per operator under :mod:`.ops`), builds it into a shared object kept in a
per-user cache (:mod:`.toolchain`), and runs it with one foreign call (:mod:`.program`). The design,
and what was rejected, is docs/adr/0011-cpu-native-code.md. Shared objects are opened once per process
and closed when no program uses them (:mod:`.library`, docs/adr/0023-native-libraries-released-when-unused.md):
a :class:`NativeProgram` must be released when it is unloaded. A queued run can be cancelled, or stopped at
its deadline, inside that one call: the code polls a control block between operators and inside long
loops (:mod:`.control`, :mod:`.polls`, docs/adr/0028-native-runs-stop-at-checks.md).

The numbers are the interpreter's: integer operators bit for bit (the same 64-bit steps as
``numerics.py``), fp32 elementwise operators as single IEEE operations or rounded once from double,
dot products with fused multiply-adds within the specification's bounds.

Whole programs or nothing: a program with an operator, dtype or attribute the lowerings do not take
(:class:`~.lowering.NotNative` says which), with variables or control flow, or with dynamic shapes,
runs on the interpreter unchanged; so does every program when no compiler works, or with
``IRONACCEL_CPU_NATIVE=0``. A compiler error is logged and the program also stays with the
interpreter, unless ``IRONACCEL_CPU_NATIVE=require`` (for tests), which makes it an error.
"""

from __future__ import annotations

import logging

from ....core.errors import InternalError
from ..interpreter import CompiledProgram
from .codegen import generate
from .lowering import NotNative
from .program import NativeProgram, array_data_offset
from .toolchain import BuildError, build, compiler, current_settings, unavailable_reason

log = logging.getLogger("ironaccel.cpu.native")
_DATA_OFFSET = array_data_offset()


def compile(compiled: CompiledProgram) -> NativeProgram:
    """The native form of a program the interpreter has prepared. Raises NotNative (the program, or this
    machine, has no native form: the reason says why) or BuildError (the compiler failed)."""
    tools = compiler()
    if tools is None:
        raise NotNative(f"no C compiler: {unavailable_reason()}")
    generated = generate(compiled.folded_main(), tools, _DATA_OFFSET or 16)
    library = build(generated.source, tools)
    return NativeProgram(compiled.program, generated, library, _DATA_OFFSET is not None, tools)


def load(compiled: CompiledProgram) -> tuple[NativeProgram | None, str]:
    """The native form of ``compiled`` as the settings ask, or None and why not (also logged)."""
    mode = current_settings().cpu_native
    if mode == "off":
        return None, "switched off (IRONACCEL_CPU_NATIVE=0)"
    try:
        return compile(compiled), ""
    except NotNative as exc:
        if mode == "require" and compiler() is None:
            raise InternalError(f"IRONACCEL_CPU_NATIVE=require, but {exc}") from exc
        log.debug("interpreting the program: %s", exc)
        return None, str(exc)
    except (BuildError, OSError) as exc:
        if mode == "require":
            raise InternalError(f"native code failed to build: {exc}") from exc
        log.warning("interpreting the program: native code failed to build: %s", exc)
        return None, f"build failed: {exc}"


__all__ = ["BuildError", "NativeProgram", "NotNative", "compile", "load"]
