"""Helpers of a search stage that hold less memory than the arrays they replace
(``tiling/stage.py``): each gives what the plain array expression gives."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fusemap.mapper.tiling import stage
from fusemap.mapper.tiling.stage import any_smaller


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 64), st.integers(1, 64), st.booleans()), max_size=40),
    st.integers(1, 7),
)
def test_a_row_bound_given_a_slice_at_a_time_answers_as_given_every_row(rows, size):
    """``bounded_in_slices``: each row ``ok`` bounded by its own tiles and its origin's
    energy, whatever the slices (the search's bound is one of each row alone)."""
    below = np.array([[a, b] for a, b, _ in rows], dtype=np.int64).reshape(len(rows), 2)
    ok = np.array([k for _, _, k in rows], dtype=bool)
    origin = np.arange(len(rows))[::-1].copy()
    energy = np.arange(len(rows), dtype=np.float64) * 0.5

    def within(tiles, spent):
        assert len(tiles) <= size and len(tiles) == len(spent)
        return (tiles.sum(axis=1) + spent) % 3 < 1.5

    want = [bool((a + b + energy[origin[r]]) % 3 < 1.5) for r, (a, b, k) in enumerate(rows) if k]
    before = stage.BOUND_SLICE
    try:
        stage.BOUND_SLICE = size
        got = stage.bounded_in_slices(within, below, energy, origin, ok)
    finally:
        stage.BOUND_SLICE = before
    assert got.tolist() == want


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 8), st.integers(1, 8), st.integers(0, 3)), max_size=20))
def test_any_smaller_compares_each_row_with_its_origin(rows):
    """``any_smaller``: whether a row's sizes fall below its origin's in some column."""
    sizes = np.array([[4, 4], [8, 2], [1, 8], [6, 6]], dtype=np.int64)
    mids = np.array([[a, b] for a, b, _ in rows], dtype=np.int64).reshape(len(rows), 2)
    origin = np.array([o for _, _, o in rows], dtype=np.int64)
    want = [a < sizes[o, 0] or b < sizes[o, 1] for a, b, o in rows]
    assert any_smaller(mids, sizes, origin).tolist() == want
