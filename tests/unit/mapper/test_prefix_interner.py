"""The prefix interner: ids built token by token (``extend``, as the tile-shape search
does) are the ids of the whole prefixes in canonical form, hosting marks included."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fusemap.mapper.space.interner import PrefixInterner
from fusemap.mapper.space.prefix import (
    HOSTING,
    MARK,
    BackingEntry,
    LoopEntry,
    MarkEntry,
    as_entries,
    canonical,
)

TOKENS = [
    ("loop", "m", 4),
    ("loop", "n", 2),
    ("back", "T1", "GB"),
    ("back", "T2", "GB"),
    ("back", HOSTING, "GB"),
]


def test_a_mark_goes_first_in_its_run_of_nodes():
    run = (("loop", "m", 4), ("back", "T1", "GB"), ("back", HOSTING, "GB"))
    assert canonical(run) == (("loop", "m", 4), ("back", HOSTING, "GB"), ("back", "T1", "GB"))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(0, len(TOKENS) - 1), min_size=1, max_size=2), max_size=6))
def test_extending_token_by_token_gives_the_whole_prefixes_id(steps):
    grown, whole = PrefixInterner(), PrefixInterner()
    ids = np.zeros(1, dtype=np.int64)
    prefix: tuple = ()
    for step in steps:
        tokens = tuple(TOKENS[k] for k in step)
        ids = grown.extend(ids, [tokens], np.zeros(1, dtype=np.int64))
        prefix += tokens
        assert grown.prefixes[int(ids[0])] == canonical(prefix)
        assert grown.prefixes[whole.intern(prefix)] == whole.prefixes[whole.intern(prefix)]
        assert grown.intern(prefix) == int(ids[0])


M_ = ("loop", "m", 4)
N_ = ("loop", "n", 2)
A_ = ("back", "A", "GB")
C_ = ("back", "C", "GB")
W_ = (MARK, "W", "GB")


def test_marks_stay_only_where_a_gap_holds_two_loops():
    """Own node W among the fused loops: ``m, n`` both above W (one gap of two loops,
    whose orders are added later) is kept apart from ``m`` above W and ``n`` below it
    (two gaps of one loop); once the orders are in, the marks go."""
    p = PrefixInterner()
    both_above = p.intern((A_, M_, N_, W_, C_))
    split = p.intern((A_, M_, W_, N_, C_))
    settled = p.settled(np.array([both_above, split, both_above]))
    assert p.prefixes[int(settled[0])] == (A_, M_, N_, W_, C_)  # kept: a gap of two
    assert p.prefixes[int(settled[1])] == (A_, M_, N_, C_)  # dropped: no order to add
    assert settled[2] == settled[0]
    plain = p.unmarked(np.array([both_above, split]))
    assert plain[0] == plain[1] == p.intern((A_, M_, N_, C_))
    assert p.loop_counts(np.array([both_above, split, 0])).tolist() == [2, 2, 0]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([M_, N_, A_, C_, W_, ("back", HOSTING, "GB")]), max_size=8))
def test_unmarked_is_the_prefix_without_marks(tokens):
    p = PrefixInterner()
    q = p.intern(tuple(tokens))
    want = p.intern(tuple(t for t in tokens if t[0] != MARK))
    assert int(p.unmarked(np.array([q]))[0]) == want
    settled = p.prefixes[int(p.settled(np.array([q]))[0])]
    assert sum(t[0] == "loop" for t in settled) == sum(t[0] == "loop" for t in tokens)


def test_entries_are_the_tuples_they_replace():
    """Typed entries hash, compare and sort as the plain tuples ``(kind, ...)``: the
    interner turns plain tuples into them, and ids stay the same."""
    loop, back, mark = LoopEntry.of("m", 4), BackingEntry.of("A", "GB"), MarkEntry.of("W", "GB")
    assert (loop, back, mark) == (M_, A_, W_)
    assert [hash(e) for e in (loop, back, mark)] == [hash(t) for t in (M_, A_, W_)]
    assert sorted([back, loop, mark]) == sorted([A_, M_, W_])
    assert as_entries((M_, A_, W_)) == (loop, back, mark)
    assert [type(e) for e in as_entries((M_, A_, W_))] == [LoopEntry, BackingEntry, MarkEntry]
    p = PrefixInterner()
    ids = p.extend(np.zeros(1, dtype=np.int64), [(M_, A_)], np.zeros(1, dtype=np.int64))
    assert p.intern((loop, back)) == int(ids[0])
    assert [type(e) for e in p.prefixes[int(ids[0])]] == [LoopEntry, BackingEntry]
    assert p.prefixes[int(ids[0])][0].var == "m" and p.prefixes[int(ids[0])][1].memory == "GB"
    assert back.renamed({"A": "B"}, {}) == BackingEntry.of("B", "GB")
    assert loop.renamed({}, {"m": "p"}) == LoopEntry.of("p", 4)


OPS = st.lists(
    st.tuples(
        st.sampled_from(["extend", "intern", "settled", "unmarked", "pickle"]),
        st.lists(st.sampled_from([M_, N_, A_, C_, W_, ("back", HOSTING, "GB")]), max_size=3),
        st.integers(0, 1 << 16),
    ),
    max_size=25,
)


@settings(max_examples=300, deadline=None)
@given(OPS)
def test_ids_and_prefixes_match_one_to_one(ops):
    """Whatever mix of extending by runs of entries, interning whole prefixes, settling,
    dropping marks and a round trip through pickle (children rebuilt) made them, two
    ids are equal exactly when their prefixes are, and each id's prefix is canonical."""
    import pickle

    p = PrefixInterner()
    for op, tokens, pick in ops:
        q = pick % len(p.prefixes)
        if op == "extend":
            p.extend(np.array([q]), [tuple(tokens)], np.zeros(1, dtype=np.int64))
        elif op == "intern":
            p.intern(p.prefixes[q] + tuple(tokens))
        elif op in ("settled", "unmarked"):
            getattr(p, op)(np.array([q]))
        else:
            p = pickle.loads(pickle.dumps(p))
    every = [p.prefixes[q] for q in range(len(p.prefixes))]
    assert len(set(every)) == len(every)
    assert all(x == canonical(x) for x in every)
    assert all(p.intern(x) == q for q, x in enumerate(every))
    loops = [[e[1] for e in x if e[0] == "loop"] for x in every]
    split = [len(set(v)) < len(v) for v in loops]
    assert p.splits_a_variable(np.arange(len(every))).tolist() == split
    settled = p.settled(np.arange(len(every)))
    unmarked = p.unmarked(np.arange(len(every)))
    for q, x in enumerate(every):
        plain = canonical(tuple(e for e in x if e[0] != MARK))
        runs = "".join("L" if e[0] == "loop" else "|" for e in x).split("|")
        kept = plain if max(map(len, runs)) < 2 else x  # marks go where no gap holds two
        assert p.prefixes[int(settled[q])] == kept
        assert p.prefixes[int(unmarked[q])] == plain


def test_a_split_is_found_past_the_bits_of_an_integer():
    """With more rank variables than an integer has bits, a prefix still tells whether
    two of its loops share one (read from the prefix itself)."""
    p = PrefixInterner()
    many = tuple(("loop", f"v{k}", 2) for k in range(70))
    once = p.intern(many + (A_,))
    twice = p.intern(many + (A_, ("loop", "v69", 1)))
    early = p.intern((("loop", "v0", 4), A_, ("loop", "v0", 2)))
    assert p.splits_a_variable(np.array([once, twice, early, 0])).tolist() == [
        False, True, True, False,
    ]  # fmt: skip
