"""From values moved to actions, energy, latency and leak for one Einsum (§2, Costs)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..spec.arch_eval import ComponentInfo, FlatArch
from ..spec.errors import ExpressionError, FusemapError, InvalidMappingError
from ..spec.expressions import ExprObject, evaluate
from ..spec.numbers import number
from .chains import Chain, HolderStep, LoopStep, linearize
from .operators import operator_actions
from .result import ActionResult, ComponentUse, EinsumResult
from .reuse import TensorTraffic, count_tensor, fanout_usage, operations


@dataclass
class _ActionView(ExprObject):
    """An action as seen by a ``total_latency`` expression."""

    name: str
    n_calls: float
    throughput: float
    energy: float | None

    def expr_getattr(self, name: str) -> object:
        if name in ("name", "n_calls", "throughput", "energy"):
            return getattr(self, name)
        raise ExpressionError(f"an action has no field '{name}' (use n_calls, throughput, energy)")


def _one_modes(chain: Chain) -> dict[int, frozenset[int]]:
    """Per arch level: spatial loops whose fanout replicates that level (per-instance view)."""
    loops = [s for s in chain.steps if isinstance(s, LoopStep) and s.spatial]
    return {
        k: frozenset(s.node_id for s in loops if s.level <= k) for k in range(len(chain.arch.path))
    }


def einsum_costs(chain: Chain, scale: float) -> EinsumResult:
    """Actions, energy, latency (and leak) of every component for one Einsum."""
    arch = chain.arch
    info = chain.einsum
    may_reuse = {(c.name, d.name): d.may_reuse for c in arch for d in c.spatial}
    skip = {c.name: c.skip_initial_output_write for c in arch}
    used = fanout_usage(chain)
    _check_fanout(arch, used, info.name)
    modes = _one_modes(chain)
    result = EinsumResult(info.name, compute_unit=chain.compute.component)
    result.fanout_usage = {f"{c}.{d}": float(n) for (c, d), n in used.items()}
    result.warnings = unreduced_partial_sums(chain, may_reuse) + holders_above_their_spread(chain)
    totals = {t: _traffic(chain, t, may_reuse, frozenset(), skip) for t in info.tensors}
    per_unit_cache: dict[tuple[frozenset[int], str], TensorTraffic] = {}
    latencies: dict[str, float] = {}
    for level, comp in enumerate(arch.path):
        if comp.kind == "container":
            continue
        mode = modes[level]
        per_unit: dict[str, TensorTraffic] = {}
        for t in info.tensors:  # per-instance counts, only where this component holds t
            if not mode or comp.name not in totals[t].reads and comp.name not in totals[t].writes:
                per_unit[t] = totals[t]
                continue
            if (mode, t) not in per_unit_cache:
                per_unit_cache[mode, t] = _traffic(chain, t, may_reuse, mode, skip)
            per_unit[t] = per_unit_cache[mode, t]
        use = ComponentUse(comp.name, comp.kind)
        n_calls: dict[str, float] = {a: 0.0 for a in comp.actions}
        if comp.kind == "compute":
            ops = operations(chain)
            result.operations = ops * scale
            if comp.name == chain.compute.component:
                per_instance = operations(chain, mode)
                # Per point: the actions of the Einsum's operators (one compute by default).
                for action, n in (operator_actions(info, comp) or {"compute": 0.0}).items():
                    _charge(use, comp, action, None, ops * n * comp.actions_scale * scale)
                    n_calls[action] = per_instance * n
        else:
            for t in info.tensors:
                bits = chain.workload_bits[t]
                for action, book, unit in (
                    ("read", totals[t].reads, per_unit[t].reads),
                    ("write", totals[t].writes, per_unit[t].writes),
                ):
                    if comp.name not in book or action not in comp.actions:
                        continue
                    vpa = comp.values_per_action(action, t, bits)
                    count = book[comp.name] / vpa * comp.actions_scale * scale
                    _charge(use, comp, action, t, count)
                    n_calls[action] += unit.get(comp.name, 0.0) / vpa
        use.latency = component_latency(comp, n_calls) * scale
        latencies[comp.name] = use.latency
        result.components[comp.name] = use
    result.latency = max(latencies.values(), default=0.0)
    if info.is_copy:  # a copy's traffic is reported under its source tensor
        _merge_onto_source(result, info.outputs[0], info.inputs[0])
    for level, comp in enumerate(arch.path):
        leaking = result.components.get(comp.name)
        if leaking is None:
            continue
        leak = total_leak_power(arch, level) * gated_fraction(arch, level, used)
        leaking.leak_energy = leak * result.latency
        leaking.energy += leaking.leak_energy
    result.energy = sum(u.energy for u in result.components.values())
    return result


def unreduced_partial_sums(
    chain: Chain, may_reuse: dict[tuple[str, str], frozenset[str]]
) -> list[str]:
    """Spatial loops that split a reduction over instances with no way to add them up.

    Each instance starts its own partial sums of the output and writes them to the
    holder above the loop; as the format defines it (and the established model counts
    it), those writes are all the parent sees: adding the partial sums up costs nothing.
    Counted that way, but said once per loop."""
    out = []
    for tensor in chain.einsum.outputs:
        steps = linearize(chain, tensor)
        parent = None
        for s in steps:
            if isinstance(s, HolderStep) and not s.toll:
                parent = s
            if not (isinstance(s, LoopStep) and s.spatial) or parent is None:
                continue
            if chain.einsum.relevance(tensor, s.rank_variable) == "relevant":
                continue
            if tensor in may_reuse.get((s.component or "", s.dimension or ""), frozenset()):
                continue
            out.append(
                f"Einsum {chain.einsum.name}: the !Spatial loop over '{s.rank_variable}' "
                f"({s.component}.{s.dimension}{chain.line_of(s.node_id, ', ', '')}) splits the "
                f"reduction into {tensor} and {s.component}.{s.dimension} may not reduce "
                f"{tensor} (may_reuse): every instance writes its partial sums to "
                f"{parent.component}, counted as writes only (adding them up is free)"
            )
    return out


def holders_above_their_spread(chain: Chain) -> list[str]:
    """Storage nodes written above a spatial loop over their own component's instances
    (or an ancestor's: the node is at or below the fanout).

    The model keeps such a node above the loop (it moves a spatial loop only down to the
    first holder at or below its fanout *below* it), so its traffic with its parent is
    counted once for every instance, as if they shared one copy, whatever ``may_reuse``
    allows. The mapper never writes loops so; said once per (node, loop) and Einsum."""
    out = []
    above: list[HolderStep] = []
    for s in chain.steps:
        if isinstance(s, HolderStep) and not s.toll:
            above.append(s)
        elif isinstance(s, LoopStep) and s.spatial:
            for h in above:
                if h.level >= s.level:
                    out.append(
                        f"Einsum {chain.einsum.name}: the !Storage node of {h.tensor} in "
                        f"{h.component}{chain.line_of(h.node_id, ' (', ')')} is above the "
                        f"!Spatial loop over '{s.rank_variable}' ({s.component}.{s.dimension}"
                        f"{chain.line_of(s.node_id, ', ', '')}) over the instances that hold "
                        "it: its traffic with its parent is counted once for all of them, as "
                        "if they shared one copy (may_reuse is not applied); write the loop "
                        "above it"
                    )
    return out


def _merge_onto_source(result: EinsumResult, output: str, source: str) -> None:
    for use in result.components.values():
        moved = use.tensors.pop(output, None)
        if moved is None:
            continue
        book = use.tensors.setdefault(source, {})
        for action, r in moved.items():
            book.setdefault(action, ActionResult()).add(r.count, r.energy)


def _traffic(chain, tensor, may_reuse, mode, skip):
    directions = {
        c.name: c.direction.get(tensor, "up_and_down") for c in chain.arch if c.kind == "toll"
    }
    return count_tensor(chain, tensor, may_reuse, mode, skip, directions)


def _charge(
    use: ComponentUse, comp: ComponentInfo, action: str, tensor: str | None, count: float
) -> None:
    cost = comp.actions[action]
    energy = count * cost.energy_per_action(comp.name) if count else 0.0
    use.actions.setdefault(action, ActionResult(model=cost.model)).add(count, energy)
    if tensor is not None:
        use.tensors.setdefault(tensor, {}).setdefault(action, ActionResult()).add(count, energy)
    use.energy += energy


def component_latency(comp: ComponentInfo, n_calls: dict[str, float]) -> float:
    """The component's ``total_latency`` (default: sum of n_calls / throughput)."""
    views = [
        _ActionView(a.name, n_calls.get(a.name, 0.0), a.throughput, a.energy)
        for a in comp.actions.values()
    ]
    if comp.node.total_latency is None:
        value = sum(_ratio(v.n_calls, v.throughput) for v in views)
    else:
        assert comp.latency_scope is not None  # set for every component but containers
        scope = comp.latency_scope.child({"actions": views})
        try:
            value = evaluate(comp.node.total_latency, scope)
        except FusemapError as err:
            raise err.located(comp.latency_location or err.location) from None
        value = number(value, comp.latency_location, low=0, infinite=True)
    return value * comp.actions_scale


def _ratio(n: float, throughput: float) -> float:
    if n == 0:
        return 0.0
    return n / throughput


def fanout_copies(arch: FlatArch, level: int) -> float:
    """Copies of the component at ``level`` made by its ancestors' fanouts.

    A component's own ``spatial`` fanout is not counted: its ``area`` and ``leak_power``
    already describe all of its own instances (as the format defines them; tpu_v4i's
    LocalBuffer gives the area of its four core buffers together)."""
    return math.prod(d.fanout for c in arch.path[:level] for d in c.spatial)


def total_leak_power(arch: FlatArch, level: int) -> float:
    """Leak power of all instances of the component at ``level``."""
    return arch.path[level].leak_power * fanout_copies(arch, level)


def total_area(arch: FlatArch, level: int) -> float:
    """Area of all instances of the component at ``level``."""
    return arch.path[level].area * fanout_copies(arch, level)


def gated_fraction(arch: FlatArch, level: int, used: dict[tuple[str, str], int]) -> float:
    """Fraction of instances drawing leak: used/fanout for each power-gateable dimension."""
    frac = 1.0
    for c in arch.path[: level + 1]:
        for d in c.spatial:
            if d.power_gateable:
                frac *= used.get((c.name, d.name), 1) / d.fanout
    return frac


def _check_fanout(arch: FlatArch, used: dict[tuple[str, str], int], einsum: str) -> None:
    for (comp, dim), n in used.items():
        d = next(x for x in arch.component(comp).spatial if x.name == dim)
        if n > d.fanout:
            raise InvalidMappingError(
                f"Einsum {einsum}: spatial fanout {comp}.{dim} exceeded: the mapping uses {n} "
                f"instances but the fanout is {d.fanout}"
            )
