"""Kernels: CUDA C compiled by NVRTC for the device's compute capability, loaded as modules.

Compiling (:func:`compile_source`) needs NVRTC only, no driver and no GPU, so the tests compile every
registered kernel on any machine. Images are cubins for the exact architecture (``sm_90``): a cubin runs
on a driver of the same CUDA major version as the compiler, where PTX would need the driver's JIT to be at
least as new as NVRTC. Each (source, architecture) is compiled once per process.

No option relaxes IEEE arithmetic: NVRTC's defaults keep denormals, IEEE division and square roots
(``-ftz=false -prec-div=true -prec-sqrt=true``), which the TOSA results compared with the CPU backend need.

:class:`Modules` loads images into the device's context (``cuModuleLoadData``) once per accelerator and
keeps each kernel's function until the accelerator closes.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from ...core.errors import InternalError, Unsupported
from .device import CudaDevice
from .driver import check, nvrtc_api
from .ops.common import Kernel

OPTIONS = ("--std=c++17",)
_IMAGES: dict[tuple[str, str], bytes] = {}
_IMAGES_LOCK = threading.Lock()


def _nvrtc_check(nvrtc: Any, result: Any, what: str) -> Any:
    status, values = (result[0], result[1:]) if isinstance(result, tuple) else (result, ())
    if int(status):
        name = getattr(status, "name", f"nvrtcResult {int(status)}")
        raise InternalError(f"{what}: {name}")
    return values[0] if len(values) == 1 else values or None


def supported_architectures() -> tuple[str, ...]:
    """The architectures this NVRTC compiles cubins for (``sm_80``, ``sm_90``, ...)."""
    nvrtc = nvrtc_api()
    numbers = _nvrtc_check(nvrtc, nvrtc.nvrtcGetSupportedArchs(), "nvrtcGetSupportedArchs")
    return tuple(f"sm_{int(n)}" for n in numbers)


def require_architecture(arch: str) -> None:
    """Unsupported when NVRTC cannot compile for ``arch`` (a device newer than the installed NVRTC)."""
    known = supported_architectures()
    if arch not in known:
        raise Unsupported(f"the installed NVRTC does not compile for {arch} (it knows {', '.join(known)})")


def compile_source(source: str, arch: str) -> bytes:
    """The cubin of ``source`` for ``arch``, compiled once per process. InternalError, with NVRTC's log,
    when it does not compile (the sources are the backend's own)."""
    key = (source, arch)
    with _IMAGES_LOCK:
        found = _IMAGES.get(key)
    if found is not None:
        return found
    image = _compile(source, arch)
    with _IMAGES_LOCK:
        return _IMAGES.setdefault(key, image)


def check_syntax(source: str, arch: str) -> None:
    """NVRTC's front end alone over ``source`` for ``arch`` (its virtual ``compute_`` form): every error a
    full compile would report in the text itself, in a fraction of the time, with no code generated.
    InternalError with NVRTC's log otherwise. For checking sources where no kernel will run."""
    _compile(source, arch.replace("sm_", "compute_"), ("-fdevice-syntax-only",))


def _compile(source: str, arch: str, extra: tuple[str, ...] = ()) -> bytes:
    nvrtc = nvrtc_api()
    program = _nvrtc_check(nvrtc, nvrtc.nvrtcCreateProgram(source.encode(), b"ironaccel.cu", 0, [], []), "create")
    try:
        options = [f"--gpu-architecture={arch}".encode(), *(o.encode() for o in (*OPTIONS, *extra))]
        status = nvrtc.nvrtcCompileProgram(program, len(options), options)
        code = status[0] if isinstance(status, tuple) else status
        if int(code):
            size = _nvrtc_check(nvrtc, nvrtc.nvrtcGetProgramLogSize(program), "log size")
            log = b" " * int(size)
            _nvrtc_check(nvrtc, nvrtc.nvrtcGetProgramLog(program, log), "log")
            text = log.rstrip(b"\0 ").decode(errors="replace")
            raise InternalError(f"NVRTC could not compile a kernel for {arch}: {getattr(code, 'name', code)}\n{text}")
        if extra:
            return b""
        size = _nvrtc_check(nvrtc, nvrtc.nvrtcGetCUBINSize(program), "cubin size")
        image = b" " * int(size)
        _nvrtc_check(nvrtc, nvrtc.nvrtcGetCUBIN(program, image), "cubin")
        return image
    finally:
        nvrtc.nvrtcDestroyProgram(program)


class Modules:
    """The kernels loaded into one device's context: a module and its function per source."""

    def __init__(self, device: CudaDevice) -> None:
        self.device = device
        self._loaded: dict[str, tuple[Any, Any]] = {}
        self._lock = threading.Lock()

    def function(self, kernel: Kernel) -> Any:
        """``kernel``'s CUfunction, compiled and loaded on first use (the device in use by the caller)."""
        with self._lock:
            found = self._loaded.get(kernel.source)
            if found is not None:
                return found[1]
            image = compile_source(kernel.source, self.device.arch)
            driver = self.device.api
            # Passed by address: the binding reads the image during the call only.
            data = np.frombuffer(image, dtype=np.uint8)
            module = check(driver.cuModuleLoadData(data.ctypes.data), "cuModuleLoadData")
            try:
                function = check(driver.cuModuleGetFunction(module, kernel.name.encode()), "cuModuleGetFunction")
            except BaseException:
                driver.cuModuleUnload(module)
                raise
            self._loaded[kernel.source] = (module, function)
            return function

    def destroy(self) -> None:
        """Unload every module (the device's close, its context current)."""
        with self._lock:
            loaded, self._loaded = list(self._loaded.values()), {}
        for module, _ in loaded:
            self.device.api.cuModuleUnload(module)


__all__ = ["OPTIONS", "Modules", "check_syntax", "compile_source", "require_architecture", "supported_architectures"]
