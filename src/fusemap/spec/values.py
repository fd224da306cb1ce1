"""Scalar value kinds that the YAML loader preserves for the evaluator."""

from __future__ import annotations


class QuotedStr(str):
    """A string that was quoted in YAML: a literal, never evaluated as an expression.

    Numeric quoted strings (``energy: "3"``) still read as numbers.
    """

    __slots__ = ()
