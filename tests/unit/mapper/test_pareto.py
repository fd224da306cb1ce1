"""Pareto pruning inside groups, against the definition (property test).

Row ``i`` survives iff no row of its group is no worse everywhere and either better
somewhere or equal and earlier. Small integer criteria make ties and duplicates common;
one to five criteria cover both algorithms (staircase for up to three criteria in large
groups, the one-pass front otherwise; both forced in turn) and the dropping of constant columns.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fusemap.mapper import pareto
from fusemap.mapper.pareto import pareto_mask


def _by_definition(groups: np.ndarray, crit: np.ndarray) -> np.ndarray:
    n = len(groups)
    keep = np.ones(n, dtype=bool)
    for i in range(n):
        for j in range(n):
            if j == i or groups[j] != groups[i]:
                continue
            le = (crit[j] <= crit[i]).all()
            if le and ((crit[j] < crit[i]).any() or j < i):
                keep[i] = False
                break
    return keep


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 5).flatmap(
        lambda k: st.lists(
            st.tuples(st.integers(0, 3), st.lists(st.integers(0, 4), min_size=k, max_size=k)),
            min_size=1,
            max_size=40,
        )
    )
)
def test_pareto_mask_matches_the_definition(rows):
    groups = np.array([g for g, _ in rows], dtype=np.int64)
    crit = np.array([c for _, c in rows], dtype=np.float64)
    expected = _by_definition(groups, crit)
    saved = pareto.SMALL_GROUP
    try:
        for small in (0, 1000):  # the staircase, then the one-pass front, for any group
            pareto.SMALL_GROUP = small
            assert (pareto_mask(groups, crit) == expected).all()
    finally:
        pareto.SMALL_GROUP = saved


def test_pareto_mask_keeps_a_hand_made_front():
    crit = np.array([[1, 5, 1], [2, 2, 2], [3, 6, 2], [1, 5, 1], [0, 9, 9], [2, 2, 3]], float)
    groups = np.zeros(6, dtype=np.int64)
    # [3,6,2] is dominated by [2,2,2]; the second [1,5,1] repeats the first; [2,2,3] too.
    assert pareto_mask(groups, crit).tolist() == [True, True, False, False, True, False]
    groups = np.array([0, 0, 1, 1, 0, 1])  # other groups never compete
    # group 1: [3,6,2] loses to [1,5,1]; [2,2,3] now survives.
    assert pareto_mask(groups, crit).tolist() == [True, True, False, True, True, True]


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 4), st.integers(0, 3), st.integers(0, 3)), min_size=1),
    st.lists(st.tuples(st.integers(0, 3), st.integers(0, 1000)), min_size=1, max_size=60),
)
def test_rows_point_at_shared_criteria(sources, picks):
    """With ``rows``, row i is judged on ``criteria[rows[i]]``, as if gathered first."""
    crit = np.array([s[1:] for s in sources], dtype=np.float64)
    rows = np.array([r % len(sources) for _, r in picks], dtype=np.int64)
    groups = np.array([g for g, _ in picks], dtype=np.int64)
    saved = pareto.SMALL_GROUP
    try:
        for small in (0, 1000):
            pareto.SMALL_GROUP = small
            got = pareto_mask(groups, crit, rows)
            assert (got == _by_definition(groups, crit[rows])).all()
    finally:
        pareto.SMALL_GROUP = saved


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 2), st.integers(0, 3), st.integers(0, 3)),
        min_size=1,
        max_size=30,
    )
)
def test_closure_front_is_expand_then_prune(rows):
    """A closure step pruned in one pass equals expanding every row to its sources'
    digits, then pruning per code (two digits: radix 4 below, the closed one above)."""
    from fusemap.mapper.pareto import closure_front

    # Digit d may move to any digit dividing into it in this toy: sources of d are 0..d.
    offsets = np.array([0, 1, 3, 6, 10], dtype=np.int64)
    sources = np.array([0, 0, 1, 0, 1, 2, 0, 1, 2, 3], dtype=np.int64)
    state = np.array([4 * hi + lo for hi, lo, _, _ in rows], dtype=np.int64)
    crit = np.array([[a, b] for _, _, a, b in rows], dtype=np.float64)
    codes, srcs = [], []
    for i, s in enumerate(state.tolist()):
        d = s // 4
        for q in range(offsets[d], offsets[d + 1]):
            codes.append(s + (int(sources[q]) - d) * 4)
            srcs.append(i)
    codes_a, srcs_a = np.array(codes), np.array(srcs)
    keep = _by_definition(codes_a, crit[srcs_a])
    head = np.full(16, -1, dtype=np.int64)
    got_codes, got_rows = closure_front(state, crit, offsets, sources, 4, 4, head)
    assert got_codes.tolist() == codes_a[keep].tolist()
    assert got_rows.tolist() == srcs_a[keep].tolist()
    assert (head == -1).all()  # the scratch is left as found
