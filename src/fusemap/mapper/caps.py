"""Capped joins: one join per order, bounded by a cap on the objective (a join bounded
by a cap keeps every partial mapping that could still be part of a mapping within it,
so if it finds a mapping, its best one is optimal), with caps deepening from the lower
bound until one finds a mapping; and the best rows of joins."""

from __future__ import annotations

import math
import time

from ..spec.resolve import WorkloadInfo
from .join.bound import Bound
from .join.ffm_join import Joined, join
from .pmappings.table import PmappingTable


def dirty_bound(order_list, tables, join_args, epsilon: float, stats, progress) -> float:
    """Dirty join (FFM 6.3): a valid, near-optimal mapping, whose objective bounds the
    clean join (which is exact). Infinite if it finds none (or for ``pareto``)."""
    objective = join_args[2]
    if objective == "pareto":
        return math.inf
    t = time.perf_counter()
    wl, arch, _, memories, rules = join_args
    bound = math.inf
    for k, order in enumerate(order_list):
        dirty = join(order, tables, wl, arch, join_objective(objective), memories,
                     epsilon=epsilon, rules=rules)  # fmt: skip
        for _, r in best_rows([dirty], objective):
            bound = min(bound, objective_value(dirty, r, objective))
        if progress:
            progress("dirty join", k + 1, len(order_list))
    stats.dirty_bound = bound if math.isfinite(bound) else None
    stats.seconds["dirty join"] = time.perf_counter() - t
    return bound


def self_bounded_cap(order_list, tables: dict[str, PmappingTable]) -> float | None:
    """The highest energy cap whose joins need no row past a table's
    :attr:`~PmappingTable.complete_to` (None if below the lower bound: they would find
    nothing)."""
    low = min(Bound.of("energy", math.inf, order, tables).lowest() for order in order_list)
    margin = min(t.complete_to - float(t.energy.min()) for t in tables.values())
    cap = (low + margin) / (1 + 1e-9)  # a join keeps a value v if v <= cap * (1 + 1e-9)
    return cap if cap >= low else None


MARGIN_PAD = 1e-6
"""Relative room :func:`margins_to` adds, over float rounding of the bounds."""


def margins_to(upper: float, order_list, leasts: dict[str, float]) -> dict[str, float] | None:
    """Per Einsum, a self bound (relative to its least energy) under which its table
    holds every row a mapping of energy at most ``upper`` may use: in such a mapping
    Einsum ``e``'s row costs at most ``upper`` less the other Einsums' leasts in its
    order. Then :func:`self_bounded_cap` is at least ``upper``. None if some least is
    not positive (no relative bound) or some Einsum is in no order."""
    need: dict[str, float] = {}
    for order in order_list:
        total = sum(leasts[n] for n in order)
        for n in order:
            need[n] = max(need.get(n, -math.inf), upper - (total - leasts[n]))
    if set(need) != set(leasts) or any(leasts[n] <= 0 for n in leasts):
        return None
    return {n: max(0.0, need[n] * (1 + MARGIN_PAD) / leasts[n] - 1) for n in sorted(need)}


def deepening(
    objective, order_list, tables, deferred, stats, join_args, progress, slacks
) -> list[Joined]:
    """Capped joins, lowest cap first, until one finds a mapping (the last is unbounded).

    The first cap sits just above the least of every Einsum alone: on GPT-3 that is the
    optimum, and one cheap join finds it. If it finds nothing, the relaxed join
    (:mod:`.join.completion`) gives a higher lower bound; the later caps sit above it and their
    joins complete partial mappings with it (it pays on long chains; on GPT-3 it would
    cost more than the whole capped join)."""
    first = deepening_caps(objective, order_list, tables, slacks)[0]
    joins = capped_joins(first, order_list, tables, deferred, stats, join_args, progress, False)
    if any(len(j.energy) for j in joins) or not math.isfinite(first):
        return joins
    for cap in deepening_caps(objective, order_list, tables, slacks, join_args[0]):
        if cap <= first:
            continue
        joins = capped_joins(cap, order_list, tables, deferred, stats, join_args, progress)
        if any(len(j.energy) for j in joins):
            break  # within the cap: every mapping at or under it was kept
    return joins


def capped_joins(
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
            join(order, tables, wl, arch, join_objective(objective), memories, bound=cut,
                 rules=rules)
        )  # fmt: skip
        if progress:
            progress("join", k + 1, len(order_list))
    stats.caps.append(cap if math.isfinite(cap) else None)
    return joins


def deepening_caps(
    objective: str, order_list, tables, slacks, wl: WorkloadInfo | None = None
) -> list[float]:
    """Objective caps for the joins, lowest first (``slacks`` above the lower bound,
    relative), the last one infinite.

    The best row of every Einsum together bounds the optimum from below (objectives add
    up along the order); with the ``wl``, the relaxed join's least, a higher bound
    (:mod:`.join.completion`). A join bounded by a cap keeps every partial mapping and every
    pmapping that could still be part of a mapping within it, so if it finds a mapping,
    its best one is optimal; if not, the next cap is tried. On GPT-3 the optimum is that
    bound itself (every Einsum at its least energy), and the first cap's join is tiny."""
    if objective == "pareto":
        return [math.inf]
    low = min(Bound.of(objective, math.inf, order, tables, wl).lowest() for order in order_list)
    if not math.isfinite(low) or low <= 0:
        return [math.inf]
    return [low * (1 + slack) for slack in slacks] + [math.inf]


def join_objective(objective: str) -> str:
    """What the join prunes on: EDP needs the whole energy-latency front."""
    return "pareto" if objective in ("edp", "pareto") else objective


def objective_value(j: Joined, row: int, objective: str) -> float:
    """The objective of row ``row`` of a join (EDP for ``edp`` and ``pareto``)."""
    e, lat = float(j.energy[row]), float(j.latency[row])
    return {"energy": e, "latency": lat}.get(objective, e * lat)


def best_rows(joins: list[Joined], objective: str) -> list[tuple[Joined, int]]:
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
