"""Which criteria the tile search's pruning compares: reservations that cannot matter
zeroed, and relaxed prefixes' reservations by their totals."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .tiler import TemplateTiler


def pruning_view(
    tiler: TemplateTiler,
    first: int,
    below: np.ndarray,
    crit: np.ndarray,
    rows: np.ndarray | None = None,
) -> np.ndarray:
    """The criteria pruning compares, with reservations that cannot matter zeroed;
    with ``rows``, row ``i`` has the criteria ``crit[rows[i]]`` (only the columns
    compared are gathered).

    In capacity mode (``reservations_are_objectives`` false), a row whose memory
    cannot overflow whatever the nodes from ``first`` down choose (their tiles are
    at most ``below``) is feasible for every future: its reservation there is
    irrelevant. That holds in a memory the join shares too when the template fuses
    nothing: no other Einsum's reservation is live while an unfused Einsum runs.
    """
    if tiler.relaxed and tiler.reservations.at_depth:
        return _relaxed_view(tiler, first, below, crit if rows is None else crit[rows])
    if rows is None:
        view = crit[:, tiler.pareto_cols]
    else:
        view = crit[rows[:, None], np.asarray(tiler.pareto_cols)]
    if tiler.reservations_are_objectives or not tiler.reservations.columns:
        return view
    live_beside = not tiler.runs_alone  # depth columns: other Einsums' tiles beside
    _zero_slack(tiler, view, first, below, crit, live_beside, rows)
    return view


def _zero_slack(
    tiler: TemplateTiler, view, first: int, below, crit, live_beside: bool, rows=None
) -> None:
    res, sizes = tiler.reservations, {v: below[:, k] for k, v in enumerate(tiler.tiles.vars)}
    for c, col in res.columns.items():
        if c in res.at_depth and live_beside:
            continue  # live beside another Einsum's tiles: always an objective
        reserved = crit[:, col] if rows is None else crit[rows, col]
        slack = res.never_overflows(c, reserved, tiler.t.holders[first:], sizes)
        view[slack, tiler.pareto_cols.index(col)] = 0.0


def _relaxed_view(
    tiler: TemplateTiler, first: int, below: np.ndarray, crit: np.ndarray
) -> np.ndarray:
    """Relaxed prefixes: each memory's reservations by their total only (no other
    Einsum's tiles are counted, so only the total can overflow, whatever the depths)."""
    res = tiler.reservations
    totals = crit.copy()
    dropped: set[int] = set()
    for c in res.columns:
        if c in res.at_depth:
            totals[:, res.columns[c]] = res.total(crit, c)
            dropped.update(int(k) for k in res.at_depth[c])
            dropped.add(res.shared[c])
    view = totals[:, tiler.pareto_cols]
    if not tiler.reservations_are_objectives:
        _zero_slack(tiler, view, first, below, totals, live_beside=False)
    return view[:, [i for i, k in enumerate(tiler.pareto_cols) if k not in dropped]]
