"""Fused prefixes: the loops and fused backing nodes at the top of a pmapping.

A pmapping's *fused prefix* is the sequence, from the root down to its deepest fused
backing node, of loops (:class:`LoopEntry`) and fused backing nodes
(:class:`BackingEntry`); while a template is searched, also of its own storage nodes
among those loops (:class:`MarkEntry`). A spatial loop's tile is a
:class:`SpatialTile`, which names its fanout too. It fixes the pmapping's
compatibility (FFM §4): for each shared tensor, the memory that backs it and the loops
above that node. The tile-shape search interns prefixes as integers so it can keep rows
of different prefixes apart.

Entries are named tuples whose first field is their kind (``"loop"``, ``"back"``,
``"mark"``): they hash, compare and sort as the plain tuples ``(kind, ...)`` they are,
and the interner turns such plain tuples into entries (:func:`as_entries`).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Sequence
from typing import Any, Final, Literal, NamedTuple

import numpy as np

HOSTING = "@hosting"
"""Tensor name of the virtual hosting holder (:mod:`fusemap.mapper.space.templates`): the loops
above it are shared with the users of a tensor held tiled across the Einsum."""


LOOP: Final = "loop"
"""Kind of a :class:`LoopEntry`."""

BACK: Final = "back"
"""Kind of a :class:`BackingEntry`."""

MARK: Final = "mark"
"""Kind of a :class:`MarkEntry`: a pmapping's own storage node among its fused loops,
kept in a prefix only while its template is searched and its loop orders are added
(rows that place the same loops differently around the node are then never compared);
the tables' prefixes have none (:meth:`PrefixInterner.unmarked`)."""


class SpatialTile(int):
    """The tile a spatial loop of a fused prefix leaves: an ``int`` (sizes use it as
    one) that equals only a spatial loop's tile of the same size on the same fanout
    (``where``: ``component.dimension``), so the join pairs spatial loops with spatial
    loops of the same fanout, never with temporal ones."""

    where: str

    def __new__(cls, tile: int, where: str) -> SpatialTile:
        obj = super().__new__(cls, tile)
        obj.where = where
        return obj

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, SpatialTile) and int(self) == int(other) and self.where == other.where
        )

    @classmethod
    def on(cls, tile: int, component: str, dimension: str) -> SpatialTile:
        """The tile a spatial loop over ``component``'s fanout ``dimension`` leaves."""
        return cls(tile, f"{component}.{dimension}")

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash((int(self), self.where))

    def __reduce__(self):
        return (SpatialTile, (int(self), self.where))

    def __repr__(self) -> str:
        return f"SpatialTile({int(self)}, {self.where!r})"


def loops_text(loops) -> str:
    """Shared loops as ``var:tile`` each (a spatial loop names its fanout)."""
    return (
        ", ".join(
            f"{v}:{int(n)} (spatial {n.where})" if isinstance(n, SpatialTile) else f"{v}:{n}"
            for v, n in loops
        )
        or "none (whole tensor)"
    )


class LoopEntry(NamedTuple):
    """A loop of a fused prefix: over rank variable ``var``, leaving ``tile`` (a
    :class:`SpatialTile` for a spatial loop)."""

    kind: Literal["loop"]  # LOOP
    var: str
    tile: int

    @classmethod
    def of(cls, var: str, tile: int) -> LoopEntry:
        """The loop over ``var`` leaving ``tile``."""
        return tuple.__new__(cls, (LOOP, var, tile))  # no keyword handling: hot

    def renamed(self, tensors: dict[str, str], variables: dict[str, str]) -> LoopEntry:
        """The same loop in an identical Einsum with other names."""
        return self._replace(var=variables.get(self.var, self.var))


class BackingEntry(NamedTuple):
    """A fused backing node of a prefix: shared ``tensor`` backed in ``memory`` (or the
    virtual hosting holder, tensor :data:`HOSTING`)."""

    kind: Literal["back"]  # BACK
    tensor: str
    memory: str

    @classmethod
    def of(cls, tensor: str, memory: str) -> BackingEntry:
        """The node backing ``tensor`` in ``memory``."""
        return tuple.__new__(cls, (BACK, tensor, memory))

    def renamed(self, tensors: dict[str, str], variables: dict[str, str]) -> BackingEntry:
        """The same node in an identical Einsum with other names."""
        return self._replace(tensor=tensors[self.tensor])


class MarkEntry(NamedTuple):
    """A pmapping's own storage node among its fused loops: ``tensor`` kept in
    ``memory`` (see :data:`MARK`)."""

    kind: Literal["mark"]  # MARK
    tensor: str
    memory: str

    @classmethod
    def of(cls, tensor: str, memory: str) -> MarkEntry:
        """The own node of ``tensor`` in ``memory``."""
        return tuple.__new__(cls, (MARK, tensor, memory))

    def renamed(self, tensors: dict[str, str], variables: dict[str, str]) -> MarkEntry:
        """The same node in an identical Einsum with other names."""
        return self._replace(tensor=tensors.get(self.tensor, self.tensor))


Entry = LoopEntry | BackingEntry | MarkEntry
"""One entry of a fused prefix."""

Prefix = tuple[Entry, ...]
"""A fused prefix, root first."""

_ENTRY_TYPES = {LOOP: LoopEntry, BACK: BackingEntry, MARK: MarkEntry}


def as_entries(prefix: tuple) -> Prefix:
    """``prefix`` with each plain ``(kind, ...)`` tuple made its typed entry (equal to
    it: the same hash, order and comparisons)."""
    for e in prefix:  # a plain loop: this runs on every new prefix of the search
        if type(e) is tuple:
            return tuple(
                x if type(x) is not tuple else tuple.__new__(_ENTRY_TYPES[x[0]], x) for x in prefix
            )
    return prefix


def _has_hosting(entries: tuple) -> bool:
    """Whether ``entries`` (typed or plain) hold the hosting mark (by index: the hot
    path of interning)."""
    return any(e[0] == BACK and e[1] == HOSTING for e in entries)


def is_hosting(entry: Entry) -> bool:
    """Whether ``entry`` is the virtual hosting holder (a backing node of
    :data:`HOSTING`)."""
    return entry.kind == BACK and entry.tensor == HOSTING


def is_spatial(entry: Entry) -> bool:
    """Whether a prefix entry is a spatial loop."""
    return entry.kind == LOOP and isinstance(entry.tile, SpatialTile)


def marked(template) -> bool:
    """Whether a template has a virtual hosting holder."""
    return any(h.virtual and h.tensor == HOSTING for h in template.holders)


def canonical(prefix: tuple) -> Prefix:
    """``prefix`` with each hosting mark first in its run of adjacent backing nodes.

    The mark is no storage node: all it says is how many loops lie above it, which its
    place within a run of nodes (no loop between them) does not change. Templates that
    place it at each point of one run give the same pmappings; one prefix keeps them in
    one group (pruned together) instead of many."""
    prefix = as_entries(prefix)
    if not _has_hosting(prefix):
        return prefix
    out: list[Entry] = []
    run: list[Entry] = []  # adjacent backing nodes
    for e in prefix:
        if e.kind == BACK:
            run.append(e)
            continue
        out += _mark_first(run)
        run = []
        out.append(e)
    return tuple(out + _mark_first(run))


def _mark_first(run: list[Entry]) -> list[Entry]:
    """A run of backing nodes with the hosting mark first (the others keep their
    order)."""
    return sorted(run, key=lambda e: not is_hosting(e))


class Compatibility(NamedTuple):
    """What a pmapping exchanges with its neighbours through one shared tensor (a named
    tuple: the join hashes and compares millions of them)."""

    tensor: str
    backing: str
    loops: tuple[tuple[str, int], ...]  # (rank variable, tile shape) above the backing node

    @property
    def depth(self) -> int:
        """Number of loops above the backing node."""
        return len(self.loops)


class PrefixInterner:
    """Integer ids for fused prefixes (id 0 is the empty prefix).

    Kept as a trie, not as tuples: the check of several fused loops per rank variable
    interns tens of millions of prefixes, nearly all partial ones no table keeps, and a
    tuple and two dictionary entries per prefix took 450 bytes each (17 GB for GPT-3 at
    batch 64). Each id records its parent's id and its *step*, the entries that lead
    there: one entry that is not a loop, or a run of loops (a gap of the search). Every
    prefix is stored along its maximal runs (:meth:`_steps_of`), whichever way it was
    built, so equal prefixes have equal ids; a prefix is rebuilt from its steps when
    looked at (:attr:`prefixes`)."""

    def __init__(self) -> None:
        self.prefixes: Sequence[Prefix] = _Prefixes(self)  # (a renamed interner's: its own)
        self._parent = array("q", [-1])
        self._step = array("q", [-1])
        self._last = bytearray(1)  # kind of each id's last entry (_KINDS; 0: none)
        self._steps: list[tuple[Prefix, bool]] = []  # step id -> typed entries, hosting?
        self._step_ids: dict[tuple, int] = {}  # entries (typed or plain) -> step id
        self._children: dict[int, int] | None = {}  # parent * STEPS + step -> id

    def __len__(self) -> int:
        return len(self._parent)

    def __getstate__(self) -> dict:
        # caches, and the children (rebuilt from the parents and steps when needed)
        skip = ("_loops", "_settled", "_unmarked", "_children", "_step_ids")
        return {k: v for k, v in self.__dict__.items() if k not in skip}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._children = None
        self._step_ids = {entries: k for k, (entries, _) in enumerate(self._steps)}

    def prefix(self, q: int) -> Prefix:
        """The prefix of id ``q``, rebuilt from its steps."""
        steps = []
        while q > 0:
            steps.append(self._steps[self._step[q]][0])
            q = self._parent[q]
        return tuple(e for entries in reversed(steps) for e in entries)

    def intern(self, prefix: tuple) -> int:
        """The id of ``prefix`` (new ids for new prefixes; see :func:`canonical`)."""
        return self._intern_canonical(canonical(prefix))

    def loop_counts(self, ids: np.ndarray) -> np.ndarray:
        """Number of loops of each prefix ``ids``."""
        return self._per_prefix("_loops", ids, lambda p: sum(e.kind == LOOP for e in p))

    def settled(self, ids: np.ndarray) -> np.ndarray:
        """Prefixes ``ids``, complete (their deepest fused node reached), with their
        :data:`MARK` entries dropped when no gap (a run of loops between two nodes)
        holds two loops: such a row has one loop order, so where its loops lie around
        its own nodes no longer matters."""

        def settle(prefix: Prefix) -> int:
            if any(e.kind == MARK for e in prefix) and not _has_gap_of_two(prefix):
                return self.intern(_without_marks(prefix))
            return self._intern_canonical(prefix)

        return self._per_prefix("_settled", ids, settle)

    def unmarked(self, ids: np.ndarray) -> np.ndarray:
        """The ids of prefixes ``ids`` without their :data:`MARK` entries."""
        return self._per_prefix("_unmarked", ids, lambda p: self.intern(_without_marks(p)))

    def _per_prefix(self, name: str, ids: np.ndarray, of: Callable[[Prefix], int]) -> np.ndarray:
        """``of(prefix)`` for each prefix of ``ids``, memoized per prefix id (a cache
        the workers do not send back)."""
        memo = self.__dict__.get(name)
        if memo is None or len(memo) < len(self.prefixes):
            grown = np.full(2 * len(self.prefixes) + 16, -1, dtype=np.int64)
            if memo is not None:
                grown[: len(memo)] = memo
            memo = self.__dict__[name] = grown
        ids = np.asarray(ids, dtype=np.int64)
        for q in np.unique(ids[memo[ids] < 0]).tolist():
            memo[q] = of(self.prefixes[q])
        return memo[ids]

    def intern_reordered(self, prefix: tuple) -> int:
        """The id of ``prefix``, an interned prefix with loops permuted in place (its
        runs of backing nodes unchanged, so it is canonical too)."""
        return self._intern_canonical(as_entries(prefix))

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
            self._steps.append((typed, _has_hosting(typed)))
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
        new = np.array(
            [
                self._extended(p, entries[w], kinds[w], steps[w])
                for p, w in zip(parents.tolist(), chosen.tolist(), strict=True)
            ],
            dtype=np.int64,
        )
        return new[inverse.ravel()]

    def _extended(self, parent: int, entries: tuple, kind: int, step: int) -> int:
        """The id of prefix ``parent`` followed by ``entries``: one step down when they
        are one (a run of loops after a node, or one node) and the prefix stays
        canonical (:func:`canonical`), else the whole prefix interned again."""
        if not entries:
            return parent
        last = self._last[parent]
        one_step = kind == _NODE or (kind == _LOOPS and last != _KINDS[LOOP])
        # Canonical still: no hosting mark, or one that starts a run of backing nodes.
        if one_step and (not self._steps[step][1] or last != _KINDS[BACK]):
            return self._child(parent, step)
        return self.intern(self.prefix(parent) + tuple(entries))

    def _child(self, parent: int, step: int) -> int:
        """The id of prefix ``parent`` followed by step ``step`` (new if not seen)."""
        children = self._children
        if children is None:  # unpickled: rebuild
            children = self._children = {
                p * _STEPS + k: q
                for q, (p, k) in enumerate(zip(self._parent, self._step, strict=True))
                if q
            }
        key = parent * _STEPS + step
        got = children.get(key)
        if got is None:
            got = children[key] = len(self._parent)
            self._parent.append(parent)
            self._step.append(step)
            self._last.append(_KINDS[self._steps[step][0][-1].kind])
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

_KINDS = {LOOP: 1, BACK: 2, MARK: 3}


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


def _without_marks(prefix: Prefix) -> Prefix:
    return tuple(e for e in prefix if e.kind != MARK)


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
