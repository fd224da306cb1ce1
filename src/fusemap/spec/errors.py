"""User-facing errors and the source map that locates every value of a spec.

Every error a user can cause is a :class:`FusemapError`. Its ``str()`` is the one line the
CLI prints, e.g. ``arch.yaml:14: GlobalBuffer.size: expected a number, got 'big'``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

Path_ = tuple[str | int, ...]
"""A path into the combined spec data, e.g. ``("arch", "nodes", 1, "size")``."""


@dataclass(frozen=True)
class Location:
    """Where a value came from: file, 1-based line and a readable key."""

    file: str | None = None
    line: int | None = None
    key: str | None = None

    def prefix(self) -> str:
        parts = []
        if self.file:
            parts.append(self.file if self.line is None else f"{self.file}:{self.line}")
        if self.key:
            parts.append(self.key)
        return ": ".join(parts)


class FusemapError(Exception):
    """Base of every error caused by user input (printed as one line, exit status 2)."""

    def __init__(self, message: str, location: Location | None = None):
        super().__init__(message)
        self.message = message
        self.location = location or Location()

    def __str__(self) -> str:
        prefix = self.location.prefix()
        return f"{prefix}: {self.message}" if prefix else self.message

    def located(self, location: Location) -> FusemapError:
        """Fill in whatever parts of the location are still unknown."""
        old = self.location
        self.location = Location(
            old.file or location.file,
            old.line if old.line is not None else location.line,
            old.key or location.key,
        )
        return self


class SpecError(FusemapError):
    """A spec file is malformed: syntax, unknown key, wrong type, missing field, ..."""


class ExpressionError(SpecError):
    """An expression in a spec cannot be evaluated (unknown name, type, cycle, ...)."""


class UnknownNameError(ExpressionError):
    """An expression names something its scope does not hold."""

    def __init__(self, name: str, message: str, location: Location | None = None):
        super().__init__(message, location)
        self.name = name


class InvalidMappingError(FusemapError):
    """A mapping is well-formed but cannot run on the architecture (overflow, fanout)."""


@dataclass
class SourceMap:
    """Maps paths in the combined spec data to (file, line).

    The loader records the line of every mapping key and every list item. Lookups fall
    back to the longest recorded prefix, so any path gets the nearest known location.
    """

    entries: dict[Path_, tuple[str, int]] = field(default_factory=dict)

    def add(self, path: Path_, file: str, line: int) -> None:
        self.entries.setdefault(path, (file, line))

    def update(self, other: SourceMap, prefix: Path_ = ()) -> None:
        for path, loc in other.entries.items():
            self.entries.setdefault(prefix + path, loc)

    def lookup(self, path: Sequence[str | int]) -> tuple[str | None, int | None]:
        path = tuple(path)
        while True:
            hit = self.entries.get(path)
            if hit is not None:
                return hit
            if not path:
                return None, None
            path = path[:-1]

    def locate(self, path: Sequence[str | int], data: object = None) -> Location:
        """Location of ``path``; with ``data`` the key reads ``GlobalBuffer.size``."""
        file, line = self.lookup(path)
        return Location(file, line, describe_path(path, data))


def describe_path(path: Sequence[str | int], data: object = None) -> str:
    """A readable key for a data path: the innermost named arch node or Einsum, then the rest.

    ``("arch", "nodes", 1, "size")`` reads ``GlobalBuffer.size`` when node 1 is named
    GlobalBuffer, else ``arch.nodes[1].size``; ``("arch", "nodes", 3, "actions", 0,
    "energy")`` reads ``MAC.actions[0].energy``. Only elements of ``nodes`` lists under
    ``arch`` and of ``einsums`` lists under ``workload`` lend their names (a mapping
    node's ``name`` is a fanout dimension, an action's name is not unique).
    """
    start, parts = 0, []
    node: Any = data  # any nested data: a step that does not fit gives None
    section = path[0] if path else None
    for i, step in enumerate(path):
        try:
            node = node[step]
        except (KeyError, IndexError, TypeError):
            node = None
        name = node.get("name") if isinstance(node, dict) else None
        if isinstance(name, str) and isinstance(step, int) and _named_list(section, path[:i]):
            start, parts = i + 1, [name]
    for step in path[start:]:
        parts.append(f"[{step}]" if isinstance(step, int) else str(step))
    text = ""
    for p in parts:
        text += p if (not text or p.startswith("[")) else "." + p
    return text


def _named_list(section: object, before: Sequence[str | int]) -> bool:
    """Whether the list at ``before`` holds named arch nodes or Einsums."""
    keys = [k for k in before if isinstance(k, str)]
    if section == "arch":
        return bool(keys) and keys[-1] == "nodes"
    if section == "workload":
        return keys == ["workload", "einsums"]
    return False
