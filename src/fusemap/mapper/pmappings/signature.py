"""When two Einsums have the same pmappings: a signature up to tensor names.

GPT-style workloads repeat Einsums (the Q, K and V projections): same rank variables and
bounds, same projections, and an architecture that treats them alike. Their pmapping
tables are then equal up to tensor names, so they are generated once. The signature
covers everything the generator reads; tensors are named by position.
"""

from __future__ import annotations

from typing import Any

from ...spec.arch_eval import ArchEvaluator, ComponentInfo
from ...spec.resolve import EinsumInfo, WorkloadInfo


def einsum_signature(
    info: EinsumInfo,
    workload: WorkloadInfo,
    arch: ArchEvaluator,
    plan=None,
) -> tuple:
    """A hashable description of ``info`` and its evaluated arch, tensors renamed
    (``plan``: the :class:`~fusemap.mapper.space.plan.FusionPlan`; None: everything may be
    fused, tiled, and the Einsum may host)."""
    fusable = None if plan is None else plan.fusable
    held_loops = {} if plan is None else plan.held_loops
    rename = {t: f"#{i}" for i, t in enumerate(info.tensors)}

    def names(items) -> tuple:  # only the Einsum's own tensors matter to its mapspace
        return tuple(sorted(rename[t] for t in items if t in rename))

    def keyed(mapping) -> tuple:
        return tuple(
            sorted(
                (rename.get(k, "?" + k), repr(v))
                for k, v in mapping.items()
                if k in rename or k not in workload.tensors
            )
        )

    var = {v: f"${i}" for i, v in enumerate(info.rank_variables)}

    def affine(p) -> tuple:
        return (tuple((var[v], c) for v, c in p.coeffs), p.const)

    tensors = tuple(
        (
            rename[t],
            tuple(affine(p) for p in info.projections[t].values()),
            t in info.outputs,
            workload.tensors[t].bits_per_value,
            t in info.persistent,
            t in workload.shared,
            fusable is None or t in fusable,
            tuple(sorted(var.get(v, v) for v in held_loops.get(t, ())))
            if t in held_loops
            else None,
        )
        for t in info.tensors
    )
    comps = tuple(_component(c, names, keyed) for c in arch.components(info.name).values())
    # Rank variables are named by position too, unless a fanout's loop_bounds name them.
    named = any(d.loop_bounds for c in arch.components(info.name).values() for d in c.spatial)
    return (
        plan is None or info.name in plan.hosts,
        () if plan is None else tuple(sorted(plan.hosted.get(info.name, ()))),
        () if plan is None else tuple(sorted(plan.host_loops.get(info.name, ()))),
        tuple((v if named else var[v], info.bounds[v]) for v in info.rank_variables),
        tensors,
        info.is_copy,
        info.n_instances,
        workload.n_instances,
        comps,
    )


def tiling_context(
    info: EinsumInfo,
    workload: WorkloadInfo,
    arch: ArchEvaluator,
    config,
    objective: str,
    prune: bool,
    join_memories: frozenset[str],
) -> tuple:
    """Everything a pmapping search's tilers read besides their templates and the
    amounts held beside them, tensors named by place: the Einsum up to names, which of
    its tensors are fused or pinned, the architecture, the search's knobs. Searches with
    equal contexts build equal fronts for equal template suffixes."""
    place = {t: k for k, t in enumerate(info.tensors)}
    fused, pinned = config.sharing(info, workload)
    return (
        einsum_signature(info, workload, arch),
        tuple(sorted(place[t] for t in fused)),
        tuple(sorted(place[t] for t in pinned)),
        config.imperfect,
        config.imperfect_max_bound,
        config.spread_max_bound,
        config.fusion,  # not fused_loops_once: the nodes below the deepest fused node
        objective,  # are searched alike with or without it (and with relaxed prefixes)
        prune,
        tuple(sorted(join_memories)),
        workload.n_instances * info.n_instances,
    )


def _component(c: ComponentInfo, names, keyed) -> tuple[Any, ...]:
    spatial = tuple(
        (
            d.name,
            d.fanout,
            names(d.may_reuse),
            names(d.reuse),
            d.usage_scale,
            d.power_gateable,
            d.min_usage,
            repr(d.loop_bounds),
        )
        for d in c.spatial
    )
    actions = tuple(
        (a.name, a.energy, a.throughput, a.bits_per_action, keyed(a.values_per_action), a.missing)
        for a in c.actions.values()
    )
    return (
        c.name,
        c.kind,
        c.size,
        c.enabled,
        c.area,
        c.leak_power,
        c.actions_scale,
        names(c.keep),
        names(c.may_keep),
        c.keep_rule,
        keyed(c.bits_per_value),
        c.skip_initial_output_write,
        keyed(c.direction),
        spatial,
        actions,
        str(getattr(c.node, "total_latency", None)),
    )


def tensor_renaming(a: EinsumInfo, b: EinsumInfo) -> dict[str, str]:
    """Tensor names of ``a`` -> the tensor of ``b`` at the same position."""
    return dict(zip(a.tensors, b.tensors, strict=True))


def variable_renaming(a: EinsumInfo, b: EinsumInfo) -> dict[str, str]:
    """Rank variables of ``a`` -> the rank variable of ``b`` at the same position."""
    return dict(zip(a.rank_variables, b.rank_variables, strict=True))
