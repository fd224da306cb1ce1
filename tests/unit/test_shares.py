"""The shares CI runs of the slow set partition it: every test in exactly one; recorded
durations spread evenly."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.shares import DURATIONS, balanced, in_share, parse_share


@given(st.lists(st.text(min_size=1), max_size=40), st.integers(1, 16))
def test_every_test_is_in_exactly_one_share(ids, n):
    for test_id in ids:
        assert sum(in_share(test_id, k, n) for k in range(n)) == 1


@given(
    st.dictionaries(st.text(min_size=1), st.floats(0, 100), max_size=40),
    st.lists(st.text(min_size=1), max_size=10),
    st.integers(1, 16),
)
def test_recorded_and_new_tests_are_each_in_exactly_one_share(recorded, new, n):
    for test_id in [*recorded, *new]:
        assert sum(in_share(test_id, k, n, recorded) for k in range(n)) == 1


def test_recorded_durations_are_spread_longest_first():
    # By hand: 9 -> share 0; 5 -> 1; 4 -> 1 (5 < 9); 3 -> 0 (9 = 9: the lowest);
    # 1 -> 1 (9 < 12).
    durations = {"a": 9.0, "b": 5.0, "c": 4.0, "d": 3.0, "e": 1.0}
    assert balanced(2, durations) == {"a": 0, "b": 1, "c": 1, "d": 0, "e": 1}


def test_the_recorded_slow_set_splits_evenly_in_sixteen():
    recorded = json.loads(DURATIONS.read_text())
    load = [0.0] * 16
    for test_id, k in balanced(16, recorded).items():
        load[k] += recorded[test_id]
    assert max(load) < 1.2 * sum(load) / 16


def test_a_share_is_the_same_on_every_run():
    # zlib.crc32(b"tests/x.py::test_a") == 4066441694, which is 6 modulo 8.
    assert in_share("tests/x.py::test_a", 6, 8)
    assert not in_share("tests/x.py::test_a", 0, 8)


def test_shares_spread_a_parametrized_test():
    ids = [f"tests/x.py::test_a[{seed}]" for seed in range(48)]
    sizes = [sum(in_share(i, k, 8) for i in ids) for k in range(8)]
    assert sum(sizes) == 48 and max(sizes) <= 12 and min(sizes) >= 2


@pytest.mark.parametrize("text", ["8/8", "-1/8", "1", "a/b", "1/0", "1/2/3"])
def test_a_bad_share_is_refused(text):
    with pytest.raises(ValueError):
        parse_share(text)


def test_a_share_is_parsed():
    assert parse_share("3/8") == (3, 8)
