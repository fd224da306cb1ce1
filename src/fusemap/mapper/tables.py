"""The pmapping tables of every Einsum of a workload (in worker processes when asked);
Einsums equal up to tensor names share one table."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from ..spec import limits
from ..spec.arch_eval import ArchEvaluator
from ..spec.resolve import WorkloadInfo
from ..spec.spec import Spec
from .deferred_hosting import DeferredHosting, marked
from .plan import FusionPlan
from .pmappings import PmappingTable, generate_pmappings
from .signature import einsum_signature, tensor_renaming, variable_renaming
from .space import config_from_spec
from .workers import give_back_memory, quiet_worker_restarts

if TYPE_CHECKING:
    from .ffm import MapStatistics

Progress = Callable[[str, int, int], None]


def generate_tables(
    spec: Spec,
    wl: WorkloadInfo,
    arch: ArchEvaluator,
    objective: str,
    jobs: int,
    progress: Progress | None,
    stats: MapStatistics,
    plan: FusionPlan | None = None,
    deferred: DeferredHosting | None = None,
) -> dict[str, PmappingTable]:
    """Fused pmappings of every Einsum; Einsums equal up to tensor names share one.
    ``plan``: what may be fused how (None: every shared tensor, tiled or not, and every
    Einsum may host). ``deferred`` (energy objective): tile no hosting template, record
    them there (:mod:`fusemap.mapper.deferred_hosting`)."""
    plan = plan or FusionPlan(
        frozenset(wl.shared), {}, frozenset(e.name for e in wl.einsums), {}, {}
    )
    groups: dict[tuple, list[str]] = {}
    for e in wl.einsums:
        groups.setdefault(einsum_signature(e, wl, arch, plan), []).append(e.name)
    unique = [names[0] for names in groups.values()]
    stats.distinct_einsums = len(unique)
    gen_objective = "energy" if objective == "energy" else "all"
    config = replace(
        config_from_spec(spec),
        fusion=True,
        fusable=plan.fusable,
        held_loops=plan.held_loops,
        hosts=plan.hosts,
        hosted=plan.hosted,
        host_loops=plan.host_loops,
    )
    made: dict[str, PmappingTable] = {}
    defer = deferred is not None
    if deferred is not None:
        deferred.config = config
        deferred.groups = {names[0]: names for names in groups.values()}
    if jobs > 1 and len(unique) > 1:
        from joblib import Parallel, delayed

        # Largest first (a cheap estimate), so workers end together.
        order = sorted(unique, key=lambda n: _work(wl, n), reverse=True)
        with quiet_worker_restarts():
            done = Parallel(n_jobs=jobs, return_as="generator", batch_size=1)(
                delayed(_generate_one)(spec, n, gen_objective, config, limits.current(), defer)
                for n in order
            )
            for k, table in enumerate(done):
                made[table.einsum] = table
                if progress:
                    progress("pmappings", k + 1, len(unique))
    else:
        for k, n in enumerate(unique):
            made[n] = generate_pmappings(
                spec, n, objective=gen_objective, config=config, workload=wl, arch=arch,
                only=_unmarked if defer else None, with_floors=defer,
            )  # fmt: skip
            if progress:
                progress("pmappings", k + 1, len(unique))
    if deferred is not None:
        for n in unique:
            deferred.add(n, made[n])
    tables: dict[str, PmappingTable] = {}
    for names in groups.values():
        first = made[names[0]]
        for n in names:
            if n == names[0]:
                tables[n] = first
            else:
                a, b = wl.einsum(names[0]), wl.einsum(n)
                tables[n] = first.renamed(n, tensor_renaming(a, b), variable_renaming(a, b))
    for n, table in tables.items():
        stats.pmappings[n] = len(table)
        stats.templates[n] = table.stats.templates
    stats.pmapping_seconds = {n: t.stats.seconds for n, t in made.items()}
    stats.peak_mb = max((t.stats.peak_mb for t in made.values()), default=0.0)
    return {e.name: tables[e.name] for e in wl.einsums}


def _work(wl: WorkloadInfo, einsum: str) -> tuple[int, int]:
    """A cheap estimate of an Einsum's pmapping search, to give workers the largest
    first: its rank variables times its tensors, then its operations."""
    info = wl.einsum(einsum)
    return (len(info.rank_variables) * len(info.tensors), int(info.operations))


def _generate_one(
    spec: Spec, einsum: str, objective: str, config, limits_in_force: limits.Limits, defer: bool
) -> PmappingTable:
    """In a worker process: the caller's limits (``--limit``), a fresh expression budget."""
    limits.configure(**dataclasses.asdict(limits_in_force))
    limits.reset_budget()
    try:
        only = _unmarked if defer else None
        return generate_pmappings(
            spec, einsum, objective=objective, config=config, only=only, with_floors=defer
        )
    finally:
        give_back_memory()


def _unmarked(index: int, template) -> bool:
    return not marked(template)
