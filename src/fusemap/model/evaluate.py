"""Evaluate a LoopTree mapping: per-Einsum chains -> counts -> costs -> one Result."""

from __future__ import annotations

import math

from ..spec.arch_eval import ArchEvaluator
from ..spec.errors import FusemapError, InvalidMappingError
from ..spec.mapping import Mapping, Pipeline
from ..spec.mapping_check import check_mapping, check_unmodelled, node_locations
from ..spec.resolve import WorkloadInfo, resolve_workload
from ..spec.spec import Spec
from ..units import unitless_energy, unitless_latency
from .capacity import check_capacity, live_reservations, peak_usage
from .chains import branch_chains, branch_compute, build_chain
from .costs import einsum_costs, total_area, total_leak_power
from .result import ComponentTotals, Result
from .schedule import mapping_latency


def evaluate_mapping(
    spec: Spec,
    mapping: Mapping | None = None,
    *,
    workload: WorkloadInfo | None = None,
    arch: ArchEvaluator | None = None,
    check: bool = True,
    einsums: list[str] | None = None,
) -> Result:
    """Energy, latency, usage and area of ``mapping`` (default: the spec's own mapping).

    ``workload`` and ``arch`` may be passed in to reuse evaluated specs across many calls.
    With ``check`` false, capacity overflow is reported in the result instead of raised.
    ``einsums`` restricts the evaluation to these Einsums (the mapping may then leave the
    others out), e.g. to score a single-Einsum pmapping.
    """
    mapping = mapping if mapping is not None else spec.mapping
    if mapping is None:
        spec.require("mapping")
    assert mapping is not None
    try:
        return _evaluate(spec, mapping, workload, arch, check, einsums)
    except FusemapError as err:  # located in the spec's mapping file, from Python too
        if mapping is spec.mapping:
            raise err.located(spec.locate("mapping")) from None
        raise


def _evaluate(
    spec: Spec,
    mapping: Mapping,
    workload: WorkloadInfo | None,
    arch: ArchEvaluator | None,
    check: bool,
    einsums: list[str] | None,
) -> Result:
    workload = workload or resolve_workload(spec)
    arch = arch or ArchEvaluator(spec, workload)
    if mapping is spec.mapping and spec._checked_with is not workload:
        check_mapping(spec, workload, einsums)  # names checked with file and line
        spec._checked_with = workload
    where = node_locations(spec) if mapping is spec.mapping else {}
    check_unmodelled(mapping, workload, where)
    by_einsum = branch_chains(mapping)
    known = {e.name for e in workload.einsums}
    unknown = [e for e in by_einsum if e not in known]
    if unknown:
        raise InvalidMappingError(
            f"!Compute names unknown Einsum '{unknown[0]}' (the workload has "
            f"{', '.join(e.name for e in workload.einsums)})"
        )
    wanted = [e.name for e in workload.einsums if einsums is None or e.name in einsums]
    for name in einsums or []:
        if name not in known:
            raise InvalidMappingError(
                f"unknown Einsum '{name}' (the workload has "
                f"{', '.join(e.name for e in workload.einsums)})"
            )
    missing = [e for e in wanted if e not in by_einsum]
    if missing:
        hint = "" if einsums else " (to score only some Einsums, name them with --einsum)"
        raise InvalidMappingError(
            f"the mapping has no !Compute node for Einsum(s) {', '.join(missing)}{hint}"
        )
    by_einsum = {k: v for k, v in by_einsum.items() if k in wanted}
    order = [name for name in by_einsum]  # mapping order = execution order
    chains = []
    for name in order:
        info = workload.einsum(name)
        nodes = by_einsum[name]
        flat = arch.flat(name, branch_compute(nodes).component)
        chains.append(build_chain(nodes, info, workload, flat, where))
    branches = [by_einsum[n] for n in order]
    live, _ = live_reservations(chains, branches)
    usage = peak_usage(live)
    sizes = {c.name: c.size for ch in chains for c in ch.arch if c.kind == "memory"}
    if check:
        check_capacity(usage, sizes)
    per_einsum = {}
    for chain in chains:
        scale = workload.n_instances * chain.einsum.n_instances
        per_einsum[chain.einsum.name] = einsum_costs(chain, scale)
    # Report Einsums in workload order.
    results = {name: per_einsum[name] for name in wanted}
    components = _component_totals(chains, arch, usage)
    for e in results.values():
        for name, use in e.components.items():
            components[name].energy += use.energy
            components[name].latency += use.latency
    energy = sum(e.energy for e in results.values())
    if any(isinstance(n, Pipeline) and n.overlap for n in mapping.walk()):
        latency = mapping_latency(mapping, results)  # overlap regions (schedule.py)
    else:
        latency = sum(e.latency for e in results.values())
    area = sum(c.area for c in components.values())
    unitless = _unitless(arch, [c.einsum.name for c in chains])
    occupancy = {name: _occupancy(live[b]) for b, name in enumerate(order)}
    return Result(energy, latency, results, components, area, unitless, occupancy)


def _occupancy(live: list) -> dict[str, dict[str, float]]:
    """Memory -> tensor -> bits of the reservations live during one branch."""
    out: dict[str, dict[str, float]] = {}
    for r in live:
        per = out.setdefault(r.memory, {})
        per[r.tensor] = per.get(r.tensor, 0.0) + r.bits
    return out


def _unitless(arch: ArchEvaluator, einsums: list[str]) -> frozenset[str]:
    """Which quantities the arch gives without units (the rule in ``fusemap.units``)."""
    energies, throughputs = [], []
    for name in einsums:
        for comp in arch.components(name).values():
            for action in comp.actions.values():
                if action.energy is not None:
                    energies.append(action.energy)
                throughputs.append(action.throughput)
    out = set()
    if unitless_energy(energies):
        out.add("energy")
    if unitless_latency(throughputs):
        out.add("latency")
    return frozenset(out)


def _component_totals(
    chains: list, arch: ArchEvaluator, usage: dict[str, float]
) -> dict[str, ComponentTotals]:
    """Area, leak power and buffer usage of every component of the architecture.

    Components on no mapped Einsum's path (another compute unit, say) still have area;
    they are evaluated as for the first mapped Einsum."""
    paths = [chain.arch for chain in chains]
    if chains:
        first = chains[0].einsum.name
        paths += [arch.flat(first, c.name) for c in arch.arch.computes()]
    components: dict[str, ComponentTotals] = {}
    for flat in paths:
        for level, comp in enumerate(flat.path):
            if comp.kind == "container" or comp.name in components:
                continue
            tot = ComponentTotals(comp.name, comp.kind)
            tot.area = total_area(flat, level)
            tot.leak_power = total_leak_power(flat, level)
            tot.models = dict(comp.models)
            tot.models.update({a: c.model for a, c in comp.actions.items() if c.model})
            if comp.kind == "memory":
                tot.size = comp.size
                tot.usage_bits = usage.get(comp.name, 0.0)
                tot.usage = _usage(tot.usage_bits, comp.size)
            components[comp.name] = tot
    return components


def _usage(bits: float, size: float) -> float:
    """Share of a memory's size in use (a memory of no size holding nothing: none)."""
    if bits == 0 or math.isinf(size):
        return 0.0
    return bits / size if size > 0 else math.inf
