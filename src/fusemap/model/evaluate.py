"""Evaluate a LoopTree mapping: per-Einsum chains -> counts -> costs -> one Result."""

from __future__ import annotations

from ..spec.arch_eval import ArchEvaluator
from ..spec.errors import InvalidMappingError
from ..spec.mapping import Mapping
from ..spec.mapping_check import check_mapping
from ..spec.resolve import WorkloadInfo, resolve_workload
from ..spec.spec import Spec
from .capacity import check_capacity, memory_usage
from .chains import branch_chains, build_chain
from .costs import einsum_costs, total_area, total_leak_power
from .result import ComponentTotals, Result


def evaluate_mapping(
    spec: Spec,
    mapping: Mapping | None = None,
    *,
    workload: WorkloadInfo | None = None,
    arch: ArchEvaluator | None = None,
    check: bool = True,
) -> Result:
    """Energy, latency, usage and area of ``mapping`` (default: the spec's own mapping).

    ``workload`` and ``arch`` may be passed in to reuse evaluated specs across many calls.
    With ``check`` false, capacity overflow is reported in the result instead of raised.
    """
    mapping = mapping if mapping is not None else spec.mapping
    if mapping is None:
        spec.require("mapping")
    assert mapping is not None
    workload = workload or resolve_workload(spec)
    arch = arch or ArchEvaluator(spec, workload)
    if mapping is spec.mapping and spec._checked_with is not workload:
        check_mapping(spec, workload)  # names checked with file and line where written
        spec._checked_with = workload
    by_einsum = branch_chains(mapping)
    known = {e.name for e in workload.einsums}
    unknown = [e for e in by_einsum if e not in known]
    if unknown:
        raise InvalidMappingError(
            f"!Compute names unknown Einsum '{unknown[0]}' (the workload has "
            f"{', '.join(e.name for e in workload.einsums)})"
        )
    missing = [e.name for e in workload.einsums if e.name not in by_einsum]
    if missing:
        raise InvalidMappingError(
            f"the mapping has no !Compute node for Einsum(s) {', '.join(missing)}"
        )
    order = [name for name in by_einsum]  # mapping order = execution order
    chains = []
    for name in order:
        info = workload.einsum(name)
        nodes = by_einsum[name]
        compute = nodes[-1].component  # type: ignore[attr-defined]
        flat = arch.flat(name, compute)
        chains.append(build_chain(nodes, info, workload, flat))
    usage, _ = memory_usage(chains, [by_einsum[n] for n in order])
    sizes = {c.name: c.size for ch in chains for c in ch.arch if c.kind == "memory"}
    if check:
        check_capacity(usage, sizes)
    einsums = {}
    for chain in chains:
        scale = workload.n_instances * chain.einsum.n_instances
        einsums[chain.einsum.name] = einsum_costs(chain, scale)
    # Report Einsums in workload order.
    einsums = {e.name: einsums[e.name] for e in workload.einsums}
    components: dict[str, ComponentTotals] = {}
    for chain in chains:
        for level, comp in enumerate(chain.arch.path):
            if comp.kind == "container" or comp.name in components:
                continue
            tot = ComponentTotals(comp.name, comp.kind)
            tot.area = total_area(chain.arch, level)
            tot.leak_power = total_leak_power(chain.arch, level)
            if comp.kind == "memory":
                tot.size = comp.size
                tot.usage_bits = usage.get(comp.name, 0.0)
                tot.usage = 0.0 if comp.size == float("inf") else tot.usage_bits / comp.size
            components[comp.name] = tot
    for e in einsums.values():
        for name, use in e.components.items():
            components[name].energy += use.energy
            components[name].latency += use.latency
    energy = sum(e.energy for e in einsums.values())
    latency = sum(e.latency for e in einsums.values())
    area = sum(c.area for c in components.values())
    return Result(energy, latency, einsums, components, area)
