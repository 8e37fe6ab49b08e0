"""The TOSA 1.0.2 specification tables as typed records, loaded once on first use.

``tosa-1.0.2.json`` is extracted from the release's ``tosa.xml`` by ``scripts/extract-tosa-spec``. This
module only gives its strings meaning: element-type names become :class:`DType`, profile / extension
names become :class:`Profile` / :class:`Extension`, and the small expressions the tables use (shape
expressions such as ``[N,H,W/2 + 1]``, rank bounds such as ``MAX_RANK - 1``, level-limit values such
as ``dilation_y * KH``) are parsed once into :class:`Expr` objects the validator evaluates.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import json
import operator as _operator
from collections.abc import Callable, Mapping
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ..dtypes import DType
from ..operators import Op
from ..ops.rule import Level

if TYPE_CHECKING:  # target.py reads the extension table from here, so it is imported lazily
    from ..target import Extension, Profile

SPEC_FILE = Path(__file__).with_name("tosa-1.0.2.json")

# Element-type names of the tables -> DType. Names not listed (mul_t, tensor_size_t) are not fixed types.
ELEMENT_TYPES: dict[str, DType] = {
    "bool_t": DType.BOOL,
    "i4_t": DType.INT4,
    "i8_t": DType.INT8,
    "i16_t": DType.INT16,
    "i32_t": DType.INT32,
    "i48_t": DType.INT48,
    "fp16_t": DType.FP16,
    "bf16_t": DType.BF16,
    "fp32_t": DType.FP32,
    "fp8e4m3_t": DType.FP8E4M3,
    "fp8e5m2_t": DType.FP8E5M2,
    "shape_t": DType.SHAPE,
}

Requirement = "Profile | Extension"
Env = Mapping[str, Any]


class Expr:
    """An arithmetic expression of the tables: names, integers, + - * /, ``rank(x)`` and
    ``tensor_list_shape(x)``. ``evaluate`` returns None while a name it needs is unknown, so a check
    over unknown (dynamic) values is skipped rather than guessed."""

    _BINOPS: ClassVar[dict[type, Callable[[Any, Any], Any]]] = {
        ast.Add: _operator.add,
        ast.Sub: _operator.sub,
        ast.Mult: _operator.mul,
    }

    def __init__(self, text: str) -> None:
        self.text = text.strip()
        self.names: set[str] = set()
        self._fn = self._compile(ast.parse(self.text, mode="eval").body)

    def _compile(self, node: ast.AST) -> Callable[[Env, bool], Any]:
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            value = node.value
            return lambda env, exact: value
        if isinstance(node, ast.Name):
            name = node.id
            self.names.add(name)
            return lambda env, exact: env.get(name)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            inner = self._compile(node.operand)
            return lambda env, exact: None if (v := inner(env, exact)) is None else -v
        if isinstance(node, ast.BinOp) and (type(node.op) in self._BINOPS or isinstance(node.op, ast.Div)):
            left, right = self._compile(node.left), self._compile(node.right)
            fn = self._BINOPS.get(type(node.op))

            def binop(env: Env, exact: bool) -> Any:
                a, b = left(env, exact), right(env, exact)
                if a is None or b is None:
                    return None
                if fn is not None:
                    return fn(a, b)
                if b == 0:
                    return None
                return Fraction(a, b) if exact else a // b

            return binop
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and len(node.args) == 1:
            if node.func.id in ("rank", "tensor_list_shape") and isinstance(node.args[0], ast.Name):
                name = node.args[0].id
                self.names.add(name)
                return lambda env, exact: None if (v := env.get(name)) is None else len(v)
        raise ValueError(f"unsupported expression {self.text!r} in the specification tables")

    def evaluate(self, env: Env, *, exact: bool = False) -> Any:
        """Integer result (``/`` rounds down), or a Fraction with ``exact=True``; None if unknown."""
        return self._fn(env, exact)

    def __repr__(self) -> str:
        return f"Expr({self.text!r})"


@dataclasses.dataclass(frozen=True)
class Argument:
    """One argument of an operator, in specification order.

    The shape is either a whole-shape variable (``shape_var``: ``shape1``, or ``shapes1`` for a list)
    or a list of dimensions (``dims``): a symbol (str), a literal (int) or an :class:`Expr`.
    """

    name: str
    category: str  # input | attribute | output
    type: str  # tensor_t, tensor_list_t, shape_t, i32_t, acc_type_t, ...
    element: str | None  # element-type variable or fixed type name; None when the table says "-"
    shape_var: str | None
    dims: tuple[str | int | Expr, ...] | None
    rank: tuple[Expr, Expr] | None
    level_limits: tuple[tuple[Expr, str], ...]
    ctc: bool

    @property
    def is_list(self) -> bool:
        return self.type == "tensor_list_t"

    @property
    def is_tensor(self) -> bool:
        return self.type in ("tensor_t", "shape_t", "tensor_list_t")

    def rank_bounds(self, level: Level) -> tuple[int, int, bool] | None:
        """(min, max, max_is_level): the allowed ranks under ``level``; ``max_is_level`` says the
        upper bound comes from MAX_RANK (exceeding it is a level violation, not an argument error)."""
        if self.rank is None:
            return None
        env = {"MAX_RANK": level.max_rank}
        return self.rank[0].evaluate(env), self.rank[1].evaluate(env), "MAX_RANK" in self.rank[1].names


@dataclasses.dataclass(frozen=True)
class TypeSupport:
    """One row of an operator's supported-types table.

    ``types`` binds element-type variables to DTypes; ``values`` holds non-type parameters of the row
    (TABLE's TABLE_SIZE). ``enabled_by`` lists alternatives; each alternative is a set of
    requirements that must all be present (e.g. PRO-FP and EXT-VARIABLE).
    """

    mode: str
    types: Mapping[str, DType]
    values: Mapping[str, int]
    enabled_by: tuple[frozenset[Requirement], ...]

    @property
    def requirements(self) -> frozenset[Requirement]:
        """Every profile / extension some alternative of this row names."""
        return frozenset().union(*self.enabled_by)

    def enabled(self, enabled: frozenset[Requirement]) -> bool:
        return any(alt <= enabled for alt in self.enabled_by)

    def describe_requirement(self) -> str:
        return " or ".join(" and ".join(sorted(r.value for r in alt)) for alt in self.enabled_by)


@dataclasses.dataclass(frozen=True)
class OperatorSpec:
    op: Op
    group: str
    arguments: tuple[Argument, ...]
    type_variables: tuple[str, ...]
    typesupport: tuple[TypeSupport, ...]

    @functools.cached_property
    def inputs(self) -> tuple[Argument, ...]:
        return tuple(a for a in self.arguments if a.category == "input")

    @functools.cached_property
    def outputs(self) -> tuple[Argument, ...]:
        return tuple(a for a in self.arguments if a.category == "output")

    @functools.cached_property
    def attributes(self) -> tuple[Argument, ...]:
        return tuple(a for a in self.arguments if a.category == "attribute")

    def argument(self, name: str) -> Argument:
        for a in self.arguments:
            if a.name == name:
                return a
        raise KeyError(f"{self.op.name} has no argument {name!r}")


@dataclasses.dataclass(frozen=True)
class Spec:
    version: tuple[int, int, int]
    profiles: tuple[Profile, ...]
    extensions: Mapping[Extension, frozenset[Profile]]  # extension -> the profiles it extends
    levels: Mapping[str, Level]
    operators: Mapping[Op, OperatorSpec]


def _requirement(name: str) -> Requirement:
    from ..target import Extension, Profile

    return Profile(name) if name.startswith("PRO-") else Extension(name)


def _shape(text: str | None) -> tuple[str | None, tuple[str | int | Expr, ...] | None]:
    if text is None or text.strip() in ("", "-"):
        return None, None
    text = text.strip()
    if not text.startswith("["):
        return text, None
    dims: list[str | int | Expr] = []
    for part in text[1:-1].split(","):
        part = part.strip()
        if part.isidentifier():
            dims.append(part)
        elif part.isdigit():
            dims.append(int(part))
        else:
            dims.append(Expr(part))
    return None, tuple(dims)


def _argument(raw: dict) -> Argument:
    shape_var, dims = _shape(raw["shape"])
    element = raw["element"] if raw["element"] not in (None, "-") else None
    if raw["category"] == "attribute" and raw["type"] not in ("tensor_t", "shape_t"):
        shape_var, dims = None, None
    rank = (Expr(raw["rank"][0]), Expr(raw["rank"][1])) if raw["rank"] else None
    limits = tuple((Expr(value), limit) for value, limit in raw["level_limits"])
    return Argument(raw["name"], raw["category"], raw["type"], element, shape_var, dims, rank, limits, raw["ctc"])


def _typesupport(raw: dict) -> TypeSupport:
    types = {var: ELEMENT_TYPES[name] for var, name in raw["types"].items() if name in ELEMENT_TYPES}
    values = {var: int(name) for var, name in raw["types"].items() if str(name).isdigit()}
    enabled = tuple(frozenset(_requirement(n) for n in alt) for alt in raw["enabled_by"])
    return TypeSupport(raw["mode"], types, values, enabled)


def _level(name: str, raw: dict[str, str]) -> Level:
    return Level(name, **{k: int(v) for k, v in raw.items()})


@functools.cache
def load(path: str | None = None) -> Spec:
    """Parse the tables (once per process)."""
    from ..target import Extension, Profile

    raw = json.loads(Path(path or SPEC_FILE).read_text())
    version = tuple(int(raw["version"][k]) for k in ("major", "minor", "patch"))
    operators = {}
    for name, op in raw["operators"].items():
        operators[Op[name]] = OperatorSpec(
            Op[name],
            op["group"],
            tuple(_argument(a) for a in op["arguments"]),
            tuple(op["type_variables"]),
            tuple(_typesupport(t) for t in op["typesupport"]),
        )
    return Spec(
        version,  # type: ignore[arg-type]
        tuple(Profile(p) for p in raw["profiles"]),
        {Extension(e): frozenset(Profile(p) for p in ps) for e, ps in raw["extensions"].items()},
        {name: _level(name, lv) for name, lv in raw["levels"].items()},
        operators,
    )


def operator(op: Op) -> OperatorSpec | None:
    """The table entry of a TOSA 1.0 operator (None for 1.1-draft operators)."""
    return load().operators.get(op)


__all__ = [
    "ELEMENT_TYPES",
    "SPEC_FILE",
    "Argument",
    "Expr",
    "OperatorSpec",
    "Requirement",
    "Spec",
    "TypeSupport",
    "load",
    "operator",
]
