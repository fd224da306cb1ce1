"""The whole-workload mapper: pmappings of every Einsum, then the FFM join, then the
best joined mapping as one LoopTree, scored again by the model."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from ..analysis.passes import PassAnalysis, pass_bounds
from ..model.evaluate import evaluate_mapping
from ..model.result import Result
from ..spec import limits
from ..spec.arch_eval import ArchEvaluator
from ..spec.errors import FusemapError
from ..spec.mapping import Mapping
from ..spec.resolve import WorkloadInfo, resolve_workload
from ..spec.spec import Spec
from .deferred_hosting import DeferredHosting
from .full_space import FullSpaceCheck, check_full_space
from .join.assemble import assemble
from .join.dependencies import FusionRules
from .join.ffm_join import Bound, Joined, join
from .pmappings.generate import PmappingTable
from .pmappings.tables import generate_tables, table_groups, tables_config
from .space.feasibility import check_einsum
from .space.plan import FusionPlan, fusion_plan
from .space.prefix import Compatibility, SpatialTile, loops_text
from .space.templates import check_bounds, config_from_spec, join_memories, top_memory

OBJECTIVES = ("energy", "latency", "edp", "pareto")
Progress = Callable[[str, int, int], None]


@dataclass
class FusedTensor:
    """A shared tensor kept below the top memory: where, and under which loops."""

    tensor: str
    memory: str
    loops: tuple[tuple[str, int], ...]

    def as_dict(self) -> dict:
        """Plain data, for JSON (a spatial loop: its fanout third)."""
        return {
            "tensor": self.tensor,
            "memory": self.memory,
            "loops": [
                [v, int(n), n.where] if isinstance(n, SpatialTile) else [v, int(n)]
                for v, n in self.loops
            ],
        }

    def loops_text(self) -> str:
        """The shared loops, ``var:tile`` each (a spatial loop names its fanout)."""
        return loops_text(self.loops)


@dataclass
class MappedWorkload:
    """One optimal mapping of the whole workload."""

    mapping: Mapping
    result: Result
    order: list[str]
    fused: list[FusedTensor]


@dataclass
class MapStatistics:
    """What the mapper did."""

    pmappings: dict[str, int] = field(default_factory=dict)  # per Einsum, after pruning
    templates: dict[str, int] = field(default_factory=dict)
    distinct_einsums: int = 0
    orders: int = 0
    groups: list[int] = field(default_factory=list)  # per join step (best order)
    joined: list[int] = field(default_factory=list)  # combinations formed per step
    kept: list[int] = field(default_factory=list)  # kept after capacity and pruning
    bounded: list[int] = field(default_factory=list)  # dropped by the last join's cap
    dirty_bound: float | None = None  # objective of the dirty join's mapping
    caps: list[float | None] = field(default_factory=list)  # cap of each join (None: none)
    hosting_templates: list[int] = field(default_factory=list)  # tiled before each join
    pmapping_seconds: dict[str, float] = field(default_factory=dict)  # per table, CPU
    seconds: dict[str, float] = field(default_factory=dict)  # per phase
    peak_mb: float = 0.0  # peak resident memory of a process generating pmappings
    full_space: FullSpaceCheck | None = None  # several fused loops per variable, bounded
    self_bounded: bool | None = None
    """Whether the first tables, of rows near each Einsum's least (:data:`SELF_BOUND`),
    held the answer (False: complete tables were made after them; None: not tried)."""

    def as_dict(self) -> dict:
        """Plain data, for JSON."""
        out = dict(self.__dict__)
        out["full_space"] = self.full_space.as_dict() if self.full_space else None
        total = sum(self.joined)
        out["pruned_fraction"] = 1 - sum(self.kept) / total if total else 0.0
        return out


@dataclass
class MapOutcome:
    """The mapper's answer: one mapping, or the energy-latency Pareto front."""

    objective: str
    mappings: list[MappedWorkload]
    statistics: MapStatistics
    passes: dict[str, PassAnalysis] = field(default_factory=dict)
    """Per rank, the passes any mapping makes and the fibers live across them (the
    lower bound beside the result; only ranks where it says something, see
    :func:`fusemap.analysis.passes.pass_bounds`)."""
    notes: list[str] = field(default_factory=list)
    """What the mapper relaxed, e.g. a ``min_usage`` no mapping reaches (the
    highest-usage mappings competed instead)."""

    @property
    def best(self) -> MappedWorkload:
        """The first mapping (the optimum; for ``pareto``, the lowest energy)."""
        return self.mappings[0]


def map_workload(
    spec: Spec,
    objective: str = "energy",
    *,
    orders: str = "given",
    jobs: int = 1,
    progress: Progress | None = None,
    max_orders: int = 720,
    epsilon: float = 0.0,
) -> MapOutcome:
    """The optimal fused mapping(s) of the spec's whole workload.

    ``orders``: ``given`` (the workload's Einsum order) or ``all`` (every order that
    respects the data dependencies, up to ``max_orders``). ``jobs``: worker processes
    for pmapping generation (results do not depend on it). ``epsilon``: of the dirty
    join whose result bounds the exact one (0: exact join only; the result is the same).
    Off by default: measured on GPT-3 and the 64-matmul chain, the exact join alone is
    faster (5.7 s against 5.4 + 4.5 s; 10.9 s against 7.8 + 8.3 s).
    """
    if objective not in OBJECTIVES:
        raise FusemapError(f"unknown objective '{objective}' (use {', '.join(OBJECTIVES)})")
    if orders not in ("given", "all"):
        raise FusemapError(f"unknown --orders '{orders}' (use given or all)")
    stats = MapStatistics()
    start = time.perf_counter()
    limits.reset_budget()  # each mapping run has its own expression budget
    wl = resolve_workload(spec)
    for e in wl.einsums:
        check_bounds(e, spec.locate_einsum(e.index))
    arch = ArchEvaluator(spec, wl)
    config = replace(config_from_spec(spec), fusion=True)
    rules = FusionRules.of(wl)
    order_list = _orders(wl, orders, max_orders, rules)
    stats.orders = len(order_list)
    notes = [
        line for info in wl.einsums for line in check_einsum(info, wl, arch, config.spread_bound)
    ]
    plan = fusion_plan(wl, order_list)
    one_loop = config.fused_loops_once and len(wl.einsums) > 1 and bool(plan.fusable)
    memories = _memory_sizes(wl, arch, replace(config, fusable=plan.fusable))
    join_args = (wl, arch, objective, memories, rules)
    search = _Search(spec, order_list, plan, jobs, progress, stats, join_args)
    # Energy: first tables holding only the rows near each Einsum's least, enough when
    # the optimum is there (GPT-3); if the join or the check needs more, full tables.
    first = objective == "energy" and epsilon <= 0 and bool(DEEPENING) and SELF_BOUND is not None
    since = start
    for self_bound in (SELF_BOUND, None) if first else (None,):
        found = search.run(self_bound, epsilon, one_loop, since)
        if found is not None:
            tables, joins = found
            break
        stats.self_bounded = False
        since = time.perf_counter()
    else:  # pragma: no cover - the last search has complete tables
        raise AssertionError("complete tables always give an answer")
    t = time.perf_counter()
    picked = _pick(joins, objective)
    if not picked:
        raise FusemapError(
            "no valid mapping of the whole workload: every combination of pmappings "
            "overflows a buffer"
        )
    best_join = picked[0][0]
    stats.groups = best_join.stats.groups
    stats.joined = best_join.stats.rows_joined
    stats.kept = best_join.stats.rows_kept
    stats.bounded = best_join.stats.rows_bounded
    top = top_memory(arch, wl.einsums[0].name)
    mapped = [_materialize(j, row, tables, wl, arch, spec, top) for j, row in picked]
    stats.seconds["assemble"] = time.perf_counter() - t
    stats.seconds["total"] = time.perf_counter() - start
    return MapOutcome(objective, mapped, stats, pass_bounds(spec, wl), notes)


@dataclass
class _Search:
    """Tables, joins and the check of the whole fused space, for one kind of tables."""

    spec: Spec
    order_list: list[list[str]]
    plan: FusionPlan
    jobs: int
    progress: Progress | None
    stats: MapStatistics
    join_args: tuple  # (workload, arch, objective, memory sizes, fusion rules)

    def run(
        self, self_bound: float | None, epsilon: float, one_loop: bool, since: float
    ) -> tuple[dict[str, PmappingTable], list[Joined]] | None:
        """The tables and the joins that hold the answer; None if tables made with
        ``self_bound`` prove too short for it (see :data:`SELF_BOUND`). ``one_loop``:
        check the fused space with several loops per rank variable after the joins."""
        wl, arch, objective, _, _ = self.join_args
        stats = self.stats
        deferred = None
        if DEFER_HOSTING and objective == "energy" and self.plan.host_loops:
            deferred = DeferredHosting(self.spec, wl, self.jobs, cut=self_bound is not None)
        tables = generate_tables(
            self.spec, wl, arch, objective, self.jobs, self.progress, stats, self.plan,
            deferred, one_loop, self_bound=self_bound,
        )  # fmt: skip
        _add_seconds(stats, "pmappings", time.perf_counter() - since)
        for name, table in tables.items():
            if len(table) == 0:
                raise FusemapError(
                    f"Einsum {name}: no valid mapping (every tile shape overflows a buffer or "
                    "breaks a fanout constraint: check sizes, min_usage, reuse and loop_bounds)"
                )
        bound = _dirty_bound(self, tables, epsilon) if epsilon > 0 else math.inf
        cut = any(math.isfinite(tab.complete_to) for tab in tables.values())
        t = time.perf_counter()
        aside = _aside(stats)
        joins = self._joins(tables, deferred, bound, cut)
        if joins is not None and one_loop:
            joins = self._checked(tables, deferred, joins)
        # The join's own time (also of a round given up).
        _add_seconds(stats, "join", time.perf_counter() - t - (_aside(stats) - aside))
        if joins is None:
            return None
        if deferred is not None or stats.full_space:  # the tables hold more rows now
            stats.pmappings = {n: len(tab) for n, tab in tables.items()}
            stats.templates = {n: tab.stats.templates for n, tab in tables.items()}
        if cut:
            stats.self_bounded = True
        return tables, joins

    def _capped(self, cap, tables, deferred, completed: bool = True) -> list[Joined]:
        return _capped_joins(
            cap, self.order_list, tables, deferred, self.stats, self.join_args, self.progress,
            completed,
        )  # fmt: skip

    def _deepening(self, tables, deferred) -> list[Joined]:
        return _deepening(
            self.join_args[2], self.order_list, tables, deferred, self.stats, self.join_args,
            self.progress,
        )  # fmt: skip

    def _joins(self, tables, deferred, bound: float, cut: bool) -> list[Joined] | None:
        """The joins: capped at ``bound`` if finite; with tables ``cut`` near their
        leasts, capped where they are complete (None if that finds nothing); else
        deepening caps."""
        if math.isfinite(bound):
            return self._capped(bound, tables, deferred)
        if not cut:
            return self._deepening(tables, deferred)
        cap = _self_bounded_cap(self.order_list, tables)
        if cap is None:
            return None
        joins = self._capped(cap, tables, deferred, False)
        return joins if any(len(j.energy) for j in joins) else None

    def _checked(self, tables, deferred, joins: list[Joined]) -> list[Joined] | None:
        """``joins``, or the joins again if the check of the whole fused space added
        rows that may do better (None: the tables are too short for the check)."""
        wl, arch, objective, _, _ = self.join_args
        found = _pick(joins, objective)
        if not found:
            return joins
        best = _objective_value(found[0][0], found[0][1], objective)
        if objective == "pareto":  # a mapping no point of the front dominates
            best = tuple((float(j.energy[r]), float(j.latency[r])) for j, r in found)
        t_check = time.perf_counter()
        check = self.stats.full_space = check_full_space(
            self.spec, wl, tables_config(self.spec, self.plan), table_groups(wl, arch, self.plan),
            tables, self.order_list, best, self.jobs, objective,
        )  # fmt: skip
        _add_seconds(self.stats, "full space", time.perf_counter() - t_check)
        if check.incomplete:
            return None
        if check.rows_added and objective == "pareto":
            return self._deepening(tables, deferred)
        if check.rows_added:
            return self._capped(best, tables, deferred)
        return joins


def _aside(stats: MapStatistics) -> float:
    """Seconds so far of the phases timed inside the join's (hosting templates, check)."""
    return stats.seconds.get("hosting pmappings", 0.0) + stats.seconds.get("full space", 0.0)


def _add_seconds(stats: MapStatistics, phase: str, seconds: float) -> None:
    stats.seconds[phase] = stats.seconds.get(phase, 0.0) + seconds


def _dirty_bound(search: _Search, tables, epsilon: float) -> float:
    """Dirty join (FFM 6.3): a valid, near-optimal mapping, whose objective bounds the
    clean join (which is exact). Infinite if it finds none (or for ``pareto``)."""
    objective, stats = search.join_args[2], search.stats
    if objective == "pareto":
        return math.inf
    t = time.perf_counter()
    wl, arch, _, memories, rules = search.join_args
    bound = math.inf
    for k, order in enumerate(search.order_list):
        dirty = join(order, tables, wl, arch, _join_objective(objective), memories,
                     epsilon=epsilon, rules=rules)  # fmt: skip
        for _, r in _pick([dirty], objective):
            bound = min(bound, _objective_value(dirty, r, objective))
        if search.progress:
            search.progress("dirty join", k + 1, len(search.order_list))
    stats.dirty_bound = bound if math.isfinite(bound) else None
    stats.seconds["dirty join"] = time.perf_counter() - t
    return bound


SELF_BOUND: float | None = 1e-3
"""Energy objective: the first tables hold only the rows of at most ``1 + SELF_BOUND``
times their Einsum's least energy (a branch and bound in each table's own search; none
when :data:`DEEPENING` is empty). Every mapping within ``sum of leasts + the least
margin`` is made of such rows, so a join capped there that finds a mapping has the
optimum (GPT-3: every Einsum at its least); if it finds none, or the check of the
whole fused space needs more (an Einsum below its table's least), complete tables are
made and the search starts again."""


def _self_bounded_cap(order_list, tables: dict[str, PmappingTable]) -> float | None:
    """The highest energy cap whose joins need no row past a table's
    :attr:`~PmappingTable.complete_to` (None if below the lower bound: they would find
    nothing)."""
    low = min(Bound.of("energy", math.inf, order, tables).lowest() for order in order_list)
    margin = min(t.complete_to - float(t.energy.min()) for t in tables.values())
    cap = (low + margin) / (1 + 1e-9)  # a join keeps a value v if v <= cap * (1 + 1e-9)
    return cap if cap >= low else None


def _deepening(objective, order_list, tables, deferred, stats, join_args, progress) -> list[Joined]:
    """Capped joins, lowest cap first, until one finds a mapping (the last is unbounded).

    The first cap sits just above the least of every Einsum alone: on GPT-3 that is the
    optimum, and one cheap join finds it. If it finds nothing, the relaxed join
    (:mod:`.completion`) gives a higher lower bound; the later caps sit above it and their
    joins complete partial mappings with it (it pays on long chains; on GPT-3 it would
    cost more than the whole capped join)."""
    first = _deepening_caps(objective, order_list, tables)[0]
    joins = _capped_joins(first, order_list, tables, deferred, stats, join_args, progress, False)
    if any(len(j.energy) for j in joins) or not math.isfinite(first):
        return joins
    for cap in _deepening_caps(objective, order_list, tables, join_args[0]):
        if cap <= first:
            continue
        joins = _capped_joins(cap, order_list, tables, deferred, stats, join_args, progress)
        if any(len(j.energy) for j in joins):
            break  # within the cap: every mapping at or under it was kept
    return joins


def _capped_joins(
    cap, order_list, tables, deferred, stats, join_args, progress, completed: bool = True
) -> list[Joined]:
    """One join per order, bounded by ``cap`` (none if infinite), the hosting templates
    it may need tiled first; ``completed``: partial mappings are completed with the
    relaxed join's least (else with every later Einsum's least alone)."""
    if deferred is not None:
        t_host = time.perf_counter()
        stats.hosting_templates.append(deferred.extend(tables, cap, order_list))
        stats.seconds["hosting pmappings"] = (
            stats.seconds.get("hosting pmappings", 0.0) + time.perf_counter() - t_host
        )
    wl, arch, objective, memories, rules = join_args
    joins: list[Joined] = []
    for k, order in enumerate(order_list):
        cut = None
        if math.isfinite(cap):
            cut = Bound.of(objective, cap, order, tables, wl if completed else None)
        joins.append(
            join(order, tables, wl, arch, _join_objective(objective), memories, bound=cut,
                 rules=rules)
        )  # fmt: skip
        if progress:
            progress("join", k + 1, len(order_list))
    stats.caps.append(cap if math.isfinite(cap) else None)
    return joins


DEFER_HOSTING = True
"""Energy objective: tile hosting templates only when a capped join may need them
(:mod:`fusemap.mapper.deferred_hosting`; the tests compare with False)."""

DEEPENING = (1e-6, 0.03, 0.15, 0.6)
"""The caps of the bounded joins, above the lower bound (relative), tried in turn before
the unbounded join."""


def _deepening_caps(
    objective: str, order_list, tables, wl: WorkloadInfo | None = None
) -> list[float]:
    """Objective caps for the joins, lowest first, the last one infinite.

    The best row of every Einsum together bounds the optimum from below (objectives add
    up along the order); with the ``wl``, the relaxed join's least, a higher bound
    (:mod:`.completion`). A join bounded by a cap keeps every partial mapping and every
    pmapping that could still be part of a mapping within it, so if it finds a mapping,
    its best one is optimal; if not, the next cap is tried. On GPT-3 the optimum is that
    bound itself (every Einsum at its least energy), and the first cap's join is tiny."""
    if objective == "pareto":
        return [math.inf]
    low = min(Bound.of(objective, math.inf, order, tables, wl).lowest() for order in order_list)
    if not math.isfinite(low) or low <= 0:
        return [math.inf]
    return [low * (1 + slack) for slack in DEEPENING] + [math.inf]


def _join_objective(objective: str) -> str:
    return "pareto" if objective in ("edp", "pareto") else objective


def _objective_value(j: Joined, row: int, objective: str) -> float:
    e, lat = float(j.energy[row]), float(j.latency[row])
    return {"energy": e, "latency": lat}.get(objective, e * lat)


def _pick(joins: list[Joined], objective: str) -> list[tuple[Joined, int]]:
    """The optimum (ties: the other objective, then order, then row), or the front."""
    cands = []
    for k, j in enumerate(joins):
        for r in range(len(j.energy)):
            e, lat = float(j.energy[r]), float(j.latency[r])
            main = {"energy": (e, lat), "latency": (lat, e), "edp": (e * lat, e)}.get(
                objective, (e, lat)
            )
            cands.append((main, k, r))
    if not cands:
        return []
    cands.sort()
    if objective != "pareto":
        _, k, r = cands[0]
        return [(joins[k], r)]
    front = []
    best_lat = math.inf
    for (_e, lat), k, r in cands:
        if lat < best_lat * (1 - 1e-12):
            front.append((joins[k], r))
            best_lat = lat
    return front


def _materialize(joined, row, tables, wl, arch, spec, top) -> MappedWorkload:
    chains, compat = [], []
    for name, pick in zip(joined.order, joined.picks[row], strict=True):
        table = tables[name]
        chains.append(table.mapping(int(pick)))
        assert table.fusion is not None
        compat.append({c.tensor: c for c in table.fusion.compatibility(int(pick))})
    levels = {c: i for i, c in enumerate(arch.components(joined.order[0]))}
    mapping = assemble(joined.order, chains, compat, top, wl, levels)
    result = evaluate_mapping(spec, mapping, workload=wl, arch=arch)
    fused = _fused(compat, top)
    return MappedWorkload(mapping, result, list(joined.order), fused)


def _fused(compat: list[dict[str, Compatibility]], top: str) -> list[FusedTensor]:
    out: dict[str, FusedTensor] = {}
    for c in compat:
        for t, x in c.items():
            if x.backing != top:
                out[t] = FusedTensor(t, x.backing, x.loops)
    return [out[t] for t in sorted(out)]


def _memory_sizes(wl, arch, config) -> dict[str, float]:
    names = join_memories(wl, arch, config)
    sizes: dict[str, float] = {}
    for info in wl.einsums:
        for name, c in arch.components(info.name).items():
            if name in names:
                sizes[name] = c.size
    return dict(sorted(sizes.items()))


def _orders(wl: WorkloadInfo, which: str, limit: int, rules: FusionRules) -> list[list[str]]:
    """The given order, or every topological order of the Einsum dependency graph.

    A reader of a recurrence's previous value placed before its writer (SPD reads RD[m1],
    written later at m1 + 1) is no edge: it stays before the writer, as given."""
    names = [e.name for e in wl.einsums]
    if which == "given":
        return [names]
    where = {n: i for i, n in enumerate(names)}
    producers = {t: e.name for e in wl.einsums for t in e.outputs}
    needs = {
        e.name: {
            producers[t]
            for t in e.tensors
            if t in producers
            and producers[t] != e.name
            and not ((e.name, t) in rules.recurrences and where[producers[t]] > where[e.name])
        }
        for e in wl.einsums
    }
    for (reader, t), _ in rules.recurrences.items():
        writer = producers[t]
        if where[writer] > where[reader]:
            needs[writer].add(reader)
    out: list[list[str]] = []

    def rec(done: list[str], left: list[str]) -> None:
        if len(out) >= limit:
            return
        if not left:
            out.append(list(done))
            return
        for n in left:
            if needs[n] <= set(done):
                rec(done + [n], [x for x in left if x != n])

    rec([], names)
    return out


__all__ = ["map_workload", "MapOutcome", "MappedWorkload", "FusedTensor"]
