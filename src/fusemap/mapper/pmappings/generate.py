"""Pmappings of one Einsum: every template tiled, the survivors in one columnar table
(:class:`~.table.PmappingTable`).

The steps: the Einsum's templates, one tiler per template (and per amount other
Einsums may hold beside it, :mod:`.held`), the shared tile-shape search, every loop
order of the fused gaps, one Pareto-pruned table (:mod:`.combine`), then the table
compacted to what it refers to.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from ...spec.arch_eval import ArchEvaluator
from ...spec.resolve import EinsumInfo, WorkloadInfo, resolve_workload
from ..distinct import sorted_distinct
from ..space.config import MapperConfig, config_from_spec
from ..space.interner import PrefixInterner
from ..space.templates import Template, join_memories, template_key, templates, top_memory
from ..tiling.fronts import FrontStore
from ..tiling.gap_orders import OrderCounter
from ..tiling.result import TemplateResult
from ..tiling.search import TilingCounts, tile_held_variants_last
from ..tiling.tiler import TemplateTiler
from .combine import combined_table
from .floors import (
    floor_under,
    least_energy_by_template,
    least_latency,
    least_latency_by_template,
    with_relaxed_twins,
)
from .held import held_amounts
from .ordered import Ordering, PrunedAsFinished, RowFilter
from .signature import tiling_context
from .table import PmappingStats, PmappingTable

SKIP_FITTING_VARIANTS = True
"""Energy objective: a template that fuses nothing is not searched again beside an amount
held when the least-energy such pmapping fits beside it
(:func:`fusemap.mapper.tiling.search.tile_held_variants_last`; the tests compare with False)."""


def generate_pmappings(
    spec,
    einsum: str,
    *,
    objective: str = "all",
    config: MapperConfig | None = None,
    workload: WorkloadInfo | None = None,
    arch: ArchEvaluator | None = None,
    progress: Callable[[int, int], None] | None = None,
    prune: bool = True,
    only: Callable[[int, Template], bool] | None = None,
    with_floors: bool = False,
    fronts: FrontStore | None = None,
    given: list[Template] | None = None,
    ceiling: float = np.inf,
    full_floors: bool = False,
    self_bound: float | None = None,
    useful: RowFilter | None = None,
) -> PmappingTable:
    """Tile every template of ``einsum`` and keep the Pareto-optimal pmappings.

    ``objective``: ``energy`` prunes on energy and reservations only (fastest),
    ``latency``/``edp``/``all`` also on the latency counts. With ``config.fusion``,
    shared tensors may be backed below the top memory, and rows are kept apart by
    compatibility and compared on reservations per loop depth (what the join needs).
    ``prune=False`` keeps every tile shape (for brute-force checks on tiny cases).
    ``only(index, template)``: the templates to tile (default: all). ``with_floors``:
    also record each template's least energy (:attr:`PmappingTable.floors`).
    ``fronts``: bottom-up fronts kept from and for tables of Einsums equal up to names.
    ``given``: these templates of the Einsum (some left out before), not all of them.
    ``ceiling``: rows of more energy are of no use (branch and bound; some may remain).
    ``full_floors``: also fill :attr:`PmappingTable.full_floors` (each template with two
    loop gaps or more above its deepest fused node searched again with relaxed prefixes,
    in the same search: the nodes below its deepest fused node are searched alike).
    ``self_bound`` (energy objective): keep only the rows of at most ``1 + self_bound``
    times the Einsum's least energy (branch and bound on the least so far; some above
    may remain; templates that fuse nothing keep their own bound). The table's
    :attr:`PmappingTable.complete_to` says up to where it is complete.
    ``useful(result, interner)``: which rows of a template's result may be of use,
    decided per prefix on what no loop order changes (energy, latency, the loops of the
    prefix), keeping every row that dominates one it keeps; the others are dropped as
    each template finishes (shown to ``useful`` once).
    """
    start = time.perf_counter()
    config = config or config_from_spec(spec)
    workload = workload or resolve_workload(spec)
    arch = arch or ArchEvaluator(spec, workload)
    info = workload.einsum(einsum)
    if given is None:
        given = _templates(info, workload, arch, config)
    temps, skipped = _chosen_templates(given, only)
    search = EinsumSearch.of(info, workload, arch, config, objective, prune)
    tilers, variants = search.tilers(temps, ceiling, self_bound, useful)
    if full_floors:  # each twin right after its template: their fronts are alive together
        tilers, variants = with_relaxed_twins(tilers, variants, objective == "energy")
    if fronts is not None:
        fronts.context = search.tiling_context()
    counts = TilingCounts()
    pruner = search.pruner(useful)
    done = tile_held_variants_last(
        tilers, variants, counts, _stepper(progress, len(tilers)), fronts, pruner
    )
    relaxed = {template_key(t.t): r for r, t in zip(done, tilers, strict=True) if t.relaxed}
    done = [r for r, t in zip(done, tilers, strict=True) if not t.relaxed]
    tilers = [t for t in tilers if not t.relaxed]
    floors = least_energy_by_template(done, tilers) if with_floors else {}
    full_ceiling = _full_ceiling(done, ceiling, objective)
    table = _pruned_table(
        search, [(r, t) for r, t in zip(done, tilers, strict=True) if r.rows], pruner
    )
    _compact(table)
    table.floors = floors
    if with_floors and objective != "energy":
        table.floors_latency = least_latency_by_template(done, tilers)
    table.complete_to = counts.complete_to
    if relaxed:
        _add_full_floors(table, relaxed, full_ceiling, objective)
    table.skipped = skipped if with_floors else []
    table.stats = _stats(len(temps), counts, len(table), time.perf_counter() - start)
    return table


def _stats(n_templates: int, counts: TilingCounts, rows: int, seconds: float) -> PmappingStats:
    """What the search of ``n_templates`` templates saw, and kept (``rows``)."""
    return PmappingStats(
        templates=n_templates,
        stages=counts.stages,
        tile_shapes_evaluated=counts.evaluated,
        tile_shapes_valid=counts.valid,
        pareto=rows,
        seconds=seconds,
        peak_mb=_peak_mb(),
    )


@dataclass
class EinsumSearch:
    """What the tilers of one Einsum's templates share: the Einsum, its tensors' place in
    the workload, the search's knobs, the search's prefix interner (the table's is its
    pruner's own: the results move there as they finish) and one memo of terms."""

    info: EinsumInfo
    workload: WorkloadInfo
    arch: ArchEvaluator
    config: MapperConfig
    objective: str
    prune: bool
    shared: frozenset[str]  # tensors that may be fused
    pinned: frozenset[str]  # shared tensors kept in the top memory
    joined: frozenset[str]  # memories whose reservations the join adds up
    amounts: list[dict[str, float]] | None  # held beside templates that fuse nothing
    scale: int  # instances of the Einsum in the workload
    bits: dict[str, float]  # bits per value of each tensor
    interner: PrefixInterner
    memo: dict

    @classmethod
    def of(cls, info, workload, arch, config, objective: str, prune: bool) -> EinsumSearch:
        """The shared state of the search of ``info``'s templates."""
        shared, pinned = config.sharing(info, workload)
        joined = join_memories(workload, arch, config)
        amounts = held_amounts(info, workload, arch, config, joined) if prune else None
        scale = workload.n_instances * info.n_instances
        bits = {t: workload.tensors[t].bits_per_value for t in info.tensors}
        return cls(
            info, workload, arch, config, objective, prune, shared, pinned, joined, amounts,
            scale, bits, PrefixInterner(), {},
        )  # fmt: skip

    def tiling_context(self) -> tuple:
        """What the fronts kept for Einsums equal up to names depend on."""
        return tiling_context(
            self.info, self.workload, self.arch, self.config, self.objective, self.prune,
            self.joined,
        )  # fmt: skip

    def pruner(self, useful: RowFilter | None) -> PrunedAsFinished | None:
        """With fusion, what cuts the results as templates finish and makes them one
        table (:mod:`.ordered`)."""
        if not self.config.fusion:
            return None
        einsum = self.info.name
        ordering = Ordering(  # the table's own interner: the search's forgets
            einsum, self.objective, self.shared, PrefixInterner(),
            {t: top_memory(self.arch, einsum) for t in self.shared}, self.prune,
            self.amounts == [{}],
        )  # fmt: skip
        return PrunedAsFinished(ordering, self.order_counter, useful)

    def order_counter(self) -> OrderCounter:
        """A counter of the rows loop orders add, against the limit."""
        return OrderCounter(self.arch.spec.locate_einsum(self.info.index))

    def tiler(self, template: Template, held: dict[str, float] | None) -> TemplateTiler:
        """A tiler of ``template`` (beside the ``held`` bits per memory)."""
        return TemplateTiler(
            template,
            self.info,
            self.arch.flat(self.info.name, template.compute),
            self.config,
            self.scale,
            self.bits,
            want_latency=self.objective != "energy",
            shared=self.shared,
            interner=self.interner,
            prune=self.prune,
            join_memories=self.joined,
            memo=self.memo,
            held=held,
        )

    def tilers(
        self, temps: list[Template], ceiling: float, self_bound: float | None, useful=None
    ) -> tuple[list[TemplateTiler], set[int]]:
        """One tiler per template, and for a template that fuses nothing one more per
        amount the Einsum may host; the indices of those searched only if needed. Rows
        of no use to ``useful`` end at their deepest fused node (its ``prefix_raise``)."""
        amounts = self.amounts
        tilers = []
        variants: set[int] = set()  # fuse nothing, something held beside them, energy only
        for tmpl in temps:
            first = self.tiler(tmpl, amounts[0] if amounts else None)
            tilers.append(first)
            if first.p_max < 0 and amounts:  # fuses nothing: once per amount it may host
                for held in amounts[1:]:
                    tilers.append(self.tiler(tmpl, held))
                    if SKIP_FITTING_VARIANTS and first.alone:
                        variants.add(len(tilers) - 1)
        for t in tilers:
            t.ceiling = ceiling
            t.prefix_raise = getattr(useful, "prefix_raise", None)
            if self_bound is not None and not t.alone:
                t.bounded_by_least, t.least_slack = True, self_bound
        return tilers, variants


def _templates(info, workload, arch, config) -> list[Template]:
    """Every template of the Einsum (its shared tensors fused or pinned as ``config``
    says)."""
    shared, pinned = config.sharing(info, workload)
    return templates(info, arch, config, shared=shared, pinned=pinned)


def _chosen_templates(
    temps: list[Template], only: Callable[[int, Template], bool] | None
) -> tuple[list[Template], list[Template]]:
    """The templates to tile (those ``only`` picks) and those left out."""
    if only is None:
        return temps, []
    chosen = [only(i, t) for i, t in enumerate(temps)]
    skipped = [t for t, c in zip(temps, chosen, strict=True) if not c]
    return [t for t, c in zip(temps, chosen, strict=True) if c], skipped


def _stepper(progress: Callable[[int, int], None] | None, total: int) -> Callable[[int], None]:
    """A callback counting finished tilers, for ``progress`` (finished, total)."""
    finished = [0]

    def step(n: int) -> None:
        finished[0] += n
        if progress:
            progress(finished[0], total)

    return step


def _pruned_table(
    search: EinsumSearch,
    kept: list[tuple[TemplateResult, TemplateTiler]],
    pruner: PrunedAsFinished | None,
) -> PmappingTable:
    """The templates' rows in one Pareto-pruned table; with fusion (``pruner``), with
    every loop order of the prefix gaps first (:mod:`.ordered`). Latencies left unknown
    (energy pruned alone) are computed last, for the rows kept."""
    results = [r for r, _ in kept]
    if pruner is not None:
        results = pruner.ordered_of(results, [t for _, t in kept])[0]
        table = pruner.ordering.table(results)
    else:
        table = combined_table(search.info.name, results, search.objective, search.shared)
    for k in sorted_distinct(table.template[np.isnan(table.latency)]):
        rows = np.flatnonzero(table.template == k)  # energy pruned alone: latency last
        table.latency[rows] = kept[k][1].latency_of(results[k], table.row[rows])
    return table


def _compact(table: PmappingTable) -> None:
    """Keep only what the table refers to: the templates with rows (a tenth of them on
    GPT-3's Q), each with its rows' trail, and the prefixes its rows use (less to hold
    and to send back from a worker)."""
    live = sorted_distinct(table.template)
    compacted = []
    for k in live.tolist():
        rows = np.flatnonzero(table.template == k)
        used = sorted_distinct(table.row[rows])
        compacted.append(table.results[k].compact(used))
        table.row[rows] = np.searchsorted(used, table.row[rows])
    table.results = compacted
    table.template = np.searchsorted(live, table.template)
    if table.fusion is not None:
        _keep_used_prefixes(table)


def _full_ceiling(done: list[TemplateResult], ceiling: float, objective: str) -> float:
    """Up to where the relaxed twins' floors are exact: the least energy of the
    Einsum's own rows (the ceiling given if none), +inf when searched without the
    energy branch and bound."""
    if objective != "energy":
        return np.inf  # twins searched without the energy branch and bound
    own = [r.least_energy for r in done if np.isfinite(r.least_energy)]  # none: the ceiling given
    return min(own) if own else float(ceiling)


def _add_full_floors(
    table: PmappingTable, relaxed: dict[tuple, TemplateResult], ceiling: float, objective: str
) -> None:
    """Each relaxed twin's least energy (and latency) over the whole fused space."""
    table.full_ceiling = ceiling
    table.full_floors = {k: floor_under(r, ceiling) for k, r in relaxed.items()}
    if objective != "energy":
        table.full_floors_latency = {k: least_latency(r) for k, r in relaxed.items()}


def _peak_mb() -> float:
    """Peak resident memory of this process so far, in MB (0 where unknown)."""
    try:
        import resource
    except ImportError:  # not on Unix
        return 0.0
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kb / 1024 if sys.platform != "darwin" else kb / 2**20


def _keep_used_prefixes(table: PmappingTable) -> None:
    """A fresh interner for ``table`` with only the prefixes its rows and results refer
    to, their ancestors and their steps (the search's interner holds every prefix it
    met, far more to send back from a worker: GPT-3's Q, K and V tables took 3 s to
    pickle)."""
    fusion = table.fusion
    assert fusion is not None
    seqs = [fusion.seq] + [r.seq for r in table.results if r.seq is not None]
    used = sorted_distinct(np.concatenate(seqs))
    interner, ids = fusion.interner.kept_only(used, PrefixInterner())
    table.results = [
        r if r.seq is None else replace(r, seq=ids[np.searchsorted(used, r.seq)])
        for r in table.results
    ]
    table.fusion = replace(fusion, seq=ids[np.searchsorted(used, fusion.seq)], interner=interner)
