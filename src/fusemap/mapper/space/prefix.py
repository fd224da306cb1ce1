"""Fused prefixes: the loops and fused backing nodes at the top of a pmapping.

A pmapping's *fused prefix* is the sequence, from the root down to its deepest fused
backing node, of loops ``("loop", var, tile)`` and fused backing nodes
``("back", tensor, memory)``. A spatial loop's tile is a :class:`SpatialTile`, which
names its fanout too. It fixes the pmapping's compatibility (FFM §4): for each
shared tensor, the memory that backs it and the loops above that node. The tile-shape
search interns prefixes as integers so it can keep rows of different prefixes apart.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

Token = tuple

HOSTING = "@hosting"
"""Tensor name of the virtual hosting holder (:mod:`fusemap.mapper.space.templates`): the loops
above it are shared with the users of a tensor held tiled across the Einsum."""


MARK = "mark"
"""Token kind of a pmapping's own storage node among its fused loops, kept in a
prefix only while its template is searched and its loop orders are added (rows that
place the same loops differently around the node are then never compared); the
tables' prefixes have none (:meth:`PrefixInterner.unmarked`)."""


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


def is_spatial(token: Token) -> bool:
    """Whether a prefix token is a spatial loop."""
    return token[0] == "loop" and isinstance(token[2], SpatialTile)


def marked(template) -> bool:
    """Whether a template has a virtual hosting holder."""
    return any(h.virtual and h.tensor == HOSTING for h in template.holders)


def canonical(prefix: tuple[Token, ...]) -> tuple[Token, ...]:
    """``prefix`` with each hosting mark first in its run of adjacent backing nodes.

    The mark is no storage node: all it says is how many loops lie above it, which its
    place within a run of nodes (no loop between them) does not change. Templates that
    place it at each point of one run give the same pmappings; one prefix keeps them in
    one group (pruned together) instead of many."""
    if not any(t[0] == "back" and t[1] == HOSTING for t in prefix):
        return prefix
    out: list[Token] = []
    run: list[Token] = []
    for t in (*prefix, ("end",)):
        if t[0] == "back":
            run.append(t)
            continue
        run.sort(key=lambda x: x[1] != HOSTING)  # stable: the others keep their order
        out += run
        run = []
        if t[0] != "end":
            out.append(t)
    return tuple(out)


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
    """Integer ids for fused prefixes (id 0 is the empty prefix)."""

    def __init__(self) -> None:
        self.prefixes: list[tuple[Token, ...]] = [()]
        self._ids: dict[tuple[Token, ...], int] = {(): 0}
        self._children: dict[tuple[int, int], int] = {}  # (parent, tokens' id) -> id
        self._token_ids: dict[tuple[Token, ...], int] = {}  # tuples hash slowly: ids once

    def __getstate__(self) -> dict:
        # caches: not worth sending to the parent
        caches = ("_loops", "_settled", "_unmarked")
        fresh = {"_children": {}, "_token_ids": {}}
        return {k: v for k, v in self.__dict__.items() if k not in caches} | fresh

    def intern(self, prefix: tuple[Token, ...]) -> int:
        """The id of ``prefix`` (new ids for new prefixes; see :func:`canonical`)."""
        return self._intern_canonical(canonical(prefix))

    def loop_counts(self, ids: np.ndarray) -> np.ndarray:
        """Number of loops of each prefix ``ids``."""
        return self._per_prefix("_loops", ids, lambda t: sum(x[0] == "loop" for x in t))

    def settled(self, ids: np.ndarray) -> np.ndarray:
        """Prefixes ``ids``, complete (their deepest fused node reached), with their
        :data:`MARK` tokens dropped when no gap (a run of loops between two nodes) holds
        two loops: such a row has one loop order, so where its loops lie around its own
        nodes no longer matters."""

        def settle(tokens: tuple[Token, ...]) -> int:
            if any(t[0] == MARK for t in tokens) and not _has_gap_of_two(tokens):
                return self.intern(tuple(t for t in tokens if t[0] != MARK))
            return self._ids[tokens]

        return self._per_prefix("_settled", ids, settle)

    def unmarked(self, ids: np.ndarray) -> np.ndarray:
        """The ids of prefixes ``ids`` without their :data:`MARK` tokens."""
        return self._per_prefix(
            "_unmarked", ids, lambda t: self.intern(tuple(x for x in t if x[0] != MARK))
        )

    def _per_prefix(self, name: str, ids: np.ndarray, of: Callable[[tuple], int]) -> np.ndarray:
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

    def intern_reordered(self, prefix: tuple[Token, ...]) -> int:
        """The id of ``prefix``, an interned prefix with loops permuted in place (its
        runs of backing nodes unchanged, so it is canonical too)."""
        return self._intern_canonical(prefix)

    def _intern_canonical(self, prefix: tuple[Token, ...]) -> int:
        got = self._ids.get(prefix)
        if got is None:
            got = self._ids[prefix] = len(self.prefixes)
            self.prefixes.append(prefix)
        return got

    def extend(self, ids: np.ndarray, tokens: list[tuple[Token, ...]], which: np.ndarray):
        """New ids: prefix ``ids[r]`` followed by ``tokens[which[r]]`` for every row r."""
        ids = np.asarray(ids, dtype=np.int64)
        which = np.asarray(which, dtype=np.int64)
        # One integer per (prefix, token) pair: a 1-D unique is far faster than axis=0.
        uniq, inverse = np.unique(ids * len(tokens) + which, return_inverse=True)
        parents, chosen = np.divmod(uniq, len(tokens))
        known = self._token_ids
        tids = [known.setdefault(x, len(known)) for x in tokens]
        new = np.array(
            [
                self._child(p, tokens[w], tids[w])
                for p, w in zip(parents.tolist(), chosen.tolist(), strict=True)
            ],
            dtype=np.int64,
        )
        return new[inverse.ravel()]

    def _child(self, parent: int, tokens: tuple[Token, ...], tid: int) -> int:
        """The id of prefix ``parent`` followed by ``tokens`` (of id ``tid`` in
        ``_token_ids``; memoized: no long tuples hashed again)."""
        key = (parent, tid)
        got = self._children.get(key)
        if got is None:
            whole = self.prefixes[parent] + tokens
            # A canonical prefix followed by tokens without a hosting mark is canonical
            # (a mark first in its run of nodes stays first when nodes are appended).
            plain = all(t[1] != HOSTING for t in tokens)
            got = self._children[key] = (
                self._intern_canonical(whole) if plain else self.intern(whole)
            )
        return got

    def compatibility(
        self, seq: int, shared: frozenset[str], top: dict[str, str]
    ) -> tuple[Compatibility, ...]:
        """Per shared tensor (sorted): backing memory and loops above (``top``: the
        memory backing each shared tensor when it is not fused)."""
        loops: list[tuple[str, int]] = []
        fused: dict[str, Compatibility] = {}
        for kind, a, b in self.prefixes[seq]:
            if kind == "loop":
                loops.append((a, b))
            else:
                fused[a] = Compatibility(a, b, tuple(loops))
        return tuple(fused.get(t) or Compatibility(t, top[t], ()) for t in sorted(shared))

    def depth(self, seq: int) -> int:
        """Loops above the deepest fused backing node."""
        toks = self.prefixes[seq]
        last = max((i for i, t in enumerate(toks) if t[0] == "back"), default=-1)
        return sum(1 for t in toks[:last] if t[0] == "loop")


def _has_gap_of_two(tokens: tuple[Token, ...]) -> bool:
    run = 0
    for t in tokens:
        run = run + 1 if t[0] == "loop" else 0
        if run >= 2:
            return True
    return False


class ForgetfulInterner(PrefixInterner):
    """Every prefix is the empty one: the search then compares the rows of every prefix
    together, which is what a template's least energy over the whole fused space needs
    (:mod:`fusemap.mapper.full_space`), not what a join needs."""

    def extend(self, ids: np.ndarray, tokens: list[tuple[Token, ...]], which: np.ndarray):
        return np.zeros(len(np.asarray(ids)), dtype=np.int64)
