"""Pareto pruning inside groups: keep the rows no other row of their group dominates.

A row dominates another when it is no worse in every criterion (smaller is better).
Of rows equal in every criterion the first (in input order) is kept, so results do
not depend on anything but the input.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True)
def _scan(order: np.ndarray, groups: np.ndarray, crit: np.ndarray) -> np.ndarray:
    n, k = crit.shape
    keep = np.zeros(n, dtype=np.bool_)
    front = np.empty(n, dtype=np.int64)
    size = 0
    current = -1
    for idx in range(n):
        i = order[idx]
        g = groups[i]
        if g != current:
            current = g
            size = 0
        dominated = False
        for f in range(size):
            j = front[f]
            worse = True
            for c in range(k):
                if crit[j, c] > crit[i, c]:
                    worse = False
                    break
            if worse:
                dominated = True
                break
        if not dominated:
            keep[i] = True
            front[size] = i
            size += 1
    return keep


def pareto_mask(groups: np.ndarray, criteria: np.ndarray) -> np.ndarray:
    """Boolean mask of the rows on the Pareto front of their group."""
    n = len(groups)
    if n == 0:
        return np.zeros(0, dtype=bool)
    crit = np.ascontiguousarray(criteria, dtype=np.float64).reshape(n, -1)
    if crit.shape[1] == 0:
        crit = np.zeros((n, 1))
    # Sort by group, then by the first criterion, then by the sum of the others: a row
    # can only be dominated by one sorted before it (a dominating row with the same first
    # criterion has a smaller sum, or is equal). The stable sort keeps input order among
    # equal rows.
    rest = crit[:, 1:].sum(axis=1) if crit.shape[1] > 1 else np.zeros(n)
    order = np.lexsort((rest, crit[:, 0], groups)).astype(np.int64)
    return _scan(order, np.asarray(groups, dtype=np.int64), crit)
