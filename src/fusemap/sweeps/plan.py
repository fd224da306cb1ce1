"""The sweep file: which spec files, which Jinja variables take which values, and what
each point computes. Read like every spec (Jinja sandboxed, then YAML) and validated
with one located line per mistake.

```yaml
arch: arch.yaml                  # paths are relative to the sweep file
workload: workload.yaml
files: [mapper.yaml]             # more spec files (optional)
mapping: mapping.yaml            # optional: evaluate this mapping at every point
objective: energy                # energy | latency | edp
orders: given                    # given | all (Einsum orders the mapper tries)
variables: {D: 64}               # fixed Jinja variables
sweep:                           # the swept Jinja variables (fusemap.sweeps.ranges)
  BUFFER_KIB: [64, 128, 256]
  S: {from: 32, to: 128, factor: 2}
combine: product                 # product (every combination) | zip (the i-th values)
allow_unused: false              # a variable no spec file reads is an error
```
"""

from __future__ import annotations

import itertools
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from ..spec import limits
from ..spec.base import SpecModel, validate
from ..spec.errors import Location, SourceMap, SpecError
from .ranges import SweptVariable, swept_variable

RESERVED = frozenset(
    {"key", "point", "status", "error", "objective", "mode", "energy", "latency", "edp",
     "area", "energy_unit", "latency_unit", "component_energy", "fused", "pmappings",
     "templates", "distinct_einsums", "orders", "joined", "kept", "pruned_fraction",
     "statistics", "notes", "wall_seconds", "mapper_seconds", "peak_mb", "fusemap_version"}
)  # fmt: skip
"""Result columns: a variable may not take one of these names."""
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class SweepFile(SpecModel):
    """The keys a sweep file may hold (module docstring)."""

    arch: str
    """The architecture file."""
    workload: str
    """The workload file."""
    files: list[str] = Field(default_factory=list)
    """More spec files (mapper knobs, variables, ...)."""
    mapping: str | None = None
    """A mapping: then every point is evaluated with it, not mapped."""
    objective: Literal["energy", "latency", "edp"] = "energy"
    """What the mapper minimizes at every point."""
    orders: Literal["given", "all"] = "given"
    """Einsum orders the mapper tries (as ``fusemap map --orders``)."""
    variables: dict[str, Any] = Field(default_factory=dict)
    """Jinja variables with one value for every point."""
    sweep: dict[str, Any]
    """Swept Jinja variables: a list of values or a range each."""
    combine: Literal["product", "zip"] = "product"
    """Every combination of the values, or the i-th value of each (equal lengths)."""
    allow_unused: bool = False
    """Accept variables that no spec file reads."""


@dataclass(frozen=True)
class SweepPlan:
    """A validated sweep: the spec files (paths resolved), the points and the settings."""

    path: str
    files: tuple[str, ...]
    """Every spec file, in load order: arch, workload, the extra files, the mapping."""
    mapping: str | None
    objective: str
    orders: str
    fixed: dict[str, Any]
    swept: tuple[SweptVariable, ...]
    combine: str
    allow_unused: bool
    sources: SourceMap = field(repr=False, compare=False)
    data: Any = field(repr=False, compare=False)

    @property
    def mode(self) -> str:
        """``evaluate`` with a fixed mapping, else ``map``."""
        return "evaluate" if self.mapping is not None else "map"

    @property
    def names(self) -> tuple[str, ...]:
        """The swept variables' names, in the order written."""
        return tuple(v.name for v in self.swept)

    def locate(self, *path: str | int) -> Location:
        """Where a key of the sweep file was written."""
        return self.sources.locate(path, self.data)

    def points(self) -> list[dict[str, Any]]:
        """The swept variables' values at every point, in sweep order (product: the last
        variable varies fastest)."""
        columns = [v.values for v in self.swept]
        rows = zip(*columns, strict=True) if self.combine == "zip" else itertools.product(*columns)
        return [dict(zip(self.names, row, strict=True)) for row in rows]


def load_sweep(path: str | Path) -> SweepPlan:
    """Read and validate a sweep file; a mistake is a SpecError naming file, line and key."""
    try:
        return _load(str(path))
    except SpecError as err:  # e.g. a missing key: no line, but the file
        raise err.located(Location(str(path))) from None


def _load(path: str) -> SweepPlan:
    from ..spec.loader import load_files

    loaded = load_files([path])
    data, sources = loaded.data, loaded.sources
    raw = validate(SweepFile, data, sources)

    def locate(*keys: str | int) -> Location:
        return sources.locate(keys, data)

    base = os.path.dirname(path)
    files = [
        _spec_file(base, raw.arch, locate("arch")),
        _spec_file(base, raw.workload, locate("workload")),
    ]
    files += [_spec_file(base, f, locate("files", i)) for i, f in enumerate(raw.files)]
    mapping = _spec_file(base, raw.mapping, locate("mapping")) if raw.mapping else None
    if not raw.sweep:
        raise SpecError("no variables to sweep", locate("sweep"))
    for section, names in (("variables", raw.variables), ("sweep", raw.sweep)):
        for name in names:
            _check_name(name, locate(section, name))
    both = sorted(set(raw.variables) & set(raw.sweep))
    if both:
        raise SpecError(
            f"'{both[0]}' is both fixed (variables) and swept", locate("sweep", both[0])
        )
    swept = tuple(
        swept_variable(name, value, lambda *k, n=name: locate("sweep", n, *k))
        for name, value in raw.sweep.items()
    )
    _check_points(swept, raw.combine, locate)
    return SweepPlan(
        path, tuple(files + ([mapping] if mapping else [])), mapping, raw.objective,
        raw.orders, dict(raw.variables), swept, raw.combine, raw.allow_unused, sources, data,
    )  # fmt: skip


def _spec_file(base: str, name: str, where: Location) -> str:
    """``name`` relative to the sweep file's folder; it must be a readable file."""
    path = os.path.normpath(os.path.join(base, os.path.expanduser(name)))
    if not os.path.isfile(path):
        what = "a folder" if os.path.isdir(path) else "no such file"
        raise SpecError(f"{what}: {path!r}", where)
    return path


def _check_name(name: str, where: Location) -> None:
    if not _NAME.match(name):
        raise SpecError(f"'{name}' is not a Jinja variable name (letters, digits, _)", where)
    if name in RESERVED:
        raise SpecError(f"'{name}' names a result column; rename the variable", where)


def _check_points(swept: tuple[SweptVariable, ...], combine: str, locate: Any) -> None:
    if combine == "zip":
        lengths = {v.name: len(v.values) for v in swept}
        first = swept[0]
        for v in swept[1:]:
            if len(v.values) != len(first.values):
                raise SpecError(
                    f"combine: zip needs as many values for every variable: {first.name} "
                    f"has {len(first.values)}, {v.name} {lengths[v.name]}",
                    locate("sweep", v.name),
                )
        return
    total = math.prod(len(v.values) for v in swept)
    if total > limits.current().sweep_points:
        raise SpecError(
            limits.exceeded("sweep_points", f"the product has {total:,} points"), locate("sweep")
        )
