"""Baseline mappers on FFM's own mapspace: Timeloop-style random sampling, SET-style
simulated annealing and a TileFlow-style genetic algorithm (the FFM paper's §7.2), each
choosing one pmapping per Einsum from the tables FFM joins, checked by FFM's join
(:mod:`.space`), seeded and deterministic (:mod:`.strategies`).

``fusemap map --mapper random|sa|ga --budget N --seed S`` runs one; the experiments in
``experiments/ffm/`` compare them with FFM.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np

from ...analysis.passes import pass_bounds
from ...spec import limits
from ...spec.arch_eval import ArchEvaluator
from ...spec.errors import FusemapError
from ...spec.resolve import resolve_workload
from ...spec.spec import Spec
from ..ffm import materialize, memory_sizes
from ..join.dependencies import FusionRules
from ..join.ffm_join import join
from ..outcome import MapOutcome, MapStatistics
from ..pmappings.tables import generate_tables
from ..space.config import config_from_spec
from ..space.plan import fusion_plan
from ..space.templates import check_bounds, top_memory
from .space import JoinSpace, Picks, Score
from .strategies import STRATEGIES, Trace, run_strategy

OBJECTIVES = ("energy", "latency", "edp")

__all__ = [
    "STRATEGIES",
    "BaselineRun",
    "baseline_space",
    "check_options",
    "map_with_baseline",
    "run_strategy",
]


@dataclass
class BaselineRun:
    """A baseline's answer: the mapping (scored by the model, as FFM's), its trace, and
    what it cost."""

    strategy: str  # random | sa | ga
    outcome: MapOutcome | None  # None: no valid mapping within the budget
    trace: Trace
    evaluations: int
    join_seconds: float  # spent scoring combinations (FFM joins over one row each)
    table_seconds: float  # spent making the pmapping tables (shared with FFM)
    joins: int  # evaluations not answered from the cache of combinations seen before

    def answer(self) -> MapOutcome:
        """The outcome; a user error if the run found no valid mapping."""
        if self.outcome is None:
            raise FusemapError(
                f"the {self.strategy} baseline found no valid mapping in {self.evaluations} "
                "evaluations (raise --budget)"
            )
        return self.outcome

    @property
    def seconds_per_evaluation(self) -> float:
        """The measured cost of one evaluation (a join not answered from the cache)."""
        return self.join_seconds / self.joins if self.joins else 0.0


def baseline_space(spec: Spec, objective: str, jobs: int = 1) -> tuple[JoinSpace, float]:
    """The tables FFM joins (the workload's order, fusion on) as a baseline's mapspace,
    and the seconds they took to make."""
    if objective not in OBJECTIVES:
        raise FusemapError(f"unknown objective '{objective}' for a baseline (use energy, "
                           "latency or edp)")  # fmt: skip
    start = time.perf_counter()
    limits.reset_budget()
    wl = resolve_workload(spec)
    for e in wl.einsums:
        check_bounds(e, spec.locate_einsum(e.index))
    arch = ArchEvaluator(spec, wl)
    order = [e.name for e in wl.einsums]
    plan = fusion_plan(wl, [order])
    config = replace(config_from_spec(spec), fusion=True, fusable=plan.fusable)
    memories = memory_sizes(wl, arch, config)
    tables = generate_tables(spec, wl, arch, objective, jobs, None, MapStatistics(), plan)
    for name, table in tables.items():
        if len(table) == 0:
            raise FusemapError(f"Einsum {name}: no valid mapping")
    space = JoinSpace.of(order, tables, wl, arch, memories, objective)
    return space, time.perf_counter() - start


def check_options(strategy: str, budget: int) -> None:
    """A user error unless ``strategy`` is a baseline and ``budget`` at least 1."""
    if strategy not in STRATEGIES:
        raise FusemapError(f"unknown --mapper '{strategy}' (use ffm, {', '.join(STRATEGIES)})")
    if budget < 1:
        raise FusemapError(f"--budget must be at least 1 (got {budget})")


def map_with_baseline(
    spec: Spec,
    strategy: str,
    objective: str = "edp",
    *,
    budget: int = 1000,
    seed: int = 0,
    jobs: int = 1,
    space: JoinSpace | None = None,
) -> BaselineRun:
    """The best mapping ``strategy`` finds in ``budget`` evaluations (seeded), as one
    LoopTree scored by the model. ``space``: tables made before (else made here)."""
    check_options(strategy, budget)
    table_seconds = 0.0
    if space is None:
        space, table_seconds = baseline_space(spec, objective, jobs)
    space.cache.clear()  # each run pays for its own joins (its wall time is its own)
    before, spent, joins = space.evaluations, space.seconds, space.joins
    trace = run_strategy(space, strategy, budget, seed)
    cost = (space.evaluations - before, space.seconds - spent, table_seconds, space.joins - joins)
    if trace.best is None:  # a search may find none: a result too (the CLI refuses it)
        return BaselineRun(strategy, None, trace, *cost)
    stats = MapStatistics(orders=1)
    stats.pmappings = {n: len(t) for n, t in space.tables.items()}
    stats.seconds = {"pmappings": table_seconds, "search": trace.seconds[-1]}
    mapped = _materialized(space, trace.best, spec)
    outcome = MapOutcome(objective, [mapped], stats, pass_bounds(spec, space.workload))
    outcome.notes = [f"{strategy} baseline, seed {seed}: {budget} evaluations, {trace.valid} valid"]
    return BaselineRun(strategy, outcome, trace, *cost)


def _materialized(space: JoinSpace, picks: Picks, spec: Spec):
    """The chosen rows as one LoopTree, scored by the model (FFM's assembly)."""
    one = {
        name: space.tables[name].take(np.array([row], dtype=np.int64))
        for name, row in zip(space.order, picks, strict=True)
    }
    target = "pareto" if space.objective == "edp" else space.objective
    joined = join(space.order, one, space.workload, space.arch, target, space.memories,
                  rules=FusionRules.of(space.workload))  # fmt: skip
    scores = [
        Score(float(e), float(lat)) for e, lat in zip(joined.energy, joined.latency, strict=True)
    ]
    row = min(range(len(scores)), key=lambda r: (scores[r].value(space.objective), r))
    top = top_memory(space.arch, space.order[0])
    return materialize(joined, row, one, space.workload, space.arch, spec, top)
