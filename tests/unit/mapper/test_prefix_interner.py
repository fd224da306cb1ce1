"""The prefix interner: ids built token by token (``extend``, as the tile-shape search
does) are the ids of the whole prefixes in canonical form, hosting marks included."""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import pytest
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
from tests.support.interner_ops import grow

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


@contextmanager
def arrays_from(n: int):
    """Batches of at least ``n`` ids worked out as arrays (0: all of them), inside."""
    from fusemap.mapper.space import interner

    before, interner.BATCH_FROM = interner.BATCH_FROM, n
    try:
        yield
    finally:
        interner.BATCH_FROM = before


@pytest.mark.parametrize("batch_from", [0, 64])
@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([M_, N_, A_, C_, W_, ("back", HOSTING, "GB")]), max_size=8))
def test_unmarked_is_the_prefix_without_marks(batch_from, tokens):
    with arrays_from(batch_from):
        _unmarked_drops_the_marks(tokens)


def _unmarked_drops_the_marks(tokens) -> None:
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
        st.sampled_from(["extend", "intern", "settled", "unmarked", "pickle", "keep", "forget"]),
        st.lists(st.sampled_from([M_, N_, A_, C_, W_, ("back", HOSTING, "GB")]), max_size=3),
        st.integers(0, 1 << 16),
    ),
    max_size=25,
)


@pytest.mark.parametrize("batch_from", [0, 64])
@settings(max_examples=300, deadline=None)
@given(OPS)
def test_ids_and_prefixes_match_one_to_one(batch_from, ops):
    """Whatever mix of extending by runs of entries, interning whole prefixes, settling,
    dropping marks, a round trip through pickle (children rebuilt), keeping only some
    prefixes (:meth:`kept_only`, each keeping its prefix) and forgetting the newest
    (:meth:`forget_from`, the memos with them; the ids given again) made them, two
    ids are equal exactly when their prefixes are, and each id's prefix is canonical
    (settled and unmarked as arrays, or one id at a time)."""
    with arrays_from(batch_from):
        _ids_and_prefixes_match(ops)


def _ids_and_prefixes_match(ops) -> None:
    import pickle

    p = PrefixInterner()
    for op, tokens, pick in ops:
        if grow(p, op, tokens, pick):
            continue
        if op in ("settled", "unmarked"):
            getattr(p, op)(np.array([pick % len(p.prefixes)]))
        elif op == "forget":
            _forget_the_newest(p, 1 + pick % len(p))
        elif op == "keep":
            ids = np.array([q for q in range(len(p)) if pick >> (q % 17) & 1], dtype=np.int64)
            other = PrefixInterner()  # some of the ancestors there already, other ids
            for q in ids[::-1][:3].tolist():
                other.intern(p.prefixes[q][: len(p.prefixes[q]) // 2])
            got = p.copied_into(ids, other)
            assert [other.prefixes[q] for q in got.tolist()] == [p.prefixes[q] for q in ids]
            assert all(other.intern(other.prefixes[q]) == q for q in range(len(other)))
            kept, new = p.kept_only(ids, PrefixInterner())
            assert [kept.prefixes[q] for q in new.tolist()] == [p.prefixes[q] for q in ids]
            ancestors = {x[:i] for x in (p.prefixes[q] for q in ids) for i in range(len(x) + 1)}
            assert len(kept) <= len(ancestors) + 1  # the ids' prefixes and their ancestors
            p = kept
        else:
            p = pickle.loads(pickle.dumps(p))
    every = [p.prefixes[q] for q in range(len(p.prefixes))]
    assert len(set(every)) == len(every)
    assert all(x == canonical(x) for x in every)
    assert all(p.intern(x) == q for q, x in enumerate(every))
    loops = [[e[1] for e in x if e[0] == "loop"] for x in every]
    split = [len(set(v)) < len(v) for v in loops]
    assert p.splits_a_variable(np.arange(len(every))).tolist() == split
    assert p.loop_counts(np.arange(len(every))[::-1]).tolist() == [len(v) for v in loops[::-1]]
    _compatibility_as_read_from_each_prefix(p, every)
    settled = p.settled(np.arange(len(every)))
    unmarked = p.unmarked(np.arange(len(every)))
    for q, x in enumerate(every):
        plain = canonical(tuple(e for e in x if e[0] != MARK))
        runs = "".join("L" if e[0] == "loop" else "|" for e in x).split("|")
        kept = plain if max(map(len, runs)) < 2 else x  # marks go where no gap holds two
        assert p.prefixes[int(settled[q])] == kept
        assert p.prefixes[int(unmarked[q])] == plain


def test_forgotten_ids_leave_no_answer_behind():
    """The memos forget with the prefixes: an older prefix's unmarked id that was
    forgotten is worked out again, and a forgotten id given again answers for its new
    prefix, not its old one."""
    p = PrefixInterner()
    marked = p.intern((M_, W_, N_))
    size = len(p)
    unmarked = int(p.unmarked(np.array([marked]))[0])  # a new id: (M_, N_)
    deep = p.intern((M_, N_, A_, M_))
    assert unmarked >= size and p.loop_counts(np.array([unmarked, deep])).tolist() == [2, 3]
    p.forget_from(size)
    assert p.intern((C_,)) == unmarked  # the forgotten id given again
    assert p.loop_counts(np.array([unmarked])).tolist() == [0]
    again = int(p.unmarked(np.array([marked]))[0])
    assert again != unmarked and p.prefixes[again] == (M_, N_)


def _forget_the_newest(p: PrefixInterner, size: int) -> None:
    """``p.forget_from(size)``: the older prefixes stay as they were, and whoever
    asked is told."""
    before, older, told = len(p), p.prefixes[:size], []
    p.when_forgetting(told.append)
    p.forget_from(size)
    assert len(p) == min(size, before) and p.prefixes[:] == older
    assert told == ([size] if size < before else [])


def _compatibility_as_read_from_each_prefix(p: PrefixInterner, every: list) -> None:
    """Per tensor a node holds, the last such node's memory and the loops above it;
    the top memory, no loop, for the others."""
    shared = frozenset({e[1] for x in every for e in x if e[0] != "loop"} | {"unused"})
    top = {t: "top" for t in shared}
    for q in range(len(every)):
        loops: list = []
        held: dict = {}
        for e in every[q]:
            if e[0] == "loop":
                loops.append((e[1], e[2]))
            else:
                held[e[1]] = (e[1], e[2], tuple(loops))
        want = [held.get(t, (t, "top", ())) for t in sorted(shared)]
        assert [tuple(c) for c in p.compatibility(q, shared, top)] == want


@pytest.mark.parametrize("variables", [29, 31, 70])
def test_a_split_is_found_past_the_bits_of_an_integer(variables):
    """With more rank variables than an id-sized integer has bits (30 are kept), a
    prefix still tells whether two of its loops share one (read from the prefix
    itself)."""
    p = PrefixInterner()
    many = tuple(("loop", f"v{k}", 2) for k in range(variables))
    once = p.intern(many + (A_,))
    twice = p.intern(many + (A_, ("loop", f"v{variables - 1}", 1)))
    early = p.intern((("loop", "v0", 4), A_, ("loop", "v0", 2)))
    assert p.splits_a_variable(np.array([once, twice, early, 0])).tolist() == [
        False, True, True, False,
    ]  # fmt: skip


def test_a_trie_past_its_most_ids_is_refused(monkeypatch):
    """Ids are 4-byte integers: a search that would intern more prefixes than they
    can number is refused with a user error (one prefix at a time or a batch of
    them), not left to wrap around."""
    from fusemap.mapper.space import interner, trie
    from fusemap.spec.errors import FusemapError

    monkeypatch.setattr(trie, "MOST_IDS", 4)
    p = PrefixInterner()
    p.intern((A_,))
    with pytest.raises(FusemapError, match="more than 4 fused prefixes"):
        p.intern((("loop", "m", 2), A_, ("loop", "n", 2), C_))
    monkeypatch.setattr(interner, "BATCH_FROM", 1)  # the batch as arrays
    q = PrefixInterner()
    with pytest.raises(FusemapError, match="more than 4 fused prefixes"):
        entries = [(("loop", "m", k),) for k in range(1, 6)]
        q.extend(np.zeros(5, dtype=np.int64), entries, np.arange(5))


BATCHES = st.lists(
    st.tuples(
        st.lists(st.integers(0, 1 << 16), min_size=1, max_size=8),
        st.lists(
            st.lists(st.sampled_from([M_, N_, A_, C_, W_, ("back", HOSTING, "GB")]), max_size=3),
            min_size=1,
            max_size=3,
        ),
    ),
    max_size=12,
)


@settings(max_examples=300, deadline=None)
@given(BATCHES, st.sampled_from([(0, 0), (4, 0), (1 << 20, 0), (4, 64)]))
def test_a_batch_extends_each_row_as_the_whole_prefix_would(batches, knobs):
    """Rows of one batch (repeated prefixes and entries, steps kept whole or not, a
    pickle round trip between batches) get the ids of their whole prefixes; children
    in arrays from the start, soon, or never; batches as arrays or row by row."""
    from fusemap.mapper.space import child_index, interner

    before = child_index.RECENT_UP_TO, interner.BATCH_FROM
    child_index.RECENT_UP_TO, interner.BATCH_FROM = knobs
    try:
        _batches_give_whole_ids(batches)
    finally:
        child_index.RECENT_UP_TO, interner.BATCH_FROM = before


def _batches_give_whole_ids(batches) -> None:
    import pickle

    p = PrefixInterner()
    none = np.zeros(0, dtype=np.int64)
    assert p.extend(none, [], none).tolist() == p.extend(none, [(M_,)], none).tolist() == []
    for k, (picks, entries) in enumerate(batches):
        ids = np.array([q % len(p) for q in picks])
        which = np.array([q % len(entries) for q in picks])
        got = p.extend(ids, [tuple(e) for e in entries], which)
        for q, w, g in zip(ids.tolist(), which.tolist(), got.tolist(), strict=True):
            assert p.prefixes[g] == canonical(p.prefixes[q] + tuple(entries[w]))
        if k % 3 == 2:
            p = pickle.loads(pickle.dumps(p))
    every = [p.prefixes[q] for q in range(len(p))]
    assert len(set(every)) == len(every)
    assert all(p.intern(x) == q for q, x in enumerate(every))
    loops = [[e[1] for e in x if e[0] == "loop"] for x in every]
    assert p.splits_a_variable(np.arange(len(every))).tolist() == [
        len(set(v)) < len(v) for v in loops
    ]


KEYS = st.one_of(
    st.integers(0, 60),  # close together
    st.integers(0, 60).map(lambda k: k << 40),  # one low part: the same first slot, often
    st.integers(0, (1 << 62) - 1),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.lists(KEYS, max_size=40))))
def test_the_child_index_answers_as_a_dict(ops):
    """Keys added in batches or one at a time, looked up in batches or one at a time,
    as a dict would: merged into the arrays at once, soon, or never; keys that share
    their first slot in the hash table probe past each other."""
    from fusemap.mapper.space import child_index

    up_to = child_index.RECENT_UP_TO
    try:
        for child_index.RECENT_UP_TO in (0, 5, 1 << 20):
            _answer_as_a_dict(child_index.ChildIndex(), {}, ops)
    finally:
        child_index.RECENT_UP_TO = up_to


def _answer_as_a_dict(index, plain: dict, ops) -> None:
    for one_by_one, keys in ops:
        new = sorted(set(keys) - set(plain))
        if one_by_one:
            for k in new:
                plain[k] = len(plain)
                index.add_one(k, plain[k])
        else:
            ids = list(range(len(plain), len(plain) + len(new)))
            plain.update(zip(new, ids, strict=True))
            index.add(np.array(new, dtype=np.int64), np.array(ids, dtype=np.int64))
        asked = np.array(keys, dtype=np.int64)
        assert index.find(asked).tolist() == [plain.get(k, -1) for k in keys]
        assert [index.get(k) for k in keys] == [plain.get(k) for k in keys]
    assert len(index) == len(plain)


LAYOUT_LOOPS = st.lists(st.sampled_from(["m", "n", "k"]), min_size=1, max_size=3)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(LAYOUT_LOOPS, min_size=1, max_size=3),  # runs of loops, a node after each
    st.lists(st.integers(0, 3), min_size=1, max_size=6),  # each prefix's tiles
    st.lists(st.integers(0, 3), min_size=1, max_size=3),  # per order: runs left alone
    st.randoms(use_true_random=False),
    st.booleans(),
)
def test_reordering_many_prefixes_gives_each_ones_id(runs, tiles, kept, rnd, other_layout):
    """Prefixes of one layout, their loops permuted within each run (as the loop orders
    of a gap permute them; several orders at once, each leaving its first runs as they
    are, each prefix in one of them), get the ids of the permuted prefixes interned
    whole; with a prefix of another layout among them (its first node first), each is
    reordered alone, with the same result."""
    p = PrefixInterner()
    prefixes = []
    for t in tiles:
        entries: list = []
        for i, run in enumerate(runs):
            entries += [("loop", v, 2 + (t + i + k) % 3) for k, v in enumerate(run)]
            entries.append(("back", f"T{i}", "GB"))
        prefixes.append(tuple(entries))
    if other_layout:
        first = len(runs[0])  # the first node's place
        x = prefixes[0]
        prefixes.append((x[first],) + x[:first] + x[first + 1 :])
    srcs = []
    for alone in kept:
        src, at = [], 0
        for i, run in enumerate(runs):
            local = list(range(at, at + len(run)))
            if i >= alone:
                rnd.shuffle(local)
            src += local + [at + len(run)]
            at += len(run) + 1
        srcs.append(src)
    ids = np.array([p.intern(x) for x in prefixes])
    which = np.array([rnd.randrange(len(srcs)) for _ in prefixes])
    got = p.reordered(ids, srcs, which)
    for x, k, g in zip(prefixes, which.tolist(), got.tolist(), strict=True):
        want = tuple(x[i] for i in srcs[k])
        assert g == p.intern(want)
        assert p.prefixes[g] == as_entries(want)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 40), max_size=30), max_size=8),
    st.sampled_from([0, 3, 1 << 20]),
)
def test_child_index_finds_or_adds_keys_as_a_dict_would(batches, recent_up_to):
    """Each batch's keys get the ids a dict gives them (new ones numbered in the order
    they first come), whether the index merges its table into its arrays early or not."""
    from fusemap.mapper.space import child_index

    before = child_index.RECENT_UP_TO
    child_index.RECENT_UP_TO = recent_up_to
    try:
        index, expected = child_index.ChildIndex(), {}
        for batch in batches:
            keys = np.array(batch, dtype=np.int64)
            start = 100 + len(expected)
            ids, added = index.find_or_add(keys, start)
            fresh = list(dict.fromkeys(k for k in batch if k not in expected))
            expected.update({k: start + i for i, k in enumerate(fresh)})
            assert ids.tolist() == [expected[k] for k in batch]
            assert added.tolist() == fresh
            assert len(index) == len(expected)
            assert index.find(np.array(sorted(expected), dtype=np.int64)).tolist() == [
                expected[k] for k in sorted(expected)
            ]
    finally:
        child_index.RECENT_UP_TO = before
