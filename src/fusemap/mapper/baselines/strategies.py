"""Three black-box mappers over :class:`~.space.JoinSpace`, after the FFM paper's
baselines (§7.2): Timeloop's random sampling, SET's simulated annealing and TileFlow's
genetic algorithm. Each is seeded (``numpy.random.default_rng``) and spends a budget of
evaluations (one FFM join over one pmapping per Einsum each); all three record the best
objective after every evaluation, for convergence plots.

Assumptions (the paper gives no more): SET's annealing starts at a temperature of 1 on
the relative change of the objective and cools geometrically to 1e-3 over the budget;
a move draws one Einsum's pmapping again and repairs the others' compatibility.
TileFlow's population is 10 (the paper's), crossover 0.7 (uniform, per Einsum, then
repaired), mutation 0.2 (per child, one Einsum drawn again), parents by binary
tournament, the best kept (elitism).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .space import JoinSpace, Picks, Score

STRATEGIES = ("random", "sa", "ga")


@dataclass
class Trace:
    """What a baseline found, evaluation by evaluation."""

    strategy: str
    seed: int
    best: Picks | None = None
    best_score: Score | None = None
    best_value: float = math.inf
    history: list[float] = field(default_factory=list)  # best value after each evaluation
    seconds: list[float] = field(default_factory=list)  # wall time after each evaluation
    valid: int = 0  # evaluations the join accepted

    def record(self, picks: Picks | None, score: Score | None, value: float, start: float):
        """One evaluation done (``picks`` None: a draw that found no compatible row)."""
        if score is not None:
            self.valid += 1
            if value < self.best_value:
                self.best, self.best_score, self.best_value = picks, score, value
        self.history.append(self.best_value)
        self.seconds.append(time.perf_counter() - start)


def run_strategy(space: JoinSpace, strategy: str, budget: int, seed: int) -> Trace:
    """Search ``space`` with ``strategy`` for ``budget`` evaluations, seeded."""
    run: dict[str, Callable[[JoinSpace, int, np.random.Generator, Trace], None]] = {
        "random": _random,
        "sa": _annealing,
        "ga": _genetic,
    }
    if strategy not in run:
        raise ValueError(f"unknown baseline '{strategy}' (use {', '.join(STRATEGIES)})")
    trace = Trace(strategy, seed)
    run[strategy](space, budget, np.random.default_rng(seed), trace)
    return trace


def _evaluate(space: JoinSpace, picks: Picks | None, trace: Trace, start: float) -> float:
    """Score ``picks`` (an evaluation even when nothing was drawn) and record it."""
    if picks is None:
        space.evaluations += 1  # a failed draw costs an evaluation too (no free retries)
        score = None
    else:
        score = space.score(picks)
    value = score.value(space.objective) if score is not None else math.inf
    trace.record(picks, score, value, start)
    return value


def _random(space: JoinSpace, budget: int, rng: np.random.Generator, trace: Trace) -> None:
    """Timeloop: one random compatible pmapping per Einsum, every time afresh."""
    start = time.perf_counter()
    for _ in range(budget):
        _evaluate(space, space.draw(rng), trace, start)


def _move(space: JoinSpace, picks: Picks, rng: np.random.Generator) -> Picks | None:
    """One Einsum's pmapping drawn again (any row), the others repaired around it."""
    j = int(rng.integers(len(picks)))
    table_rows = len(space.tables[space.order[j]])
    changed = list(picks)
    changed[j] = int(rng.integers(table_rows))
    return space.repaired(tuple(changed), j, rng)


def _annealing(space: JoinSpace, budget: int, rng: np.random.Generator, trace: Trace) -> None:
    """SET: simulated annealing over pmapping choices, a move at a time."""
    start = time.perf_counter()
    current, value = None, math.inf
    for step in range(budget):
        if current is None or not math.isfinite(value):  # no valid state yet: draw one
            picks = space.draw(rng)
            new = _evaluate(space, picks, trace, start)
            if math.isfinite(new):
                current, value = picks, new
            continue
        temperature = 1e-3 ** (step / max(1, budget - 1))
        candidate = _move(space, current, rng)
        new = _evaluate(space, candidate, trace, start)
        if not math.isfinite(new):
            continue
        delta = (new - value) / value if value > 0 else new - value
        if delta <= 0 or rng.random() < math.exp(-delta / temperature):
            current, value = candidate, new


POPULATION = 10
CROSSOVER = 0.7
MUTATION = 0.2


def _genetic(space: JoinSpace, budget: int, rng: np.random.Generator, trace: Trace) -> None:
    """TileFlow: a genetic algorithm over pmapping choices."""
    start = time.perf_counter()
    population: list[tuple[float, Picks]] = []
    spent = 0
    while len(population) < POPULATION and spent < budget:
        picks = space.draw(rng)
        value = _evaluate(space, picks, trace, start)
        spent += 1
        if picks is not None:
            population.append((value, picks))
    while spent < budget and population:
        children: list[tuple[float, Picks]] = []
        for _ in range(POPULATION):
            if spent >= budget:
                break
            child = _child(space, population, rng)
            value = _evaluate(space, child, trace, start)
            spent += 1
            if child is not None:
                children.append((value, child))
        best = min(population, key=lambda p: p[0])
        population = sorted(children + [best], key=lambda p: p[0])[:POPULATION]


def _child(
    space: JoinSpace, population: list[tuple[float, Picks]], rng: np.random.Generator
) -> Picks | None:
    """Two parents by tournament, crossed over and mutated, then repaired."""
    a, b = _tournament(population, rng), _tournament(population, rng)
    child = a
    if rng.random() < CROSSOVER:
        take = rng.random(len(a)) < 0.5
        child = tuple(x if t else y for x, y, t in zip(a, b, take, strict=True))
        keep = int(rng.integers(len(child)))
        repaired = space.repaired(child, keep, rng)
        if repaired is None:
            return None
        child = repaired
    if rng.random() < MUTATION:
        return _move(space, child, rng)
    return child


def _tournament(population: list[tuple[float, Picks]], rng: np.random.Generator) -> Picks:
    """The better of two members drawn at random."""
    i, k = rng.integers(len(population)), rng.integers(len(population))
    return min(population[int(i)], population[int(k)], key=lambda p: p[0])[1]
