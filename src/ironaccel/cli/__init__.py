"""The ``ironaccel`` command line; the only layer that prints for people."""

from .main import main

__all__ = ["main"]
