"""The architecture evaluated for one Einsum: numbers and tensor sets, per component.

The arch is evaluated once per Einsum (its expressions may depend on the Einsum, e.g.
``enabled: len(All) == 3``), then flattened to the path from the root to one compute
unit. A plug-in component (a ``component_class`` naming a model) gets the values the spec
leaves out from the component model library (:mod:`fusemap.spec.arch_pricing`); other
missing energies are reported only when the model asks for them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from . import arch as A
from .arch_info import ActionCost, ComponentInfo, FlatArch, SpatialInfo
from .arch_pricing import Pricing, action_arguments, component_pricing
from .cim_functions import ArraySpec
from .errors import ExpressionError, Location, SpecError
from .expressions import ExprObject, Scope, evaluate, parse_expression
from .fields import LazyFields, evaluate_fields
from .kept_sets import accepts, keep_rule, kept_sets
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
_KINDS: dict[type, str] = {A.Memory: "memory", A.Toll: "toll", A.Compute: "compute"}
"""ComponentInfo.kind per arch node class; any other node is a container."""


class _ComponentView(ExprObject):
    """``GlobalBuffer.size`` in an expression: the evaluated fields of a component, and
    ``Macro.get_fanout()``: the product of its own spatial fanouts."""

    def __init__(self, get: Any, name: str, fanout: Any = None):
        self._get, self._name, self._fanout = get, name, fanout

    def expr_call(self, name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        if name == "get_fanout" and not args and not kwargs and self._fanout is not None:
            return self._fanout(self._name)
        return super().expr_call(name, args, kwargs)

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
        assert spec.arch is not None
        self.arch: A.Arch = spec.arch
        self._paths = self._node_paths()
        self._cache: dict[str, dict[str, ComponentInfo]] = {}
        self._bases: dict[str, Scope] = {}  # per Einsum: the scope its sets are evaluated in
        self._allowed: dict[tuple, bool] = {}  # allows_holding's answers
        self._memories = [n.name for n in self.arch.leaves() if isinstance(n, A.Memory)]
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

    def allows_holding(
        self, einsum: str, path: Sequence[ComponentInfo], held: Iterable[tuple[str, str]]
    ) -> bool:
        """Whether the memories on ``path`` whose rules name memories accept what a
        template holds (``held``: its (memory, tensor) storage nodes)."""
        sets: dict[str, set[str]] = {m: set() for m in self._memories}
        for memory, tensor in held:
            sets[memory].add(tensor)
        full = {m: frozenset(ts) for m, ts in sets.items()}
        key = (einsum, tuple(c.name for c in path), tuple(sorted(full.items())))
        if key not in self._allowed:
            self.components(einsum)  # its scope
            info, at = self.workload.einsum(einsum), self.locate
            self._allowed[key] = accepts(path, self._bases[einsum], info, at, full)
        return self._allowed[key]

    # ------------------------------------------------------------------ evaluation
    def _evaluate(self, info: EinsumInfo) -> dict[str, ComponentInfo]:
        leaves = {n.name: n for n in self.arch.leaves()}
        # Variables are evaluated on first use: get_array_fanout_*(spec) reads fanouts
        # that may themselves use variables.
        spec_layer = {"spec": ArraySpec(lambda kind: self._array_fanout(kind, base, info))}
        arch_vars = LazyFields(
            self.arch.variables,
            info.scope.child(spec_layer),
            locate=lambda k: self.spec.locate("arch", "variables", k),
        )
        base = info.scope.child(spec_layer, arch_vars)
        self._bases[info.name] = base
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
                where = self.locate(name, "tensors")
                p.kept_set, _ = kept_sets(node, base.child(sets), info, where)
                return p
            finally:
                busy.remove(name)

        views = _Lazy(list(leaves), lambda n: _ComponentView(get, n, own_fanout))
        sets = _Lazy(list(leaves), lambda n: get(n).kept_set)

        def own_fanout(name: str) -> int:
            node, space = leaves[name], info.sets["All"]
            dims = [self._fanout(node, i, d, base, space) for i, d in enumerate(node.spatial)]
            return math.prod(fanout for fanout, _, _ in dims)

        arch_vars.evaluate_all()  # every variable, for every Einsum
        out = {}
        for name, node in leaves.items():
            p = get(name)
            out[name] = self._component(node, p.fields, base, views, sets, info)
        return out

    def _array_fanout(self, kind: str, scope: Scope, info: EinsumInfo) -> int:
        """Fanout of the CiM array dimensions (``*ARRAY_ROWS``, ``*ARRAY_COLUMNS``) that
        may reuse the outputs (kind ``output``), the input (``input``), or all (``total``)."""
        wanted = set(info.outputs)
        if kind == "input":
            found = info.sets.get("input")
            wanted = set(found.items) if found is not None else set(info.inputs)
        total = 1
        for node in self.arch.leaves():
            for i, dim in enumerate(node.spatial):
                if not dim.name.endswith(("ARRAY_ROWS", "ARRAY_COLUMNS")):
                    continue
                fanout, may, _ = self._fanout(node, i, dim, scope, info.sets["All"])
                if kind == "total" or (wanted and wanted <= may):
                    total *= fanout
        return total

    def _component(
        self, node: Any, fields: dict, base: Scope, views: Mapping, sets: Mapping, info: EinsumInfo
    ) -> ComponentInfo:
        """One arch node evaluated for an Einsum; its kind decides which fields it has."""
        name = node.name
        where = self.locate(name)
        scope = base.child(views, fields)
        set_scope = base.child(sets)
        space: TensorSet = info.sets["All"]
        spatial = [
            self._spatial(node, i, d, set_scope, space, info) for i, d in enumerate(node.spatial)
        ]
        kind = _KINDS.get(type(node), "container")
        comp = ComponentInfo(name, kind, node, spatial, location=where)
        if kind == "container":
            comp.area = amount(fields.get("area", node.area), self.locate(name, "area"))
            comp.leak_power = amount(
                fields.get("leak_power", node.leak_power), self.locate(name, "leak_power")
            )
            return comp
        comp.enabled = bool(fields["enabled"])
        comp.actions_scale = amount(fields["actions_scale"], self.locate(name, "actions_scale"))
        comp.n_parallel_instances = positive(
            fields["n_parallel_instances"], self.locate(name, "n_parallel_instances")
        )
        comp.fields = fields
        pricing = component_pricing(self.spec, node, kind, fields, scope, self.locate)
        self._area_and_leak(comp, node, fields, pricing)
        if kind in ("memory", "toll"):
            self._held_tensors(comp, node, scope, set_scope, info)
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
                node, i, act, scope, fields, comp_bpa, comp_vpa, space, pricing
            )
        if kind == "compute":
            comp.operators = self._operators(node, scope)
        self._latency(comp, node, scope)
        return comp

    def _area_and_leak(
        self, comp: ComponentInfo, node: Any, fields: dict, pricing: Pricing | None
    ) -> None:
        """Area and leak power, from the spec or else the component model (else 0), scaled
        and multiplied by the parallel instances."""
        name = node.name
        dummy = node.component_class == "Dummy"
        priced = pricing.component_price() if pricing is not None else None
        for key in ("area", "leak_power"):
            value = fields.get(key)
            if value is None and priced is not None:
                value = getattr(priced, key)
                comp.models[key] = priced.model
            elif value is None:
                value = 0  # no model: the format's default
                if dummy:
                    comp.models[key] = "Dummy"
            scale = amount(fields[f"{key}_scale"], self.locate(name, f"{key}_scale"))
            at = self.locate(name, key)
            setattr(comp, key, amount(value, at) * scale * comp.n_parallel_instances)

    def _held_tensors(
        self, comp: ComponentInfo, node: Any, scope: Scope, set_scope: Scope, info: EinsumInfo
    ) -> None:
        """What a memory or toll keeps (and may keep), and the bits per value of each tensor."""
        name = node.name
        space: TensorSet = info.sets["All"]
        keep, may = kept_sets(node, set_scope, info, self.locate(name, "tensors"))
        comp.keep_rule = keep_rule(node, self._memories, self.workload.tensors, info.name)
        # A rule that names memories is known per template: here, bounds of every case.
        bounds = (keep.items, may.items) if not comp.keep_rule else (frozenset(), space.items)
        comp.keep, comp.may_keep = bounds
        if not node.bits_per_value:
            return
        found = evaluate_set_keyed_dict(
            node.bits_per_value,
            scope,
            space=space,
            location_of_key=lambda k: self.locate(name, "bits_per_value", k),
        )
        # A memory stores values: more than 0 bits each. A toll may carry none of a
        # tensor (0 bits: it costs no action there).
        check = positive if comp.kind == "memory" else amount
        comp.bits_per_value = {
            t: check(v, self.locate(name, "bits_per_value")) for t, v in found.items()
        }

    def _latency(self, comp: ComponentInfo, node: Any, scope: Scope) -> None:
        """Where the model evaluates the total latency; its text is checked now."""
        name = node.name
        comp.latency_scope = scope
        comp.latency_location = self.locate(name, "total_latency")
        latency = node.total_latency
        if isinstance(latency, str) and not isinstance(latency, QuotedStr):
            # Evaluated by the model once actions are counted; check its text now.
            try:
                parse_expression(latency)
            except ExpressionError as err:
                raise err.located(self.locate(name, "total_latency")) from None

    def _action(self, node, i, act, scope, fields, comp_bpa, comp_vpa, space, pricing):
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
        bpa = vals["bits_per_action"] if vals["bits_per_action"] is not None else comp_bpa
        bpa_at = (
            self.locate(name, "actions", i, "bits_per_action")
            if vals["bits_per_action"] is not None
            else self.locate(name, "bits_per_action")
        )
        bpa = 1 if bpa is None else positive(bpa, bpa_at)
        energy, tp = vals["energy"], vals["throughput"]
        if tp is None and vals["latency"] is not None:
            latency = amount(vals["latency"], self.locate(name, "actions", i, "latency"))
            tp = 1 / latency if latency else math.inf
        model = self._price_action(node, i, act, scope, pricing, energy, tp, bpa)
        if model is not None:
            energy = model.energy if energy is None else energy
            tp = model.throughput if tp is None else tp
        missing = None
        if energy is None and node.component_class != "Dummy":
            missing = f"action '{act.name}' has no energy (give 'energy' in the spec)"
        elif energy is not None:
            energy = (
                amount(energy, self.locate(name, "actions", i, "energy"))
                * amount(fields["energy_scale"], self.locate(name, "energy_scale"))
                * amount(vals["energy_scale"], self.locate(name, "actions", i, "energy_scale"))
            )
        else:
            energy = 0.0  # Dummy: the format's zero-cost component
        tp = (
            math.inf
            if tp is None
            else positive(tp, self.locate(name, "actions", i, "throughput"), infinite=True)
        )
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
        vpa = dict(comp_vpa)
        vpa.update(self._values_per_action(act.values_per_action, scope, space, name, where))
        at = self.locate(name, "actions", i)
        at = Location(at.file, at.line, f"{name}.actions.{act.name}")
        source = model.model if model is not None else None
        if node.component_class == "Dummy" and (
            vals["energy"] is None or vals["throughput"] is None
        ):
            source = "Dummy"
        return ActionCost(act.name, energy, tp, bpa, vpa, missing, at, source)

    def _price_action(self, node, i, act, scope, pricing: Pricing | None, energy, tp, bpa):
        """The library's price of an action the spec leaves (partly) unpriced, else None."""
        if pricing is None or act.name not in pricing.actions:
            return None
        holder = isinstance(node, A.Memory | A.Toll)
        args = action_arguments(
            act,
            bpa if holder else None,
            scope,
            lambda k: self.locate(
                node.name, "actions", i, "extra_attributes_for_component_model", k
            ),
        )
        return pricing.action_price(act.name, args)

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
        vals = evaluate_fields(
            {k: getattr(dim, k) for k in ("usage_scale", "power_gateable", "min_usage")},
            scope,
            locate=lambda k: self.locate(node.name, "spatial", i, k),
        )
        fanout, may, reuse = self._fanout(node, i, dim, scope, space)
        return SpatialInfo(
            dim.name,
            fanout,
            may,
            reuse,
            amount(vals["usage_scale"], self.locate(node.name, "spatial", i, "usage_scale")),
            bool(vals["power_gateable"]),
            number(
                vals["min_usage"], self.locate(node.name, "spatial", i, "min_usage"), low=0, high=1
            ),
            dim.loop_bounds,
        )

    def _fanout(
        self, node, i, dim: A.SpatialDim, scope: Scope, space: TensorSet
    ) -> tuple[int, frozenset[str], frozenset[str]]:
        """A dimension's fanout, may_reuse and reuse (alone: arch variables may need them)."""
        loc = self.locate(node.name, "spatial", i)
        at = self.locate(node.name, "spatial", i, "fanout")
        fanout = evaluate(dim.fanout, scope, location=at)
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
        return int(count(fanout, at)), may.items, reuse.items


def _with_key(where: Location | None, key: str) -> Location:
    where = where or Location()
    return Location(where.file, where.line, key)
