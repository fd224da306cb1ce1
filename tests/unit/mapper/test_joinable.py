"""The semi-join of the full-space check (``mapper/joinable.py``): order-free keys are
the same for every loop order of a prefix, and a check row is dropped exactly when some
other user of one of its tensors has no row of its key, in rounds."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fusemap.mapper.check_rows import RowCut
from fusemap.mapper.joinable import (
    CostBound,
    OrderFreeKeys,
    joinable,
    order_free_keys,
    renamed_key,
    renamed_keys,
)
from fusemap.mapper.space.interner import PrefixInterner
from fusemap.mapper.space.prefix import (
    HOSTING,
    BackingEntry,
    LoopEntry,
    MarkEntry,
    SpatialTile,
)
from tests.support.interner_ops import grow

L, B = LoopEntry.of, BackingEntry.of
TOP = dict.fromkeys(["T1", "T2", "I", "Q", "K"], "DRAM")


def test_a_key_sorts_the_loops_above_each_tensor_and_skips_marks():
    prefix = (
        L("n", 4), L("m", 8), MarkEntry.of("W", "GB"), B("T1", "GB"),
        L("m", 2), B("T2", "GB"),
    )  # fmt: skip
    got = order_free_keys(prefix, {"T2", "T1"}, TOP)
    assert got == (
        ("T1", "GB", (("m", 8, ""), ("n", 4, ""))),
        ("T2", "GB", (("m", 2, ""), ("m", 8, ""), ("n", 4, ""))),
    )


def test_an_unfused_tensor_is_in_its_top_memory_under_no_loop():
    assert order_free_keys((L("m", 8), B("T1", "GB")), {"T1", "T2"}, TOP)[1] == ("T2", "DRAM", ())
    assert order_free_keys((B("T2", "DRAM"),), {"T2"}, TOP) == order_free_keys((), {"T2"}, TOP)


def test_a_spatial_loop_differs_from_a_temporal_loop_of_the_same_tile():
    spatial = order_free_keys((L("m", SpatialTile(4, "PE.X")), B("T1", "GB")), {"T1"}, TOP)
    temporal = order_free_keys((L("m", 4), B("T1", "GB")), {"T1"}, TOP)
    assert spatial != temporal and spatial[0][2] == (("m", 4, "PE.X"),)


LOOPS = [L("m", 8), L("n", 4), L("k", 2), L("m", SpatialTile(2, "PE.X"))]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.permutations(range(len(LOOPS))), min_size=1, max_size=3), st.randoms())
def test_every_order_of_the_gaps_has_the_same_key(gaps, rnd):
    """Any permutation of the loops within each gap (a run of loops between nodes)."""
    tensors = ["T1", "T2", "T3"][: len(gaps)]
    canon, shuffled = [], []
    for t, gap in zip(tensors, gaps, strict=True):
        loops = [LOOPS[i] for i in gap]
        canon += [*loops, B(t, "GB")]
        rnd.shuffle(loops)
        shuffled += [*loops, B(t, "GB")]
    top = dict.fromkeys(tensors, "DRAM")
    assert order_free_keys(tuple(canon), tensors, top) == order_free_keys(
        tuple(shuffled), tensors, top
    )


def test_a_renamed_key_renames_tensors_and_variables_and_sorts_again():
    key = (("T1", "GB", (("a", 2, ""), ("b", 4, ""))),)
    assert renamed_key(key, {"T1": "U"}, {"a": "z", "b": "c"}) == (
        ("U", "GB", (("c", 4, ""), ("z", 2, ""))),
    )


def test_keys_renamed_together_are_each_renamed_alone():
    """Tensor keys shared by several keys are renamed once, the keys sorted again by
    their new tensor names (T2 becomes A: first)."""
    t1 = ("T1", "GB", (("a", 2, ""),))
    t2 = ("T2", "DRAM", (("b", 4, ""), ("a", 2, "")))
    keys = [(t1, t2), (t1,), (t2,), (t1, t2)]
    tensors, variables = {"T1": "U", "T2": "A"}, {"a": "z"}
    got = renamed_keys(keys, tensors, variables)
    assert got == [renamed_key(k, tensors, variables) for k in keys]
    assert got[0] == (("A", "DRAM", (("b", 4, ""), ("z", 2, ""))), ("U", "GB", (("z", 2, ""),)))


def _table(shared: list[str], prefixes: list[tuple], energy: list[float] | None = None):
    interner = PrefixInterner()
    seq = np.array([interner.intern(p) for p in prefixes], dtype=np.int64)
    fusion = SimpleNamespace(
        seq=seq, interner=interner, shared=frozenset(shared), top={t: "DRAM" for t in shared}
    )
    energy = energy or [0.0] * len(prefixes)
    return SimpleNamespace(fusion=fusion, energy=np.array(energy), latency=np.array(energy) * 10)


def _free(*keys) -> dict:
    """Check keys whose rows cost nothing (the semi-join on keys alone)."""
    return dict.fromkeys(keys, (0.0, 0.0))


def _workload(einsums: dict[str, tuple[list[str], list[str]]]):
    infos = {n: SimpleNamespace(tensors=t, rank_variables=v) for n, (t, v) in einsums.items()}
    return SimpleNamespace(einsum=infos.__getitem__)


def test_rows_no_other_user_can_meet_are_dropped_in_rounds():
    """A -T1-> B -T2-> C. B's check row ``b1`` backs T1 under m:8 then m:2 (A's check
    row ``a1`` does too) but T2 under loops no row of C has: dropped in round 1, and
    ``a1``, which only ``b1`` met, in round 2. ``b2`` meets A's table (T1 unfused) and
    C's (T2 under m:8): kept."""
    wl = _workload({
        "A": (["X", "T1"], ["m", "k"]),
        "B": (["T1", "T2"], ["m", "n"]),
        "C": (["T2", "Y"], ["m", "p"]),
    })  # fmt: skip
    tables = {
        "A": _table(["T1"], [()]),
        "B": _table(["T1", "T2"], [()]),
        "C": _table(["T2"], [(), (L("m", 8), B("T2", "GB"))]),
    }
    split = (L("m", 8), L("m", 2), B("T1", "GB"))
    a1 = order_free_keys(split, {"T1"}, TOP)
    b1 = order_free_keys((*split, L("n", 4), B("T2", "GB")), {"T1", "T2"}, TOP)
    b2 = order_free_keys((L("m", 8), L("m", 2), B("T2", "GB")), {"T1", "T2"}, TOP)
    b3 = order_free_keys((L("m", 8), B("T2", "GB"), L("m", 2)), {"T1", "T2"}, TOP)
    groups = {n: [n] for n in "ABC"}
    got = joinable(wl, groups, tables, {"A": _free(a1), "B": _free(b1, b2, b3)})
    assert got == {"A": {}, "B": {b3: (0.0, 0.0)}}
    assert b2 != b3  # b2's T2 sits under m:2 as well: C has no such row


def test_a_shared_table_keeps_a_row_one_of_its_einsums_can_use():
    """Q and K share one table (K renamed from Q). A row backing the input under
    ``k:4`` meets only what K's consumer holds, so it is kept for K's sake."""
    wl = _workload({
        "Q": (["I", "WQ", "Q"], ["m", "e"]),
        "K": (["I", "WK", "K"], ["m", "e"]),
        "S": (["Q", "K", "S"], ["m", "e"]),
    })  # fmt: skip
    tables = {
        "Q": _table(["I", "Q"], [()]),
        "K": _table(["I", "K"], [()]),
        "S": _table(["Q", "K"], [(), (L("m", 4), L("m", 2), B("K", "GB"))]),
    }
    row = order_free_keys((L("m", 2), L("m", 4), B("Q", "GB")), {"I", "Q"}, TOP)
    got = joinable(wl, {"Q": ["Q", "K"], "S": ["S"]}, tables, {"Q": _free(row)})
    assert set(got["Q"]) == {row}
    alone = joinable(wl, {"Q": ["Q"], "K": ["K"], "S": ["S"]}, tables, {"Q": _free(row)})
    assert alone == {"Q": {}}  # as Q's own row: S holds Q under nothing


def _pair(a_table: list[float], b_cost: float, a_cost: float = 3.0):
    """A -T1-> B, best 10 J, least A 1 J and B 2 J: A's allowance 8 J, B's 9 J. A's
    check key ``a1`` backs T1 under m:8, m:2 (its rows from ``a_cost`` J); A's table
    has T1 unfused, and under m:8, m:2 too if ``a_table`` has two costs. B's check
    key backs T1 alike, its rows from ``b_cost`` J (latencies: none for check
    rows, 10 s per J for table rows)."""
    wl = _workload({"A": (["X", "T1"], ["m", "k"]), "B": (["T1", "Y"], ["m", "n"])})
    split = (L("m", 8), L("m", 2), B("T1", "GB"))
    tables = {
        "A": _table(["T1"], [(), split][: len(a_table)], a_table),
        "B": _table(["T1"], [()], [2.0]),
    }
    a1 = order_free_keys(split, {"T1"}, TOP)
    found = {"A": {a1: (a_cost, 0.0)}, "B": {a1: (b_cost, 0.0)}}
    cuts = {"A": RowCut("energy", 8.0), "B": RowCut("energy", 9.0)}
    bound = CostBound(
        {"A": (1.0, 0.0), "B": (2.0, 0.0)}, lambda b, e, lat: cuts[b].keeps_one(e, lat)
    )
    return wl, {"A": ["A"], "B": ["B"]}, tables, found, bound, a1


def test_a_key_is_kept_only_if_its_least_row_fits_with_its_partners_least_row():
    """B's key costs 4 J, A's rows of that key 3 J (2 J above A's least): 4 + 2 <= 9 and
    3 + (4 - 2) <= 8, so both kept, each with 2 J the other costs beyond its least.
    At 7.5 J B's rows fit the plain allowance (9 J) but not with A's 2 J: dropped, and
    then A's key has no partner left (round 2)."""
    wl, groups, tables, found, bound, a1 = _pair([1.0], 4.0)
    assert joinable(wl, groups, tables, found, bound) == {
        "A": {a1: (2.0, 0.0)}, "B": {a1: (2.0, 0.0)},
    }  # fmt: skip
    wl, groups, tables, found, bound, a1 = _pair([1.0], 7.5)
    assert joinable(wl, groups, tables, found, bound) == {"A": {}, "B": {}}
    assert joinable(wl, groups, tables, found) == {"A": {a1: (0.0, 0.0)}, "B": {a1: (0.0, 0.0)}}


def test_a_partners_table_rows_of_the_key_count_too():
    """A's table has a row of the key at 1.5 J, below its check rows' 3 J: B's key then
    costs A at least 0.5 J beyond its least, and B's 7.5 J rows fit (8 <= 9)."""
    wl, groups, tables, found, bound, a1 = _pair([1.0, 1.5], 7.5)
    got = joinable(wl, groups, tables, found, bound)
    assert got["B"] == {a1: (0.5, 15.0)}  # latency: no least to subtract


def test_energy_and_latency_are_raised_each_by_the_partners_least():
    """The cut sees the key's least energy and latency, each raised by the partner's
    least of its rows of that key beyond the partner's least (latencies: 10 x energies)."""
    wl, groups, tables, found, _, a1 = _pair([1.0], 4.0)
    found = {"A": {a1: (3.0, 25.0)}, "B": {a1: (4.0, 50.0)}}
    seen = []
    bound = CostBound(
        {"A": (1.0, 5.0), "B": (2.0, 20.0)}, lambda b, e, lat: not seen.append((b, e, lat))
    )
    got = joinable(wl, groups, tables, found, bound)
    assert got == {"A": {a1: (2.0, 30.0)}, "B": {a1: (2.0, 20.0)}}
    assert sorted(seen) == [("A", 5.0, 55.0), ("B", 6.0, 70.0)]


ENTRIES = [
    L("m", 8), L("n", 4), L("m", 2), L("n", SpatialTile(4, "PE.X")), B("T1", "GB"),
    B("T2", "GB"), B("I", "GB"), B("T1", "DRAM"), MarkEntry.of("W", "GB"),
    BackingEntry.of(HOSTING, "GB"),
]  # fmt: skip
KEY_OPS = st.lists(
    st.tuples(
        st.sampled_from(["extend", "intern", "ask"]),
        st.lists(st.sampled_from(ENTRIES), max_size=3),
        st.integers(0, 1 << 16),
    ),
    max_size=30,
)


@settings(max_examples=300, deadline=None)
@given(KEY_OPS)
def test_keys_along_the_trie_are_the_keys_of_the_whole_prefixes(ops):
    """Asked in any order while the interner grows (each id's key memoized from its
    parent's), every id's key is :func:`order_free_keys` of its whole prefix."""
    p = PrefixInterner()
    keys = OrderFreeKeys(p, {"T1", "T2"}, TOP)
    asked = {}
    for op, entries, pick in ops:
        if not grow(p, op, entries, pick):
            q = pick % len(p.prefixes)
            asked[q] = keys(q)
    for q in [*asked, *range(len(p.prefixes))]:
        assert keys(q) == order_free_keys(p.prefixes[q], {"T1", "T2"}, TOP)
    assert all(keys(q) == key for q, key in asked.items())
    every = OrderFreeKeys(p, {"T1", "T2"}, TOP)  # all at once, deepest ids first
    got = every.indices(np.arange(len(p.prefixes))[::-1])[::-1]
    assert [every.keys[k] for k in got.tolist()] == [keys(q) for q in range(len(p.prefixes))]
    assert len(set(every.keys)) == len(every.keys), "each key numbered once"
