"""Integer ids for fused prefixes (:mod:`.prefix`): the tile-shape search keeps rows of
different prefixes apart by them, and tables refer to their prefixes by them."""

from __future__ import annotations

from array import array
from collections.abc import Sequence

import numpy as np

from ..distinct import distinct_values, first_codes, sorted_distinct
from .prefix import (
    BACK,
    LOOP,
    MARK,
    Compatibility,
    Prefix,
    as_entries,
    canonical,
)
from .trie import (
    GAP_OF_TWO,
    LAST_LOOP,
    LOOPS_STEP,
    MARKED,
    NODE_STEP,
    SPLIT,
    STEPS,
    WIDE,
    PrefixTrie,
    step_kind,
)


class PrefixInterner(PrefixTrie):
    """Integer ids for fused prefixes (id 0 is the empty prefix), kept in a
    :class:`~.trie.PrefixTrie`: prefixes interned whole, extended a step at a time,
    settled, unmarked and reordered, for one row or many at once."""

    def intern(self, prefix: tuple) -> int:
        """The id of ``prefix`` (new ids for new prefixes; see :func:`canonical`)."""
        return self._intern_canonical(canonical(prefix))

    def splits_a_variable(self, ids: np.ndarray) -> np.ndarray:
        """Whether each prefix of ``ids`` has two loops over one rank variable."""
        ids = np.asarray(ids, dtype=np.int64)
        flags = np.frombuffer(self._flags, dtype=np.uint8)[ids]
        out = (flags & SPLIT) > 0
        for i in np.flatnonzero(flags & WIDE).tolist():  # too many variables for the bits
            out[i] = _split(self.prefixes[int(ids[i])])
        return out

    def loop_counts(self, ids: np.ndarray) -> np.ndarray:
        """Number of loops of each prefix ``ids``."""
        return self._summed_along("_loops", ids, self._step_loops())

    def settled(self, ids: np.ndarray) -> np.ndarray:
        """Prefixes ``ids``, complete (their deepest fused node reached), with their
        :data:`MARK` entries dropped when no gap (a run of loops between two nodes)
        holds two loops: such a row has one loop order, so where its loops lie around
        its own nodes no longer matters."""
        ids = np.asarray(ids, dtype=np.int64)
        flags = np.frombuffer(self._flags, dtype=np.uint8)[ids]
        settle = (flags & (MARKED | GAP_OF_TWO)) == MARKED
        out = ids.copy()
        out[settle] = self.unmarked(ids[settle])
        return out

    def unmarked(self, ids: np.ndarray) -> np.ndarray:
        """The ids of prefixes ``ids`` without their :data:`MARK` entries.

        Worked out from each one's nearest ancestor's along the trie, all of them a
        level at a time (a mark step leaves it as it was, a run of loops right after
        another joins it in one step, another step extends it, as arrays where it is
        one step down: :meth:`_extended`), and memoized per id: the check of several
        fused loops per rank variable settles millions of prefixes (one at a time, 11%
        of GPT-3's QK check at batch 64)."""
        ids = np.asarray(ids, dtype=np.int64)
        marked = (np.frombuffer(self._flags, dtype=np.uint8)[ids] & MARKED) > 0
        asked = sorted_distinct(ids[marked])
        unknown = asked[self._memo("_unmarked", len(self))[asked] < 0]
        if len(unknown) < BATCH_FROM:  # a few: one at a time costs less than the arrays
            for q in unknown.tolist():
                self._unmark(q)
            unknown = unknown[:0]
        todo = self._unworked_marked(unknown)
        while len(todo):  # a level: the ids whose parents are worked out
            parents = self._parent_view()[todo]
            waiting = self._unmarked_of(parents) < 0
            self._memo("_unmarked", len(self))[todo[~waiting]] = self._unmark_steps(
                todo[~waiting], self._unmarked_of(parents[~waiting])
            )
            todo = todo[waiting]
        out = ids.copy()
        out[marked] = self._unmarked_of(ids[marked])
        return out

    def _unmark(self, q: int) -> int:
        """:meth:`unmarked` of one id (its unworked ancestors walked in Python)."""
        memo = self._memo("_unmarked", q + 1)
        path = []
        while self._flags[q] & MARKED and memo[q] < 0:
            path.append(q)
            q = self._parent[q]
        u = int(memo[q]) if self._flags[q] & MARKED else q
        for p in reversed(path):
            u = memo[p] = self._unmark_step(u, self._step[p])
        return u

    def _unmark_step(self, u: int, step: int) -> int:
        """Unmarked prefix ``u`` followed by step ``step``, its marks dropped: a mark
        step leaves it as it was, a run of loops right after another joins it in one
        step, another step extends it (:meth:`_extended`, which keeps it canonical)."""
        entries = self._steps[step]
        kind = step_kind(entries)
        if kind == LOOPS_STEP and u > 0 and self._step_last[self._step[u]] == LAST_LOOP:
            merged = self._steps[self._step[u]] + entries  # loops after loops: one run
            return self._child(self._parent[u], self._step_id(merged))
        if entries[0].kind == MARK:
            return u
        return self._extended(u, entries, kind, step)

    def _unmarked_of(self, ids: np.ndarray) -> np.ndarray:
        """Each id unmarked: itself if it holds no mark, else its memo (-1: not yet)."""
        marked = (np.frombuffer(self._flags, dtype=np.uint8)[ids] & MARKED) > 0
        return np.where(marked, self._memo("_unmarked", len(self))[ids], ids)

    def _unworked_marked(self, ids: np.ndarray) -> np.ndarray:
        """Marked ids ``ids`` (their unmarked ids not known) and their ancestors whose
        unmarked id is not known."""
        found, frontier = [], ids
        while len(frontier):
            found.append(frontier)
            parents = self._parent_view()[frontier]
            frontier = sorted_distinct(parents[self._unmarked_of(parents) < 0])
        return sorted_distinct(np.concatenate(found)) if found else ids[:0]

    def _unmark_steps(self, ids: np.ndarray, under: np.ndarray) -> np.ndarray:
        """The unmarked ids of ``ids``, whose parents' unmarked ids are ``under``."""
        _, steps = self.parents_and_steps(ids)
        distinct, inverse = np.unique(steps, return_inverse=True)
        kinds = [step_kind(self._steps[k]) for k in distinct.tolist()]
        kind = np.array(kinds, dtype=np.int64)[inverse.ravel()]
        mark = (kind == NODE_STEP) & (
            (np.frombuffer(self._step_flags, dtype=np.int64)[steps] & MARKED) > 0
        )
        last = np.frombuffer(self._step_last, dtype=np.uint8)[self._step_view()[under]]
        join = (kind == LOOPS_STEP) & (under > 0) & (last == LAST_LOOP)
        out = under.copy()  # a mark step: as its parent
        if join.any():  # loops after loops (a mark between them dropped): one run, one step
            grand, above = self.parents_and_steps(under[join])
            pairs, which = np.unique(above * STEPS + steps[join], return_inverse=True)
            merged = [self._step_id(self._steps[a // STEPS] + self._steps[a % STEPS])
                      for a in pairs.tolist()]  # fmt: skip
            out[join] = self._children_of(grand, np.array(merged, dtype=np.int64)[which.ravel()])
        rest = np.flatnonzero(~mark & ~join)
        one = self._one_step(under[rest], kind[rest], steps[rest])
        out[rest[one]] = self._children_of(under[rest[one]], steps[rest[one]])
        for i in rest[~one].tolist():
            out[i] = self._unmark_step(int(under[i]), int(steps[i]))
        return out

    def intern_reordered(self, prefix: tuple) -> int:
        """The id of ``prefix``, an interned prefix with loops permuted in place (its
        runs of backing nodes unchanged, so it is canonical too)."""
        return self._intern_canonical(as_entries(prefix))

    def reordered(
        self, ids: np.ndarray, srcs: Sequence[Sequence[int]], which: np.ndarray | None = None
    ) -> np.ndarray:
        """The ids of prefixes ``ids``, prefix ``ids[r]`` with its entry at position
        ``src[i]`` moved to position ``i`` (``src = srcs[which[r]]``; ``which`` None: all
        the first): loops permuted within their runs (:meth:`intern_reordered` of each).

        The prefixes are grouped by layout (their steps' lengths; a permutation is of
        positions in one layout), and each group worked out a step at a time, each row
        from its deepest ancestor no permutation changes: each distinct (step,
        permutation) once, each level's children looked up and added as arrays (prefix
        by prefix, from the root, this was 15% of GPT-3's run at batch 64, 64 tokens,
        and then the orders of few prefixes at a time 47% of its second searches: all
        the orders a prune needs come in one call)."""
        ids = np.asarray(ids, dtype=np.int64)
        which = np.zeros(len(ids), dtype=np.int64) if which is None else np.asarray(which)
        out = np.empty(len(ids), dtype=np.int64)
        if not len(ids):
            return out
        layouts = self._layout_codes(ids)
        order = np.argsort(layouts, kind="stable")
        cuts = np.flatnonzero(np.diff(layouts[order])) + 1
        for rows in np.split(order, cuts):  # rows of one layout
            out[rows] = self._reordered_alike(ids[rows], srcs, which[rows])
        return out

    def _reordered_one_at_a_time(
        self, ids: np.ndarray, srcs: Sequence[Sequence[int]], which: np.ndarray
    ) -> np.ndarray:
        """:meth:`reordered`, prefix by prefix (a permutation that is not within the
        prefixes' steps)."""
        got = [
            self.intern_reordered(tuple(self.prefix(q)[i] for i in srcs[k]))
            for q, k in zip(ids.tolist(), which.tolist(), strict=True)
        ]
        return np.array(got, dtype=np.int64)

    def _layout_codes(self, ids: np.ndarray) -> np.ndarray:
        """One code per layout (the lengths of a prefix's steps, root first) of ``ids``."""
        lengths = np.frombuffer(self._step_length(), dtype=np.int64)
        codes, q = np.zeros(len(ids), dtype=np.int64), ids.copy()
        while (q > 0).any():  # each level's length (0 past the root) appended
            live = np.flatnonzero(q > 0)
            q[live], steps = self.parents_and_steps(q[live])
            here = np.zeros(len(ids), dtype=np.int64)
            here[live] = lengths[steps]
            codes = first_codes(codes * (int(here.max()) + 1) + here)[0]
        return codes

    def _reordered_alike(
        self, ids: np.ndarray, srcs: Sequence[Sequence[int]], which: np.ndarray
    ) -> np.ndarray:
        """:meth:`reordered` of prefixes of one layout."""
        walked = self._steps_up(ids)
        assert walked is not None, "one layout"
        levels, ancestors = walked
        widths = [len(self._steps[int(st[0])]) for st in levels]
        starts = np.cumsum([0, *widths])
        used, which = np.unique(which, return_inverse=True)  # the srcs these rows take
        which = which.ravel()
        srcs = [srcs[k] for k in used.tolist()]
        if any(len(src) != starts[-1] for src in srcs):
            return self._reordered_one_at_a_time(ids, srcs, which)
        local = [  # per src, per level: its permutation of the level's step
            [
                tuple(src[a + i] - a for i in range(n))
                for a, n in zip(starts[:-1].tolist(), widths, strict=True)
            ]
            for src in srcs
        ]
        if any(sorted(p) != list(range(len(p))) for per in local for p in per):
            return self._reordered_one_at_a_time(ids, srcs, which)  # not within steps
        moves = np.array(
            [[perm != tuple(range(len(perm))) for perm in per] + [True] for per in local]
        )
        first = moves.argmax(axis=1)[which]  # the first level each row's src changes
        out = np.zeros(len(ids), dtype=np.int64)
        for lv, steps in enumerate(levels):
            out[first == lv] = ancestors[lv][first == lv]
            rows = np.flatnonzero(first <= lv)
            if not len(rows):
                continue
            steps = steps[rows].copy()
            ks = which[rows]
            m = np.flatnonzero(moves[ks, lv])
            if len(m):  # each distinct (step, permutation) worked out once
                pair, _, inverse = distinct_values(steps[m] * len(srcs) + ks[m])
                step_of, k_of = np.divmod(pair, len(srcs))
                moved = [
                    self._permuted_step(x, local[k][lv])
                    for x, k in zip(step_of.tolist(), k_of.tolist(), strict=True)
                ]
                steps[m] = np.array(moved, dtype=np.int64)[inverse]
            pairs, _, inverse = distinct_values(out[rows] * STEPS + steps)  # rows share them
            out[rows] = self._children_of(pairs // STEPS, pairs % STEPS)[inverse]
        unchanged = first == len(levels)
        out[unchanged] = ids[unchanged]
        return out

    def _steps_up(self, ids: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]] | None:
        """The step ids of prefixes ``ids`` per level, root first, if they all have as
        many steps, of the same lengths, level by level (else None); and per level, the
        ids of their ancestors above that level's step."""
        lengths = np.frombuffer(self._step_length(), dtype=np.int64)
        levels, above, q = [], [], ids
        while len(q) and (q > 0).any():
            if not (q > 0).all():
                return None
            q, steps = self.parents_and_steps(q)
            if (lengths[steps] != lengths[steps[0]]).any():
                return None
            levels.append(steps)
            above.append(q)
        return levels[::-1], above[::-1]

    def _step_loops(self) -> np.ndarray:
        """Loops per step id (grown as steps are added)."""
        got = self.__dict__.setdefault("_loop_steps", array("q"))
        steps = range(len(got), len(self._steps))
        got.extend(sum(e.kind == LOOP for e in self._steps[k]) for k in steps)
        return np.frombuffer(got, dtype=np.int64)

    def _step_length(self) -> array:
        """Entries per step id (grown as steps are added)."""
        got = self.__dict__.setdefault("_lengths", array("q"))
        got.extend(len(self._steps[k]) for k in range(len(got), len(self._steps)))
        return got

    def _permuted_step(self, step: int, local: tuple[int, ...]) -> int:
        """The id of step ``step`` with its entry ``local[i]`` at position ``i``
        (memoized: a cache the workers do not send back)."""
        memo = self.__dict__.setdefault("_permuted", {})
        got = memo.get((step, local))
        if got is None:
            entries = self._steps[step]
            got = memo[step, local] = self._step_id(tuple(entries[i] for i in local))
        return got

    def extend(self, ids: np.ndarray, entries: list[tuple], which: np.ndarray):
        """New ids: prefix ``ids[r]`` followed by the entries ``entries[which[r]]`` for
        every row r."""
        ids = np.asarray(ids, dtype=np.int64)
        which = np.asarray(which, dtype=np.int64)
        # One integer per (prefix, entries) pair: a 1-D unique is far faster than axis=0.
        uniq, _, inverse = distinct_values(ids * len(entries) + which)
        parents, chosen = np.divmod(uniq, len(entries))
        kinds = [step_kind(x) for x in entries]
        steps = [self._step_id(x) if k else -1 for x, k in zip(entries, kinds, strict=True)]
        step = np.array(steps, dtype=np.int64)[chosen]
        new = parents.copy()  # no entries: the prefix itself
        rest = np.flatnonzero(np.array([bool(x) for x in entries], dtype=bool)[chosen])
        if len(rest) >= BATCH_FROM:  # one step down, as arrays; the others one at a time
            one = self._one_step(parents[rest], np.array(kinds, dtype=np.int64)[chosen[rest]],
                                 step[rest])  # fmt: skip
            new[rest[one]] = self._children_of(parents[rest[one]], step[rest[one]])
            rest = rest[~one]
        for i in rest.tolist():
            w = int(chosen[i])
            new[i] = self._extended(int(parents[i]), entries[w], kinds[w], steps[w])
        return new[inverse.ravel()]

    def compatibility(
        self, seq: int, shared: frozenset[str], top: dict[str, str]
    ) -> tuple[Compatibility, ...]:
        """Per shared tensor (sorted): backing memory and loops above (``top``: the
        memory backing each shared tensor when it is not fused)."""
        loops: list[tuple[str, int]] = []
        fused: dict[str, Compatibility] = {}
        for e in self.prefixes[seq]:
            if e.kind == LOOP:
                loops.append((e.var, e.tile))
            else:
                fused[e.tensor] = Compatibility(e.tensor, e.memory, tuple(loops))
        return tuple(fused.get(t) or Compatibility(t, top[t], ()) for t in sorted(shared))

    def depth(self, seq: int) -> int:
        """Loops above the deepest fused backing node."""
        prefix = self.prefixes[seq]
        last = max((i for i, e in enumerate(prefix) if e.kind == BACK), default=-1)
        return sum(1 for e in prefix[:last] if e.kind == LOOP)


BATCH_FROM = 64
"""Pairs of an :meth:`PrefixInterner.extend` from which they are looked up and added as
arrays (fewer: one at a time, cheaper than the arrays' overhead)."""


def _split(prefix: Prefix) -> bool:
    """Whether ``prefix`` has two loops over one rank variable."""
    loops = [e.var for e in prefix if e.kind == LOOP]
    return len(set(loops)) < len(loops)


class ForgetfulInterner(PrefixInterner):
    """Every prefix is the empty one: the search then compares the rows of every prefix
    together, which is what a template's least energy over the whole fused space needs
    (:mod:`fusemap.mapper.full_space`), not what a join needs."""

    def extend(self, ids: np.ndarray, entries: list[tuple], which: np.ndarray):
        return np.zeros(len(np.asarray(ids)), dtype=np.int64)
