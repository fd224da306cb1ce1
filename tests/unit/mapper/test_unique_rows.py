"""The distinct rows of an integer array by one key per row (the search's fused prefix
tokens, the relaxed join's states): the same answer as numpy's ``unique(axis=0)``,
negative values included, with or without the fallback (columns too wide for one
64-bit key)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from fusemap.mapper import distinct
from fusemap.mapper.distinct import distinct_values, first_codes, sorted_distinct, unique_rows


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


def test_first_codes_by_hand():
    codes, first = first_codes(np.array([7, 3, 7, 9, 3]))
    assert codes.tolist() == [0, 1, 0, 2, 1]
    assert first.tolist() == [0, 1, 3]


def test_distinct_values_by_hand():
    uniq, first, inverse = distinct_values(np.array([7, 3, 7, 9, 3, 3, 3]))
    assert uniq.tolist() == [3, 7, 9]
    assert first.tolist() == [1, 0, 3]
    assert inverse.tolist() == [1, 0, 1, 2, 0, 0, 0]


@pytest.mark.parametrize("hashed_from", [0, distinct.HASHED_FROM])
@settings(max_examples=300, deadline=None)
@given(
    arrays(
        np.int64,
        st.integers(0, 60),
        elements=st.one_of(st.integers(0, 4), st.integers(-(2**62), 2**62)),
    )
)
def test_distinct_values_same_as_numpy(hashed_from, values):
    """Every path: hashed when values repeat, sorted when most are distinct, and
    numpy's own below :data:`HASHED_FROM` values."""
    saved, distinct.HASHED_FROM = distinct.HASHED_FROM, hashed_from
    try:
        _distinct_values_same_as_numpy(values)
    finally:
        distinct.HASHED_FROM = saved


def _distinct_values_same_as_numpy(values):
    uniq, first, inverse = distinct_values(values)
    want, want_first, want_inverse = np.unique(values, return_index=True, return_inverse=True)
    assert np.array_equal(uniq, want)
    assert np.array_equal(first, want_first)
    assert np.array_equal(inverse, want_inverse.ravel())
    codes, at = first_codes(values)
    assert np.array_equal(values[at][codes], values)  # a code names one value
    assert len(at) == len(want) and np.all(np.diff(at) > 0)  # first appearances, in order


def test_sorted_distinct_by_hand():
    assert sorted_distinct(np.array([7, 3, 7, 9, 3, -1])).tolist() == [-1, 3, 7, 9]
    assert sorted_distinct(np.array([[2, 2], [1, 2]])).tolist() == [1, 2]  # flattened
    assert sorted_distinct(np.zeros(0, dtype=np.int64)).dtype == np.int64


@settings(max_examples=300, deadline=None)
@given(arrays(st.sampled_from([np.int64, np.int32, np.uint8, np.bool_]), st.integers(0, 60)))
def test_sorted_distinct_same_as_numpy(values):
    got = sorted_distinct(values)
    assert got.dtype == values.dtype
    assert np.array_equal(got, np.unique(values))
