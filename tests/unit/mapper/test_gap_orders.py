"""Loop orders of prefix gaps (mapper/gap_orders.py): which orders are added, what
each changes, and that a row with another order is the LoopTree the join assembles.

Every order of a prefix gap is a row. Below a backing node, a virtual holder or an
untracked memory they cost the same; below a lowered node an order that passes fewer
loops reserves the larger tile it stops at, one depth shallower per loop not passed.

Hand cases: a chain ``A = X * W`` (m, k, n), ``B = A * S`` (m, n) with ``A`` fused in a
buffer. ``B``'s only gap above ``A`` sits below DRAM backing nodes (unbounded), so the
search writes it ``m, n``; the order ``n, m`` costs the same and must be in the table,
else it cannot meet an ``A = X * W`` that keeps its own ``W`` between ``n`` and ``m``
(the LoopTree oracle's seed 23: 2646 against 2850).
"""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

from fusemap.mapper.ffm import map_workload
from fusemap.mapper.space.prefix import BackingEntry, LoopEntry, SpatialTile
from fusemap.mapper.space.templates import Holder
from fusemap.mapper.tiling.gap_orders import (
    GapContext,
    _gap_options,
    _passed,
    ordered_as_prefix,
    with_gap_orders_of,
)
from fusemap.model.evaluate import evaluate_mapping
from fusemap.spec import mapping as M
from fusemap.spec.spec import load_spec
from tests.support.model_helpers import (
    access,
    arch,
    compute_unit,
    einsum,
    memory,
    to_yaml,
    workload,
)


def _result(holders, variables, relevance, spatial=()):
    tmpl = SimpleNamespace(holders=holders, spatial=spatial)
    return SimpleNamespace(template=tmpl, variables=variables, relevance=relevance)


def _ctx(tracked=("GB",), by_depth=("GB",)):
    """A context whose holders reserve the product of their tile sizes (8 bits each)."""

    def bits(_h, sizes):
        return 8.0 * np.prod([s for s in sizes.values()], axis=0)

    return GapContext(2, frozenset(tracked), frozenset(by_depth), 7, {"GB": 1e9}, bits)


W_REL = {"W": {"k": "relevant", "m": "irrelevant", "n": "relevant"}}


def test_a_lowered_reservation_passes_leading_relevant_loops_only():
    res = _result((), ["k", "m", "n"], W_REL)
    rel = W_REL["W"]
    assert _passed(res, rel, (0, 2, 1)) == (0, 2)  # k, n, then m stops it
    assert _passed(res, rel, (1, 0, 2)) == ()  # m first: not lowered at all
    assert _passed(res, rel, (0, 1, 2)) == (0,)
    part = _result((), ["p", "q", "c"], {"I": {"p": "partial", "q": "partial", "c": "relevant"}})
    assert _passed(part, part.relevance["I"], (2, 1, 0)) == (1, 2)  # c, then one partial


def test_every_order_below_a_node_that_does_not_lower_costs_the_same():
    # Below a backing node, a virtual holder or an untracked memory: 3! orders, no change.
    sizes = (np.array([[2, 4, 6]]), np.array([[1, 2, 3]]))  # one prefix
    for h, ctx in [
        (Holder("W", "GB", 1, True), _ctx()),
        (Holder("@hosting", "GB", 1, False, virtual=True), _ctx()),
        (Holder("W", "GB", 1, False), _ctx(tracked=())),
    ]:
        res = _result((h,), ["k", "m", "n"], W_REL)
        opts = _gap_options(res, ctx, 0, 0b111, [], sizes, 0)
        assert len(opts) == 6 and opts[0].canonical
        assert all(o.delta == () for o in opts)


def _plain(option):
    """An option with its changes for the one prefix as plain numbers."""
    delta = tuple((m, c, float(b[0])) for m, c, b in option.delta)
    return replace(option, delta=delta)


def test_an_order_that_lowers_less_reserves_the_larger_tile_shallower():
    # W[k, n] in GB above loops k (2 -> 1), m (4 -> 2), n (6 -> 3), two loops above.
    # Canonical k, n, m: W lowered past k and n, tile 1 x 3 (x m's 4: the product of all
    # sizes here, so 1 * 4 * 3 = 12 values, 96 bits) at depth 2 + 2 = 4.
    res = _result((Holder("W", "GB", 1, False),), ["k", "m", "n"], W_REL)
    sizes = (np.array([[2, 4, 6]]), np.array([[1, 2, 3]]))  # one prefix
    opts = {o.order: _plain(o) for o in _gap_options(res, _ctx(), 0, 0b111, [], sizes, 2)}
    assert opts[(0, 2, 1)].canonical
    assert opts[(2, 0, 1)].delta == ()  # n, k, m: the same loops passed
    # m first: not lowered, tile 2 * 4 * 6 = 48 values (384 bits) at depth 2.
    assert opts[(1, 0, 2)].delta == (("GB", 4, -96.0), ("GB", 2, 384.0))
    # k, m, n: past k only, tile 1 * 4 * 6 = 24 values (192 bits) at depth 3.
    assert opts[(0, 1, 2)].delta == (("GB", 4, -96.0), ("GB", 3, 192.0))
    # Not kept by depth: the total grows by the difference.
    flat = {
        o.order: _plain(o) for o in _gap_options(res, _ctx(by_depth=()), 0, 0b111, [], sizes, 2)
    }
    assert flat[(1, 0, 2)].delta == (("GB", -1, 288.0),)


def test_a_spatial_loop_takes_every_place_but_above_its_variables_loop_and_stops_lowering():
    # W[k, n] in GB above loops k (2 -> 1) and m (4 -> 2), then a spatial loop over m
    # (2 instances, the tile 2 -> 1) at the end of the gap (item 3 = 3 variables + 0).
    # It may go anywhere but above the temporal m loop whose tile it splits: k, m, s /
    # m, k, s / m, s, k. W's lowering stops at it (a fanout below W's memory): m, s, k
    # passes nothing (m is irrelevant to W), as m, k, s does; k, m, s passes k.
    spread = (SimpleNamespace(var="m"),)
    res = _result((Holder("W", "GB", 1, False),), ["k", "m", "n"], W_REL, spread)
    sizes = (np.array([[2, 4, 6]]), np.array([[1, 2, 6]]))
    opts = {o.order: _plain(o) for o in _gap_options(res, _ctx(), 0, 0b011, [0], sizes, 2)}
    assert set(opts) == {(0, 1, 3), (1, 0, 3), (1, 3, 0)}
    assert opts[(0, 1, 3)].canonical
    # Canonical: past k, tile 1 * 4 * 6 = 24 values (192 bits) at depth 3; stopped right
    # away: 2 * 4 * 6 = 48 (384 bits) at depth 2.
    assert opts[(1, 0, 3)].delta == (("GB", 3, -192.0), ("GB", 2, 384.0))
    assert opts[(1, 3, 0)].delta == opts[(1, 0, 3)].delta


def test_ordered_as_prefix_moves_spatial_loops_too():
    tree = M.Mapping(
        nodes=[
            M.Storage(tensors=["A"], component="DRAM"),
            M.Temporal(rank_variable="m", tile_shape=1),
            M.Spatial(rank_variable="n", tile_shape=2, name="X", component="GB"),
            M.Storage(tensors=["A"], component="GB"),
            M.Temporal(rank_variable="k", tile_shape=1),
            M.Compute(einsum="E", component="MAC"),
        ]
    )
    tokens = (
        LoopEntry.of("n", SpatialTile.on(2, "GB", "X")),
        LoopEntry.of("m", 1),
        BackingEntry.of("A", "GB"),
    )
    out = ordered_as_prefix(tree, tokens)
    kinds = [type(n).__name__ for n in out.nodes]
    assert kinds == ["Storage", "Spatial", "Temporal", "Storage", "Temporal", "Compute"]
    assert out.nodes[1] == tree.nodes[2] and out.nodes[2] == tree.nodes[1]


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
    tokens = (LoopEntry.of("n", 2), LoopEntry.of("m", 1), BackingEntry.of("A", "GB"))
    out = ordered_as_prefix(tree, tokens)
    loops = [(n.rank_variable, n.tile_shape) for n in out.nodes if isinstance(n, M.Temporal)]
    assert loops == [("n", 2), ("m", 1), ("k", 1)]


def _spec(tmp_path, name, wl, gb_bits, **dram):
    """``wl`` on DRAM (intermediates kept off it), a buffer of ``gb_bits``, one MAC."""
    a = arch(
        memory("DRAM", "inf", 100, 50, tensors={"keep": "~Intermediates", "may_keep": "All"},
               **dram),
        memory("GB", gb_bits, 4, 2, tensors={"may_keep": "All"}),
        compute_unit("MAC", 1, throughput=2),
    )  # fmt: skip
    path = tmp_path / f"{name}.yaml"
    path.write_text(to_yaml({**a, **wl}))
    return load_spec(path)


def _seed23_spec(tmp_path):
    """The oracle's seed 23, written out (m=3, k=2, n=2; GB of 24 bits)."""
    wl = workload(
        {"m": 3, "k": 2, "n": 2},
        einsum("E0", access("X", ["m", "k"]), access("W", ["k", "n"]),
               access("A", ["m", "n"], output=True)),
        einsum("E1", access("A", ["m", "n"]), access("S", ["m", "n"]),
               access("B", ["m", "n"], output=True)),
    )  # fmt: skip
    return _spec(tmp_path, "seed23", wl, 24, read_tp=2, write_tp=2)


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


def test_too_many_orders_stop_with_one_clear_message(tmp_path):
    """The rows loop orders add are bounded (the limit ``loop_orders``), with a message
    naming the Einsum in the workload file and how to raise the limit; raised, the
    same space maps."""
    from fusemap.spec import limits
    from fusemap.spec.errors import FusemapError

    spec = _seed23_spec(tmp_path)
    limits.configure(loop_orders=1)
    with pytest.raises(FusemapError, match="loop orders of fused prefixes") as err:
        map_workload(spec, "energy")
    text = str(err.value)
    assert "limit loop_orders = 1; raise it with --limit loop_orders=N" in text
    where = err.value.location
    assert where.file and where.file.endswith(".yaml") and where.line
    assert where.key in {e.name for e in spec.workload.einsums}
    limits.configure(loop_orders=5_000_000)
    assert map_workload(spec, "energy").best is not None


def test_a_shared_copy_is_lowered_as_its_row_prefix_orders_the_gap():
    """copies._passed reads the gap's loops in the row's prefix order, not the canonical
    one: X[m, k] below two loops ``m`` (relevant) and ``n`` (irrelevant)."""
    from fusemap.mapper.join.copies import _passed as copy_passed
    from fusemap.mapper.space.interner import PrefixInterner

    rel = {"m": "relevant", "n": "irrelevant", "k": "relevant"}
    info = SimpleNamespace(relevance=lambda _t, v: rel[v])
    res = SimpleNamespace(variables=["k", "m", "n"])
    interner = PrefixInterner()
    canon = interner.intern((("loop", "m", 1), ("loop", "n", 1), ("back", "A", "GB")))
    other = interner.intern((("loop", "n", 1), ("loop", "m", 1), ("back", "A", "GB")))
    fusion = SimpleNamespace(seq=np.array([canon, other]), interner=interner)
    looped = np.array([[False, True, True], [False, True, True]])  # the gap: m and n
    got = copy_passed(info, "X", res, looped, np.array([0, 0]), fusion, np.array([0, 1]))
    assert got.tolist() == [1, 0]  # m then n: past m; n then m: not lowered
    # A gap below the prefix (loops 2-3 of a 2-loop prefix): the canonical count.
    deeper = copy_passed(info, "X", res, looped, np.array([2, 2]), fusion, np.array([0, 1]))
    assert deeper.tolist() == [1, 1]


def test_a_table_keeps_only_the_prefixes_it_refers_to(tmp_path):
    """The search's interner holds every prefix it met; a table sends back only its own
    (each still the same prefix) and the shorter ones they are built from (the
    interner's trie), with no own-node mark left in them."""
    from fusemap.mapper.pmappings.generate import generate_pmappings
    from fusemap.mapper.space.config import config_from_spec
    from fusemap.mapper.space.prefix import MARK

    spec = _seed23_spec(tmp_path)
    config = replace(config_from_spec(spec), fusion=True)
    table = generate_pmappings(spec, "E0", objective="energy", config=config)
    fusion = table.fusion
    assert fusion is not None
    seqs = [fusion.seq] + [r.seq for r in table.results if r.seq is not None]
    used = set(np.concatenate(seqs).tolist()) | {0}
    kept = [fusion.interner.prefixes[i] for i in used]
    assert all(any(k[: len(p)] == p for k in kept) for p in fusion.interner.prefixes)
    assert len(fusion.interner.prefixes) < 3 * len(used)
    assert not any(t[0] == MARK for p in fusion.interner.prefixes for t in p)
    assert {fusion.compatibility(i) for i in range(len(table))}  # every row decodes


def _middle_of_three_spec(tmp_path):
    """A chain of three matmuls; E1 reads the fused A, writes the fused C and keeps its
    own W1, which the search may place among the fused loops."""
    wl = workload(
        {"m": 4, "k": 2, "n": 4, "p": 2},
        einsum("E0", access("X", ["m", "k"]), access("W0", ["k", "n"]),
               access("A", ["m", "n"], output=True)),
        einsum("E1", access("A", ["m", "n"]), access("W1", ["n", "p"]),
               access("C", ["m", "p"], output=True)),
        einsum("E2", access("C", ["m", "p"]), access("W2", ["p", "k"]),
               access("D", ["m", "k"], output=True)),
    )  # fmt: skip
    return _spec(tmp_path, "three", wl, 400)


def test_rows_of_one_marked_prefix_have_the_same_gaps(tmp_path, monkeypatch):
    """What the loop orders' proof needs: within a template, rows of one prefix (own
    nodes among the fused loops marked) with a gap of two loops or more loop over the
    same variables in every prefix gap, so every order changes them alike (rows whose
    gaps hold one loop each have one order: their marks go, they may differ)."""
    import fusemap.mapper.pmappings.generate as P
    import fusemap.mapper.pmappings.ordered as O
    from fusemap.mapper.space.config import config_from_spec
    from fusemap.mapper.space.prefix import MARK
    from fusemap.mapper.tiling.gap_orders import _looped_masks

    seen = []

    def spy(results, contexts, interner, counter):
        for res, ctx in zip(results, contexts, strict=True):
            if res.seq is not None and ctx.p_max > 0 and res.rows:
                here, mids = res.gap_tiles(np.arange(res.rows))
                masks = _looped_masks(res, here, mids)[:, : ctx.p_max]
                seen.append((res.seq.copy(), masks, [interner.prefixes[q] for q in res.seq]))
        return with_gap_orders_of(results, contexts, interner, counter)

    monkeypatch.setattr(O, "with_gap_orders_of", spy)
    spec = _middle_of_three_spec(tmp_path)
    config = replace(config_from_spec(spec), fusion=True)
    P.generate_pmappings(spec, "E1", objective="energy", config=config)
    assert any(t[0] == MARK for _, _, prefixes in seen for p in prefixes for t in p)
    several = 0
    for seq, masks, _ in seen:
        for q in np.unique(seq):
            rows = masks[seq == q]
            if any(bin(int(m)).count("1") >= 2 for m in rows.ravel()):
                several += 1
                assert len(np.unique(rows, axis=0)) == 1
    assert several > 0


@pytest.mark.parametrize("objective", ["energy", "all"])
def test_rows_dropped_before_the_orders_leave_the_table_cut_the_same(tmp_path, objective):
    """A ``useful`` filter on what orders do not change (energy, latency, the prefix's
    loops) gives the table filtered after: the same rows, every order of them included."""
    from fusemap.mapper.pmappings.generate import generate_pmappings
    from fusemap.mapper.space.config import config_from_spec

    spec = _seed23_spec(tmp_path)
    config = replace(config_from_spec(spec), fusion=True)
    whole = generate_pmappings(spec, "E0", objective=objective, config=config)
    limit = float(np.median(whole.energy))

    def rows(table, keep):
        fusion = table.fusion
        prefixes = [fusion.interner.prefixes[int(s)] for s in fusion.seq]
        return sorted(
            (float(table.energy[i]), prefixes[i], float(table.reservations["GB"][i]))
            for i in np.flatnonzero(keep)
        )

    cut = generate_pmappings(
        spec, "E0", objective=objective, config=config,
        useful=lambda r, _interner: r.energy <= limit,
    )  # fmt: skip
    want = rows(whole, whole.energy <= limit)
    assert 0 < len(want) < len(whole)  # the filter drops some, keeps some
    assert rows(cut, np.ones(len(cut), dtype=bool)) == want
    prefixes = {p for _, p, _ in want}
    assert len({tuple(sorted(map(repr, p))) for p in prefixes}) < len(prefixes)  # reorders
