"""The whole-workload mapper: pmappings of every Einsum, then the FFM join, then the
best joined mapping as one LoopTree, scored again by the model."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from ..analysis.passes import pass_bounds
from ..model.evaluate import evaluate_mapping
from ..spec import limits
from ..spec.arch_eval import ArchEvaluator
from ..spec.errors import FusemapError
from ..spec.resolve import WorkloadInfo, resolve_workload
from ..spec.spec import Spec
from .caps import (
    best_rows,
    capped_joins,
    deepening,
    dirty_bound,
    margins_to,
    objective_value,
    self_bounded_cap,
)
from .deferred_hosting import DeferredHosting
from .edp_by_energy import compute_floors, least_latency, proves_edp
from .full_space import check_full_space
from .join.assemble import assemble
from .join.dependencies import FusionRules
from .join.ffm_join import Joined
from .outcome import FusedTensor, MapOutcome, MappedWorkload, MapStatistics
from .pmappings.table import PmappingTable
from .pmappings.tables import SelfBound, generate_tables, table_groups, tables_config
from .space.config import config_from_spec
from .space.feasibility import check_einsum
from .space.plan import FusionPlan, fusion_plan
from .space.prefix import Compatibility
from .space.templates import check_bounds, join_memories, top_memory

OBJECTIVES = ("energy", "latency", "edp", "pareto")
EDP_BY_ENERGY = True
"""EDP: map for energy first, and answer with the energy optimum where a latency floor
proves it an EDP optimum (:mod:`fusemap.mapper.edp_by_energy`)."""
Progress = Callable[[str, int, int], None]


def map_workload(
    spec: Spec,
    objective: str = "energy",
    *,
    orders: str = "given",
    jobs: int = 1,
    progress: Progress | None = None,
    max_orders: int = 720,
    epsilon: float = 0.0,
    check_full_space: bool = True,
) -> MapOutcome:
    """The optimal fused mapping(s) of the spec's whole workload.

    ``orders``: ``given`` (the workload's Einsum order) or ``all`` (every order that
    respects the data dependencies, up to ``max_orders``). ``jobs``: worker processes
    for pmapping generation (results do not depend on it). ``epsilon``: of the dirty
    join whose result bounds the exact one (0: exact join only; the result is the same).
    Off by default: measured on GPT-3 and the 64-matmul chain, the exact join alone is
    faster (5.7 s against 5.4 + 4.5 s; 10.9 s against 7.8 + 8.3 s).
    ``check_full_space=False`` skips the check of several fused loops per rank variable
    (:mod:`fusemap.mapper.full_space`): the answer is then the optimum of the default space
    only (``statistics.unchecked``), for experiments whose check does not finish."""
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
    since = start
    if objective == "edp" and EDP_BY_ENERGY and epsilon <= 0:
        kwargs = dict(orders=orders, jobs=jobs, progress=progress, max_orders=max_orders)
        proved = _edp_by_energy(spec, wl, arch, plan, check_full_space, kwargs, start)
        if proved is not None:
            return proved
        since = time.perf_counter()
        stats.seconds["energy first"] = since - start
    may_split = config.fused_loops_once and len(wl.einsums) > 1 and bool(plan.fusable)
    stats.unchecked, one_loop = may_split and not check_full_space, may_split and check_full_space
    memories = memory_sizes(wl, arch, replace(config, fusable=plan.fusable))
    join_args = (wl, arch, objective, memories, rules)
    search = _Search(spec, order_list, plan, jobs, progress, stats, join_args)
    # Energy: first tables holding only the rows near each Einsum's least, enough when
    # the optimum is there (GPT-3); if the join or the check needs more, tables up to a
    # mapping found (_Search.widened), then complete ones.
    first = objective == "energy" and epsilon <= 0 and bool(DEEPENING) and SELF_BOUND is not None
    tables, joins = search.answer(SELF_BOUND if first else None, epsilon, one_loop, since)
    t = time.perf_counter()
    picked = best_rows(joins, objective)
    if not picked:
        raise FusemapError(
            "no valid mapping of the whole workload: every combination of pmappings "
            "overflows a buffer"
        )
    _record_join(stats, picked[0][0])
    top = top_memory(arch, wl.einsums[0].name)
    mapped = [materialize(j, row, tables, wl, arch, spec, top) for j, row in picked]
    stats.seconds["assemble"] = time.perf_counter() - t
    stats.seconds["total"] = time.perf_counter() - start
    return MapOutcome(objective, mapped, stats, pass_bounds(spec, wl), notes)


def _record_join(stats: MapStatistics, best_join: Joined) -> None:
    """What the join that found the answer did, in ``stats``."""
    stats.groups = best_join.stats.groups
    stats.joined = best_join.stats.rows_joined
    stats.kept = best_join.stats.rows_kept
    stats.bounded = best_join.stats.rows_bounded


def _edp_by_energy(
    spec, wl, arch, plan, check_full_space: bool, kwargs, start: float
) -> MapOutcome | None:
    """The energy optimum, if the latency floors prove it an EDP optimum
    (:mod:`fusemap.mapper.edp_by_energy`); None if they do not (or cannot)."""
    floors = compute_floors(wl, arch)
    if floors is None:
        return None
    energy_first = map_workload(spec, "energy", check_full_space=check_full_space, **kwargs)
    table_config = tables_config(spec, plan)
    t_floors = time.perf_counter()
    latencies = {n: e.latency for n, e in energy_first.best.result.einsums.items()}
    smallest_first = [e.name for e in sorted(wl.einsums, key=lambda e: e.operations)]
    if not proves_edp(
        latencies, floors,
        lambda n: least_latency(spec, wl.einsum(n), wl, arch, table_config),
        smallest_first,
    ):  # fmt: skip
        return None
    energy_first.statistics.seconds["latency floors"] = time.perf_counter() - t_floors
    energy_first.statistics.edp_by_energy = True
    energy_first.statistics.seconds["total"] = time.perf_counter() - start
    return replace(energy_first, objective="edp")


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
    upper: float = math.inf
    """Energy of a valid mapping found with tables too short for the answer."""
    leasts: dict[str, float] = field(default_factory=dict)  # of those tables, per Einsum

    def answer(
        self, self_bound: SelfBound, epsilon: float, one_loop: bool, since: float
    ) -> tuple[dict[str, PmappingTable], list[Joined]]:
        """The tables and joins that hold the answer: first made to ``self_bound``,
        then (if short) as :meth:`widened` says, last complete."""
        while True:
            found = self.run(self_bound, epsilon, one_loop, since)
            if found is not None:
                return found
            if self_bound is None:  # pragma: no cover - complete tables always answer
                raise AssertionError("complete tables always give an answer")
            self.stats.self_bounded = False
            since = time.perf_counter()
            self_bound = self.widened(self_bound)
            self.stats.self_bounds.append(None if self_bound is None else "to the upper bound")

    def run(
        self, self_bound: SelfBound, epsilon: float, one_loop: bool, since: float
    ) -> tuple[dict[str, PmappingTable], list[Joined]] | None:
        """The tables and the joins that hold the answer; None if tables made with
        ``self_bound`` prove too short for it (see :data:`SELF_BOUND`; then
        :meth:`widened` says what to try next). ``one_loop``: check the fused space with
        several loops per rank variable after the joins."""
        wl, arch, objective, _, _ = self.join_args
        stats = self.stats
        deferred = None
        if DEFER_HOSTING and objective != "pareto" and self.plan.host_loops:
            deferred = DeferredHosting(
                self.spec, wl, self.jobs, objective, cut=self_bound is not None
            )
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
        bound = self._dirty_bound(tables, epsilon) if epsilon > 0 else math.inf
        cut = any(math.isfinite(tab.complete_to) for tab in tables.values())
        t = time.perf_counter()
        aside = _aside(stats)
        joins = self._joins(tables, deferred, bound, cut)
        if joins is not None and one_loop:
            joins = self._checked(tables, deferred, joins)
        # The join's own time (also of a round given up).
        _add_seconds(stats, "join", time.perf_counter() - t - (_aside(stats) - aside))
        if joins is None:
            self.leasts = {n: float(tab.energy.min()) for n, tab in tables.items()}
            if cut and isinstance(self_bound, float) and not math.isfinite(self.upper):
                self.upper = self._upper_bound(tables, deferred)
            return None
        if deferred is not None or stats.full_space:  # the tables hold more rows now
            stats.pmappings = {n: len(tab) for n, tab in tables.items()}
            stats.templates = {n: tab.stats.templates for n, tab in tables.items()}
        if cut and stats.self_bounded is None:  # the first tables held it
            stats.self_bounded = True
        return tables, joins

    def widened(self, self_bound: SelfBound) -> SelfBound:
        """What to try after tables made with ``self_bound`` proved short: from the
        first, near each Einsum's least, tables holding every row a mapping of energy
        up to :attr:`upper` may use (:func:`~fusemap.mapper.caps.margins_to`), if a
        mapping was found; else (or after those) complete tables."""
        if not isinstance(self_bound, float) or not math.isfinite(self.upper):
            return None
        return margins_to(self.upper, self.order_list, self.leasts)

    def _upper_bound(self, tables, deferred) -> float:
        """Energy of the best mapping the deepening joins find in short tables: a valid
        mapping, so the optimum is at most that (inf if they find none)."""
        t = time.perf_counter()
        found = best_rows(self._deepening(tables, deferred), "energy")
        _add_seconds(self.stats, "upper bound", time.perf_counter() - t)
        return objective_value(found[0][0], found[0][1], "energy") if found else math.inf

    def _dirty_bound(self, tables, epsilon: float) -> float:
        return dirty_bound(
            self.order_list, tables, self.join_args, epsilon, self.stats, self.progress
        )

    def _capped(self, cap, tables, deferred, completed: bool = True) -> list[Joined]:
        return capped_joins(
            cap, self.order_list, tables, deferred, self.stats, self.join_args, self.progress,
            completed,
        )  # fmt: skip

    def _deepening(self, tables, deferred) -> list[Joined]:
        return deepening(
            self.join_args[2], self.order_list, tables, deferred, self.stats, self.join_args,
            self.progress, DEEPENING,
        )  # fmt: skip

    def _joins(self, tables, deferred, bound: float, cut: bool) -> list[Joined] | None:
        """The joins: capped at ``bound`` if finite; with tables ``cut`` near their
        leasts, capped where they are complete (None if that finds nothing); else
        deepening caps."""
        if math.isfinite(bound):
            return self._capped(bound, tables, deferred)
        if not cut:
            return self._deepening(tables, deferred)
        cap = self_bounded_cap(self.order_list, tables)
        if cap is None:
            return None
        joins = self._capped(cap, tables, deferred, False)
        return joins if any(len(j.energy) for j in joins) else None

    def _checked(self, tables, deferred, joins: list[Joined]) -> list[Joined] | None:
        """``joins``, or the joins again if the check of the whole fused space added
        rows that may do better (None: the tables are too short for the check)."""
        wl, arch, objective, _, _ = self.join_args
        found = best_rows(joins, objective)
        if not found:
            return joins
        best: float | tuple[tuple[float, float], ...] = objective_value(
            found[0][0], found[0][1], objective
        )
        if objective == "pareto":  # a mapping no point of the front dominates
            best = tuple((float(j.energy[r]), float(j.latency[r])) for j, r in found)
        t_check = time.perf_counter()
        check = self.stats.full_space = check_full_space(
            self.spec, wl, tables_config(self.spec, self.plan), table_groups(wl, arch, self.plan),
            tables, self.order_list, best, self.jobs, objective,
        )  # fmt: skip
        _add_seconds(self.stats, "full space", time.perf_counter() - t_check)
        if check.incomplete:
            if isinstance(best, float):  # a valid mapping: the optimum is at most it
                self.upper = min(self.upper, best)
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
    """Add ``seconds`` to the time of ``phase`` (a phase may run several times)."""
    stats.seconds[phase] = stats.seconds.get(phase, 0.0) + seconds


SELF_BOUND: float | None = 1e-3
"""Energy objective: the first tables hold only the rows of at most ``1 + SELF_BOUND``
times their Einsum's least energy (a branch and bound in each table's own search; none
when :data:`DEEPENING` is empty). Every mapping within ``sum of leasts + the least
margin`` is made of such rows, so a join capped there that finds a mapping has the
optimum (GPT-3: every Einsum at its least); if it finds none, or the check of the
whole fused space needs more (an Einsum below its table's least), complete tables are
made and the search starts again."""


DEFER_HOSTING = True
"""Energy, latency and EDP objectives: tile hosting templates only when a capped join may
need them (:mod:`fusemap.mapper.deferred_hosting`; the tests compare with False)."""

DEEPENING = (1e-6, 0.03, 0.15, 0.6)
"""The caps of the bounded joins, above the lower bound (relative), tried in turn before
the unbounded join."""


def materialize(joined, row, tables, wl, arch, spec, top) -> MappedWorkload:
    """Row ``row`` of a join as one LoopTree, scored by the model (also the baselines'
    answers, :mod:`fusemap.mapper.baselines`)."""
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
    """The shared tensors the pmappings back below the top memory, by name."""
    out: dict[str, FusedTensor] = {}
    for c in compat:
        for t, x in c.items():
            if x.backing != top:
                out[t] = FusedTensor(t, x.backing, x.loops)
    return [out[t] for t in sorted(out)]


def memory_sizes(wl, arch, config) -> dict[str, float]:
    """Size of each memory whose reservations the join adds up (by name), for the
    fusion the ``config`` allows."""
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
