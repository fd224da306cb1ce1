"""The distinct rows of an integer array, fast: the search's fused-prefix tokens and the
relaxed join's states ask for them millions of times."""

from __future__ import annotations

import numpy as np


def unique_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of a 2-D integer array (sorted) and each row's index among
    them, as ``np.unique(rows, axis=0, return_inverse=True)``; rows of no column are
    all one row. By one integer key per row when the columns' ranges fit in 62 bits
    (a 1-D unique is far faster than ``axis=0``), which keeps the order: each column is
    shifted by its least value, then weighted by the ranges of the columns after it."""
    if rows.shape[1] == 0:
        return np.zeros((1 if len(rows) else 0, 0), dtype=np.int64), np.zeros(
            len(rows), dtype=np.int64
        )
    if not len(rows):
        return rows[:0], np.zeros(0, dtype=np.int64)
    low = rows.min(axis=0).astype(np.int64)
    radix = rows.max(axis=0).astype(np.int64) - low + 1
    if float(np.prod(radix.astype(np.float64))) >= 2.0**62:
        uniq, inverse = np.unique(rows, axis=0, return_inverse=True)
        return uniq, inverse.ravel()
    key = np.zeros(len(rows), dtype=np.int64)
    for k in range(rows.shape[1]):
        key = key * radix[k] + (rows[:, k] - low[k])
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    return rows[first], inverse.ravel()
