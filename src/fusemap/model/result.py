"""Typed results of evaluating a mapping, with the JSON shape of the reference cases."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..spec.numbers import finite_json

FRAME_COLUMNS = ("einsum", "component", "kind", "tensor", "action", "count", "energy")


@dataclass
class ActionResult:
    """How many times an action happened and the energy it cost."""

    count: float = 0.0
    energy: float = 0.0
    model: str | None = None
    """The component model that priced the action (None: the spec gave its energy)."""

    def add(self, count: float, energy: float) -> None:
        self.count += count
        self.energy += energy

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"count": self.count, "energy": self.energy}
        if self.model is not None:
            out["model"] = self.model
        return out


@dataclass
class ComponentUse:
    """One component's activity during one Einsum."""

    name: str
    kind: str
    energy: float = 0.0
    latency: float = 0.0
    leak_energy: float = 0.0
    actions: dict[str, ActionResult] = field(default_factory=dict)
    tensors: dict[str, dict[str, ActionResult]] = field(default_factory=dict)

    @property
    def dynamic_energy(self) -> float:
        """Energy of the actions (without leak)."""
        return self.energy - self.leak_energy

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "energy": self.energy,
            "latency": self.latency,
            "leak_energy": self.leak_energy,
            "actions": {a: r.to_json() for a, r in self.actions.items()},
        }
        if self.kind != "compute":
            out["tensors"] = {
                t: {a: r.to_json() for a, r in acts.items()} for t, acts in self.tensors.items()
            }
        return out


@dataclass
class EinsumResult:
    """Energy and latency of one Einsum, per component."""

    name: str
    energy: float = 0.0
    latency: float = 0.0
    components: dict[str, ComponentUse] = field(default_factory=dict)
    compute_unit: str = ""
    operations: float = 0.0
    fanout_usage: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(
        default_factory=list
    )  # shapes counted as the format says, judged doubtful

    @property
    def bound_by(self) -> str:
        """The component with the longest latency (what limits this Einsum)."""
        if not self.components:
            return ""
        return max(self.components.values(), key=lambda c: c.latency).name

    def to_json(self) -> dict[str, Any]:
        return {
            "energy": self.energy,
            "latency": self.latency,
            "bound_by": self.bound_by,
            "compute_unit": self.compute_unit,
            "operations": self.operations,
            "components": {c: u.to_json() for c, u in self.components.items()},
        }


@dataclass
class ComponentTotals:
    """A component over the whole workload."""

    name: str
    kind: str
    energy: float = 0.0
    latency: float = 0.0
    area: float = 0.0
    leak_power: float = 0.0
    usage: float | None = None  # fraction of size (memories only; 0 for unbounded)
    usage_bits: float | None = None
    size: float | None = None
    models: dict[str, str] = field(default_factory=dict)
    """Component model behind each value it gave: ``area``, ``leak_power``, action names."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "energy": self.energy,
            "latency": self.latency,
            "area": self.area,
            "leak_power": self.leak_power,
        }
        if self.usage is not None:
            out["usage"] = self.usage
            out["usage_bits"] = self.usage_bits
            finite = self.size is not None and self.size != float("inf")
            out["size_bits"] = self.size if finite else None  # null: unbounded
        if self.models:
            out["models"] = dict(self.models)
        return out


@dataclass
class Result:
    """Everything the model computed for one mapping."""

    energy: float
    latency: float
    einsums: dict[str, EinsumResult]
    components: dict[str, ComponentTotals]
    area: float = 0.0
    unitless: frozenset[str] = frozenset()
    """Quantities the spec gives without units ("energy", "latency"): toy specs that count
    actions and cycles (rule in ``fusemap.units``)."""
    occupancy: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    """Einsum (in execution order) -> memory -> tensor -> bits live while it runs: the
    reservations' lifetimes (model/capacity.py), the buffer usage over the schedule."""

    @property
    def warnings(self) -> list[str]:
        """What the model counted as the format defines but judges doubtful, per Einsum."""
        return [w for e in self.einsums.values() for w in e.warnings]

    def einsum(self, name: str) -> EinsumResult:
        """Result of one Einsum."""
        return self.einsums[name]

    def component(self, name: str) -> ComponentTotals:
        """Totals of one component."""
        return self.components[name]

    def energy_of(
        self,
        component: str | None = None,
        einsum: str | None = None,
        tensor: str | None = None,
        action: str | None = None,
    ) -> float:
        """Energy filtered by any of component, Einsum, tensor and action."""
        total = 0.0
        for e in self.einsums.values():
            if einsum is not None and e.name != einsum:
                continue
            for c in e.components.values():
                if component is not None and c.name != component:
                    continue
                if tensor is not None:
                    for a, r in c.tensors.get(tensor, {}).items():
                        if action is None or a == action:
                            total += r.energy
                elif action is None:
                    total += c.energy
                else:
                    total += c.actions.get(action, ActionResult()).energy
        return total

    def count(
        self, component: str, action: str, einsum: str | None = None, tensor: str | None = None
    ) -> float:
        """Number of ``action`` at ``component`` (optionally for one Einsum / tensor)."""
        total = 0.0
        for e in self.einsums.values():
            if einsum is not None and e.name != einsum:
                continue
            c = e.components.get(component)
            if c is None:
                continue
            book = c.actions if tensor is None else c.tensors.get(tensor, {})
            total += book.get(action, ActionResult()).count
        return total

    @property
    def units(self) -> dict[str, str]:
        """Unit of each kind of number of the result (``1``: unitless)."""
        from ..units import json_units

        return json_units("energy" in self.unitless, "latency" in self.unitless)

    def to_json(self) -> dict[str, Any]:
        """The nested shape of ``reference/model/*/expected.json`` (plus a few extras);
        ``docs/json.md`` documents every key."""
        return {
            "energy": self.energy,
            "latency": self.latency,
            "area": self.area,
            "einsums": {n: e.to_json() for n, e in self.einsums.items()},
            "components": {n: c.to_json() for n, c in self.components.items()},
            "occupancy": self.occupancy,
            "units": self.units,
            "warnings": self.warnings,
        }

    def to_frame(self) -> Any:
        """A pandas DataFrame in long format, one row per action (and per tensor):
        columns einsum, component, kind, tensor, action, count, energy.

        Memory actions come per tensor; compute actions and leak have no tensor. Leak
        rows have action ``leak`` and no count. ``frame.energy.sum()`` is ``self.energy``.
        """
        import pandas as pd

        return pd.DataFrame(self.rows(), columns=list(FRAME_COLUMNS))

    def rows(self) -> list[tuple]:
        """The rows of :meth:`to_frame` as tuples (``FRAME_COLUMNS``)."""
        rows: list[tuple] = []
        for e in self.einsums.values():
            for c in e.components.values():
                for action, total in c.actions.items():
                    left_count, left_energy = total.count, total.energy
                    for tensor, acts in c.tensors.items():
                        r = acts.get(action)
                        if r is None:
                            continue
                        rows.append((e.name, c.name, c.kind, tensor, action, r.count, r.energy))
                        left_count -= r.count
                        left_energy -= r.energy
                    if not c.tensors or abs(left_energy) > 1e-12 * max(abs(total.energy), 1e-300):
                        count = total.count if not c.tensors else left_count
                        rows.append((e.name, c.name, c.kind, None, action, count, left_energy))
                if c.leak_energy:
                    rows.append((e.name, c.name, c.kind, None, "leak", None, c.leak_energy))
        return rows

    def dumps(self) -> str:
        """JSON text."""
        return finite_json(self.to_json(), indent=1)
