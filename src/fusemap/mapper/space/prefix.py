"""Fused prefixes: the loops and fused backing nodes at the top of a pmapping.

A pmapping's *fused prefix* is the sequence, from the root down to its deepest fused
backing node, of loops (:class:`LoopEntry`) and fused backing nodes
(:class:`BackingEntry`); while a template is searched, also of its own storage nodes
among those loops (:class:`MarkEntry`). A spatial loop's tile is a
:class:`SpatialTile`, which names its fanout too. It fixes the pmapping's
compatibility (FFM §4): for each shared tensor, the memory that backs it and the loops
above that node. The tile-shape search interns prefixes as integers so it can keep rows
of different prefixes apart (:mod:`.interner`).

Entries are named tuples whose first field is their kind (``"loop"``, ``"back"``,
``"mark"``): they hash, compare and sort as the plain tuples ``(kind, ...)`` they are,
and the interner turns such plain tuples into entries (:func:`as_entries`).
"""

from __future__ import annotations

from typing import Final, Literal, NamedTuple

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


def has_hosting(entries: tuple) -> bool:
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
    if not has_hosting(prefix):
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
