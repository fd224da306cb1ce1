"""Pmappings of one Einsum: every template tiled, the survivors in one columnar table.

A row is one pmapping: a template and a tile shape. The table holds its objectives
(energy, latency), its reservations per bounded memory, and its compatibility (for each
shared tensor, the backing memory and the loops above it); :meth:`PmappingTable.mapping`
turns any row into a LoopTree.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from ...spec import mapping as M
from ...spec.arch_eval import ArchEvaluator
from ...spec.resolve import WorkloadInfo
from ..pareto import pareto_mask
from ..space.prefix import Compatibility, PrefixInterner, SpatialTile, marked
from ..space.templates import (
    MapperConfig,
    Template,
    backing_choices,
    compute_units,
    config_from_spec,
    join_memories,
    templates,
    top_level,
    top_memory,
)
from ..tiling.fronts import FrontStore
from ..tiling.gap_orders import OrderCounter, ordered_as_prefix, with_gap_orders
from ..tiling.result import TemplateResult, renamed_result
from ..tiling.search import TilingCounts, tile_held_variants_last
from ..tiling.tiler import TemplateTiler
from ..tiling.uneven import spatial_tiles
from .fused_rows import fused_criteria, pruned_before_orders, stacked_buckets
from .renamed import RenamedInterner, RenamedResults
from .signature import tiling_context

OBJECTIVES = ("energy", "latency", "edp")


@dataclass
class PmappingStats:
    """How much of the mapspace was seen, and how much survived."""

    templates: int = 0
    stages: int = 0  # search stages run (templates share the stages of common prefixes)
    tile_shapes_evaluated: int = 0  # partial tile shapes costed by the search
    tile_shapes_valid: int = 0  # of those, within every capacity
    pareto: int = 0  # rows of the final table
    seconds: float = 0.0
    peak_mb: float = 0.0  # peak resident memory of the process that made it, once done

    def as_dict(self) -> dict[str, float]:
        """Plain numbers, for JSON."""
        return dict(self.__dict__)


@dataclass
class FusionColumns:
    """Per-row data the FFM join needs (pmappings generated with fusion on)."""

    seq: np.ndarray  # (R,) interned fused prefix
    buckets: dict[str, np.ndarray]  # memory -> (R, K+1) private reservations by loop depth
    interner: PrefixInterner
    shared: frozenset[str]  # the Einsum's tensors shared with other Einsums
    top: dict[str, str]  # shared tensor -> memory backing it when unfused

    def compatibility(self, i: int) -> tuple[Compatibility, ...]:
        """Per shared tensor (sorted by name): backing memory and loops above it."""
        return self.interner.compatibility(int(self.seq[i]), self.shared, self.top)

    def take(self, keep: np.ndarray) -> FusionColumns:
        """The rows ``keep``."""
        return replace(
            self, seq=self.seq[keep], buckets={m: b[keep] for m, b in self.buckets.items()}
        )


@dataclass
class PmappingTable:
    """The Pareto-optimal pmappings of one Einsum."""

    einsum: str
    results: list[TemplateResult]
    template: np.ndarray  # (R,) index into ``results``
    row: np.ndarray  # (R,) row within that template's result
    energy: np.ndarray
    latency: np.ndarray
    reservations: dict[str, np.ndarray]  # memory -> bits, for memories that can overflow
    latency_counts: dict[str, np.ndarray] = field(default_factory=dict)  # see TemplateResult
    stats: PmappingStats = field(default_factory=PmappingStats)
    fusion: FusionColumns | None = None  # with fusion: what the join needs per row
    notes: list[str] = field(default_factory=list)  # what the search relaxed (min_usage)
    floors: dict[tuple, float] = field(default_factory=dict)
    """Per template (:func:`template_key`): a lower bound of its pmappings' energy."""
    skipped: list[Template] = field(default_factory=list)
    """With floors: the templates ``only`` left out (in the order they were made)."""
    full_floors: dict[tuple, float] = field(default_factory=dict)
    """Per template with two loop gaps or more above its deepest fused node: its least
    energy over the whole fused space if at most ``full_ceiling``, else +inf
    (:mod:`fusemap.mapper.full_space`; empty when not asked)."""
    complete_to: float = np.inf
    """Every pmapping of energy at most this is in the table (a self-bounded search,
    ``generate_pmappings(self_bound=...)``, left out costlier ones)."""
    full_ceiling: float = -np.inf
    full_floors_latency: dict[tuple, float] = field(default_factory=dict)
    """Latency and EDP objectives: per template of :attr:`full_floors` (then exact, no
    ceiling), its least latency over the whole fused space."""

    def __len__(self) -> int:
        return len(self.energy)

    def best(self, objective: str = "energy") -> int:
        """Index of the best row (ties: the other objective, then table order)."""
        if len(self) == 0:
            raise IndexError("no pmapping")
        if objective == "energy":
            keys = (self.latency, self.energy)
        elif objective == "latency":
            keys = (self.energy, self.latency)
        elif objective == "edp":
            keys = (self.energy, self.energy * self.latency)
        else:
            raise ValueError(f"unknown objective '{objective}' (use {', '.join(OBJECTIVES)})")
        return int(np.lexsort(keys)[0])

    def take(self, rows: np.ndarray) -> PmappingTable:
        """The table of ``rows`` (in that order; repeats allowed)."""
        return replace(
            self,
            template=self.template[rows],
            row=self.row[rows],
            energy=self.energy[rows],
            latency=self.latency[rows],
            reservations={m: v[rows] for m, v in self.reservations.items()},
            latency_counts={m: v[rows] for m, v in self.latency_counts.items()},
            fusion=None if self.fusion is None else self.fusion.take(rows),
        )

    def mapping(self, i: int) -> M.Mapping:
        """The LoopTree of row ``i``."""
        tree = materialize(self.results[int(self.template[i])], int(self.row[i]))
        if self.fusion is None:
            return tree
        return ordered_as_prefix(tree, self.fusion.interner.prefixes[int(self.fusion.seq[i])])

    def renamed(
        self, einsum: str, tensors: dict[str, str], variables: dict[str, str] | None = None
    ) -> PmappingTable:
        """The same table for an identical Einsum with other tensor (and rank variable)
        names."""
        var = variables or {}

        def tiles(r: TemplateResult) -> TemplateResult:
            return renamed_result(r, einsum, tensors, var)

        fusion = self.fusion
        if fusion is not None:
            fusion = replace(
                fusion,  # the same prefix ids, in the base's interner renamed
                interner=RenamedInterner(fusion.interner, tensors, var),
                shared=frozenset(tensors[t] for t in fusion.shared),
                top={tensors[t]: m for t, m in fusion.top.items()},
            )
        results = RenamedResults(self.results, tiles)
        out = replace(self, einsum=einsum, results=results, fusion=fusion)  # type: ignore[arg-type]
        # Row i is this table's row i renamed (the relaxed join reads compatibilities
        # off the first table, :mod:`fusemap.mapper.join.completion`).
        out.__dict__["renamed_from"] = (self, tensors, var)
        return out

    def compatibility(self, i: int, shared: frozenset[str]) -> list[Compatibility]:
        """Per shared tensor of the Einsum: backing memory and the loops above it."""
        return compatibility_of(self.mapping(i), shared)


def compatibility_of(mapping: M.Mapping, shared: frozenset[str]) -> list[Compatibility]:
    """Per shared tensor: backing memory and the loops above it, in order."""
    out = []
    for t in sorted(shared):
        loops: list[tuple[str, int]] = []
        for node in mapping.nodes:
            if isinstance(node, M.Storage) and t in node.tensors:
                out.append(Compatibility(t, node.component, tuple(loops)))
                break
            if isinstance(node, M.Spatial):
                tile = SpatialTile.on(node.tile_shape, node.component, node.name)
                loops.append((node.rank_variable, tile))
            elif isinstance(node, M.Temporal):
                loops.append((node.rank_variable, node.tile_shape))
    return out


def _top(res: TemplateResult, holder) -> bool:
    """Backing in the first memory with no loop above (what fusion-off gives)."""
    return holder.backing and holder.level == res.template.holders[0].level


def materialize(res: TemplateResult, row: int) -> M.Mapping:
    """The canonical LoopTree of one tile shape of a template."""
    t = res.template
    relevance, variables = res.relevance, res.variables
    nodes: list = []
    trail = res.trail(row)
    for j, holder in enumerate(t.holders):
        here, mid = trail[j]
        looped = [k for k, _ in enumerate(variables) if mid[k] < here[k]]
        rank = {"relevant": 0, "partial": 1, "irrelevant": 2}
        if holder.virtual:  # no storage node: only the loops it exposes
            looped.sort()
        else:
            nodes.append(M.Storage(tensors=[holder.tensor], component=holder.component))
            looped.sort(key=lambda k: (rank[relevance[holder.tensor][variables[k]]], k))
        for k in looped:
            nodes.append(M.Temporal(rank_variable=variables[k], tile_shape=int(mid[k])))
        loops = [s for s in t.spatial if s.slot == j + 1]
        below = trail[j + 1][0] if j + 1 < len(trail) else np.ones(len(variables), dtype=np.int64)
        for s, tile in zip(loops, spatial_tiles(loops, variables, mid, below), strict=True):
            nodes.append(
                M.Spatial(
                    rank_variable=s.var, tile_shape=tile, name=s.dimension, component=s.component
                )
            )
    nodes.append(M.Compute(einsum=t.einsum, component=t.compute))
    return M.Mapping(nodes=nodes)


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
    """
    from ...spec.resolve import resolve_workload

    start = time.perf_counter()
    config = config or config_from_spec(spec)
    workload = workload or resolve_workload(spec)
    arch = arch or ArchEvaluator(spec, workload)
    info = workload.einsum(einsum)
    scale = workload.n_instances * info.n_instances
    bits = {t: workload.tensors[t].bits_per_value for t in info.tensors}
    shared, pinned = config.sharing(info, workload)
    temps = (
        given if given is not None else templates(info, arch, config, shared=shared, pinned=pinned)
    )
    skipped: list[Template] = []
    if only is not None:
        chosen = [only(i, t) for i, t in enumerate(temps)]
        skipped = [t for t, c in zip(temps, chosen, strict=True) if not c]
        temps = [t for t, c in zip(temps, chosen, strict=True) if c]
    joined = join_memories(workload, arch, config)
    stats = PmappingStats(templates=len(temps))
    interner = PrefixInterner()
    memo: dict = {}
    amounts = held_amounts(info, workload, arch, config, joined) if prune else None

    def tiler(tmpl, held: dict[str, float] | None) -> TemplateTiler:
        return TemplateTiler(
            tmpl,
            info,
            arch.flat(info.name, tmpl.compute),
            config,
            scale,
            bits,
            want_latency=objective != "energy",
            shared=shared,
            interner=interner,
            prune=prune,
            join_memories=joined,
            memo=memo,
            held=held,
        )

    tilers = []
    variants: set[int] = set()  # fuse nothing, something held beside them, energy only
    for tmpl in temps:
        first = tiler(tmpl, amounts[0] if amounts else None)
        tilers.append(first)
        if first.p_max < 0 and amounts:  # fuses nothing: once per amount it may host
            for held in amounts[1:]:
                tilers.append(tiler(tmpl, held))
                if SKIP_FITTING_VARIANTS and first.alone:
                    variants.add(len(tilers) - 1)
    for t in tilers:
        t.ceiling = ceiling
        if self_bound is not None and not t.alone:
            t.bounded_by_least, t.least_slack = True, self_bound
    if full_floors:  # each twin right after its template: their fronts are alive together
        tilers, variants = _with_relaxed_twins(tilers, variants, objective == "energy")
    counts = TilingCounts()
    finished = [0]

    def step(n: int) -> None:
        finished[0] += n
        if progress:
            progress(finished[0], len(tilers))

    if fronts is not None:
        fronts.context = tiling_context(info, workload, arch, config, objective, prune, joined)
    done = tile_held_variants_last(tilers, variants, counts, step, fronts)
    stats.tile_shapes_evaluated = counts.evaluated
    stats.tile_shapes_valid = counts.valid
    stats.stages = counts.stages
    relaxed = {template_key(t.t): r for r, t in zip(done, tilers, strict=True) if t.relaxed}
    done = [r for r, t in zip(done, tilers, strict=True) if not t.relaxed]
    tilers = [t for t in tilers if not t.relaxed]
    floors = least_energy_by_template(done, tilers) if with_floors else {}
    own = [float(r.energy.min()) for r in done if r.rows]  # relaxed only: the ceiling given
    full_ceiling = min(own) if own else float(ceiling)
    if objective != "energy":
        full_ceiling = np.inf  # twins searched without the energy branch and bound
    kept = [(r, tiler) for r, tiler in zip(done, tilers, strict=True) if r.rows]
    results = [r for r, _ in kept]
    if config.fusion:  # every loop order of the prefix gaps, before the table is pruned
        counter = OrderCounter(einsum)
        alone = amounts == [{}]  # hosts nothing: rows that fuse nothing run alone
        contexts = [t.gap_context() for _, t in kept]
        if prune:
            results = pruned_before_orders(results, contexts, objective, alone)
        results = [
            _unmarked(with_gap_orders(r, ctx, interner, counter), interner)
            for r, ctx in zip(results, contexts, strict=True)
        ]
        top = {t: top_memory(arch, info.name) for t in shared}
        table = _combine_fused(einsum, results, objective, shared, interner, top, prune, alone)
    else:
        table = _combine(einsum, results, objective, shared)
    for k in np.unique(table.template[np.isnan(table.latency)]):
        rows = np.flatnonzero(table.template == k)  # energy pruned alone: latency last
        table.latency[rows] = kept[k][1].latency_of(results[k], table.row[rows])
    # Keep only what the table refers to: the templates with rows (a tenth of them on
    # GPT-3's Q), each with its rows' trail (less to hold and to send back from a worker).
    live = np.unique(table.template)
    compacted = []
    for k in live.tolist():
        rows = np.flatnonzero(table.template == k)
        used = np.unique(table.row[rows])
        compacted.append(table.results[k].compact(used))
        table.row[rows] = np.searchsorted(used, table.row[rows])
    table.results = compacted
    table.template = np.searchsorted(live, table.template)
    if table.fusion is not None:
        _keep_used_prefixes(table)
    table.floors = floors
    table.complete_to = counts.complete_to
    if relaxed:
        table.full_ceiling = full_ceiling
        table.full_floors = {k: _floor_under(r, full_ceiling) for k, r in relaxed.items()}
        if objective != "energy":
            table.full_floors_latency = {k: _least_latency(r) for k, r in relaxed.items()}
    table.skipped = skipped if with_floors else []
    stats.pareto = len(table)
    stats.seconds = time.perf_counter() - start
    stats.peak_mb = _peak_mb()
    table.stats = stats
    return table


def _stack(results: list[TemplateResult]):
    tmpl = np.concatenate([np.full(r.rows, i) for i, r in enumerate(results)])
    row = np.concatenate([np.arange(r.rows) for r in results])
    energy = np.concatenate([r.energy for r in results])
    latency = np.concatenate([r.latency for r in results])
    memories = sorted({m for r in results for m in r.reservations})
    res = {
        m: np.concatenate([r.reservations.get(m, np.zeros(r.rows)) for r in results])
        for m in memories
    }
    return tmpl, row, energy, latency, res


def _counts(results: list[TemplateResult], keep: np.ndarray) -> dict[str, np.ndarray]:
    names = sorted({n for r in results for n in r.latency_counts})
    return {
        n: np.concatenate([r.latency_counts.get(n, np.zeros(r.rows)) for r in results])[keep]
        for n in names
    }


def empty_table(einsum: str) -> PmappingTable:
    empty = np.zeros(0)
    return PmappingTable(einsum, [], empty.astype(int), empty.astype(int), empty, empty, {})


def _combine(
    einsum: str, results: list[TemplateResult], objective: str, shared: frozenset[str]
) -> PmappingTable:
    """All templates' rows, Pareto-pruned (energy, latency, reservations) per compatibility.

    Rows that exchange shared tensors differently (another backing memory, other loops
    above it) are never compared: either may be the one a neighbour needs.
    """
    if not results:
        return empty_table(einsum)
    tmpl, row, energy, latency, res = _stack(results)
    cols = [energy] + ([latency] if objective != "energy" else []) + list(res.values())
    keys: dict[tuple, int] = {}
    groups = np.zeros(len(energy), dtype=np.int64)
    for i in range(len(energy)):
        res_i = results[int(tmpl[i])]
        if not any(h.tensor in shared and not _top(res_i, h) for h in res_i.template.holders):
            key: tuple = ()  # every shared tensor backed at the top with no loop above
        else:
            key = tuple(compatibility_of(materialize(res_i, int(row[i])), shared))
        groups[i] = keys.setdefault(key, len(keys))
    keep = pareto_mask(groups, np.stack(cols, axis=1))
    return _kept(einsum, results, (tmpl, row, energy, latency, res), keep)


def _kept(einsum, results, stacked, keep, fusion: FusionColumns | None = None) -> PmappingTable:
    """The table of the ``keep`` rows of the stacked template results."""
    tmpl, row, energy, latency, res = stacked
    return PmappingTable(
        einsum,
        results,
        tmpl[keep],
        row[keep],
        energy[keep],
        latency[keep],
        {m: v[keep] for m, v in res.items()},
        _counts(results, keep),
        fusion=fusion,
    )


def _combine_fused(
    einsum: str,
    results: list[TemplateResult],
    objective: str,
    shared: frozenset[str],
    interner: PrefixInterner,
    top: dict[str, str],
    prune: bool,
    alone: bool = False,
) -> PmappingTable:
    """Like :func:`_combine`, grouped by compatibility (the interned fused prefix) and
    compared on the private reservations of every loop depth (``alone``: the Einsum
    never hosts another Einsum's tensor)."""
    if not results:
        table = empty_table(einsum)
        table.fusion = FusionColumns(np.zeros(0, dtype=np.int64), {}, interner, shared, top)
        return table
    tmpl, row, energy, latency, res = _stack(results)
    seq = np.concatenate([r.seq for r in results])
    buckets = stacked_buckets(results)
    crit = fused_criteria(results, seq, buckets, objective, alone)
    keep = pareto_mask(seq, crit) if prune else np.ones(len(seq), dtype=bool)
    fusion = FusionColumns(seq, buckets, interner, shared, top).take(keep)
    return _kept(einsum, results, (tmpl, row, energy, latency, res), keep, fusion)


SKIP_FITTING_VARIANTS = True
"""Energy objective: a template that fuses nothing is not searched again beside an amount
held when the least-energy such pmapping fits beside it
(:func:`fusemap.mapper.tiling.search.tile_held_variants_last`; the tests compare with False)."""

MAX_HELD_AMOUNTS = 64
"""Above this many amounts an Einsum may host, its templates that fuse nothing keep their
reservations as criteria instead of being searched once per amount."""


def held_amounts(
    info, workload: WorkloadInfo, arch: ArchEvaluator, config: MapperConfig, joined
) -> list[dict[str, float]] | None:
    """Every amount (bits per memory) of other Einsums' tensors that may be held while
    ``info`` runs fusing nothing, nothing first; None when there are too many.

    Such an Einsum shares no loop with its neighbours, so all that can be held beside it
    are tensors fused whole (no loop above their backing node) between two of their
    users with it in between: any subset of them, each in any memory that may back it.
    For each amount the least energy under the capacity left is what the join needs
    (FFM's pruning, with the hosted amount as a known reservation)."""
    if not config.fusion or config.hosts is None:
        return None
    if info.name not in config.hosts:
        return [{}]
    hosted = sorted(t for t in config.hosted.get(info.name, ()) if t not in info.tensors)
    options: list[dict[str, float]] = [{}]
    for t in hosted:
        user = next(e for e in workload.einsums if t in e.tensors)
        places = []
        for unit in compute_units(user, arch):
            flat = arch.flat(user.name, unit)
            top = top_level(flat)
            for level in backing_choices(user, flat, t, True):
                if level == top:
                    continue  # not fused (the top memory may be unable to keep it)
                comp = flat.path[level]
                if comp.name in joined:
                    bits = workload.tensors[t].size * comp.value_bits(
                        t, workload.tensors[t].bits_per_value
                    )
                    places.append((comp.name, bits, comp.size))
        grown = []
        for opt in options:
            for memory, bits, size in dict.fromkeys(places):
                new = dict(opt)
                new[memory] = new.get(memory, 0.0) + bits
                if new[memory] <= size * (1 + 1e-9):  # else it cannot be held there
                    grown.append(new)
        options += grown
        unique = {tuple(sorted(o.items())): o for o in options}
        options = list(unique.values())
        if len(options) > MAX_HELD_AMOUNTS:
            return None
    return options


def _with_relaxed_twins(
    tilers: list, variants: set[int], bounded: bool = True
) -> tuple[list, set[int]]:
    """``tilers`` with a relaxed twin (:meth:`TemplateTiler.relaxed_twin`) right after
    each unmarked one with two loop gaps or more above its deepest fused node."""
    out, moved = [], set()
    for i, t in enumerate(tilers):
        if i in variants:
            moved.add(len(out))
        out.append(t)
        if t.p_max >= 2 and not marked(t.t) and i not in variants:
            out.append(t.relaxed_twin(bounded))
    return out, moved


def _floor_under(result: TemplateResult, ceiling: float) -> float:
    """A relaxed twin's least energy if at most ``ceiling``, else +inf (its rows above
    the ceiling were cut by the branch and bound)."""
    if not result.rows:
        return np.inf
    least = float(result.energy.min())
    return least if least <= ceiling * (1 + 1e-9) else np.inf


def _least_latency(result: TemplateResult) -> float:
    """A relaxed twin's least latency (+inf: no row; -inf, bounding nothing, if a
    latency was left unknown)."""
    if not result.rows:
        return np.inf
    least = float(result.latency.min())
    return -np.inf if math.isnan(least) else least


def _peak_mb() -> float:
    """Peak resident memory of this process so far, in MB (0 where unknown)."""
    try:
        import resource
    except ImportError:  # not on Unix
        return 0.0
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kb / 1024 if sys.platform != "darwin" else kb / 2**20


def template_key(t: Template) -> tuple:
    """What identifies a template in every process (no set order, no slot numbers)."""
    holders = tuple((h.tensor, h.component, h.level, h.backing, h.virtual) for h in t.holders)
    spatial = tuple((s.component, s.dimension, s.var, s.trips) for s in t.spatial)
    return (t.compute, holders, spatial)


def least_energy_by_template(done: list[TemplateResult], tilers: list) -> dict[tuple, float]:
    """Per template, a lower bound of the energy of every valid tile shape of it: its
    least energy, or for a template the branch and bound emptied (it fuses nothing and
    no row beat the best template finished before it), that best; +inf if none is valid."""
    best: dict[tuple, float] = {}
    for r, t in zip(done, tilers, strict=True):
        if t.alone and r.rows:
            best[t.held_key] = min(best.get(t.held_key, np.inf), float(r.energy.min()))
    out: dict[tuple, float] = {}
    for r, t in zip(done, tilers, strict=True):
        if r.rows:
            floor = float(r.energy.min())
        elif t.alone:
            floor = best.get(t.held_key, np.inf)
        else:
            floor = np.inf
        key = template_key(t.t)
        out[key] = min(out.get(key, np.inf), floor)
    return out


def _unmarked(result: TemplateResult, interner: PrefixInterner) -> TemplateResult:
    """``result`` with the own-node marks taken out of its prefixes (its loop orders are
    in: from here on, rows of one prefix compete whatever nodes lie among its loops)."""
    if result.seq is None:
        return result
    return replace(result, seq=interner.unmarked(result.seq))


def _keep_used_prefixes(table: PmappingTable) -> None:
    """A fresh interner for ``table`` with only the prefixes its rows and results refer
    to (the search's interner holds every prefix it met, far more to send back from a
    worker: GPT-3's Q, K and V tables took 3 s to pickle)."""
    fusion = table.fusion
    assert fusion is not None
    seqs = [fusion.seq] + [r.seq for r in table.results if r.seq is not None]
    used = np.unique(np.concatenate([np.zeros(1, dtype=np.int64), *seqs]))
    interner = PrefixInterner()
    for k, q in enumerate(used[1:].tolist(), start=1):
        got = interner.intern(fusion.interner.prefixes[q])
        assert got == k, "interned prefixes are canonical and distinct"
    table.results = [
        r if r.seq is None else replace(r, seq=np.searchsorted(used, r.seq)) for r in table.results
    ]
    table.fusion = replace(fusion, seq=np.searchsorted(used, fusion.seq), interner=interner)
