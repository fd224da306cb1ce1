"""Concrete workload facts: rank-variable bounds, tensor shapes, roles and renames.

``resolve_workload(spec)`` evaluates every expression of the workload once and returns
plain typed objects that the model and the mapper use without touching YAML again.
"""

from __future__ import annotations

import math
import re
from collections import ChainMap
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property, partial
from typing import Any

from .affine import Affine, Constraint, box_bounds, parse_affine, parse_constraints
from .errors import FusemapError, Location, SpecError
from .expressions import Scope, evaluate
from .fields import evaluate_fields
from .graph import check_data_flow
from .numbers import number
from .sets import TensorFacts, TensorSet, evaluate_set_expression, evaluate_set_keyed_dict
from .spec import Spec
from .workload import Einsum


@dataclass(frozen=True)
class TensorInfo:
    """A tensor of the workload: ranks, shape, width and who touches it."""

    name: str
    ranks: tuple[str, ...]
    shape: tuple[int, ...]
    bits_per_value: float
    writers: tuple[str, ...]
    readers: tuple[str, ...]

    @property
    def size(self) -> int:
        """Number of values (dense box)."""
        return math.prod(self.shape)

    @property
    def is_intermediate(self) -> bool:
        """Written by some Einsum and read by another."""
        return bool(self.writers) and bool(self.readers)


@dataclass(frozen=True)
class EinsumInfo:
    """One Einsum with everything evaluated."""

    name: str
    index: int
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    rank_variables: tuple[str, ...]
    bounds: Mapping[str, int]
    projections: Mapping[str, Mapping[str, Affine]]
    is_copy: bool
    n_instances: float
    persistent: frozenset[str]
    scope: Scope = field(repr=False, compare=False)
    sets: Mapping[str, TensorSet] = field(repr=False, compare=False)
    map_operator: str = "multiply"
    """Operator combining the inputs at each point (extended Einsums)."""
    reduce_operator: str = "add"
    """Operator combining the points that map to one output value (add, max, none)."""

    @property
    def tensors(self) -> tuple[str, ...]:
        """Inputs then outputs."""
        return self.inputs + self.outputs

    def relevance(self, tensor: str, rank_variable: str) -> str:
        """``relevant``, ``partial`` or ``irrelevant`` (see the counting rules, §2)."""
        got = self._relevance.get((tensor, rank_variable))
        return got if got is not None else self._relevance_of(tensor, rank_variable)

    @cached_property
    def _relevance(self) -> dict[tuple[str, str], str]:
        """Every tensor's relevance to every rank variable (the mapper asks millions of
        times)."""
        return {
            (t, v): self._relevance_of(t, v) for t in self.projections for v in self.rank_variables
        }

    def _relevance_of(self, tensor: str, rank_variable: str) -> str:
        kind = "irrelevant"
        for expr in self.projections[tensor].values():
            if rank_variable in expr.variables:
                if expr.is_single_variable:
                    return "relevant"
                kind = "partial"
        return kind

    @property
    def reduced_variables(self) -> tuple[str, ...]:
        """Rank variables that index no output: the ranks the Einsum reduces."""
        used = {v for t in self.outputs for e in self.projections[t].values() for v in e.variables}
        return tuple(v for v in self.rank_variables if v not in used)

    @property
    def operations(self) -> int:
        """Points of the iteration space (dense box)."""
        return math.prod(self.bounds.values())


@dataclass(frozen=True)
class WorkloadInfo:
    """The evaluated workload."""

    einsums: tuple[EinsumInfo, ...]
    tensors: Mapping[str, TensorInfo]
    n_instances: float
    variables: Mapping[str, Any]
    rank_sizes: Mapping[str, float] = field(default_factory=dict)
    """Workload rank sizes (also usable as constants in index expressions)."""

    def einsum(self, name: str) -> EinsumInfo:
        """The Einsum called ``name``."""
        return self._by_name[name]

    @cached_property
    def _by_name(self) -> dict[str, EinsumInfo]:
        return {e.name: e for e in self.einsums}

    @property
    def intermediates(self) -> frozenset[str]:
        """Tensors written by one Einsum and read by another."""
        return frozenset(t for t, i in self.tensors.items() if i.is_intermediate)

    @property
    def shared(self) -> frozenset[str]:
        """Tensors touched by more than one Einsum."""
        return frozenset(
            t for t, i in self.tensors.items() if len(set(i.writers) | set(i.readers)) > 1
        )

    def dependencies(self) -> dict[str, list[str]]:
        """Einsum -> the Einsums that produce its inputs."""
        out: dict[str, list[str]] = {}
        for e in self.einsums:
            deps: list[str] = []
            for t in e.inputs:
                deps += [w for w in self.tensors[t].writers if w != e.name and w not in deps]
            out[e.name] = deps
        return out


def evaluate_variables(spec: Spec) -> dict[str, Any]:
    """Top-level variables (may reference each other)."""
    return evaluate_fields(spec.variables, Scope(), locate=lambda k: spec.locate("variables", k))


def resolve_workload(spec: Spec) -> WorkloadInfo:
    """Evaluate the workload of ``spec`` into a :class:`WorkloadInfo`."""
    spec.require("workload")
    wl = spec.workload
    assert wl is not None
    variables = evaluate_variables(spec)
    base = Scope(variables)
    # Rank sizes may refer to each other (``XT: ceil(M / X)``), like sibling fields.
    raw_sizes = evaluate_fields(
        wl.rank_sizes, base, locate=lambda r: spec.locate("workload", "rank_sizes", r)
    )
    sizes = {
        r: _number(v, r, spec.locate("workload", "rank_sizes", r), **_RANK_SIZE)
        for r, v in raw_sizes.items()
    }
    # Bounds of rank variables per Einsum.
    bounds: dict[str, dict[str, int]] = {}
    projections: dict[str, dict[str, dict[str, Affine]]] = {}
    iterated = wl.iterated_tensors()  # their iterative ranks hold size + 1 values
    global_consts = _constants({**variables, **sizes})
    for i, e in enumerate(wl.einsums):
        where = spec.locate_einsum(i)
        local: ChainMap[str, Any] = ChainMap({}, sizes)
        own = evaluate_fields(
            e.rank_sizes,
            base.child(sizes),
            locate=partial(spec.locate_einsum, i, "rank_sizes"),
        )
        for r, v in own.items():
            local[r] = _number(v, r, spec.locate_einsum(i, "rank_sizes", r), **_RANK_SIZE)
        consts = ChainMap(_constants({r: local[r] for r in own}), global_consts)
        projections[e.name] = {
            t.name: {r: _affine(x, consts, where) for r, x in t.ranks().items()}
            for t in e.tensor_accesses
        }
        bounds[e.name] = _einsum_bounds(
            e, projections[e.name], local, wl.iteration_space_shape, variables, where, iterated
        )
    tensors = _tensor_shapes(spec, projections, bounds, sizes, iterated)
    einsums, all_facts = [], []
    for i, e in enumerate(wl.einsums):
        facts = {
            t: TensorFacts(frozenset(v for x in ranks.values() for v in x.variables), None)
            for t, ranks in projections[e.name].items()
        }
        all_facts.append(facts)
        einsums.append(
            _einsum_info(spec, i, e, bounds[e.name], projections[e.name], tensors, facts, base)
        )
    check_data_flow(einsums, iterated, spec.locate_einsum)
    bits = _bits_per_value(spec, einsums, base)
    for facts in all_facts:  # the sets of each Einsum now know the widths
        for t, f in facts.items():
            facts[t] = TensorFacts(f.rank_variables, bits[t])
    final = {
        t: TensorInfo(info.name, info.ranks, info.shape, bits[t], info.writers, info.readers)
        for t, info in tensors.items()
    }
    where = spec.locate("workload", "n_instances")
    n_inst = _number(
        evaluate(wl.n_instances, base, location=where), "n_instances", where, **_POSITIVE
    )
    return WorkloadInfo(tuple(einsums), final, n_inst, variables, sizes)


def _number(value: Any, what: str, where: Location | None = None, **domain: Any) -> float:
    """``value`` checked by :func:`.numbers.number` (``domain``), located at ``where``
    with ``what`` as the key when ``where`` has none."""
    if where is None or not where.key:
        where = Location(where.file if where else None, where.line if where else None, what)
    return number(value, where, **domain)


_RANK_SIZE = {"low": 1, "infinite": True, "whole": True}
_POSITIVE = {"low": 0, "above": True}


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _key(where: Location, key: str) -> Location:
    """``where`` with a key naming ``key`` inside the object it locates."""
    return Location(where.file, where.line, f"{where.key}.{key}" if where.key else key)


def _with_key(where: Location, key: str) -> Location:
    return Location(where.file, where.line, key)


def _constants(values: Mapping[str, Any]) -> dict[str, Any]:
    """The numbers among ``values`` (index expressions may use them as constants)."""
    return {k: v for k, v in values.items() if isinstance(v, (int, float))}


def _affine(text: Any, consts: Mapping[str, Any], where: Location) -> Affine:
    """An index expression; uppercase names are constants (variables and rank sizes)."""
    for name in _IDENT.findall(str(text)):
        if not name[:1].islower() and name not in consts:
            raise SpecError(
                f"unknown name '{name}' in index expression '{text}' (uppercase names must "
                "be rank sizes or variables)",
                where,
            )
    try:
        return parse_affine(text if isinstance(text, int) else str(text), consts)
    except FusemapError as err:
        raise err.located(where) from None


def _einsum_bounds(
    e: Einsum,
    proj: dict[str, dict[str, Affine]],
    sizes: Mapping[str, float],
    shapes: Mapping[str, str],
    variables: Mapping[str, Any],
    where: Location,
    iterated: Mapping[str, set[str]],
) -> dict[str, int]:
    consts = {k: v for k, v in variables.items() if isinstance(v, (int, float))}
    rvs = e.rank_variables
    constraints: list[Constraint] = []
    try:
        for var in rvs:
            if var in shapes:
                constraints += parse_constraints(shapes[var], consts)
        for text in e.iteration_space_shape:
            constraints += parse_constraints(text, consts)
        for tensor, ranks in proj.items():
            for rank, expr in ranks.items():
                if rank in sizes and not math.isinf(sizes[rank]):
                    top = sizes[rank] if rank in iterated.get(tensor, ()) else sizes[rank] - 1
                    constraints.append(Constraint(expr, 0, top))
    except FusemapError as err:
        raise err.located(where) from None
    box = box_bounds(list(rvs), constraints)
    out: dict[str, int] = {}
    for var in rvs:
        lo, hi = box[var]
        if math.isinf(lo) or math.isinf(hi):
            raise SpecError(
                f"rank variable '{var}' is unbounded; give its rank a size "
                f"(rank_sizes) or constrain it (iteration_space_shape: {{{var}: 0 <= {var} < N}})",
                where,
            )
        if hi < lo:
            raise SpecError(f"rank variable '{var}' has an empty range", where)
        out[var] = int(hi - lo + 1)
    return out


def _tensor_shapes(spec: Spec, proj, bounds, sizes, iterated) -> dict[str, TensorInfo]:
    wl = spec.workload
    assert wl is not None
    out: dict[str, TensorInfo] = {}
    writers: dict[str, list[str]] = {}
    readers: dict[str, list[str]] = {}
    for i, e in enumerate(wl.einsums):
        for t in e.tensor_accesses:
            (writers if t.output else readers).setdefault(t.name, []).append(e.name)
            ranks = tuple(proj[e.name][t.name])
            box = {v: (0, b - 1) for v, b in bounds[e.name].items()}
            shape = []
            for r, expr in proj[e.name][t.name].items():
                lo, hi = expr.range(box)
                if r in sizes and not math.isinf(sizes[r]):
                    lo, hi = max(lo, 0), min(hi, sizes[r] - 1)
                    if r in iterated.get(t.name, ()):  # coordinates 0 .. size, all of them
                        lo, hi = 0, sizes[r]
                shape.append(int(max(hi - lo + 1, 1)))
            known = out.get(t.name)
            if known is not None and known.ranks != ranks:
                raise SpecError(
                    f"tensor {t.name} has ranks {list(known.ranks)} in one Einsum and "
                    f"{list(ranks)} in Einsum {e.name}",
                    spec.locate_einsum(i),
                )
            if known is not None:  # keep the largest extent per rank over all Einsums
                shape = [max(a, b) for a, b in zip(known.shape, shape, strict=True)]
            out[t.name] = TensorInfo(t.name, ranks, tuple(shape), 0, (), ())
    return {
        t: TensorInfo(
            i.name, i.ranks, i.shape, 0, tuple(writers.get(t, ())), tuple(readers.get(t, ()))
        )
        for t, i in out.items()
    }


def _einsum_info(
    spec: Spec, index: int, e: Einsum, bounds, proj, tensors, facts, base: Scope
) -> EinsumInfo:
    where = spec.locate_einsum(index)
    names = tuple(e.tensors)
    space = TensorSet(frozenset(names), frozenset(names), "tensor", facts)

    def subset(members) -> TensorSet:
        return TensorSet(frozenset(m for m in members if m in names), space.space, "tensor", facts)

    sets: dict[str, Any] = {
        "All": space,
        "Tensors": space,
        "Nothing": subset(()),
        "Inputs": subset(e.inputs),
        "Outputs": subset(e.outputs),
        "Intermediates": subset(t for t in names if tensors[t].is_intermediate),
        "Shared": subset(
            t for t in names if len(set(tensors[t].writers) | set(tensors[t].readers)) > 1
        ),
    }
    rv_space = frozenset(bounds)
    for t in names:
        sets[t] = subset([t])
    # Every other tensor of the workload names an empty set here, made when first used
    # (making them all for every Einsum would cost Einsums x tensors).
    sets = _TensorSets(sets, tensors, lambda t: subset(()))
    for v in bounds:
        sets[v] = TensorSet(frozenset([v]), rv_space, "rank_variable", facts)
    persistent = frozenset(a.name for a in e.tensor_accesses if a.persistent)
    scope = base.child(sets)
    wl = spec.workload
    assert wl is not None
    if wl.persistent_tensors is not None:
        renamed = _renames(spec, index, e, scope, space)
        persistent |= evaluate_set_expression(
            wl.persistent_tensors,
            base.child(sets, renamed),
            space=space,
            location=spec.locate("workload", "persistent_tensors"),
        ).items
    sets["Persistent"] = subset(persistent)
    scope = base.child(sets)
    renamed = _renames(spec, index, e, scope, space)
    sets.update(renamed)
    n_inst = _number(
        evaluate(e.n_instances, scope, location=where),
        "n_instances",
        _key(where, "n_instances"),
        **_POSITIVE,
    )
    return EinsumInfo(
        e.name,
        index,
        tuple(e.inputs),
        tuple(e.outputs),
        tuple(bounds),
        dict(bounds),
        proj,
        e.is_copy_operation,
        n_inst,
        persistent,
        base.child(sets),
        sets,
        e.map_operator,
        e.reduce_operator,
    )


class _TensorSets(dict):
    """An Einsum's named sets; the workload's other tensors are empty sets, made lazily."""

    def __init__(self, sets: dict[str, Any], tensors: Mapping[str, Any], empty: Any) -> None:
        super().__init__(sets)
        self._tensors, self._empty = tensors, empty

    def __contains__(self, key: object) -> bool:
        return super().__contains__(key) or key in self._tensors

    def __missing__(self, key: str) -> Any:
        if key not in self._tensors:
            raise KeyError(key)
        self[key] = value = self._empty(key)
        return value


def _renames(
    spec: Spec, index: int, e: Einsum, scope: Scope, space: TensorSet
) -> dict[str, TensorSet]:
    """Per-Einsum renames first, then the top-level ``default`` entry for names not set."""
    own_at = spec.locate_einsum(index, "renames")
    entries = [(r, own_at) for r in e.renames]
    default = spec.renames.default() if spec.renames else None
    own = {r.name for r in e.renames}
    if default:
        at = spec.locate("renames")
        entries += [(r, at) for r in default.tensor_accesses if r.name not in own]
    out: dict[str, TensorSet] = {}
    for r, at in entries:
        inner = scope.child(out)
        value = evaluate_set_expression(r.source, inner, space=space, location=at)
        if r.expected_count is not None:
            want = evaluate(r.expected_count, inner, location=at)
            if len(value) != want:
                raise SpecError(
                    f"rename '{r.name}' = {r.source} has {len(value)} tensor(s) {value!r} "
                    f"in Einsum {e.name}, expected {want}",
                    at,
                )
        out[r.name] = value
    return out


def _bits_per_value(spec: Spec, einsums: list[EinsumInfo], base: Scope) -> dict[str, float]:
    wl = spec.workload
    assert wl is not None
    bits: dict[str, float] = {}
    for info, e in zip(einsums, wl.einsums, strict=True):
        space = info.sets["All"]
        found = (
            evaluate_set_keyed_dict(
                wl.bits_per_value,
                info.scope,
                space=space,
                location_of_key=lambda k: spec.locate("workload", "bits_per_value", k),
            )
            if wl.bits_per_value
            else {}
        )
        for a in e.tensor_accesses:
            value = found.get(a.name)
            if a.bits_per_value is not None:
                value = evaluate(
                    a.bits_per_value,
                    info.scope,
                    location=spec.locate_einsum(info.index),
                )
            if value is None:
                raise SpecError(
                    f"tensor {a.name} has no bits_per_value (add it to workload.bits_per_value)",
                    spec.locate("workload", "bits_per_value"),
                )
            value = _number(
                value,
                f"bits_per_value of {a.name}",
                _with_key(spec.locate("workload", "bits_per_value"), f"{a.name}.bits_per_value"),
                **_POSITIVE,
            )
            if a.name in bits and bits[a.name] != value:
                raise SpecError(
                    f"tensor {a.name} has {bits[a.name]} bits per value in one Einsum and "
                    f"{value} in Einsum {e.name}",
                    spec.locate_einsum(info.index),
                )
            bits[a.name] = value
    return bits
