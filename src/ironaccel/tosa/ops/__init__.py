"""Operator knowledge, one module per operator group of the specification.

Each group module registers, for each of its operators, a *rule*: a function that receives a
:class:`~ironaccel.tosa.ops.rule.Context` (the operator's attribute and input tensor types), raises
through ``ctx.error_if`` / ``ctx.require`` for every ERROR_IF / REQUIRE of the 1.0 pseudocode that is
specific to the operator, and returns the inferred output shapes. The generic checks that the
specification states as data (argument counts, ranks, element-type support per profile and extension,
level limits) run in :mod:`ironaccel.tosa.validate` from the extracted specification tables and are
not repeated here.
"""

from .rule import RULES, Context, TensorType, rule, rule_for

__all__ = ["RULES", "Context", "TensorType", "rule", "rule_for"]
