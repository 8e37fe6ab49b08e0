"""The runtimes the benchmark compares: IronAccel's CPU backend and its peers.

Every peer turns a :class:`~workloads.Workload` into a :class:`Prepared` (or a short "n/a: reason"
string): ``measure(n)`` makes ``n`` timed calls and returns their durations in seconds, ``outputs()``
returns the results in our layout for the agreement check. Compilation, session creation, weight
packing and layout conversion of the inputs all happen in ``prepare``, outside the timed calls; a
timed call is what a user of that library calls per inference, including handing back numpy arrays.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from workloads import Workload

from ironaccel.conformance import cts

HERE = Path(__file__).resolve().parent


class Prepared:
    """One workload made ready on one peer."""

    def __init__(self, call: Callable[[], list[np.ndarray]], convert: Callable[[np.ndarray], np.ndarray]) -> None:
        self._call = call
        self._convert = convert

    def measure(self, n: int) -> list[float]:
        call, clock, times = self._call, time.perf_counter, []
        for _ in range(n):
            start = clock()
            call()
            times.append(clock() - start)
        return times

    def outputs(self) -> list[np.ndarray]:
        return [np.asarray(self._convert(np.asarray(y))) for y in self._call()]


class Peer:
    name = "peer"
    version = ""
    threads = ""  # the thread policy, in words, for the report

    def prepare(self, workload: Workload) -> Prepared | str:
        raise NotImplementedError

    def close(self) -> None:
        pass


def _versions(*modules: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for module in modules:
        try:
            found.append(f"{module} {version(module)}")
        except PackageNotFoundError:
            pass
    return ", ".join(found)


# -- IronAccel ----------------------------------------------------------------------------------------
class IronAccel(Peer):
    """The user API: ``ironaccel.open("cpu").compile(tosa)(*inputs)``."""

    name = "ironaccel"

    def __init__(self) -> None:
        import ironaccel

        self.device = ironaccel.open("cpu")
        from ironaccel.backends.cpu.parallel import blas_info

        self.version = f"ironaccel {ironaccel.__version__}"
        self.threads = f"{blas_info()}; {_blas_threads()}"

    def prepare(self, workload: Workload) -> Prepared | str:
        exe = self.device.compile(workload.tosa)
        inputs = workload.inputs
        return Prepared(lambda: exe(*inputs), lambda y: y)

    def close(self) -> None:
        self.device.close()


class IronAccelKernel(Peer):
    """What the CPU backend runs for the program, alone: its native code where the program compiles
    (``NativeProgram.run``), else the interpreter; no API layer (array checks, output allocation by the
    API, the program's pinning)."""

    name = "ironaccel-kernel"

    def __init__(self) -> None:
        from ironaccel.backends.cpu.native import toolchain

        tools = toolchain.compiler()
        reason = toolchain.unavailable_reason()
        compiler = f"{tools.identity}, {' '.join(tools.flags)}, {tools.isa} kernels" if tools else f"none ({reason})"
        self.threads = f"native code (C compiler: {compiler}) where the program compiles; threads as ironaccel"

    def prepare(self, workload: Workload) -> Prepared | str:
        from ironaccel.backends.cpu import native
        from ironaccel.backends.cpu.interpreter import load
        from ironaccel.tosa.codec import read

        compiled = load(read(workload.tosa))
        runner, _ = native.load(compiled)
        program = runner or compiled
        inputs = workload.inputs
        return Prepared(lambda: program.run(inputs), lambda y: y)


class IronAccelInterpreter(Peer):
    """The numpy interpreter alone (``CompiledProgram.run``), what the backend runs without a C compiler."""

    name = "ironaccel-interp"
    threads = "the numpy interpreter alone, threads as ironaccel"

    def prepare(self, workload: Workload) -> Prepared | str:
        from ironaccel.backends.cpu.interpreter import load
        from ironaccel.tosa.codec import read

        compiled = load(read(workload.tosa))
        inputs = workload.inputs
        return Prepared(lambda: compiled.run(inputs), lambda y: y)


def _blas_threads() -> str:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "numpy BLAS: unknown (threadpoolctl not installed)"
    import numpy  # noqa: F401 - load the BLAS so threadpoolctl sees it

    parts = [
        f"{i.get('internal_api')} {i.get('version')} {i.get('architecture', '')} x{i.get('num_threads')}"
        for i in threadpool_info()
        if i.get("user_api") == "blas"
    ]
    return "numpy's BLAS: " + (", ".join(parts) or "none found")


# -- onnxruntime -------------------------------------------------------------------------------------
class OnnxRuntime(Peer):
    name = "ort"

    def __init__(self) -> None:
        import onnxruntime

        self.ort = onnxruntime
        self.version = f"onnxruntime {onnxruntime.__version__}"
        self.threads = "default SessionOptions (intra-op pool = physical cores)"

    def prepare(self, workload: Workload) -> Prepared | str:
        if workload.onnx_model is None:
            return "n/a: no ONNX model"
        session = self.ort.InferenceSession(workload.onnx_model(), providers=["CPUExecutionProvider"])
        names = [i.name for i in session.get_inputs()]
        feed = dict(zip(names, workload.to_framework(workload.inputs), strict=True))
        return Prepared(lambda: session.run(None, feed), workload.from_framework)


# -- torch eager -------------------------------------------------------------------------------------
class TorchEager(Peer):
    name = "torch"

    def __init__(self) -> None:
        import torch

        self.torch = torch
        self.version = f"torch {torch.__version__}"
        self.threads = f"default (torch.get_num_threads() = {torch.get_num_threads()})"

    def prepare(self, workload: Workload) -> Prepared | str:
        if workload.torch_module is None:
            return "n/a: no torch module"
        torch = self.torch
        module = workload.torch_module()
        if workload.torch_inputs is not None:
            tensors = workload.torch_inputs(workload.inputs)
        else:
            tensors = [torch.from_numpy(a) for a in workload.to_framework(workload.inputs)]

        def call() -> list[np.ndarray]:
            with torch.inference_mode():
                result = module(*tensors)
            return [result.numpy()]

        return Prepared(call, workload.from_framework)


# -- IREE --------------------------------------------------------------------------------------------
class Iree(Peer):
    """TOSA MLIR from the .tosa (tosa-opt, from tosa-tools), compiled by iree-compile for llvm-cpu (host CPU),
    run with the iree.runtime ``local-task`` driver (its default multi-threaded executor)."""

    name = "iree"

    def __init__(self) -> None:
        import iree.runtime as rt

        self.rt = rt
        self.version = _versions("iree-base-compiler", "iree-base-runtime")
        self.threads = "local-task driver default (one worker per core)"
        self.tools = cts.find_tools()
        self.work = Path(tempfile.mkdtemp(prefix="ironaccel-bench-iree-"))
        compiler = Path(sys.executable).parent / "iree-compile"
        self.compiler = str(compiler) if compiler.exists() else "iree-compile"

    def _mlir(self, tosa: Path, mlir: Path) -> str | None:
        done = cts.tosa_opt_to_mlir(tosa, mlir, self.tools)
        if done.returncode != 0 or not mlir.exists():
            return "n/a: tosa-opt could not deserialize: " + _last_line(done.stderr or done.stdout)
        return None

    def prepare(self, workload: Workload) -> Prepared | str:
        stem = self.work / _slug(workload.name)
        tosa, mlir, vmfb = stem.with_suffix(".tosa"), stem.with_suffix(".mlir"), stem.with_suffix(".vmfb")
        tosa.write_bytes(workload.tosa)
        failed = self._mlir(tosa, mlir)
        if failed:
            return failed
        done = subprocess.run(
            [
                self.compiler,
                "--iree-input-type=tosa",
                "--iree-hal-target-backends=llvm-cpu",
                "--iree-llvmcpu-target-cpu=host",
                str(mlir),
                "-o",
                str(vmfb),
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if done.returncode != 0:
            return "n/a: iree-compile failed: " + _last_line(done.stderr)
        rt = self.rt
        context = rt.SystemContext(config=rt.Config("local-task"))
        context.add_vm_module(rt.VmModule.copy_buffer(context.instance, vmfb.read_bytes()))
        function = context.modules.module["main"]
        inputs = workload.inputs

        def call() -> list[np.ndarray]:
            result = function(*inputs)
            results = result if isinstance(result, (list, tuple)) else [result]
            return [r.to_host() for r in results]

        return Prepared(call, lambda y: y)

    def close(self) -> None:
        import shutil

        shutil.rmtree(self.work, ignore_errors=True)


# -- the TOSA reference model ------------------------------------------------------------------------
class RefPrepared(Prepared):
    def __init__(self, server: RefModel, job: int, outputs: list[np.ndarray]) -> None:
        super().__init__(lambda: outputs, lambda y: y)
        self._server = server
        self._job = job

    def measure(self, n: int) -> list[float]:
        return self._server.request({"cmd": "time", "id": self._job, "reps": n})["seconds"]


class RefModel(Peer):
    """tosa-tools' reference model, in its own environment, as a long-lived subprocess (ref_server.py)."""

    name = "ref"
    threads = "single-threaded (tosa_reference_model.run per call)"

    def __init__(self) -> None:
        self.tools = cts.find_tools()
        self.version = f"tosa-tools {cts.tools_version(self.tools)}"
        self.work = Path(tempfile.mkdtemp(prefix="ironaccel-bench-ref-"))
        self.log = open(self.work / "stderr.log", "w")  # closed in close()
        self.proc = subprocess.Popen(
            [str(self.tools / "bin" / "python"), str(HERE / "ref_server.py")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            env=cts.tools_env(self.tools),
            text=True,
            bufsize=1,
        )
        self.jobs = 0

    def request(self, message: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"reference model server died: {self._log_tail()}")
        answer = json.loads(line)
        if not answer.get("ok"):
            raise RuntimeError(answer.get("error", "reference model request failed"))
        return answer

    def _log_tail(self) -> str:
        self.log.flush()
        return (self.work / "stderr.log").read_text()[-500:]

    def prepare(self, workload: Workload) -> Prepared | str:
        self.jobs += 1
        job = self.jobs
        folder = self.work / str(job)
        folder.mkdir()
        (folder / "model.tosa").write_bytes(workload.tosa)
        paths = []
        for index, array in enumerate(workload.inputs):
            paths.append(str(folder / f"input-{index}.npy"))
            np.save(paths[-1], array, allow_pickle=False)
        answer = self.request(
            {"cmd": "load", "id": job, "tosa": str(folder / "model.tosa"), "inputs": paths, "out": str(folder / "out")}
        )
        if answer["status"] != "TOSA_VALID":
            return f"n/a: reference model status {answer['status']}"
        outputs = [np.load(folder / "out" / f"output-{i}.npy") for i in range(answer["outputs"])]
        return RefPrepared(self, job, outputs)

    def close(self) -> None:
        import shutil

        try:
            if self.proc.stdin:  # end of input ends the server's loop
                self.proc.stdin.close()
            self.proc.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
        self.log.close()
        shutil.rmtree(self.work, ignore_errors=True)


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in text)[:60]


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip() and not line.startswith("WARNING")]
    return (lines[-1] if lines else "no message")[:200]


def make(name: str) -> Peer:
    """A peer by name; raises ImportError / cts.ToolsNotFound when it is not installed here."""
    peers: dict[str, Callable[[], Peer]] = {
        "ironaccel": IronAccel,
        "ironaccel-kernel": IronAccelKernel,
        "ironaccel-interp": IronAccelInterpreter,
        "ort": OnnxRuntime,
        "iree": Iree,
        "torch": TorchEager,
        "ref": RefModel,
    }
    return peers[name]()
