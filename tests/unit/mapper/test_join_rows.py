"""Joining a step's pairs in batches gives, destination by destination, what joining the
pairs one by one gives (:func:`fusemap.mapper.join.rows.join_pairs`), and the capacity
rule on a hand case."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np
import pytest

from fusemap.mapper.join.rows import Group, concat, join_pairs

MEMORIES = {"GB": 100.0, "LB": 30.0}
K = 4  # private reservation columns per pmapping (levels 0..K-1 and below every one)


@dataclass
class Piece:
    rows: np.ndarray
    b_prev: int
    b_next: int
    shared_adds: list[tuple[str, int, float]] = field(default_factory=list)


def _table(rng, n: int):
    buckets = {"GB": rng.integers(0, 12, (n, K + 1)).astype(float)}
    return SimpleNamespace(
        energy=rng.random(n), latency=rng.random(n), fusion=SimpleNamespace(buckets=buckets)
    )


def _group(rng, n: int, b: int, j: int) -> Group:
    return Group(
        rng.random(n), rng.random(n), rng.integers(0, 50, (n, j)),
        {m: rng.integers(0, 15, (n, b)).astype(float) for m in MEMORIES},
        {m: rng.integers(0, 25, (n, b + 1)).astype(float) for m in MEMORIES},
    )  # fmt: skip


@pytest.mark.parametrize("seed", range(25))
def test_batches_equal_pairs_joined_alone(seed):
    rng = np.random.default_rng(seed)
    table = _table(rng, 40)
    by_b = {b: [_group(rng, int(rng.integers(1, 4)), b, 2) for _ in range(3)] for b in range(3)}
    pairs = []
    for _ in range(30):
        b, b2 = int(rng.integers(0, 3)), int(rng.integers(0, 3))
        adds = [
            (str(rng.choice(["GB", "LB"])), int(rng.integers(1, 5)), float(rng.integers(1, 9)))
            for _ in range(int(rng.integers(0, 3)))
        ]
        rows = rng.choice(40, size=int(rng.integers(1, 4)), replace=False)
        pairs.append((by_b[b][int(rng.integers(0, 3))], Piece(rows, b, b2, adds)))
    # A destination group's live tensors fix the loops it shares with the next Einsum.
    dest = [(p.b_next, int(rng.integers(0, 3))) for _, p in pairs]
    together = join_pairs(pairs, dest, table, MEMORIES)
    expected: dict[tuple, list[Group]] = {}  # pair by pair, appended to its destination
    for pair, to in zip(pairs, dest, strict=True):
        alone = join_pairs([pair], [to], table, MEMORIES)
        if alone:
            expected.setdefault(to, []).append(alone[to])
    assert list(together) == list(expected)  # same destinations, in the same order
    assert together, "the case is not vacuous"
    for to, parts in expected.items():
        want, got = concat(parts), together[to]
        assert np.array_equal(got.energy, want.energy)
        assert np.array_equal(got.latency, want.latency)
        assert np.array_equal(got.picks, want.picks)
        for m in MEMORIES:
            assert np.array_equal(got.S[m], want.S[m]) and np.array_equal(got.C[m], want.C[m])


def test_fused_tile_below_the_next_einsum_closes_into_the_peak():
    """One partial mapping with one open level (S[1] = 10, C = [0, 9]) joined with a
    pmapping that shares no loop with the next Einsum (b2 = 0): its fused tile of 4
    at level 1 adds to S[1], its private 7 reserved below every level is its own
    peak, and the level closes: C[0] = 10 + 4 + max(9, 7) = 23 (23 fits, 22 not)."""
    group = Group(
        np.array([1.0]), np.array([2.0]), np.array([[3]]),
        {"LB": np.array([[10.0]])}, {"LB": np.array([[0.0, 9.0]])},
    )  # fmt: skip
    table = SimpleNamespace(
        energy=np.array([0.5]), latency=np.array([0.25]),
        fusion=SimpleNamespace(buckets={"LB": np.array([[0.0, 7.0]])}),
    )  # fmt: skip
    piece = Piece(np.array([0]), 1, 0, [("LB", 1, 4.0)])
    got = join_pairs([(group, piece)], ["next"], table, {"LB": 23.0})["next"]
    assert got.C["LB"].tolist() == [[23.0]] and got.S["LB"].shape == (1, 0)
    assert got.energy.tolist() == [1.5] and got.picks.tolist() == [[3, 0]]
    assert join_pairs([(group, piece)], ["next"], table, {"LB": 22.0}) == {}
