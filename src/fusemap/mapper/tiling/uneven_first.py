"""An output's first visits under spreads of uneven tiles, per row (the model's
``first_visits``, ``model/reuse.py``): each instance of the spatial loops that do not
index the output fully starts its own partial sums, once, on the tile it really gets.
From the tiles around each spatial loop a row carries as state
(:class:`~fusemap.mapper.tiling.uneven.UnevenCounts`), and the most there can be, for
the compute leaf's floor."""

from __future__ import annotations

import itertools
import math

import numpy as np

from ...model.rules import starts_partial_sums
from .terms import first_basis


def first_visits(counts, tensor: str, one: set, position: int, sizes: dict, bounds, state):
    """Per row, the model's ``first_visits`` at the node at ``position``: the values
    of the distinct output tiles (``first_basis``), for each instance of the spatial
    loops above that start their own partial sums, each with the tile it gets: per
    variable not indexing ``tensor`` fully, the tiles its spatial loops leave, loops
    in ``one`` and temporal loops (at the tile above each spatial loop, and at the
    node's) keeping one tile per parent tile. A variable cut evenly gets its loops'
    trips."""
    info, count = counts.info, np.ones(len(state))
    partial: dict[str, list] = {}
    variables = counts.tiles.vars, counts.tiles.bounds, counts.tiles.imperfect
    for v, bound, imperfect in zip(*variables, strict=True):
        relevance = info.relevance(tensor, v)
        if not starts_partial_sums(relevance):
            continue
        loops = [i for i, s in enumerate(counts.loops) if s.var == v and s.slot <= position]
        if not imperfect:
            count = count * math.prod(counts.loops[i].trips for i in loops if i not in one)
            continue
        tiles = tiles_left(counts, loops, one, int(bound), state)
        if relevance == "partial":  # its tiles' sizes count too
            partial[v] = [(np.minimum(z, sizes[v]), c) for z, c in tiles]
        else:
            count = count * sum(c for _, c in tiles)
    total = 0.0 * count
    for combo in itertools.product(*partial.values()):
        at = dict(sizes) | {v: z for v, (z, _) in zip(partial, combo, strict=True)}
        times = math.prod((c for _, c in combo), start=count)
        total = total + times * first_basis(info, tensor, at, bounds)
    return total


def tiles_left(counts, loops: list[int], one: set, bound: int, state) -> list:
    """(size, count) per row of the tiles a variable's spatial ``loops`` leave, each
    loop in ``one`` and each temporal loop keeping one tile per parent tile."""
    tiles = [(np.full(len(state), bound, dtype=np.int64), np.ones(len(state)))]
    for i in loops:
        big, small = counts.tiles_around(i, state)
        if i in one:
            tiles = [(np.minimum(np.minimum(z, big), small), c) for z, c in tiles]
            continue
        cut = [divmod(np.minimum(z, big), small) + (c,) for z, c in tiles]
        tiles = [(small, sum(c * q for q, _, c in cut))]
        tiles += [(r, c * (r > 0)) for _, r, c in cut]
    return tiles


def most_first_visits(counts, tensor: str, multicast: set[int], ones: dict) -> float:
    """Most first visits of ``tensor`` at the leaf in view 0: its distinct values times
    each spatial loop's most trips, for every loop not indexing it fully outside the
    leaf's own multicast (each cuts a tile into at most its trips)."""
    out = float(first_basis(counts.info, tensor, ones)[0])
    for i, s in enumerate(counts.loops):
        if i not in multicast and counts.info.relevance(tensor, s.var) != "relevant":
            out *= max(counts.trips(i))
    return out
