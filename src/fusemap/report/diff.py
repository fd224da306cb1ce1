"""``fusemap diff A B``: what changed between two results (or two mappings, evaluated),
per component, Einsum and tensor, and by how much.

Both sides become the JSON shape of a result (``docs/json.md``); every number is compared.
A mapping written by fusemap names its inputs in its comment header, so ``diff`` can
evaluate it without being told the arch and workload again.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Group
from rich.table import Table

from ..spec.errors import SpecError
from ..units import area, capacity, number, quantity

SCOPES = ("total", "component", "Einsum", "tensor", "fused")


@dataclass(frozen=True)
class Change:
    """One quantity on both sides (a string for where a tensor is fused)."""

    scope: str
    name: str
    metric: str
    old: Any
    new: Any

    @property
    def delta(self) -> float | None:
        if isinstance(self.old, str) or isinstance(self.new, str):
            return None
        return (self.new or 0.0) - (self.old or 0.0)

    @property
    def relative(self) -> float | None:
        """(new - old) / old; None when old is zero or either side is not a number."""
        d = self.delta
        if d is None or not self.old:
            return None
        return d / abs(self.old)

    def changed(self, rtol: float = 1e-9) -> bool:
        if self.delta is None:
            return self.old != self.new
        if self.old is None or self.new is None:
            return self.old != self.new
        if math.isinf(self.old) or math.isinf(self.new):
            return self.old != self.new
        return abs(self.delta) > rtol * max(abs(self.old), abs(self.new)) + 1e-300


@dataclass
class Diff:
    """Every compared quantity and, for two mappings, the LoopTree text diff."""

    a: str
    b: str
    changes: list[Change]
    tree: list[str] = field(default_factory=list)
    unitless: frozenset[str] = frozenset()

    def changed(self, rtol: float = 1e-9) -> list[Change]:
        return [c for c in self.changes if c.changed(rtol)]

    def to_frame(self) -> Any:
        """A DataFrame: scope, name, metric, a, b, change, relative."""
        import pandas as pd

        rows = [
            (c.scope, c.name, c.metric, c.old, c.new, c.delta, c.relative) for c in self.changes
        ]
        return pd.DataFrame(
            rows, columns=["scope", "name", "metric", "a", "b", "change", "relative"]
        )


def flatten(data: dict[str, Any]) -> dict[tuple[str, str, str], Any]:
    """The numbers of a JSON result, keyed (scope, name, metric)."""
    out: dict[tuple[str, str, str], Any] = {}
    for k in ("energy", "latency", "area"):
        if k in data:
            out["total", "", k] = data[k]
    for c, cd in (data.get("components") or {}).items():
        for k in ("energy", "latency", "usage_bits", "area", "leak_power"):
            if k in cd:
                out["component", c, k] = cd[k]
    for e, ed in (data.get("einsums") or {}).items():
        for k in ("energy", "latency"):
            out["Einsum", e, k] = ed.get(k)
    tensors: dict[tuple[str, str, str], float] = {}
    for ed in (data.get("einsums") or {}).values():
        for c, cd in (ed.get("components") or {}).items():
            for t, td in (cd.get("tensors") or {}).items():
                for a, ad in td.items():
                    for key, v in (
                        (("tensor", t, "energy"), ad.get("energy", 0.0)),
                        (("tensor", t, f"{a}s at {c}"), ad.get("count", 0.0)),
                    ):
                        tensors[key] = tensors.get(key, 0.0) + (v or 0.0)
    out.update(dict(sorted(tensors.items())))
    for f in data.get("fused") or []:
        loops = (
            ", ".join(
                f"{x[0]}:{x[1]}" + (f" (spatial {x[2]})" if len(x) > 2 else "")
                for x in f.get("loops", [])
            )
            or "whole tensor"
        )
        out["fused", f["tensor"], "kept in"] = f"{f['memory']} ({loops})"
    return out


def diff_data(a: dict[str, Any], b: dict[str, Any], name_a: str = "A", name_b: str = "B") -> Diff:
    """Compare two JSON results."""
    fa, fb = flatten(a), flatten(b)
    if any(k[0] == "fused" for k in fa) or any(k[0] == "fused" for k in fb):
        for key in set(fa) | set(fb):  # a tensor fused on one side only
            if key[0] == "fused":
                fa.setdefault(key, "not fused")
                fb.setdefault(key, "not fused")
    keys = list(dict.fromkeys([*fa, *fb]))
    keys.sort(key=lambda k: SCOPES.index(k[0]))
    changes = [Change(*k, fa.get(k), fb.get(k)) for k in keys]
    unitless = frozenset(
        q for q in ("energy", "latency") if "1" in {(d.get("units") or {}).get(q) for d in (a, b)}
    )
    return Diff(name_a, name_b, changes, unitless=unitless)


_INPUT = re.compile(r"^# input: (.*) \(sha256 [0-9a-f]+\.\.\.\)$")
_DEFINE = re.compile(r"^# -D (.*)$")


def recorded_inputs(path: Path) -> tuple[list[str], dict[str, Any]]:
    """The inputs and -D values a fusemap-written mapping names in its comment header."""
    from ..spec.loader import parse_define

    files, variables = [], {}
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if not line.startswith("#"):
            break
        if m := _INPUT.match(line):
            files.append(m.group(1))
        elif m := _DEFINE.match(line):
            name, value = parse_define(m.group(1))
            variables[name] = value
    return files, variables


def load_side(
    path: Path, spec_files: list[Path], variables: dict[str, Any], allow_unused: bool = False
) -> tuple[dict[str, Any], str | None]:
    """A side of the diff as a JSON result (and its LoopTree text, for a mapping)."""
    if path.suffix.lower() == ".json":
        try:
            return json.loads(path.read_text(encoding="utf-8")), None
        except (OSError, ValueError) as err:
            raise SpecError(f"cannot read a JSON result from {path}: {err}") from None
    from ..model.evaluate import evaluate_mapping
    from ..spec.spec import load_spec
    from .render import text_tree

    files: Sequence[str | Path] = list(spec_files)
    given = dict(variables)
    if not files:
        files, recorded = recorded_inputs(path)
        given = {**recorded, **given}
        if not files:
            raise SpecError(
                f"{path} names no inputs in its header (not written by fusemap map): give "
                "the arch and workload with --spec ARCH --spec WORKLOAD"
            )
    spec = load_spec(*files, path, variables=given, allow_unused=allow_unused)
    spec.require("arch", "workload", "mapping")
    assert spec.mapping is not None
    result = evaluate_mapping(spec)
    return result.to_json(), text_tree(spec.mapping)


def diff_paths(
    a: Path, b: Path, spec_files: list[Path], variables: dict[str, Any], allow_unused: bool = False
) -> Diff:
    """Compare two results or mappings given by file."""
    da, ta = load_side(a, spec_files, variables, allow_unused)
    db, tb = load_side(b, spec_files, variables, allow_unused)
    out = diff_data(da, db, str(a), str(b))
    if ta is not None and tb is not None:
        out.tree = list(
            difflib.unified_diff(ta.splitlines(), tb.splitlines(), str(a), str(b), lineterm="")
        )
    return out


def _value(metric: str, v: Any, unitless: frozenset[str]) -> str:
    if v is None:
        return "-"
    if isinstance(v, str):
        return v
    if metric in ("energy", "leak_power"):
        return quantity(v, "J" if metric == "energy" else "W", "energy" in unitless)
    if metric == "latency":
        return quantity(v, "s", "latency" in unitless)
    if metric == "area":
        return area(v)
    if metric == "usage_bits":
        return capacity(v)
    return number(v)


def diff_tables(d: Diff, everything: bool = False) -> Group:
    """One table per scope with the quantities that changed (all with ``everything``)."""
    parts: list[Any] = []
    rows = d.changes if everything else d.changed()
    for scope in SCOPES:
        mine = [c for c in rows if c.scope == scope]
        if not mine:
            continue
        t = Table(title=f"Per {scope}" if scope != "total" else "Totals", title_justify="left")
        for col in (scope if scope != "total" else "", "quantity", "A", "B", "change", "%"):
            t.add_column(col, justify="left" if col in (scope, "", "quantity") else "right")
        for c in mine:
            delta = c.delta
            sign = "+" if delta is not None and delta > 0 else ""
            change = "" if delta is None else sign + _value(c.metric, delta, d.unitless)
            rel = "" if c.relative is None else f"{100 * c.relative:+.2f}%"
            t.add_row(c.name, c.metric, _value(c.metric, c.old, d.unitless),
                      _value(c.metric, c.new, d.unitless), change, rel)  # fmt: skip
        parts.append(t)
    head = f"A: {d.a}\nB: {d.b}"
    if not rows:
        parts.append("No difference in any number.")
    if d.tree:
        parts.append("LoopTree changes (unified diff):\n" + "\n".join(d.tree))
    return Group(head, *parts)
