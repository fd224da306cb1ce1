"""The pmapping tables of every Einsum of a workload (in worker processes when asked);
Einsums equal up to tensor names share one table."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from ...spec import limits
from ...spec.arch_eval import ArchEvaluator
from ...spec.resolve import WorkloadInfo
from ...spec.spec import Spec
from ..deferred_hosting import DeferredHosting
from ..space.config import MapperConfig, config_from_spec
from ..space.plan import FusionPlan
from ..space.prefix import marked
from ..tiling.fronts import FrontStore
from ..workers import in_worker, spread
from .generate import generate_pmappings
from .signature import einsum_signature, tensor_renaming, variable_renaming
from .table import PmappingTable

if TYPE_CHECKING:
    from ..outcome import MapStatistics

Progress = Callable[[str, int, int], None]
SelfBound = float | Mapping[str, float] | None
"""How far the tables are made: near each Einsum's least (relative), per Einsum
(relative to its least), or complete (None)."""


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
    floors: bool = False,
    self_bound: SelfBound = None,
) -> dict[str, PmappingTable]:
    """Fused pmappings of every Einsum; Einsums equal up to tensor names share one.
    ``plan``: what may be fused how (None: every shared tensor, tiled or not, and every
    Einsum may host). ``deferred`` (not for Pareto fronts): tile no hosting template, record
    them there (:mod:`fusemap.mapper.deferred_hosting`). ``floors``: with each table, its
    templates' least energies over the whole fused space up to its own least
    (:mod:`fusemap.mapper.full_space`). ``self_bound``: each table holds only its rows of
    at most ``1 + self_bound`` times its least energy (and some more;
    :attr:`PmappingTable.complete_to`); per table (by its first Einsum's name), if a
    mapping."""
    plan = plan or FusionPlan(
        frozenset(wl.shared), {}, frozenset(e.name for e in wl.einsums), {}, {}
    )
    groups = table_groups(wl, arch, plan)
    unique = list(groups)
    stats.distinct_einsums = len(unique)
    gen_objective = "energy" if objective == "energy" else "all"
    config = tables_config(spec, plan)
    made: dict[str, PmappingTable] = {}
    defer = deferred is not None
    if deferred is not None:
        deferred.config = config
        deferred.groups = groups
    # Einsums equal up to names but for what the plan lets them fuse or host (Q, K, V)
    # are generated one after another in one process: later ones reuse the fronts.
    kinds: dict[tuple, list[str]] = {}
    for n in unique:
        kinds.setdefault(einsum_signature(wl.einsum(n), wl, arch), []).append(n)
    # Largest first (a cheap estimate), so workers end together.
    jobs_in_order = sorted(kinds.values(), key=lambda names: _work(wl, names), reverse=True)

    bound = [_kind_bound(self_bound, [m for n in k for m in groups[n]]) for k in jobs_in_order]

    def remote(i: int) -> tuple:
        args = (spec, jobs_in_order[i], gen_objective, config, limits.current(), defer)
        return _generate_kind, (*args, None, None, floors, bound[i])

    def local(i: int) -> list[PmappingTable]:
        return _generate_kind(
            spec, jobs_in_order[i], gen_objective, config, None, defer, wl, arch, floors,
            bound[i],
        )  # fmt: skip

    def done(i: int, kind: list[PmappingTable]) -> None:
        for table in kind:
            made[table.einsum] = table
            if progress:
                progress("pmappings", len(made), len(unique))

    spread(jobs, len(jobs_in_order), remote, local, done)
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


def _kind_bound(self_bound: SelfBound, names: list[str]) -> float | None:
    """The self bound of Einsums generated together: the loosest of theirs (a looser
    bound keeps more rows, and each table says how far it is complete)."""
    if self_bound is None or isinstance(self_bound, float):
        return self_bound
    return max(self_bound[n] for n in names)


def tables_config(spec: Spec, plan: FusionPlan) -> MapperConfig:
    """The search's knobs for the tables of a workload: the spec's, fusion on, and what
    the fusion plan allows."""
    return replace(
        config_from_spec(spec),
        fusion=True,
        fusable=plan.fusable,
        held_loops=plan.held_loops,
        hosts=plan.hosts,
        hosted=plan.hosted,
        host_loops=plan.host_loops,
    )


def table_groups(wl: WorkloadInfo, arch: ArchEvaluator, plan: FusionPlan) -> dict[str, list[str]]:
    """Einsums that share one table (equal up to tensor names), keyed by the first."""
    groups: dict[tuple, list[str]] = {}
    for e in wl.einsums:
        groups.setdefault(einsum_signature(e, wl, arch, plan), []).append(e.name)
    return {names[0]: names for names in groups.values()}


def _work(wl: WorkloadInfo, einsums: list[str]) -> tuple[int, int]:
    """A cheap estimate of the pmapping searches of ``einsums``, to give workers the
    largest first: rank variables times tensors, then operations (summed)."""
    infos = [wl.einsum(n) for n in einsums]
    return (
        sum(len(i.rank_variables) * len(i.tensors) for i in infos),
        sum(int(i.operations) for i in infos),
    )


def _generate_kind(
    spec: Spec,
    einsums: list[str],
    objective: str,
    config,
    limits_in_force: limits.Limits | None,
    defer: bool,
    wl: WorkloadInfo | None = None,
    arch: ArchEvaluator | None = None,
    floors: bool = False,
    self_bound: float | None = None,
) -> list[PmappingTable]:
    """The tables of Einsums equal up to names (one after another, sharing the fronts
    of their suffix searches). In a worker process (``limits_in_force`` given): the
    caller's limits (``--limit``), a fresh expression budget. ``floors``: each table
    also gets :attr:`PmappingTable.full_floors`."""
    only = _unmarked if defer else None
    store = FrontStore() if len(einsums) > 1 else None
    out = []
    with in_worker(limits_in_force):
        for k, einsum in enumerate(einsums):
            if store is not None:
                store.frozen = k == len(einsums) - 1
            table = generate_pmappings(
                spec, einsum, objective=objective, config=config, workload=wl, arch=arch,
                only=only, with_floors=defer, fronts=store, full_floors=floors,
                self_bound=self_bound,
            )  # fmt: skip
            out.append(table)
        del store  # before the memory is given back
        return out


def _unmarked(index: int, template) -> bool:
    return not marked(template)
