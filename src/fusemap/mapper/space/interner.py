"""Integer ids for fused prefixes (:mod:`.prefix`): the tile-shape search keeps rows of
different prefixes apart by them, and tables refer to their prefixes by them."""

from __future__ import annotations

from array import array
from collections.abc import Callable, Sequence
from itertools import chain
from typing import Any

import numpy as np

from .child_index import ChildIndex
from .prefix import (
    BACK,
    LOOP,
    MARK,
    Compatibility,
    Entry,
    Prefix,
    as_entries,
    canonical,
    has_hosting,
)


class PrefixInterner:
    """Integer ids for fused prefixes (id 0 is the empty prefix).

    Kept as a trie, not as tuples: the check of several fused loops per rank variable
    interns tens of millions of prefixes, nearly all partial ones no table keeps, and a
    tuple and two dictionary entries per prefix took 450 bytes each (17 GB for GPT-3 at
    batch 64). Each id records its parent's id and its *step*, the entries that lead
    there: one entry that is not a loop, or a run of loops (a gap of the search). Every
    prefix is stored along its maximal runs (:func:`_steps_of`), whichever way it was
    built, so equal prefixes have equal ids; a prefix is rebuilt from its steps when
    looked at (:attr:`prefixes`)."""

    def __init__(self) -> None:
        self.prefixes: Sequence[Prefix] = _Prefixes(self)  # (a renamed interner's: its own)
        self._parent = array("q", [-1])
        self._step = array("q", [-1])
        self._flags = bytearray(1)  # per id: _MARKED, _GAP_OF_TWO, _SPLIT, _WIDE
        self._vars = array("q", [0])  # per id: its loops' rank variables, one bit each
        self._var_bits: dict[str, int] = {}
        self._steps: list[Prefix] = []  # per step id: its typed entries
        self._step_ids: dict[tuple, int] = {}  # entries (typed or plain) -> step id
        # Per step: flags, vars, hosting mark?, last entry's kind (_LAST_*).
        self._step_flags, self._step_vars = array("q"), array("q")
        self._step_hosting, self._step_last = bytearray(), bytearray()
        self._children: ChildIndex | None = ChildIndex()  # parent * STEPS + step -> id

    def __len__(self) -> int:
        return len(self._parent)

    def __getstate__(self) -> dict:
        # caches, and the children (rebuilt from the parents and steps when needed)
        skip = ("_loops", "_settled", "_unmarked", "_children", "_step_ids", "_lengths")
        return {k: v for k, v in self.__dict__.items() if k not in skip}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._children = None
        self._step_ids = {step: k for k, step in enumerate(self._steps)}

    def prefix(self, q: int) -> Prefix:
        """The prefix of id ``q``, rebuilt from its steps."""
        steps = []
        while q > 0:
            steps.append(self._steps[self._step[q]])
            q = self._parent[q]
        return tuple(chain.from_iterable(reversed(steps)))

    def step_of(self, q: int) -> tuple[int, int, Prefix]:
        """Id ``q``'s parent id, its step's id and entries (``q`` > 0): one entry that is
        not a loop, or a run of loops."""
        step = self._step[q]
        return self._parent[q], step, self._steps[step]

    def parents_and_steps(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Ids ``ids``' parent ids and step ids (``ids`` > 0), as arrays."""
        ids = np.asarray(ids, dtype=np.int64)
        parents = np.frombuffer(self._parent, dtype=np.int64)[ids]
        return parents, np.frombuffer(self._step, dtype=np.int64)[ids]

    def step_entries(self, step: int) -> Prefix:
        """The entries of step id ``step`` (one entry that is not a loop, or a run of
        loops)."""
        return self._steps[step]

    def step_count(self) -> int:
        """How many step ids there are."""
        return len(self._steps)

    def intern(self, prefix: tuple) -> int:
        """The id of ``prefix`` (new ids for new prefixes; see :func:`canonical`)."""
        return self._intern_canonical(canonical(prefix))

    def splits_a_variable(self, ids: np.ndarray) -> np.ndarray:
        """Whether each prefix of ``ids`` has two loops over one rank variable."""
        ids = np.asarray(ids, dtype=np.int64)
        flags = np.frombuffer(self._flags, dtype=np.uint8)[ids]
        out = (flags & _SPLIT) > 0
        for i in np.flatnonzero(flags & _WIDE).tolist():  # too many variables for the bits
            out[i] = _split(self.prefixes[int(ids[i])])
        return out

    def loop_counts(self, ids: np.ndarray) -> np.ndarray:
        """Number of loops of each prefix ``ids``."""
        return self._per_prefix(
            "_loops", ids, lambda q: sum(e.kind == LOOP for e in self.prefixes[q])
        )

    def settled(self, ids: np.ndarray) -> np.ndarray:
        """Prefixes ``ids``, complete (their deepest fused node reached), with their
        :data:`MARK` entries dropped when no gap (a run of loops between two nodes)
        holds two loops: such a row has one loop order, so where its loops lie around
        its own nodes no longer matters."""

        def settle(q: int) -> int:
            if self._flags[q] & (_MARKED | _GAP_OF_TWO) == _MARKED:
                return self._unmark(q)
            return q

        return self._per_prefix("_settled", ids, settle)

    def unmarked(self, ids: np.ndarray) -> np.ndarray:
        """The ids of prefixes ``ids`` without their :data:`MARK` entries."""
        return self._per_prefix("_unmarked", ids, self._unmark)

    def _unmark(self, q: int) -> int:
        """The id of prefix ``q`` without its :data:`MARK` entries, worked out from its
        nearest ancestor's along the trie (a mark step leaves it as it was, a run of
        loops right after another joins it in one step, another step extends it:
        :meth:`_extended`, which keeps it canonical) and memoized per
        id: the check of several fused loops per rank variable settles millions of
        prefixes, each rebuilt and interned whole before (8% of GPT-3's QK check)."""
        memo = self._memo("_unmarked", q + 1)
        path = []
        while self._flags[q] & _MARKED and memo[q] < 0:
            path.append(q)
            q = self._parent[q]
        u = int(memo[q]) if self._flags[q] & _MARKED else q
        for p in reversed(path):
            step = self._step[p]
            entries = self._steps[step]
            kind = _step_kind(entries)
            if kind == _LOOPS and u > 0 and self._step_last[self._step[u]] == _LAST_LOOP:
                # loops after loops (a mark between them dropped): one run, one step
                merged = self._steps[self._step[u]] + entries
                u = self._child(self._parent[u], self._step_id(merged))
            elif entries[0].kind != MARK:
                u = self._extended(u, entries, kind, step)
            memo[p] = u
        return u

    def _memo(self, name: str, size: int) -> np.ndarray:
        """The memo ``name`` (one id per prefix id, -1: not yet), grown to hold ``size``
        ids at least (a cache the workers do not send back)."""
        memo = self.__dict__.get(name)
        if memo is None or len(memo) < size:
            grown = np.full(max(size, 2 * len(self.prefixes) + 16), -1, dtype=np.int64)
            if memo is not None:
                grown[: len(memo)] = memo
            memo = self.__dict__[name] = grown
        return memo

    def _per_prefix(self, name: str, ids: np.ndarray, of: Callable[[int], int]) -> np.ndarray:
        """``of(id)`` for each prefix id of ``ids``, memoized per id (``of`` may use and
        grow the same memo)."""
        ids = np.asarray(ids, dtype=np.int64)
        memo = self._memo(name, len(self.prefixes))
        for q in np.unique(ids[memo[ids] < 0]).tolist():
            got = of(q)
            self.__dict__[name][q] = got
        return self.__dict__[name][ids]

    def intern_reordered(self, prefix: tuple) -> int:
        """The id of ``prefix``, an interned prefix with loops permuted in place (its
        runs of backing nodes unchanged, so it is canonical too)."""
        return self._intern_canonical(as_entries(prefix))

    def reordered(self, ids: np.ndarray, src: Sequence[int]) -> np.ndarray:
        """The ids of prefixes ``ids``, each with its entry at position ``src[i]`` moved
        to position ``i``: loops permuted within their runs (:meth:`intern_reordered`
        of each), where every prefix of ``ids`` has the same steps' lengths (one layout).

        Worked out a step at a time for all of them: each distinct step permuted once,
        each level's children looked up and added as arrays (prefix by prefix, from the
        root, this was 15% of GPT-3's run at batch 64, 64 tokens)."""
        ids = np.asarray(ids, dtype=np.int64)
        levels = self._steps_up(ids)
        if levels is None:  # not one layout: prefix by prefix
            return np.array(
                [
                    self.intern_reordered(tuple(self.prefix(q)[i] for i in src))
                    for q in ids.tolist()
                ],
                dtype=np.int64,
            )
        out, at = np.zeros(len(ids), dtype=np.int64), 0
        for steps in levels:
            n = len(self._steps[int(steps[0])]) if len(steps) else 0
            local = tuple(src[at + i] - at for i in range(n))
            if local != tuple(range(n)):
                distinct, inverse = np.unique(steps, return_inverse=True)
                moved = [self._permuted_step(s, local) for s in distinct.tolist()]
                steps = np.array(moved, dtype=np.int64)[inverse.ravel()]
            out = self._children_of(out, steps)
            at += n
        return out

    def _steps_up(self, ids: np.ndarray) -> list[np.ndarray] | None:
        """The step ids of prefixes ``ids`` per level, root first, if they all have as
        many steps, of the same lengths, level by level (else None)."""
        lengths = np.frombuffer(self._step_length(), dtype=np.int64)
        levels, q = [], ids
        while len(q) and (q > 0).any():
            if not (q > 0).all():
                return None
            q, steps = self.parents_and_steps(q)
            if (lengths[steps] != lengths[steps[0]]).any():
                return None
            levels.append(steps)
        return levels[::-1]

    def _step_length(self) -> array:
        """Entries per step id (grown as steps are added)."""
        got = self.__dict__.setdefault("_lengths", array("q"))
        got.extend(len(self._steps[k]) for k in range(len(got), len(self._steps)))
        return got

    def _permuted_step(self, step: int, local: tuple[int, ...]) -> int:
        """The id of step ``step`` with its entry ``local[i]`` at position ``i``."""
        entries = self._steps[step]
        return self._step_id(tuple(entries[i] for i in local))

    def _intern_canonical(self, prefix: Prefix) -> int:
        """The id of ``prefix``, canonical and of typed entries: its steps from the root."""
        q = 0
        for entries in _steps_of(prefix):
            q = self._child(q, self._step_id(entries))
        return q

    def _step_id(self, entries: tuple) -> int:
        got = self._step_ids.get(entries)
        if got is None:
            typed = as_entries(entries)
            got = self._step_ids[entries] = len(self._steps)
            flags = _MARKED if any(e.kind == MARK for e in typed) else 0
            if _has_gap_of_two(typed):  # steps are maximal runs: a gap of two
                flags |= _GAP_OF_TWO
            bits = 0
            for e in typed:
                if e.kind == LOOP:
                    bit = 1 << self._var_bits.setdefault(e.var, len(self._var_bits))
                    flags |= _SPLIT if bits & bit else 0
                    bits |= bit
            if bits >= 1 << 62:  # past the bits of an integer: worked out from the prefix
                flags, bits = flags | _WIDE, 0
            self._steps.append(typed)
            self._step_flags.append(flags)
            self._step_vars.append(bits)
            self._step_hosting.append(has_hosting(typed))
            last = typed[-1].kind
            self._step_last.append(
                _LAST_LOOP if last == LOOP else _LAST_BACK if last == BACK else 0
            )
        return got

    def extend(self, ids: np.ndarray, entries: list[tuple], which: np.ndarray):
        """New ids: prefix ``ids[r]`` followed by the entries ``entries[which[r]]`` for
        every row r."""
        ids = np.asarray(ids, dtype=np.int64)
        which = np.asarray(which, dtype=np.int64)
        # One integer per (prefix, entries) pair: a 1-D unique is far faster than axis=0.
        uniq, inverse = np.unique(ids * len(entries) + which, return_inverse=True)
        parents, chosen = np.divmod(uniq, len(entries))
        kinds = [_step_kind(x) for x in entries]
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

    def _one_step(self, parents: np.ndarray, kinds: np.ndarray, steps: np.ndarray) -> np.ndarray:
        """Whether each prefix ``parents`` followed by its step (of ``kinds``; -1: none)
        is one step down that keeps it canonical (see :meth:`_extended`)."""
        if not self._steps:
            return np.zeros(len(parents), dtype=bool)
        own = np.frombuffer(self._step, dtype=np.int64)[parents]
        last = np.frombuffer(self._step_last, dtype=np.uint8)[np.maximum(own, 0)]
        last = np.where(parents > 0, last, 0)
        hosting = np.frombuffer(self._step_hosting, dtype=np.uint8)[np.maximum(steps, 0)]
        one = (kinds == _NODE) | ((kinds == _LOOPS) & (last != _LAST_LOOP))
        return one & ((hosting == 0) | (last != _LAST_BACK)) & (steps >= 0)

    def _children_of(self, parents: np.ndarray, steps: np.ndarray) -> np.ndarray:
        """:meth:`_child` of each (parent, step) pair, new ids given in the pairs' order."""
        keys = parents * _STEPS + steps
        uniq, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
        got = self._index().find(uniq)
        new = np.flatnonzero(got < 0)
        if len(new):
            new = new[np.argsort(first[new], kind="stable")]  # in the pairs' order
            got[new] = len(self._parent) + np.arange(len(new))
            self._append(uniq[new] // _STEPS, uniq[new] % _STEPS)
            fresh = np.sort(new)  # uniq is sorted
            self._index().add(uniq[fresh], got[fresh])
        return got[inverse.ravel()]

    def _append(self, parents: np.ndarray, steps: np.ndarray) -> None:
        """New ids for prefixes ``parents`` followed by steps ``steps`` (the arrays'
        buffers are read through views that end with each expression, so they may grow
        after)."""
        flags = np.frombuffer(self._flags, dtype=np.uint8)[parents].astype(np.int64)
        above = np.frombuffer(self._vars, dtype=np.int64)[parents]
        bits = np.frombuffer(self._step_vars, dtype=np.int64)[steps]
        flags |= np.frombuffer(self._step_flags, dtype=np.int64)[steps]
        flags |= np.where(above & bits, _SPLIT, 0)
        self._parent.frombytes(parents.astype(np.int64).tobytes())
        self._step.frombytes(steps.astype(np.int64).tobytes())
        self._flags += flags.astype(np.uint8).tobytes()
        self._vars.frombytes((above | bits).tobytes())

    def _index(self) -> ChildIndex:
        """The children, rebuilt from the parents and steps after unpickling."""
        if self._children is None:
            parents = np.frombuffer(self._parent, dtype=np.int64)[1:]
            steps = np.frombuffer(self._step, dtype=np.int64)[1:]
            ids = np.arange(1, len(self._parent), dtype=np.int64)
            self._children = ChildIndex.of(parents * _STEPS + steps, ids)
        return self._children

    def _extended(self, parent: int, entries: tuple, kind: int, step: int) -> int:
        """The id of prefix ``parent`` followed by ``entries``: one step down when they
        are one (a run of loops after a node, or one node) and the prefix stays
        canonical (:func:`canonical`), else the whole prefix interned again."""
        if not entries:
            return parent
        last = self._step_last[self._step[parent]] if parent else 0
        one_step = kind == _NODE or (kind == _LOOPS and last != _LAST_LOOP)
        # Canonical still: no hosting mark, or one that starts a run of backing nodes.
        if one_step and (not self._step_hosting[step] or last != _LAST_BACK):
            return self._child(parent, step)
        return self.intern(self.prefix(parent) + tuple(entries))

    def _child(self, parent: int, step: int) -> int:
        """The id of prefix ``parent`` followed by step ``step`` (new if not seen)."""
        key = parent * _STEPS + step
        got = self._index().get(key)
        if got is None:
            got = len(self._parent)
            self._parent.append(parent)
            self._step.append(step)
            flags, bits = self._step_flags[step], self._step_vars[step]
            above = self._vars[parent]
            self._flags.append(self._flags[parent] | flags | (_SPLIT if above & bits else 0))
            self._vars.append(above | bits)
            self._index().add_one(key, got)
        return got

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


_STEPS = 1 << 32
"""Step ids stay below it (a key per parent and step)."""

_NODE, _LOOPS = 1, 2

BATCH_FROM = 64
"""Pairs of an :meth:`PrefixInterner.extend` from which they are looked up and added as
arrays (fewer: one at a time, cheaper than the arrays' overhead)."""

_LAST_LOOP, _LAST_BACK = 1, 2
"""A step's last entry: a loop, a backing node (0: another node)."""

_MARKED, _GAP_OF_TWO, _SPLIT, _WIDE = 1, 2, 4, 8
"""Flags of a prefix: it holds a :data:`MARK`; one of its gaps holds two loops; two of
its loops share a rank variable; it has too many variables for :attr:`_vars`."""


def _split(prefix: Prefix) -> bool:
    """Whether ``prefix`` has two loops over one rank variable."""
    loops = [e.var for e in prefix if e.kind == LOOP]
    return len(set(loops)) < len(loops)


def _step_kind(entries: tuple) -> int:
    """:data:`_NODE` for one entry that is not a loop, :data:`_LOOPS` for a run of
    loops, 0 otherwise (empty, or mixed)."""
    if len(entries) == 1 and entries[0][0] != LOOP:
        return _NODE
    if entries and all(e[0] == LOOP for e in entries):
        return _LOOPS
    return 0


def _steps_of(prefix: Prefix) -> list[Prefix]:
    """A prefix cut into its steps: each entry that is not a loop alone, each maximal
    run of loops together."""
    out: list[Prefix] = []
    run: list[Entry] = []
    for e in prefix:
        if e.kind == LOOP:
            run.append(e)
            continue
        if run:
            out.append(tuple(run))
            run = []
        out.append((e,))
    if run:
        out.append(tuple(run))
    return out


class _Prefixes(Sequence):
    """An interner's prefixes by id, each rebuilt from its steps when looked at."""

    def __init__(self, interner: PrefixInterner) -> None:
        self._interner = interner

    def __len__(self) -> int:
        return len(self._interner)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self._interner.prefix(k) for k in range(*i.indices(len(self)))]
        if not -len(self) <= i < len(self):
            raise IndexError(i)
        return self._interner.prefix(int(i) % len(self))


def _has_gap_of_two(prefix: Prefix) -> bool:
    run = 0
    for e in prefix:
        run = run + 1 if e.kind == LOOP else 0
        if run >= 2:
            return True
    return False


class ForgetfulInterner(PrefixInterner):
    """Every prefix is the empty one: the search then compares the rows of every prefix
    together, which is what a template's least energy over the whole fused space needs
    (:mod:`fusemap.mapper.full_space`), not what a join needs."""

    def extend(self, ids: np.ndarray, entries: list[tuple], which: np.ndarray):
        return np.zeros(len(np.asarray(ids)), dtype=np.int64)
