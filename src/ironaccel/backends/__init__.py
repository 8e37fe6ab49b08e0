"""Execution backends, one package each, all shaped alike: ``cpu``, ``vulkan``, and ``_template``, the kit a new
backend is copied from (registered as the ``null`` device). Each registers through an entry point of the group
``ironaccel.backends`` (ADR 0030); docs/adding-a-backend.md walks from the copy to a first operator."""
