"""A table filled by modules that are imported on first lookup.

Operator knowledge lives in one module per operator group (``tosa/ops/<group>.py``,
``backends/<name>/ops/<group>.py``); each module registers its entries with a decorator. The table
imports the group modules the first time it is read, so importing the package stays cheap and a
lookup never misses an entry because its module was not imported yet.
"""

from __future__ import annotations

import importlib
import sys
import threading
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LazyTable(Generic[K, V]):
    def __init__(self, what: str, package: str, modules: Sequence[str]) -> None:
        self._what = what  # for the duplicate-entry error ("rule", "CPU kernel")
        self._package = package
        self._modules = tuple(modules)
        self._entries: dict[K, V] = {}
        self._loaded = False
        self._lock = threading.Lock()

    def register(self, *keys: K) -> Callable[[V], V]:
        """Decorator: make the decorated object the entry of every key in ``keys``."""

        def wrap(value: V) -> V:
            for key in keys:
                if key in self._entries:
                    raise RuntimeError(f"two {self._what}s for {getattr(key, 'name', key)}")
                self._entries[key] = value
            return value

        return wrap

    def get(self, key: K) -> V | None:
        if not self._loaded:
            with self._lock:
                if not self._loaded:
                    for name in self._modules:
                        importlib.import_module(f"{self._package}.{name}")
                    self._loaded = True
        return self._entries.get(key)

    @property
    def entries(self) -> dict[K, V]:
        """The entries registered so far (without importing anything)."""
        return self._entries


def lazy_names(package: str, where: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of ``package`` for names imported on first use: ``where``
    maps each name to the submodule (relative to the package) that defines it. A name, once imported,
    joins the package's namespace, so later lookups do not come here. Importing the package stays cheap:
    nothing of ``where`` is imported until asked for."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *where})

    return __getattr__, __dir__
