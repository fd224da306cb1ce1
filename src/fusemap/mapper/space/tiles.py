"""Tile sizes: the sizes a loop over a rank variable may leave, the sizes one loop
below may leave under each, and the instances a spatial loop may use."""

from __future__ import annotations

import numpy as np

from .divisors import divisors


def candidate_sizes(bound: int, imperfect: bool) -> list[int]:
    """Tile sizes a rank variable can take: its divisors (found from its prime factors, so
    the cost grows with their number, not with the bound), or every size when imperfect
    (only for small bounds, ``imperfect_max_bound``)."""
    if imperfect:
        return list(range(1, bound + 1))
    return list(divisors(bound))


def next_sizes(cands: np.ndarray, bound: int, imperfect: bool) -> tuple[np.ndarray, np.ndarray]:
    """CSR table: for each candidate tile, the tiles one loop below it may leave (itself,
    then its proper divisors ascending; below the whole rank, any smaller imperfect tile)."""
    offsets = [0]
    values: list[int] = []
    for c in cands:
        c = int(c)
        nxt = [c]
        if c == bound and imperfect:
            nxt += [int(d) for d in cands if d < c]
        else:
            nxt += list(divisors(c)[:-1])
        values += nxt
        offsets.append(len(values))
    return np.array(offsets, dtype=np.int64), np.array(values, dtype=np.int64)


def trip_counts(bound: int, spread_bound: int) -> list[int]:
    """Instances a spatial loop over a rank of ``bound`` may use: its divisors, or every
    count up to it when the rank may be cut unevenly."""
    if bound <= spread_bound:
        return list(range(1, bound + 1))
    return list(divisors(bound))
