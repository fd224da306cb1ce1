"""The counting rules of fusemap.model.rules by hand, and the mapper's per-basis form of
the traffic rules (Counts) against the model's scalar form."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fusemap.mapper.tiling.terms import Counts, holder_traffic
from fusemap.model import rules


def test_box_values_by_hand():
    # A[p + r] with p over 4 and r over 3: 1 + (4 - 1) + (3 - 1) = 6 values (halo).
    assert rules.box_values([[("p", 1), ("r", 1)]], {"p": 4, "r": 3}) == 6
    # B[2p + r]: 1 + 2 * 3 + 2 = 9; times a second rank of one variable, 5: 45.
    assert rules.box_values([[("p", 2), ("r", 1)], [("c", 1)]], {"p": 4, "r": 3, "c": 5}) == 45
    # A scalar (no rank) holds one value; integers stay exact.
    assert rules.box_values([], {}) == 1
    assert rules.box_values([[("m", 1)]], {"m": 10**18 + 1}) == 10**18 + 1
    # The mapper's float form, per row.
    got = rules.box_values([[("p", 1), ("r", 1)]], {"p": np.array([4, 1]), "r": 3}, 1.0)
    assert got.tolist() == [6.0, 3.0]


def test_predicates_by_hand():
    assert rules.shares_parent_transfer("irrelevant", "A", frozenset({"A", "B"}))
    assert not rules.shares_parent_transfer("irrelevant", "A", frozenset({"B"}))
    assert not rules.shares_parent_transfer("partial", "A", frozenset({"A"}))
    assert rules.starts_partial_sums("irrelevant") and rules.starts_partial_sums("partial")
    assert not rules.starts_partial_sums("relevant")
    assert rules.skips_first_reads(True, True)
    assert not rules.skips_first_reads(False, True)
    assert not rules.skips_first_reads(True, False)
    assert not rules.skips_first_reads(True, True, copied_output=True)


def test_traffic_equations_by_hand():
    # A holder filled 100 times, skipping 10 first reads, under a multicast of ratio 4.
    assert rules.holder_writes(100.0, 10.0, 4.0) == 360.0
    assert rules.holder_reads(30.0, 4.0) == 120.0
    assert rules.parent_writes(30.0) == 30.0
    assert rules.parent_reads(100.0, 10.0, parent_skips=True) == 90.0
    assert rules.parent_reads(100.0, 10.0, parent_skips=False) == 100.0  # it serves them


@pytest.mark.parametrize(
    ("kinds", "passed"),
    [
        ([], 0),
        (["relevant", "relevant"], 2),
        (["relevant", "irrelevant", "relevant"], 1),
        (["relevant", "partial", "relevant"], 2),
        (["partial", "partial"], 1),
        (["irrelevant"], 0),
    ],
)
def test_lowered_past_by_hand(kinds, passed):
    assert rules.lowered_past(kinds) == passed


finite = st.floats(0, 1e6, allow_nan=False, allow_infinity=False)


@given(
    role=st.sampled_from(["own", "parent"]),
    action=st.sampled_from(["read", "write"]),
    fill=finite,
    back=finite,
    first=finite,
    ratio=st.floats(0.01, 100),
    skips=st.booleans(),
    parent_skips=st.booleans(),
)
def test_counts_follow_the_model_rules(role, action, fill, back, first, ratio, skips, parent_skips):
    """The mapper keeps the fill and first-visit parts apart (coefficients of two
    bases); added up, they are the model's count of the same holder, to rounding."""
    got = holder_traffic(role, action, fill, back, first, ratio, skips, parent_skips)
    skipped = first if skips else 0.0
    want = {
        ("own", "write"): rules.holder_writes(fill, skipped, ratio),
        ("own", "read"): rules.holder_reads(back, ratio),
        ("parent", "write"): rules.parent_writes(back),
        ("parent", "read"): rules.parent_reads(fill, skipped, parent_skips),
    }[role, action]
    assert got.values() == pytest.approx(want, rel=1e-12, abs=1e-9)
    assert isinstance(got, Counts)
    # Only the fill basis carries fills and write-backs; only the first-visit basis,
    # skipped first reads.
    carried = {
        "own": fill if action == "write" else back,
        "parent": fill if action == "read" else back,
    }
    scale = ratio if role == "own" else 1.0
    assert got.fill == pytest.approx(carried[role] * scale, rel=1e-12)
