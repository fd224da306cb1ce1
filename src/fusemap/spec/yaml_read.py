"""Reading YAML text: composition bounded in nodes and time, and plain scalars read as
the YAML 1.2 core schema says (``1e9`` is a float, ``yes`` a string, ``0x10`` sixteen);
nothing is ever constructed from a tag."""

from __future__ import annotations

import io
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.composer import Composer
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from . import limits
from .errors import SpecError

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


class BoundedComposer(Composer):
    """Counts the nodes it makes against ``yaml_nodes`` (before a huge document is
    built, not after)."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        self.loader.fusemap_session.composed()
        return super().compose_node(parent, index)


class TickingText(io.StringIO):
    """The rendered text, read by the YAML scanner in chunks; each chunk checks the
    render clock, so parsing a huge text stops at ``render_seconds``."""

    def __init__(self, text: str, tick: Any) -> None:
        super().__init__(text)
        self._tick = tick

    def read(self, size: int | None = -1) -> str:
        self._tick()
        return super().read(size)


def compose(text: str, session: Any) -> Node | None:
    """The node graph of ``text``; ``session`` counts nodes (``composed()``) and owns
    the render clock (``env.tick``)."""
    yaml = YAML(typ="rt")
    yaml.Composer = BoundedComposer
    # Our own attribute on ruamel's YAML object: the composer reaches it as its loader.
    yaml.fusemap_session = session  # type: ignore[attr-defined]
    return yaml.compose(TickingText(text, session.env.tick))


def check_size(root: Node, already: int) -> None:
    """Refuse a node graph whose alias-expanded size exceeds yaml_nodes (billion laughs)."""
    sizes: dict[int, int] = {}

    def size(node: Node) -> int:
        if id(node) in sizes:
            return sizes[id(node)]
        sizes[id(node)] = 0  # a recursive alias is reported while converting
        kids = node.value if isinstance(node, SequenceNode) else []
        if isinstance(node, MappingNode):
            kids = [n for pair in node.value for n in pair]
        sizes[id(node)] = total = 1 + sum(size(k) for k in kids)
        if total + already > limits.current().yaml_nodes:
            raise SpecError(limits.exceeded("yaml_nodes", "document too large (alias expansion?)"))
        return total

    size(root)
