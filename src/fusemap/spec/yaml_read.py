"""Plain YAML scalars read as the YAML 1.2 core schema says (``1e9`` is a float,
``yes`` a string, ``0x10`` sixteen); nothing is ever constructed from a tag."""

from __future__ import annotations

from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.nodes import ScalarNode

CORE = "tag:yaml.org,2002:"
"""Prefix of the core schema's tags."""


def implicit_tag(text: str) -> str:
    """The tag the YAML 1.2 resolver gives the plain scalar ``text``."""
    node = YAML(typ="rt").resolver.resolve(ScalarNode, text, (True, False))
    return str(node)


def plain_scalar(text: str, tag: str | None) -> Any:
    """Value of a plain (unquoted) scalar the YAML 1.2 resolver tagged ``tag``."""
    tag = str(tag or "")
    raw = text.replace("_", "")
    try:
        if tag == CORE + "null":
            return None
        if tag == CORE + "bool":
            if text.lower() in ("true", "false"):
                return text.lower() == "true"
            return text
        if tag == CORE + "int":
            sign = -1 if raw.startswith("-") else 1
            digits = raw.lstrip("+-")
            for prefix, base in (("0x", 16), ("0o", 8), ("0b", 2)):
                if digits.startswith(prefix):
                    return sign * int(digits[2:], base)
            return sign * int(digits, 10)
        if tag == CORE + "float":
            low = raw.lower()
            if low.endswith(".inf"):
                return float("-inf") if low.startswith("-") else float("inf")
            if low == ".nan":
                return float("nan")
            return float(raw)
    except ValueError:
        return str(text)
    return str(text)
