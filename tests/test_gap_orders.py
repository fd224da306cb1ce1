"""Loop orders of prefix gaps (mapper/gap_orders.py): which orders are added, and that
a row with another order is the LoopTree the join assembles.

Hand cases: a chain ``A = X * W`` (m, k, n), ``B = A * S`` (m, n) with ``A`` fused in a
buffer. ``B``'s only gap above ``A`` sits below DRAM backing nodes (unbounded), so the
search writes it ``m, n``; the order ``n, m`` costs the same and must be in the table,
else it cannot meet an ``A = X * W`` that keeps its own ``W`` between ``n`` and ``m``
(the LoopTree oracle's seed 23: 2646 against 2850).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from fusemap.mapper.ffm import map_workload
from fusemap.mapper.gap_orders import _orders, _segments, ordered_as_prefix
from fusemap.mapper.space import Holder
from fusemap.model.evaluate import evaluate_mapping
from fusemap.spec import mapping as M
from fusemap.spec.spec import load_spec
from model_helpers import access, arch, compute_unit, einsum, memory, to_yaml, workload


def test_orders_permute_within_segments_only():
    assert list(_orders([[0, 1]])) == [[1, 0]]
    assert list(_orders([[0], [1]])) == []
    got = list(_orders([[0, 1], [2], [3, 4]]))
    assert got == [[0, 1, 2, 4, 3], [1, 0, 2, 3, 4], [1, 0, 2, 4, 3]]
    assert len(list(_orders([[0, 1, 2]]))) == 5  # 3! less the canonical one


def _result(holders, variables, relevance):
    tmpl = SimpleNamespace(holders=holders)
    return SimpleNamespace(template=tmpl, variables=variables, relevance=relevance)


def test_segments_follow_the_relevance_to_the_node_above():
    w_gb = Holder("W", "GB", 1, False)
    res = _result(
        (Holder("W", "DRAM", 0, True), w_gb),
        ["k", "m", "n"],
        {"W": {"k": "relevant", "m": "irrelevant", "n": "relevant"}},
    )
    # Gap 0 (below DRAM, unbounded) loops m, n: free. Gap 1 (below W in GB) loops k, m,
    # n: canonical k, n (relevant, free among themselves), then m.
    assert _segments(res, [0b110, 0b111], 5, {0}) == [[0, 1], [2, 3], [4]]
    # The same gap below a bounded node: m then n would lower W less, so not free.
    assert _segments(res, [0b110], 2, set()) == [[0], [1]]


def test_segments_keep_the_first_partially_relevant_loop_in_place():
    res = _result(
        (Holder("I", "GB", 1, False),),
        ["p", "q", "r", "c"],
        {"I": {"p": "partial", "q": "partial", "r": "partial", "c": "relevant"}},
    )
    # Canonical: c (relevant), p (first partial, passed by the lowering), q, r.
    assert _segments(res, [0b1111], 4, set()) == [[0], [1], [2, 3]]


def test_ordered_as_prefix_rewrites_the_first_loops():
    tree = M.Mapping(
        nodes=[
            M.Storage(tensors=["A"], component="DRAM"),
            M.Temporal(rank_variable="m", tile_shape=1),
            M.Temporal(rank_variable="n", tile_shape=2),
            M.Storage(tensors=["A"], component="GB"),
            M.Temporal(rank_variable="k", tile_shape=1),
            M.Compute(einsum="E", component="MAC"),
        ]
    )
    tokens = (("loop", "n", 2), ("loop", "m", 1), ("back", "A", "GB"))
    out = ordered_as_prefix(tree, tokens)
    loops = [(n.rank_variable, n.tile_shape) for n in out.nodes if isinstance(n, M.Temporal)]
    assert loops == [("n", 2), ("m", 1), ("k", 1)]


def _seed23_spec(tmp_path):
    """The oracle's seed 23, written out (m=3, k=2, n=2; GB of 24 bits)."""
    wl = workload(
        {"m": 3, "k": 2, "n": 2},
        einsum("E0", access("X", ["m", "k"]), access("W", ["k", "n"]),
               access("A", ["m", "n"], output=True)),
        einsum("E1", access("A", ["m", "n"]), access("S", ["m", "n"]),
               access("B", ["m", "n"], output=True)),
    )  # fmt: skip
    a = arch(
        memory(
            "DRAM",
            "inf",
            100,
            50,
            read_tp=2,
            write_tp=2,
            tensors={"keep": "~Intermediates", "may_keep": "All"},
        ),  # fmt: skip
        memory("GB", 24, 4, 2, tensors={"may_keep": "All"}),
        compute_unit("MAC", 1, throughput=2),
    )
    path = tmp_path / "seed23.yaml"
    path.write_text(to_yaml({**a, **wl}))
    return load_spec(path)


def test_a_fused_chain_meets_in_any_loop_order(tmp_path):
    spec = _seed23_spec(tmp_path)
    out = map_workload(spec, "energy")
    r = out.best.result
    # Hand count of the optimum (W in GB under n, reused over m; A in GB under n, m):
    # E0: X read 12 from DRAM (1200), W read 4 from DRAM (400) and written 4 to GB (8),
    #     read 12 from GB (48); A written 12 to GB (24) and read 6 for the accumulation
    #     (24); 12 MACs (12): 1716.  E1: S 6 reads (600), B 6 writes (300), A 6 reads
    #     from GB (24), 6 MACs: 930.
    assert r.energy == pytest.approx(1716 + 930)
    again = evaluate_mapping(spec, out.best.mapping)
    assert again.energy == pytest.approx(r.energy)
    loops = [n for n in out.best.mapping.nodes if isinstance(n, M.Temporal)]
    assert [n.rank_variable for n in loops[:2]] == ["n", "m"]
    assert np.isfinite(r.latency)


def test_too_many_orders_stop_with_one_clear_message(tmp_path, monkeypatch):
    """The rows loop orders add are bounded (an allocation limit), with a message."""
    import fusemap.mapper.gap_orders as G
    from fusemap.spec.errors import FusemapError

    monkeypatch.setattr(G, "MAX_ORDER_ROWS", 0)
    with pytest.raises(FusemapError, match="loop orders of fused prefixes"):
        map_workload(_seed23_spec(tmp_path), "energy")
