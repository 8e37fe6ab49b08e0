"""The PyTorch front door's tests need torch and ExecuTorch: `make test` runs them in .venv-export
(`make export-env`); in an environment without them they are not collected."""

from __future__ import annotations

import importlib.util


def _installed(name: str) -> bool:
    """Whether ``name`` is a regular package: tests/ is on sys.path in a whole run, where this folder would
    pass for a namespace package "torch" (ExecuTorch's top level is a namespace package: ask for exir)."""
    try:
        spec = importlib.util.find_spec(name)
    except ImportError:
        return False
    return spec is not None and spec.origin not in (None, "namespace")


collect_ignore_glob = [] if _installed("torch") and _installed("executorch.exir") else ["test_*.py"]
