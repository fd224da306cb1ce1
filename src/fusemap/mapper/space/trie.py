"""The trie the prefix interner (:mod:`.interner`) keeps its prefixes in: per id its
parent's id and its step, per step id its entries and flags, and the children looked up
and added one at a time or as arrays."""

from __future__ import annotations

from array import array
from collections.abc import Callable, Hashable, Sequence
from itertools import chain
from typing import Any, TypeVar

import numpy as np

from ...spec.errors import FusemapError
from ..distinct import sorted_distinct
from .child_index import ChildIndex
from .prefix import (
    BACK,
    LOOP,
    MARK,
    Entry,
    Prefix,
    as_entries,
    canonical,
    has_hosting,
)

_Trie = TypeVar("_Trie", bound="PrefixTrie")

_NOT_SENT = frozenset(
    ["_loops", "_unmarked", "_children", "_step_ids", "_lengths", "_permuted", "_loop_steps"]
    + ["_memos", "_depths", "_forgetting"]
)
"""Attributes a pickled trie leaves out: caches, and the children (rebuilt from the
parents and steps when needed)."""


class PrefixTrie:
    """Integer ids for fused prefixes (id 0 is the empty prefix).

    Kept as a trie, not as tuples: the check of several fused loops per rank variable
    interns tens of millions of prefixes, nearly all partial ones no table keeps, and a
    tuple and two dictionary entries per prefix took 450 bytes each (17 GB for GPT-3 at
    batch 64). Each id records its parent's id and its *step*, the entries that lead
    there: one entry that is not a loop, or a run of loops (a gap of the search). Every
    prefix is stored along its maximal runs (:func:`steps_of`), whichever way it was
    built, so equal prefixes have equal ids; a prefix is rebuilt from its steps when
    looked at (:attr:`prefixes`)."""

    def __init__(self) -> None:
        self.prefixes: Sequence[Prefix] = _Prefixes(self)  # (a renamed interner's: its own)
        self._parent = array(ID_CODE, [-1])
        self._step = array(ID_CODE, [-1])
        self._flags = bytearray(1)  # per id: MARKED, GAP_OF_TWO, SPLIT, WIDE
        self._vars = array(ID_CODE, [0])  # per id: its loops' rank variables, one bit each
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
        return {k: v for k, v in self.__dict__.items() if k not in _NOT_SENT}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._children = None
        self._step_ids = {step: k for k, step in enumerate(self._steps)}

    def kept_only(self, ids: np.ndarray, out: _Trie) -> tuple[_Trie, np.ndarray]:
        """``out`` (a new trie) made to hold the prefixes ``ids`` and their ancestors
        alone (the steps they use, ids in the same order), and each of ``ids``' id in it:
        what a table keeps of a search that met millions of prefixes, as arrays (no
        prefix rebuilt)."""
        assert len(out) == 1 and not out.step_count(), "a new trie"
        ids = np.asarray(ids, dtype=np.int64)
        parent = self._parent_view()
        keep = self._with_ancestors(ids)
        old = np.flatnonzero(keep)
        new_of = np.cumsum(keep) - 1
        step = self._step_view()[old[1:]]
        used, step = np.unique(step, return_inverse=True)
        out._var_bits = dict(self._var_bits)
        for k in used.tolist():
            out._step_id(self._steps[k])  # in ``used``'s order: ids 0, 1, ...
        out._parent = array(ID_CODE, _id_bytes(np.concatenate([[-1], new_of[parent[old[1:]]]])))
        out._step = array(ID_CODE, _id_bytes(np.concatenate([[-1], step.ravel()])))
        out._flags = bytearray(np.frombuffer(self._flags, dtype=np.uint8)[old].tobytes())
        out._vars = array(ID_CODE, self._vars_view()[old].tobytes())
        out._children = None  # rebuilt from the parents and steps when needed
        return out, new_of[ids]

    def copied_into(self, ids: np.ndarray, other: PrefixTrie) -> np.ndarray:
        """Each of ``ids``' id in ``other``, the prefixes and their ancestors added to it
        where new: a level of the trie at a time, as arrays (no prefix rebuilt; one at a
        time, merging a table into another's interner was 8% of GPT-3's batch-64 run)."""
        ids = np.asarray(ids, dtype=np.int64)
        parent = self._parent_view()
        kept = np.flatnonzero(self._with_ancestors(ids))[1:]  # the root is the root
        depth = self._summed_along("_depths", kept, np.ones(self.step_count(), np.int64))
        steps = self._step_view()[kept]
        used, steps = np.unique(steps, return_inverse=True)
        theirs = np.array([other._step_id(self._steps[k]) for k in used.tolist()], dtype=np.int64)
        steps = theirs[steps.ravel()]
        new = np.zeros(len(self), dtype=np.int64)
        for level in range(1, int(depth.max(initial=0)) + 1):
            at = np.flatnonzero(depth == level)
            q = kept[at]
            new[q] = other._children_of(new[parent[q]], steps[at])
        return new[ids]

    def _with_ancestors(self, ids: np.ndarray) -> np.ndarray:
        """Per id of the trie, whether it is one of ``ids`` or an ancestor of one (the
        root always): a level of ancestors at a time."""
        parent = self._parent_view()
        keep = np.zeros(len(self), dtype=bool)
        keep[0] = True
        todo = sorted_distinct(ids[ids > 0])
        while len(todo):
            keep[todo] = True
            todo = sorted_distinct(parent[todo])
            todo = todo[~keep[todo]]
        return keep

    def forget_from(self, size: int) -> None:
        """Forget the prefixes of ids ``size`` on, to be given again: what a search
        interned for rows nothing refers to any more (the check's first search, once
        its table is given up, interns tens of millions). The memos forget them too,
        and so does whatever :meth:`when_forgetting` registered."""
        if size >= len(self):
            return
        assert size >= 1, "the empty prefix stays"
        for column in (self._parent, self._step, self._vars, self._flags):
            del column[size:]
        for name in _ID_MEMOS:
            memo = self.__dict__.get(name)
            if memo is not None:
                memo[size:] = -1
        unmarked = self.__dict__.get("_unmarked")
        if unmarked is not None:  # its values are ids too
            unmarked[unmarked >= size] = -1
        self.__dict__.pop("_memos", None)
        if self._children is not None:
            self._children.forget_ids_from(size)
        for told in self.__dict__.get("_forgetting", ()):
            told(size)

    def when_forgetting(self, told: Callable[[int], None]) -> None:
        """Call ``told(size)`` whenever :meth:`forget_from` forgets ids ``size`` on (a
        cache of values per id; not pickled)."""
        self.__dict__.setdefault("_forgetting", []).append(told)

    def memo_of(self, key: Hashable) -> dict:
        """A dict for a caller's values per prefix id under ``key``: an id never changes
        its prefix, so the values stay true as the trie grows, and every table sharing
        the trie (a table merged with another keeps its interner) reads them (not
        pickled)."""
        memos = self.__dict__.setdefault("_memos", {})
        got = memos.get(key)
        if got is None:
            got = memos[key] = {}
        return got

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
        """Ids ``ids``' parent ids and step ids (``ids`` > 0), as 64-bit arrays."""
        ids = np.asarray(ids, dtype=np.int64)
        parents = self._parent_view()[ids].astype(np.int64)
        return parents, self._step_view()[ids].astype(np.int64)

    def _parent_view(self) -> np.ndarray:
        """Per id, its parent's id (a view that ends with the expression using it: the
        array may grow after)."""
        return np.frombuffer(self._parent, dtype=ID_TYPE)

    def _step_view(self) -> np.ndarray:
        """Per id, its step's id (a view, as :meth:`_parent_view`)."""
        return np.frombuffer(self._step, dtype=ID_TYPE)

    def _vars_view(self) -> np.ndarray:
        """Per id, its loops' rank variables (a view, as :meth:`_parent_view`)."""
        return np.frombuffer(self._vars, dtype=ID_TYPE)

    def step_entries(self, step: int) -> Prefix:
        """The entries of step id ``step`` (one entry that is not a loop, or a run of
        loops)."""
        return self._steps[step]

    def step_count(self) -> int:
        """How many step ids there are."""
        return len(self._steps)

    def _memo(self, name: str, size: int) -> np.ndarray:
        """The memo ``name`` (one id per prefix id, -1: not yet), grown to hold ``size``
        ids at least (a cache the workers do not send back)."""
        memo = self.__dict__.get(name)
        if memo is None or len(memo) < size:
            grown = np.full(max(size, len(self) + len(self) // 2 + 16), -1, dtype=ID_TYPE)
            if memo is not None:
                grown[: len(memo)] = memo
            memo = self.__dict__[name] = grown
        return memo

    def _summed_along(self, name: str, ids: np.ndarray, per_step: np.ndarray) -> np.ndarray:
        """Per prefix id of ``ids``, the sum of ``per_step`` over its steps, memoized
        per id in the memo ``name`` (each worked out from its parent's, a level of the
        trie at a time)."""
        ids = np.asarray(ids, dtype=np.int64)
        memo = self._memo(name, len(self))
        memo[0] = 0
        parent = self._parent_view()
        levels, todo = [], sorted_distinct(ids[memo[ids] < 0])
        while len(todo):
            levels.append(todo)
            up = parent[todo]
            todo = sorted_distinct(up[memo[up] < 0])
        step = self._step_view()
        for todo in reversed(levels):  # parents first
            memo[todo] = memo[parent[todo]] + per_step[step[todo]]
        return memo[ids]

    def _intern_canonical(self, prefix: Prefix) -> int:
        """The id of ``prefix``, canonical and of typed entries: its steps from the root."""
        q = 0
        for entries in steps_of(prefix):
            q = self._child(q, self._step_id(entries))
        return q

    def _step_id(self, entries: tuple) -> int:
        got = self._step_ids.get(entries)
        if got is None:
            typed = as_entries(entries)
            got = self._step_ids[entries] = len(self._steps)
            flags = MARKED if any(e.kind == MARK for e in typed) else 0
            if _has_gap_of_two(typed):  # steps are maximal runs: a gap of two
                flags |= GAP_OF_TWO
            bits = 0
            for e in typed:
                if e.kind == LOOP:
                    bit = 1 << self._var_bits.setdefault(e.var, len(self._var_bits))
                    flags |= SPLIT if bits & bit else 0
                    bits |= bit
            if bits >= 1 << 30:  # past the bits of an id-sized integer: from the prefix
                flags, bits = flags | WIDE, 0
            self._steps.append(typed)
            self._step_flags.append(flags)
            self._step_vars.append(bits)
            self._step_hosting.append(has_hosting(typed))
            last = typed[-1].kind
            self._step_last.append(LAST_LOOP if last == LOOP else LAST_BACK if last == BACK else 0)
        return got

    def _one_step(self, parents: np.ndarray, kinds: np.ndarray, steps: np.ndarray) -> np.ndarray:
        """Whether each prefix ``parents`` followed by its step (of ``kinds``; -1: none)
        is one step down that keeps it canonical (see :meth:`_extended`)."""
        if not self._steps:
            return np.zeros(len(parents), dtype=bool)
        own = self._step_view()[parents]
        last = np.frombuffer(self._step_last, dtype=np.uint8)[np.maximum(own, 0)]
        last = np.where(parents > 0, last, 0)
        hosting = np.frombuffer(self._step_hosting, dtype=np.uint8)[np.maximum(steps, 0)]
        one = (kinds == NODE_STEP) | ((kinds == LOOPS_STEP) & (last != LAST_LOOP))
        return one & ((hosting == 0) | (last != LAST_BACK)) & (steps >= 0)

    def _children_of(self, parents: np.ndarray, steps: np.ndarray) -> np.ndarray:
        """:meth:`_child` of each (parent, step) pair, new ids given in the pairs' order."""
        keys = parents.astype(np.int64) * STEPS + steps
        ids, new = self._index().find_or_add(keys, len(self._parent))
        if len(new):
            self._append(new // STEPS, new % STEPS)
        return ids

    def _append(self, parents: np.ndarray, steps: np.ndarray) -> None:
        """New ids for prefixes ``parents`` followed by steps ``steps`` (the arrays'
        buffers are read through views that end with each expression, so they may grow
        after)."""
        _room_for(len(self._parent) + len(parents))
        flags = np.frombuffer(self._flags, dtype=np.uint8)[parents].astype(np.int64)
        above = self._vars_view()[parents].astype(np.int64)
        bits = np.frombuffer(self._step_vars, dtype=np.int64)[steps]
        flags |= np.frombuffer(self._step_flags, dtype=np.int64)[steps]
        flags |= np.where(above & bits, SPLIT, 0)
        self._parent.frombytes(_id_bytes(parents))
        self._step.frombytes(_id_bytes(steps))
        self._flags += flags.astype(np.uint8).tobytes()
        self._vars.frombytes(_id_bytes(above | bits))

    def _index(self) -> ChildIndex:
        """The children, rebuilt from the parents and steps after unpickling."""
        if self._children is None:
            parents = self._parent_view()[1:].astype(np.int64)
            steps = self._step_view()[1:]
            ids = np.arange(1, len(self._parent), dtype=np.int64)
            self._children = ChildIndex.of(parents * STEPS + steps, ids)
        return self._children

    def _extended(self, parent: int, entries: tuple, kind: int, step: int) -> int:
        """The id of prefix ``parent`` followed by ``entries``: one step down when they
        are one (a run of loops after a node, or one node) and the prefix stays
        canonical (:func:`canonical`), else the whole prefix interned again."""
        if not entries:
            return parent
        last = self._step_last[self._step[parent]] if parent else 0
        one_step = kind == NODE_STEP or (kind == LOOPS_STEP and last != LAST_LOOP)
        # Canonical still: no hosting mark, or one that starts a run of backing nodes.
        if one_step and (not self._step_hosting[step] or last != LAST_BACK):
            return self._child(parent, step)
        return self._intern_canonical(canonical(self.prefix(parent) + tuple(entries)))

    def _child(self, parent: int, step: int) -> int:
        """The id of prefix ``parent`` followed by step ``step`` (new if not seen)."""
        key = parent * STEPS + step
        got = self._index().get(key)
        if got is None:
            got = len(self._parent)
            _room_for(got + 1)
            self._parent.append(parent)
            self._step.append(step)
            flags, bits = self._step_flags[step], self._step_vars[step]
            above = self._vars[parent]
            self._flags.append(self._flags[parent] | flags | (SPLIT if above & bits else 0))
            self._vars.append(above | bits)
            self._index().add_one(key, got)
        return got


_ID_MEMOS = ("_loops", "_unmarked", "_depths")
"""The memos of one value per prefix id (:meth:`PrefixTrie._memo`)."""

STEPS = 1 << 32
"""Step ids stay below it (a key per parent and step)."""

ID_TYPE, ID_CODE = np.int32, "i"
"""Ids (and step ids, and rank-variable bits) are 4-byte integers: the check of several
fused loops per rank variable interns tens of millions of prefixes per search, each
with its parent, its step and its variables, and memos of one id per prefix."""

MOST_IDS = (1 << 31) - 1
"""Prefixes a trie may hold (ids are 4-byte integers)."""


def _room_for(ids: int) -> None:
    """Refuse to grow a trie past :data:`MOST_IDS` prefixes (its ids would wrap)."""
    if ids > MOST_IDS:
        raise FusemapError(
            f"the mapper's search met more than {MOST_IDS:,} fused prefixes of one Einsum; "
            "map fewer templates (fewer memories, spatial loops or fused tensors)"
        )


def _id_bytes(values: np.ndarray) -> bytes:
    """``values`` as the bytes of 4-byte ids."""
    return np.asarray(values).astype(ID_TYPE).tobytes()


NODE_STEP, LOOPS_STEP = 1, 2

LAST_LOOP, LAST_BACK = 1, 2
"""A step's last entry: a loop, a backing node (0: another node)."""

MARKED, GAP_OF_TWO, SPLIT, WIDE = 1, 2, 4, 8
"""Flags of a prefix: it holds a :data:`MARK`; one of its gaps holds two loops; two of
its loops share a rank variable; it has too many variables for :attr:`_vars`."""


def step_kind(entries: tuple) -> int:
    """:data:`NODE_STEP` for one entry that is not a loop, :data:`LOOPS_STEP` for a run of
    loops, 0 otherwise (empty, or mixed)."""
    if len(entries) == 1 and entries[0][0] != LOOP:
        return NODE_STEP
    if entries and all(e[0] == LOOP for e in entries):
        return LOOPS_STEP
    return 0


def steps_of(prefix: Prefix) -> list[Prefix]:
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

    def __init__(self, interner: PrefixTrie) -> None:
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
