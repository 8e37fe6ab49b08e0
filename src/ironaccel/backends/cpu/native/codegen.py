"""From a prepared program to one C source: lowering every operator, planning storage, writing the code.

The source is :file:`prelude.h`, then one static function per operator (its lowering's body, with typed
``restrict`` pointers for its operands, results, scratch and prepared arrays), then the entry points:

* ``int ia_run(void *const *io, unsigned char *A, const unsigned char *K, int64_t *ctl)``: the whole
  program, in order, on the calling thread. ``io`` holds the inputs' then the outputs' data pointers,
  ``A`` is an arena of :attr:`Generated.arena_bytes` and ``K`` the blob of constants (64-byte aligned
  both). ``ctl`` is the run's control block (:mod:`.control`) or NULL: the run returns 0 when it ran to
  the end, else the stop word it saw (:mod:`.polls` says where it looks).
* ``int ia_main(a0, ..., A, K, ctl)``: the same, taking the numpy arrays themselves (their data pointers
  are read here, which costs less than reading them in Python).
* An operator whose lowering checks a REQUIRE on data (:attr:`Kernel.failure`) is called with a flag;
  where the rule fails, the run returns ``IA_FAILED + k``, k the rule's place in
  :attr:`Generated.failures`.
* Operators worth splitting across threads run as ``ia_pool_for(ia_unit_N, io, A, K, ctl, units)`` with
  ``ia_unit_N(io, A, K, ctl, lo, hi)`` running units [lo, hi) of one operator; the pool (:file:`pool.c`,
  handed over through the exported ``ia_set_pool``) shares the units among threads from inside the
  run. Without a pool the call runs them all on the calling thread. :attr:`Generated.splits` counts them.

Every operator's function takes ``ctl`` after its operands, for the polls its lowering placed.

Nothing in the source depends on the values of large constants (weights live in the blob), so programs
that differ only in their weights share one compiled object.
"""

from __future__ import annotations

import dataclasses
import re
from importlib import resources

import numpy as np

from ....tosa.dtypes import DType
from ....tosa.operators import Op
from ..interpreter import FoldedGraph
from . import polls
from .lowering import C_TYPES, Kernel, NotNative, OpView, lowering_for
from .ops.elementwise import clamp_epilogue
from .plan import Plan, Storage, plan
from .toolchain import Toolchain

# An operator is split across threads only above this many multiply-adds (or element operations):
# handing units to a spinning helper takes only atomics, but below this the split costs more than it
# saves. Small splits pay when their neighbours split too: each thread then reads mostly rows it wrote
# (see pool.c), so the bundled CNN runs faster with its small convolutions split than with only the
# large ones (ADR 0014).
PARALLEL_MIN_MACS = 1 << 16
MAX_OPERATORS = 20000  # beyond, the compiler's time (and the source's size) grows past what a load should cost

_ARRAY_C_TYPES = {
    np.dtype(np.float32): "float",
    np.dtype(np.float64): "double",
    np.dtype(np.int8): "int8_t",
    np.dtype(np.uint8): "uint8_t",
    np.dtype(np.int16): "int16_t",
    np.dtype(np.int32): "int32_t",
    np.dtype(np.int64): "int64_t",
    np.dtype(np.bool_): "uint8_t",
}


@dataclasses.dataclass
class Generated:
    source: str
    plan: Plan
    n_inputs: int
    n_outputs: int
    splits: int  # operators run through the helper pool (0: the program never asks for it)
    failures: tuple[tuple[str, str], ...] = ()  # (operator, rule) of each status IA_FAILED + k (Kernel.failure)

    @property
    def arena_bytes(self) -> int:
        return self.plan.arena_bytes


def _prelude() -> str:
    return resources.files(__package__).joinpath("prelude.h").read_text()


def generate(graph: FoldedGraph, tools: Toolchain, data_offset: int) -> Generated:
    """The C source of ``graph`` (see the module doc); NotNative when some part has no native code."""
    if graph.stateful:
        raise NotNative("the program has variables or control flow")
    block = graph.block
    if not block.outputs:
        raise NotNative("the program has no outputs")
    for tensor in (*block.input_tensors, *block.output_tensors):
        if tensor.dtype not in C_TYPES:
            raise NotNative(f"{tensor.name!r} is {tensor.dtype}")
    for tensor in block.tensors:
        if tensor.unranked or any(d < 0 for d in tensor.shape):
            raise NotNative(f"{tensor.name!r} has no static shape")
        if not int(np.prod(tensor.shape, dtype=np.int64)) and tensor.dtype is not DType.SHAPE:
            raise NotNative(f"{tensor.name!r} has no elements")  # (an empty SHAPE is a rank-0 reshape's)
    # Data nodes the interpreter did not fold (over its size limit) produce constants: nothing to run.
    operators = [op for op in graph.operators if not all(n in graph.constants for n in op.outputs)]
    if len(operators) > MAX_OPERATORS:
        raise NotNative(f"{len(operators)} operators (at most {MAX_OPERATORS})")
    views = [
        OpView(
            position,
            operator,
            tuple(block.tensor(n) for n in operator.inputs),
            tuple(block.tensor(n) for n in operator.outputs),
            tuple(graph.constants.get(n) for n in operator.inputs),
            tools,
            f"k{position}_",
        )
        for position, operator in enumerate(operators)
    ]
    fused = fusions(views, set(block.outputs))
    kernels: list[Kernel] = []
    used: list[set[str]] = []
    for position, operator in enumerate(operators):
        lower = lowering_for(operator.op)
        if lower is None:
            raise NotNative(f"no native code for {operator.op.name}")
        view = views[position]
        if position in fused:
            view = dataclasses.replace(view, epilogue=clamp_epilogue(views[fused[position]]))
        kernel = lower(view)
        if position in fused.values():
            kernel.alias = True  # its producer clamped the values in place (the body, if run, changes none)
        text = kernel.body + kernel.prologue + kernel.helpers
        used.append({n for i, n in enumerate(operator.inputs) if re.search(rf"\bX{i}\b", text)})
        kernels.append(kernel)
    layout = plan(block, operators, kernels, graph.constants, used)
    return _Writer(block, operators, kernels, used, layout, tools, data_offset).write()


# Products whose fp32 results a following CLAMP can be applied to while they are still in L1: the
# separate pass would read them back from wherever they went (on a split operator, another core's cache).
_CLAMPED_PRODUCERS = (Op.CONV2D, Op.DEPTHWISE_CONV2D)


def fusions(views: list[OpView], outputs: set[str]) -> dict[int, int]:
    """Producer position -> position of the CLAMP fused into it: an fp32 CONV2D / DEPTHWISE_CONV2D whose
    result is read only by one CLAMP (and is no program output). The CLAMP becomes an alias."""
    readers: dict[str, list[int]] = {}
    for view in views:
        for name in set(view.operator.inputs):
            readers.setdefault(name, []).append(view.index)
    out: dict[int, int] = {}
    for view in views:
        if view.op not in _CLAMPED_PRODUCERS or view.out_dtype() is not DType.FP32:
            continue
        result = view.operator.outputs[0]
        reader = readers.get(result, [])
        if result in outputs or len(reader) != 1:
            continue
        clamp = views[reader[0]]
        if clamp.op is Op.CLAMP and clamp.operator.inputs[0] == result and clamp.out_dtype() is DType.FP32:
            out[view.index] = clamp.index
    return out


class _Writer:
    def __init__(self, block, operators, kernels, used, layout: Plan, tools: Toolchain, data_offset: int) -> None:
        self.block = block
        self.operators = operators
        self.kernels = kernels
        self.used = used
        self.plan = layout
        self.tools = tools
        self.data_offset = data_offset
        self.n_in = len(block.inputs)
        self.n_out = len(block.outputs)

    def pointer(self, name: str, c_type: str, writable: bool = False) -> str:
        where: Storage = self.plan.storage[name]
        const = "" if writable else "const "
        if where.kind == "input":
            return f"({const}{c_type} *)io[{where.index}]"
        if where.kind == "output":
            return f"({const}{c_type} *)io[{self.n_in + where.index}]"
        base = "A" if where.kind == "arena" else "K"
        return f"({const}{c_type} *)({base} + {where.index})"

    def function(self, position: int) -> tuple[str, str]:
        """The static function of one operator, and the arguments a call passes it (before lo, hi)."""
        operator, kernel = self.operators[position], self.kernels[position]
        params, args = [], []
        for i, name in enumerate(operator.inputs):
            if name in self.used[position]:
                ct = C_TYPES[self.block.tensor(name).dtype]
                params.append(f"const {ct} *restrict X{i}")
                args.append(self.pointer(name, ct))
        for j, name in enumerate(operator.outputs):
            ct = C_TYPES[self.block.tensor(name).dtype]
            params.append(f"{ct} *restrict Y{j}")
            args.append(self.pointer(name, ct, writable=True))
        for j in range(len(kernel.scratch)):
            params.append(f"unsigned char *restrict S{j}")
            args.append(f"(A + {self.plan.scratch[(position, j)]})")
        for array_name, value in kernel.arrays.items():
            ct = _ARRAY_C_TYPES[value.dtype]
            params.append(f"const {ct} *restrict K_{array_name}")
            args.append(f"(const {ct} *)(K + {self.plan.arrays[(position, array_name)]})")
        params.append("int64_t *ctl")
        args.append("ctl")
        if kernel.failure:
            if kernel.units or kernel.prologue:
                raise NotNative(f"operator #{position} {operator.op.name}: a checked rule in a split body")
            params.append("int *restrict failed")
            args.append("&failed")
        plain = list(params)
        if kernel.units:
            params += ["ptrdiff_t lo", "ptrdiff_t hi"]
        header = f"/* operator #{position}: {operator.op.name} */\n"  # never a name from the program
        text = ""
        if kernel.prologue:
            text += f"static void op{position}_pre({', '.join(plain)})\n{{\n{kernel.prologue.rstrip()}\n}}\n"
        text += f"{header}static void op{position}({', '.join(params)})\n{{\n{kernel.body.rstrip()}\n}}\n"
        return text, ", ".join(args)

    def copies(self) -> list[str]:
        lines = []
        for k, name in self.plan.final_copies:
            tensor = self.block.tensor(name)
            nbytes = int(np.prod(tensor.shape, dtype=np.int64)) * tensor.dtype.numpy.itemsize
            lines.append(polls.copy(f"io[{self.n_in + k}]", self.pointer(name, "unsigned char"), nbytes, in_run=True))
        return lines

    def write(self) -> Generated:
        isa = {"avx512": "#define IA_ISA_AVX512 1\n", "avx2": "#define IA_ISA_AVX2 1\n"}.get(self.tools.isa, "")
        parts = [
            "/* Generated by IronAccel's CPU backend from a TOSA program. */\n",
            isa,
            f"#define IA_ARRAY_DATA_OFFSET {self.data_offset}\n",
            "#define IA_VECTORS 1\n" if any(k.vectors and not k.alias for k in self.kernels) else "",
            _prelude(),
        ]
        body = []
        splits = 0
        failures: list[tuple[str, str]] = []
        work = 0.0  # budgets of work since the code last read the clock (see polls.between)
        for position, kernel in enumerate(self.kernels):
            if kernel.alias:
                continue
            if kernel.helpers:
                parts.append(kernel.helpers.rstrip() + "\n")
            text, args = self.function(position)
            parts.append(text)
            if kernel.prologue:
                body.append(f"op{position}_pre({args});")
                body.append(polls.between(0.0))  # a prologue that stopped leaves its body nothing valid to read
            if kernel.units > 1 and kernel.macs >= PARALLEL_MIN_MACS:
                signature = "void *const *io, unsigned char *A, const unsigned char *K, int64_t *ctl, "
                signature += "ptrdiff_t lo, ptrdiff_t hi"
                unit = f"static void ia_unit_{position}({signature})\n"
                parts.append(unit + f"{{\n    op{position}({args}, lo, hi);\n}}\n")
                body.append(f"ia_parallel(ia_unit_{position}, io, A, K, ctl, {kernel.units});")
                splits += 1
            elif kernel.units:
                body.append(f"op{position}({args}, 0, {kernel.units});")
            elif kernel.failure:
                status = f"IA_FAILED + {len(failures)}"
                body.append(f"{{ int failed = 0; op{position}({args}); if (failed) return {status}; }}")
                failures.append((self.operators[position].op.name, kernel.failure))
            else:
                body.append(f"op{position}({args});")
            work += kernel.macs / (kernel.poll_work or polls.ELEMENT_WORK)
            body.append(polls.between(work))
            if work >= 1.0:
                work = 0.0
        body += [*self.copies(), "return 0;"]
        run = "int ia_run(void *const *io, unsigned char *A, const unsigned char *K, int64_t *ctl)"
        parts.append(_entry(run, body))
        arrays = ", ".join(f"void *a{i}" for i in range(self.n_in + self.n_out))
        pointers = ", ".join(f"IA_ARRAY_DATA(a{i})" for i in range(self.n_in + self.n_out))
        parts.append(
            _entry(
                f"int ia_main({arrays}, unsigned char *A, const unsigned char *K, int64_t *ctl)",
                [f"void *io[{self.n_in + self.n_out}] = {{{pointers}}};", "return ia_run(io, A, K, ctl);"],
            )
        )
        if splits:
            parts.insert(3, "#define IA_SPLIT 1\n")  # before the prelude: it declares the pool hook
        return Generated("".join(parts), self.plan, self.n_in, self.n_out, splits, tuple(failures))


def _entry(signature: str, lines: list[str]) -> str:
    body = "\n".join(f"    {line}" for line in lines)
    return f"IA_EXPORT {signature}\n{{\n{body}\n}}\n"
