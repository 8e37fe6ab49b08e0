"""Execution backends, one package each, all shaped alike (see docs/adding-a-backend.md)."""
