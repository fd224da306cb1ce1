"""The whole spec: architecture, workload, mapping, variables and knobs, from YAML files."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from collections.abc import Mapping as MappingABC
from pathlib import Path
from typing import Any

from pydantic import Field, PrivateAttr

from .arch import Arch
from .base import SpecModel, validate
from .errors import Location, SourceMap, SpecError
from .mapping import Mapping
from .workload import Renames, Workload

log = logging.getLogger("fusemap")


class Config(SpecModel):
    """General settings."""

    expression_custom_functions: list[Any] = Field(default_factory=list)
    """Refused by fusemap: a spec may not bring code (kept only for a clear message)."""
    component_models: list[Any] = Field(default_factory=list)
    """Plug-in component models (not supported; kept for a clear message)."""
    use_installed_component_models: bool = True
    """Plug-in lookup (not supported)."""


class ModelOptions(SpecModel):
    """Model settings."""

    metrics: list[str] | str | None = None
    """Which metrics to compute (fusemap always computes all)."""


class MapperOptions(SpecModel):
    """FFM knobs (used by the mapper)."""

    metrics: list[str] | str | None = None
    """Objectives."""
    model_config = {"extra": "allow"}


class Spec(SpecModel):
    """Architecture + workload (+ mapping) and the values they may refer to."""

    arch: Arch | None = None
    """The architecture."""
    workload: Workload | None = None
    """The Einsums."""
    mapping: Mapping | None = None
    """A LoopTree mapping (optional)."""
    variables: dict[str, Any] = Field(default_factory=dict)
    """Top-level variables usable in every expression."""
    renames: Renames | None = None
    """Renames (the ``default`` entry applies to every Einsum)."""
    config: Config = Field(default_factory=Config)
    """General settings."""
    mapper: MapperOptions = Field(default_factory=MapperOptions)
    """Mapper knobs."""
    model: ModelOptions = Field(default_factory=ModelOptions)
    """Model knobs."""

    _sources: SourceMap = PrivateAttr(default_factory=SourceMap)
    _data: Any = PrivateAttr(default=None)
    _checked_with: Any = PrivateAttr(default=None)  # workload the mapping was checked against
    _files: list[str] = PrivateAttr(default_factory=list)
    _read: list[str] = PrivateAttr(default_factory=list)  # every file read, includes too
    _einsum_paths: list[tuple[str | int, ...]] | None = PrivateAttr(default=None)
    _variables: dict[str, Any] = PrivateAttr(default_factory=dict)  # the Jinja variables
    _referenced: frozenset[str] = PrivateAttr(default=frozenset())  # names templates read

    @property
    def inputs(self) -> dict[str, Any]:
        """The files given, every file read (includes too) and the Jinja variables."""
        return {
            "files": list(self._files),
            "read": list(self._read),
            "variables": dict(self._variables),
        }

    @property
    def referenced(self) -> frozenset[str]:
        """Names the templates read: the Jinja variables that can change this spec."""
        return self._referenced

    def digest(self) -> str:
        """SHA-256 (hex) of the rendered, combined spec data: equal for two loads that
        read the same values, whatever the files and variables that wrote them."""
        import hashlib
        import json

        text = json.dumps(canonical_data(self._data), separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    @property
    def input_files(self) -> list[str]:
        """Every file the spec was read from (included files too)."""
        return list(dict.fromkeys([*self._files, *self._read]))

    @property
    def sources(self) -> SourceMap:
        """Where each value of the spec was written."""
        return self._sources

    def locate(self, *path: str | int) -> Location:
        """Location of a data path, e.g. ``spec.locate("arch", "nodes", 1, "size")``."""
        return self._sources.locate(path, self._data)

    def einsum_path(self, index: int) -> tuple[str | int, ...]:
        """Data path of the ``index``-th Einsum (the YAML list may nest lists of Einsums)."""
        if self._einsum_paths is None:
            self._einsum_paths = self._find_einsum_paths()
        found = self._einsum_paths
        return found[index] if index < len(found) else ("workload", "einsums", index)

    def _find_einsum_paths(self) -> list[tuple[str | int, ...]]:
        found: list[tuple[str | int, ...]] = []

        def walk(items: Any, path: tuple[str | int, ...]) -> None:
            for i, item in enumerate(items):
                if isinstance(item, list):
                    walk(item, (*path, i))
                else:
                    found.append((*path, i))

        data = self._data.get("workload") if isinstance(self._data, MappingABC) else None
        einsums = data.get("einsums") if isinstance(data, MappingABC) else None
        if isinstance(einsums, list):
            walk(einsums, ("workload", "einsums"))
        return found

    def locate_einsum(self, index: int, *keys: str | int) -> Location:
        """Location of a field of the ``index``-th Einsum (after flattening nested lists).

        The key starts with the Einsum's name (concise Einsums have no ``name:`` key).
        """
        where = self.locate(*self.einsum_path(index), *keys)
        einsums = self.workload.einsums if self.workload is not None else []
        if index < len(einsums):
            key = ".".join([einsums[index].name, *(str(k) for k in keys)])
            where = Location(where.file, where.line, key)
        return where

    def require(self, *parts: str) -> None:
        """Fail clearly when a needed part (arch, workload, mapping) is missing."""
        for part in parts:
            if getattr(self, part) is None:
                used = {f for f, _ in self._sources.entries.values()}
                files = self._files or sorted(used)
                message = f"no '{part}:' section found in {', '.join(files) or 'the given files'}"
                empty = [f for f in self._files if f not in used]
                if empty:
                    message += f" ({', '.join(empty)} defines nothing)"
                raise SpecError(message)

    @classmethod
    def from_data(cls, data: Any, sources: SourceMap | None = None) -> Spec:
        """Validate plain data (as produced by the loader) into a Spec."""
        if not isinstance(data, MappingABC):
            raise SpecError("a spec must be a mapping of top-level keys")
        spec = validate(cls, dict(data), sources)
        spec._sources = sources or SourceMap()
        spec._data = data
        if spec.config.expression_custom_functions:
            raise SpecError(
                "custom expression functions are refused: a spec may not bring code",
                spec.locate("config", "expression_custom_functions"),
            )
        return spec


def load_spec(
    *paths: str | Path | Sequence[str | Path],
    variables: MappingABC[str, Any] | None = None,
    allow_unused: bool = False,
) -> Spec:
    """Load and validate a spec from YAML files (Jinja rendered with ``variables``).

    A variable that no file reads is an error (a misspelled sweep variable would
    silently give the default's result) unless ``allow_unused``."""
    from . import limits
    from .jinja_env import expand_paths
    from .loader import load_files

    limits.reset_budget()  # a new spec: a new budget for its expressions
    flat: list[str | Path] = []
    for p in paths:
        if isinstance(p, str | Path):
            flat.append(p)
        else:
            flat.extend(p)
    loaded = load_files(flat, dict(variables or {}))
    if not allow_unused:
        check_variables_used(variables or {}, loaded.referenced)
    data = loaded.data
    holders = [k for k in data if k in loaded.anchor_holders and k not in Spec.model_fields]
    if holders:
        # Unknown top-level keys are errors, except those that only hold a YAML anchor
        # (``input_sliced: &input_sliced {...}``, pasted in by include_text): they are
        # templates for aliases elsewhere, not spec content.
        log.info("ignoring top-level anchor holders: %s", ", ".join(holders))
        data = {k: v for k, v in data.items() if k not in holders}
    spec = Spec.from_data(data, loaded.sources)
    spec._files = expand_paths(flat)
    spec._read = list(loaded.files)
    spec._variables = dict(variables or {})
    spec._referenced = frozenset(loaded.referenced)
    return spec


def canonical_data(value: Any) -> Any:
    """Plain JSON data that tells apart what the loader tells apart (a quoted string is
    a literal, not an expression; 1 and 1.0 and "1" differ)."""
    if isinstance(value, MappingABC):
        return [type(value).__name__, [[str(k), canonical_data(v)] for k, v in value.items()]]
    if isinstance(value, list | tuple):
        return [type(value).__name__, [canonical_data(v) for v in value]]
    if isinstance(value, str):
        return [type(value).__name__, str(value)]
    return [type(value).__name__, repr(value)]


ALLOW_UNUSED = "pass --allow-unused (Python: load_spec(..., allow_unused=True))"


def check_variables_used(
    variables: MappingABC[str, Any],
    referenced: set[str] | frozenset[str],
    allow: str = ALLOW_UNUSED,
    where: Callable[[str], Location] | None = None,
) -> None:
    """Refuse variables that no template reads, with the closest name they do read.

    ``allow`` says how to accept them; ``where(name)`` locates one (default ``-D name``)."""
    import difflib

    unused = [name for name in variables if name not in referenced]
    if not unused:
        return
    name = unused[0]
    close = difflib.get_close_matches(name, sorted(referenced), n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    more = f" ({len(unused) - 1} more unused: {', '.join(unused[1:])})" if unused[1:] else ""
    raise SpecError(
        f"variable '{name}' is given but no spec file uses it{hint}{more}; "
        f"{allow} if that is intended",
        where(name) if where else Location(key=f"-D {name}"),
    )
