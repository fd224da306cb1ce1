"""The distinct rows of an integer array by one key per row (the search's fused prefix
tokens, the relaxed join's states): the same answer as numpy's ``unique(axis=0)``,
negative values included, with or without the fallback (columns too wide for one
64-bit key)."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from fusemap.mapper.distinct import unique_rows


def test_hand_worked_rows():
    rows = np.array([[2, 0], [1, 5], [2, 0], [0, 7]])
    uniq, inverse = unique_rows(rows)
    assert uniq.tolist() == [[0, 7], [1, 5], [2, 0]]
    assert inverse.tolist() == [2, 1, 2, 0]


def test_no_rows():
    uniq, inverse = unique_rows(np.zeros((0, 3), dtype=np.int64))
    assert uniq.shape == (0, 3) and len(inverse) == 0


def test_rows_of_no_column_are_one_row():
    uniq, inverse = unique_rows(np.zeros((3, 0), dtype=np.int64))
    assert uniq.shape == (1, 0) and inverse.tolist() == [0, 0, 0]


def test_negative_values_keep_the_order():
    rows = np.array([[-1, 4], [2, -7], [-1, 3], [2, -7]])
    uniq, inverse = unique_rows(rows)
    assert uniq.tolist() == [[-1, 3], [-1, 4], [2, -7]]
    assert inverse.tolist() == [1, 2, 0, 2]


def test_columns_too_wide_for_one_key_fall_back():
    big = 2**40
    rows = np.array([[big, big, 1], [0, big, 1], [big, big, 1]], dtype=np.int64)
    uniq, inverse = unique_rows(rows)
    assert uniq.tolist() == [[0, big, 1], [big, big, 1]]
    assert inverse.tolist() == [1, 0, 1]


@settings(max_examples=200, deadline=None)
@given(
    arrays(
        np.int64,
        st.tuples(st.integers(0, 40), st.integers(1, 5)),
        elements=st.one_of(st.integers(0, 6), st.integers(-3, 2**31)),
    )
)
def test_same_as_numpy(rows):
    uniq, inverse = unique_rows(rows)
    want, want_inverse = np.unique(rows, axis=0, return_inverse=True)
    assert np.array_equal(uniq, want)
    assert np.array_equal(inverse, want_inverse.ravel())
    assert np.array_equal(uniq[inverse], rows)
