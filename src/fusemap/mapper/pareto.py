"""Pareto pruning inside groups: keep the rows no other row of their group dominates.

A row dominates another when it is no worse in every criterion (smaller is better).
Of rows equal in every criterion the first (in input order) is kept, so results do
not depend on anything but the input order.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True)
def _fronts(groups: np.ndarray, crit: np.ndarray, n_groups: int) -> np.ndarray:
    """One pass in input order, keeping a linked list of the current front per group."""
    n, k = crit.shape
    head = np.full(n_groups, -1, dtype=np.int64)
    nxt = np.full(n, -1, dtype=np.int64)
    keep = np.zeros(n, dtype=np.bool_)
    for i in range(n):
        g = groups[i]
        dominated = False
        prev = -1
        j = head[g]
        while j != -1:
            j_le = True  # row j is no worse than row i everywhere
            i_le = True
            for c in range(k):
                if crit[j, c] > crit[i, c]:
                    j_le = False
                if crit[i, c] > crit[j, c]:
                    i_le = False
            if j_le:
                dominated = True
                break
            following = nxt[j]
            if i_le:  # row i dominates row j: drop j from the front
                keep[j] = False
                if prev == -1:
                    head[g] = following
                else:
                    nxt[prev] = following
            else:
                prev = j
            j = following
        if not dominated:
            keep[i] = True
            nxt[i] = head[g]
            head[g] = i
    return keep


def pareto_mask(groups: np.ndarray, criteria: np.ndarray) -> np.ndarray:
    """Boolean mask of the rows on the Pareto front of their group."""
    n = len(groups)
    if n == 0:
        return np.zeros(0, dtype=bool)
    crit = np.asarray(criteria, dtype=np.float64).reshape(n, -1)
    if crit.shape[1] > 1:  # a criterion equal in every row decides nothing
        crit = crit[:, (crit != crit[0]).any(axis=0)]
    crit = np.ascontiguousarray(crit)
    groups = np.asarray(groups, dtype=np.int64)
    top = int(groups.max()) + 1 if n else 0
    if groups.min() < 0 or top > max(4 * n, 1 << 20):
        _, groups = np.unique(groups, return_inverse=True)
        groups = groups.ravel().astype(np.int64)
        top = int(groups.max()) + 1
    return _fronts(groups, crit, top)
