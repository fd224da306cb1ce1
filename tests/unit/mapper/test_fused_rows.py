"""Pruning across templates before the loop orders are added (mapper/fused_rows.py).

A row goes only when a row of another template of the same order kind (same nodes above
the prefix gaps, same lowering, same capacities) dominates it in the same prefix, on the
table's criteria and on the totals of the memories a node lowers into; the proof is in
docs/ffm.md, "Loop orders in a fused prefix". Hand cases on two-row templates.
"""

from __future__ import annotations

import numpy as np

from fusemap.mapper.pmappings.fused_rows import (
    fused_criteria,
    rows_kept_before_orders,
    stacked_buckets,
)
from fusemap.mapper.space.templates import Holder, Template
from fusemap.mapper.tiling.gap_orders import GapContext
from fusemap.mapper.tiling.result import TemplateResult

ROOT = Holder("@root", "DRAM", 0, True, virtual=True)
W = Holder("W", "GB", 1, False)  # own node above the fused one: lowers its reservation
A = Holder("A", "GB", 1, True)  # fused backing node (position 2, the deepest)
HOLDERS = (ROOT, W, A)


def _ctx(tracked=("GB",), capacity=1e9):
    return GapContext(2, frozenset(tracked), frozenset(tracked), 3, {"GB": capacity}, None)


def _pruned(pairs, objective, alone):
    """The results of (result, context) pairs cut to :func:`rows_kept_before_orders`."""
    results = [r for r, _ in pairs]
    kept = rows_kept_before_orders(results, [c for _, c in pairs], objective, alone)
    return [r if k is None else r.compact(k) for r, k in zip(results, kept, strict=True)]


def _result(holders, energy, buckets, totals, seq=(5, 6)):
    rows = len(energy)
    template = Template("E", "MAC", 2, holders, ())
    return TemplateResult(
        template,
        np.array(energy, dtype=float),
        np.zeros(rows),
        {"GB": np.array(totals, dtype=float)},
        [np.full((1, 1), 8), np.full((rows, 1), 2)],
        [np.full((rows, 1), 2)],
        [np.zeros(rows, dtype=np.int64)],
        ["m"],
        {},
        {},
        np.array(seq, dtype=np.int64),
        {"GB": np.array(buckets, dtype=float)},
    )


def _rows(kept):
    return [r.energy.tolist() for r in kept]


def test_a_row_dominated_by_a_template_of_the_same_kind_goes():
    s = _result(HOLDERS, [1.0, 5.0], [[1, 0, 0], [1, 0, 0]], [1, 1])
    r = _result(HOLDERS, [2.0, 0.5], [[1, 0, 0], [1, 0, 0]], [1, 1])
    kept = _pruned([(s, _ctx()), (r, _ctx())], "energy", False)
    assert _rows(kept) == [[1.0], [0.5]]  # 5.0 and 2.0 are dominated


def test_rows_of_other_prefixes_or_kinds_stay():
    s = _result(HOLDERS, [1.0, 1.0], [[1, 0, 0]] * 2, [1, 1], seq=(5, 6))
    r = _result(HOLDERS, [2.0, 2.0], [[1, 0, 0]] * 2, [1, 1], seq=(7, 8))
    w_in_dram = (ROOT, Holder("W", "DRAM", 0, True), A)
    other = _result(w_in_dram, [3.0, 3.0], [[1, 0, 0]] * 2, [1, 1])
    kept = _pruned([(s, _ctx()), (r, _ctx()), (other, _ctx())], "energy", False)
    assert _rows(kept) == [[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]]
    worse = _result(HOLDERS, [2.0, 2.0], [[1, 0, 0]] * 2, [1, 1], seq=(5, 6))
    smaller = _pruned([(s, _ctx()), (worse, _ctx(capacity=64))], "energy", False)
    assert _rows(smaller) == [[1.0, 1.0], [2.0, 2.0]]  # another capacity: another kind
    same = _pruned([(s, _ctx()), (worse, _ctx())], "energy", False)
    assert _rows(same) == [[1.0, 1.0], []]


def test_the_total_of_a_lowering_memory_decides_too():
    """Less energy and the same buckets, but a larger total in the memory W lowers into:
    its orders might not fit where the other's do, so both rows stay."""
    s = _result(HOLDERS, [1.0, 1.0], [[1, 0, 0]] * 2, [9, 9])
    r = _result(HOLDERS, [2.0, 2.0], [[1, 0, 0]] * 2, [1, 1])
    kept = _pruned([(s, _ctx()), (r, _ctx())], "energy", False)
    assert _rows(kept) == [[1.0, 1.0], [2.0, 2.0]]
    untracked = _pruned([(s, _ctx(())), (r, _ctx(()))], "energy", False)
    assert _rows(untracked) == [[1.0, 1.0], []]  # W lowers nothing: totals decide nothing


def test_criteria_pad_missing_depth_columns_and_zero_lone_rows():
    a = _result(HOLDERS, [1.0], [[1, 2, 3]], [6], seq=(0,))
    b = _result(HOLDERS, [2.0], [[4, 5, 6]], [15], seq=(3,))
    b.buckets["GB"] = np.array([[4.0, 5.0]])  # fewer columns: the last is zero
    buckets = stacked_buckets([a, b])
    assert buckets["GB"].tolist() == [[1, 2, 3], [4, 5, 0]]
    seq = np.array([0, 3])
    crit = fused_criteria([a, b], seq, buckets, "latency", alone=True)
    assert crit.tolist() == [[1, 0, 0, 0, 0], [2, 0, 4, 5, 0]]  # latency 0; row 0 alone
