"""The architecture evaluated for one Einsum: numbers and tensor sets, per component.

The arch is evaluated once per Einsum (its expressions may depend on the Einsum, e.g.
``enabled: len(All) == 3``), then flattened to the path from the root to one compute
unit. Costs that are missing are reported only when the model asks for them.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from . import arch as A
from .errors import ExpressionError, Location, SpecError
from .expressions import ExprObject, Scope, evaluate, evaluate_fields, parse_expression
from .numbers import amount, count, number, positive
from .resolve import EinsumInfo, WorkloadInfo
from .sets import TensorSet, evaluate_set_expression, evaluate_set_keyed_dict
from .spec import Spec
from .values import QuotedStr

_SCALARS = (
    "size",
    "enabled",
    "area",
    "area_scale",
    "leak_power",
    "leak_power_scale",
    "energy_scale",
    "actions_scale",
    "throughput_scale",
    "n_parallel_instances",
    "bits_per_action",
    "skip_initial_output_write",
)
_DIRECTIONS = {"up": "up", "down": "down", "up_and_down": "up_and_down"}


@dataclass
class ActionCost:
    """One action with its energy and throughput (scales applied)."""

    name: str
    energy: float | None
    throughput: float
    bits_per_action: float
    values_per_action: Mapping[str, float]
    missing: str | None = None
    location: Location | None = field(default=None, repr=False, compare=False)

    def energy_per_action(self, component: str) -> float:
        """Energy, or a clear error when the spec does not give it."""
        if self.energy is None:
            raise SpecError(f"component {component}: {self.missing}", self.location)
        return self.energy


@dataclass
class SpatialInfo:
    """One fanout dimension, evaluated."""

    name: str
    fanout: int
    may_reuse: frozenset[str]
    reuse: frozenset[str]
    usage_scale: float
    power_gateable: bool
    min_usage: float
    loop_bounds: list[A.LoopBound]


@dataclass
class ComponentInfo:
    """A component evaluated for one Einsum."""

    name: str
    kind: str  # memory | toll | compute | container
    node: Any = field(repr=False)
    spatial: list[SpatialInfo]
    size: float = math.inf
    enabled: bool = True
    actions: dict[str, ActionCost] = field(default_factory=dict)
    area: float = 0.0
    leak_power: float = 0.0
    actions_scale: float = 1.0
    n_parallel_instances: float = 1.0
    keep: frozenset[str] = frozenset()
    may_keep: frozenset[str] = frozenset()
    bits_per_value: Mapping[str, float] = field(default_factory=dict)
    skip_initial_output_write: bool = True
    direction: Mapping[str, str] = field(default_factory=dict)
    fields: Mapping[str, Any] = field(default_factory=dict, repr=False)
    latency_scope: Scope | None = field(default=None, repr=False)
    location: Location | None = field(default=None, repr=False)
    latency_location: Location | None = field(default=None, repr=False)
    missing_area: str | None = None
    operators: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    """Compute units: operator -> {action or operator: count per use} (evaluated)."""

    def values_per_action(self, action: str, tensor: str, workload_bits: float) -> float:
        """Values moved by one ``action`` of ``tensor`` (precedence as in §2)."""
        act = self.actions[action]
        if tensor in act.values_per_action:
            return act.values_per_action[tensor]
        bits = self.bits_per_value.get(tensor, workload_bits)
        return act.bits_per_action / bits

    def value_bits(self, tensor: str, workload_bits: float) -> float:
        """Bits per value of ``tensor`` stored here."""
        return self.bits_per_value.get(tensor, workload_bits)


@dataclass
class FlatArch:
    """The path from the root to one compute unit, evaluated for one Einsum."""

    einsum: str
    compute: str
    path: list[ComponentInfo]

    def __iter__(self) -> Iterator[ComponentInfo]:
        return iter(self.path)

    def component(self, name: str) -> ComponentInfo:
        """The component called ``name`` on this path."""
        for c in self.path:
            if c.name == name:
                return c
        raise KeyError(name)

    def index(self, name: str) -> int:
        """Depth of ``name`` on the path (0 = root)."""
        for i, c in enumerate(self.path):
            if c.name == name:
                return i
        raise KeyError(name)


class _ComponentView(ExprObject):
    """``GlobalBuffer.size`` in an expression: the evaluated fields of a component."""

    def __init__(self, get: Any, name: str):
        self._get, self._name = get, name

    def expr_getattr(self, name: str) -> Any:
        fields = self._get(self._name).fields
        if name == "tensors":
            return self._get(self._name).kept_set
        if name in fields:
            return fields[name]
        raise ExpressionError(f"component {self._name} has no field '{name}'")


class _Lazy(Mapping):
    """A scope layer whose values are computed on first use (component names)."""

    def __init__(self, names: list[str], make: Any):
        self._names, self._make = names, make

    def __getitem__(self, key: str) -> Any:
        if key not in self._names:
            raise KeyError(key)
        return self._make(key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


@dataclass
class _Partial:
    fields: dict[str, Any]
    kept_set: TensorSet | None = None


class ArchEvaluator:
    """Evaluates the arch of a spec once per Einsum (results cached)."""

    def __init__(self, spec: Spec, workload: WorkloadInfo):
        spec.require("arch")
        self.spec, self.workload = spec, workload
        self.arch: A.Arch = spec.arch  # type: ignore[assignment]
        self._paths = self._node_paths()
        self._cache: dict[str, dict[str, ComponentInfo]] = {}
        self._locations: dict[tuple, Location] = {}

    def _node_paths(self) -> dict[str, tuple]:
        out: dict[str, tuple] = {}

        def walk(nodes: list, prefix: tuple) -> None:
            for i, n in enumerate(nodes):
                if isinstance(n, A.Fork):
                    walk(n.nodes, prefix + (i, "nodes"))
                else:
                    out[n.name] = prefix + (i,)

        walk(self.arch.nodes, ("arch", "nodes"))
        return out

    def locate(self, component: str, *keys: str | int) -> Location:
        """Where a component's field was written (the same for every Einsum: cached)."""
        key = (component, *keys)
        found = self._locations.get(key)
        if found is None:
            found = self._locations[key] = self.spec.locate(*self._paths[component], *keys)
        return found

    def flat(self, einsum: str, compute: str) -> FlatArch:
        """The evaluated path to ``compute`` for ``einsum``."""
        comps = self.components(einsum)
        try:
            path = self.arch.path_to(compute)
        except KeyError:
            raise SpecError(f"unknown compute unit '{compute}'") from None
        return FlatArch(einsum, compute, [comps[n.name] for n in path])

    def components(self, einsum: str) -> dict[str, ComponentInfo]:
        """Every component evaluated for ``einsum``."""
        if einsum not in self._cache:
            self._cache[einsum] = self._evaluate(self.workload.einsum(einsum))
        return self._cache[einsum]

    # ------------------------------------------------------------------ evaluation
    def _evaluate(self, info: EinsumInfo) -> dict[str, ComponentInfo]:
        leaves = {n.name: n for n in self.arch.leaves()}
        arch_vars = evaluate_fields(
            self.arch.variables,
            info.scope,
            locate=lambda k: self.spec.locate("arch", "variables", k),
        )
        base = info.scope.child(arch_vars)
        partial: dict[str, _Partial] = {}
        busy: list[str] = []

        def get(name: str) -> _Partial:
            if name in partial:
                return partial[name]
            if name in busy:
                raise ExpressionError(f"cycle between components: {' -> '.join(busy + [name])}")
            busy.append(name)
            try:
                node = leaves[name]
                raw = {k: getattr(node, k) for k in _SCALARS if hasattr(node, k)}
                scope = base.child(views)
                fields = evaluate_fields(raw, scope, locate=lambda k: self.locate(name, k))
                p = _Partial(fields)
                partial[name] = p
                p.kept_set = self._keep(node, base.child(sets), info)[0]
                return p
            finally:
                busy.remove(name)

        views = _Lazy(list(leaves), lambda n: _ComponentView(get, n))
        sets = _Lazy(list(leaves), lambda n: get(n).kept_set)
        out = {}
        for name, node in leaves.items():
            p = get(name)
            out[name] = self._component(node, p.fields, base, views, sets, info)
        return out

    def _keep(self, node: Any, scope: Scope, info: EinsumInfo) -> tuple[TensorSet, TensorSet]:
        space: TensorSet = info.sets["All"]
        pol = getattr(node, "tensors", None)
        if pol is None:
            return space - space, space - space
        loc = self.locate(node.name, "tensors")
        keep = (
            evaluate_set_expression(pol.keep, scope, space=space, location=loc)
            if pol.keep is not None
            else space - space
        )
        if pol.may_keep is not None:
            may = evaluate_set_expression(pol.may_keep, scope, space=space, location=loc)
        else:
            may = space - space if pol.keep is not None else space
        return keep, may

    def _component(
        self, node: Any, fields: dict, base: Scope, views: Mapping, sets: Mapping, info: EinsumInfo
    ) -> ComponentInfo:
        name = node.name
        where = self.locate(name)
        scope = base.child(views, fields)
        set_scope = base.child(sets)
        space: TensorSet = info.sets["All"]
        spatial = [
            self._spatial(node, i, d, set_scope, space, info) for i, d in enumerate(node.spatial)
        ]
        kind = {A.Memory: "memory", A.Toll: "toll", A.Compute: "compute"}.get(
            type(node), "container"
        )
        comp = ComponentInfo(name, kind, node, spatial, location=where)
        if kind == "container":
            comp.area = amount(fields.get("area", node.area), self.locate(name, "area"))
            comp.leak_power = amount(
                fields.get("leak_power", node.leak_power), self.locate(name, "leak_power")
            )
            return comp
        dummy = node.component_class == "Dummy"
        plugin = node.component_class not in (None, "Dummy")
        comp.enabled = bool(fields["enabled"])
        comp.actions_scale = amount(fields["actions_scale"], self.locate(name, "actions_scale"))
        comp.n_parallel_instances = positive(
            fields["n_parallel_instances"], self.locate(name, "n_parallel_instances")
        )
        comp.fields = fields
        for key in ("area", "leak_power"):
            value = fields.get(key)
            if value is None:
                if plugin:
                    comp.missing_area = (
                        f"'{key}' is not given and component_class "
                        f"'{node.component_class}' is a plug-in model, which "
                        f"fusemap does not run; give '{key}' in the spec"
                    )
                value = 0
            scale = amount(fields[f"{key}_scale"], self.locate(name, f"{key}_scale"))
            at = self.locate(name, key)
            setattr(comp, key, amount(value, at) * scale * comp.n_parallel_instances)
        if kind in ("memory", "toll"):
            keep, may = self._keep(node, set_scope, info)
            comp.keep, comp.may_keep = keep.items, may.items
            if node.bits_per_value:
                found = evaluate_set_keyed_dict(
                    node.bits_per_value,
                    scope,
                    space=space,
                    location_of_key=lambda k: self.locate(name, "bits_per_value", k),
                )
                comp.bits_per_value = {
                    t: positive(v, self.locate(name, "bits_per_value")) for t, v in found.items()
                }
        if kind == "memory":
            comp.size = number(fields["size"], self.locate(name, "size"), low=0, infinite=True)
        if kind in ("memory", "compute"):
            comp.skip_initial_output_write = bool(fields["skip_initial_output_write"])
        if kind == "toll":
            comp.direction = self._direction(node, set_scope, space)
        comp_vpa = self._values_per_action(
            node.values_per_action if kind != "compute" else None, scope, space, name, where
        )
        comp_bpa = fields.get("bits_per_action")
        for i, act in enumerate(node.actions):
            comp.actions[act.name] = self._action(
                node, i, act, scope, fields, comp_bpa, comp_vpa, space, dummy, plugin
            )
        if kind == "compute":
            comp.operators = self._operators(node, scope)
        comp.latency_scope = scope
        comp.latency_location = self.locate(name, "total_latency")
        latency = node.total_latency
        if isinstance(latency, str) and not isinstance(latency, QuotedStr):
            # Evaluated by the model once actions are counted; check its text now.
            try:
                parse_expression(latency)
            except ExpressionError as err:
                raise err.located(self.locate(name, "total_latency")) from None
        return comp

    def _action(self, node, i, act, scope, fields, comp_bpa, comp_vpa, space, dummy, plugin):
        name = node.name
        where = self.locate(name, "actions", i)
        vals = evaluate_fields(
            {
                k: getattr(act, k)
                for k in (
                    "energy",
                    "energy_scale",
                    "throughput",
                    "throughput_scale",
                    "latency",
                    "bits_per_action",
                )
            },
            scope,
            locate=lambda k: self.locate(name, "actions", i, k),
        )
        missing = None
        energy = vals["energy"]
        if energy is None:
            if plugin:
                missing = (
                    f"action '{act.name}' has no energy and component_class "
                    f"'{node.component_class}' is a plug-in model, which fusemap does "
                    "not run; give 'energy' in the spec"
                )
            elif not dummy:
                missing = f"action '{act.name}' has no energy (give 'energy' in the spec)"
        else:
            energy = (
                amount(energy, self.locate(name, "actions", i, "energy"))
                * amount(fields["energy_scale"], self.locate(name, "energy_scale"))
                * amount(vals["energy_scale"], self.locate(name, "actions", i, "energy_scale"))
            )
        if dummy and energy is None:
            energy = 0.0
        tp = vals["throughput"]
        if tp is None and vals["latency"] is not None:
            latency = amount(vals["latency"], self.locate(name, "actions", i, "latency"))
            tp = 1 / latency if latency else math.inf
        elif tp is not None:
            tp = positive(tp, self.locate(name, "actions", i, "throughput"), infinite=True)
        tp = math.inf if tp is None else tp
        tp *= (
            positive(
                fields["throughput_scale"], self.locate(name, "throughput_scale"), infinite=True
            )
            * positive(
                vals["throughput_scale"],
                self.locate(name, "actions", i, "throughput_scale"),
                infinite=True,
            )
            * positive(fields["n_parallel_instances"], self.locate(name, "n_parallel_instances"))
        )
        bpa = vals["bits_per_action"] if vals["bits_per_action"] is not None else comp_bpa
        bpa_at = (
            self.locate(name, "actions", i, "bits_per_action")
            if vals["bits_per_action"] is not None
            else self.locate(name, "bits_per_action")
        )
        bpa = 1 if bpa is None else positive(bpa, bpa_at)
        vpa = dict(comp_vpa)
        vpa.update(self._values_per_action(act.values_per_action, scope, space, name, where))
        at = self.locate(name, "actions", i)
        at = Location(at.file, at.line, f"{name}.actions.{act.name}")
        return ActionCost(act.name, energy, tp, bpa, vpa, missing, at)

    def _operators(self, node: A.Compute, scope: Scope) -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = {}
        for op, parts in node.operators.items():
            if isinstance(parts, str):
                out[op] = {parts: 1.0}
                continue
            out[op] = {}
            for part, raw in parts.items():
                at = self.locate(node.name, "operators", op, part)
                out[op][part] = amount(evaluate(raw, scope, location=at), at)
        return out

    def _values_per_action(self, raw, scope, space, name, where) -> dict[str, float]:
        if raw is None:
            return {}
        if not isinstance(raw, dict):
            raw = {"All": raw}
        found = evaluate_set_keyed_dict(raw, scope, space=space, location_of_key=lambda k: where)
        at = _with_key(where, f"{name}.values_per_action")
        return {t: positive(v, at) for t, v in found.items()}

    def _direction(self, node: A.Toll, scope: Scope, space: TensorSet) -> dict[str, str]:
        loc = self.locate(node.name, "direction")
        raw = node.direction if isinstance(node.direction, dict) else {"All": node.direction}
        found = evaluate_set_keyed_dict(
            raw, scope.child(_DIRECTIONS), space=space, location_of_key=lambda k: loc
        )
        for d in found.values():
            if d not in _DIRECTIONS:
                raise SpecError(f"direction must be up, down or up_and_down, got {d!r}", loc)
        return dict(found)

    def _spatial(
        self, node, i, dim: A.SpatialDim, scope: Scope, space: TensorSet, info: EinsumInfo
    ) -> SpatialInfo:
        loc = self.locate(node.name, "spatial", i)
        vals = evaluate_fields(
            {k: getattr(dim, k) for k in ("fanout", "usage_scale", "power_gateable", "min_usage")},
            scope,
            locate=lambda k: self.locate(node.name, "spatial", i, k),
        )
        empty = space - space
        reuse = (
            evaluate_set_expression(dim.reuse, scope, space=space, location=loc)
            if dim.reuse is not None
            else empty
        )
        if dim.may_reuse is not None:
            may = evaluate_set_expression(dim.may_reuse, scope, space=space, location=loc)
        else:
            may = reuse if dim.reuse is not None else space
        at = lambda key: self.locate(node.name, "spatial", i, key)  # noqa: E731
        return SpatialInfo(
            dim.name,
            count(vals["fanout"], at("fanout")),
            may.items,
            reuse.items,
            amount(vals["usage_scale"], at("usage_scale")),
            bool(vals["power_gateable"]),
            number(vals["min_usage"], at("min_usage"), low=0, high=1),
            dim.loop_bounds,
        )


def _with_key(where: Location | None, key: str) -> Location:
    where = where or Location()
    return Location(where.file, where.line, key)
