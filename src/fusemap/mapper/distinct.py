"""Distinct values and rows of integer arrays, fast: the search's fused-prefix tokens, its
tile shapes and pruning groups, and the relaxed join's states ask for them millions of
times. By hashing (pandas) rather than sorting, where many values repeat."""

from __future__ import annotations

import numpy as np


def sorted_distinct(values: np.ndarray) -> np.ndarray:
    """``np.unique(values)`` of an integer array (flattened): its distinct values, sorted.
    By a sort and a comparison of neighbours: numpy 2.4's ``unique`` hashes when asked
    for values alone, 10 to 45 times slower on millions of ids (2.8 s against 0.06 s for
    four million mostly distinct ones)."""
    values = np.asarray(values).ravel()
    assert values.dtype.kind in "iub", values.dtype  # NaNs would need numpy's care
    if len(values) < 2:
        return values.copy()
    out = np.sort(values)
    new = np.empty(len(out), dtype=bool)
    new[0] = True
    np.not_equal(out[1:], out[:-1], out=new[1:])
    return out[new]


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
    _, first, inverse = distinct_values(key)
    return rows[first], inverse


HASHED_FROM = 2000
"""Values from which hashing beats sorting (pandas' overhead per call is about 30 us:
numpy's unique took 13 us for 10 values, 42 us for 1,000, 309 us for 5,000; hashing
37, 53 and 137 us)."""


def first_codes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One code per distinct value of a 1-D integer array, numbered in the order of
    first appearance, and the index of each code's first appearance."""
    import pandas as pd  # not at import: the model's commands never need it

    values = np.asarray(values, dtype=np.int64)
    if len(values) < HASHED_FROM:
        _, first, codes = np.unique(values, return_index=True, return_inverse=True)
        rank = np.empty(len(first), dtype=np.int64)  # numbered by first appearance
        rank[np.argsort(first, kind="stable")] = np.arange(len(first))
        return rank[codes.ravel()], np.sort(first)
    codes, _ = pd.factorize(values)
    codes = codes.astype(np.int64, copy=False)
    if not len(codes):
        return codes, codes.copy()
    new = np.empty(len(codes), dtype=bool)
    new[0] = True  # a code is new where it passes every code before it
    new[1:] = codes[1:] > np.maximum.accumulate(codes[:-1])
    return codes, np.flatnonzero(new)


def distinct_values(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``np.unique(values, return_index=True, return_inverse=True)`` of a 1-D integer
    array: its distinct values (sorted), the index of each one's first appearance, and
    each value's index among them. Hashed, then only the distinct values sorted (the
    hashing costs more than it saves when most values are distinct)."""
    values = np.asarray(values, dtype=np.int64)
    codes, first = first_codes(values) if len(values) >= HASHED_FROM else (None, None)
    if codes is None or first is None or 2 * len(first) > len(values):
        uniq, at, inverse = np.unique(values, return_index=True, return_inverse=True)
        return uniq, at, inverse.ravel()
    uniq = values[first]
    order = np.argsort(uniq, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return uniq[order], first[order], rank[codes]
