"""Bottom-up fronts (:mod:`.suffix`) shared: by the templates of one search while
they need them (:class:`FrontCache`), and across the tables of Einsums equal up to
names (:class:`FrontStore`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .result import TemplateResult, renamed_result
from .stage import Stage
from .tiler import TemplateTiler

if TYPE_CHECKING:
    from .front_floor import FrontFloor


@dataclass
class Front:
    """Per tile shape at a node (``state``), the Pareto-optimal costs of the nodes below."""

    state: np.ndarray  # (R,) encoded tile shape at the node
    crit: np.ndarray  # (R, front_width) criteria of this node and everything below
    mids: np.ndarray  # (R,) encoded sizes after the gap's temporal loops
    child: np.ndarray  # (R,) row of the next node's front
    complete_to: float = np.inf
    """Every row of energy at most this is here (rows above a ceiling were dropped)."""
    below: Front | None = None
    """The next node's front, which ``child`` indexes (fronts kept across tables may be
    built again with another ceiling: each keeps its own)."""
    _by_state: tuple[np.ndarray, np.ndarray] | None = None

    def by_state(self) -> tuple[np.ndarray, np.ndarray]:
        """(rows ordered by state, their states): worked out once, the front is met by
        many prefixes."""
        if self._by_state is None:
            order = np.argsort(self.state, kind="stable")
            self._by_state = (order, self.state[order])
        return self._by_state


class FrontStore:
    """Fronts kept from one pmapping table for the next of an Einsum equal up to names
    (GPT-3's Q, K and V build the same 3,306 fronts: the second and third build none).

    Keys are the fronts' own (:meth:`SuffixSearch._key`, tensors named by place), the
    room each memory leaves, and ``context``: everything a table's tilers read besides
    their template (the Einsum up to names, the architecture, the search's knobs),
    given by the caller. Bounded: fronts past ``budget`` bytes are not kept."""

    def __init__(self, budget: int = 0):
        self.budget = budget or FRONT_STORE_BYTES
        self.used = 0
        self.fronts: dict[tuple, Front] = {}
        self.alone: dict[tuple, tuple[TemplateResult, tuple[str, ...]]] = {}
        self.context: tuple | None = None
        self.frozen = False  # the last table of its kind: keep nothing more
        self.hits = 0
        self.alone_hits = 0

    def key(self, front_key: tuple, tiler) -> tuple:
        return (self.context, front_key, _room(tiler))

    def get(self, front_key: tuple, tiler) -> Front | None:
        got = self.fronts.get(self.key(front_key, tiler))
        self.hits += got is not None
        return got

    def put(self, front_key: tuple, tiler, front: Front) -> None:
        """Keep ``front`` (in place of one kept before: built again, it is more complete)."""
        if self.frozen:
            return
        key = self.key(front_key, tiler)
        old = self.fronts.pop(key, None)
        self.used -= _nbytes(old) if old is not None else 0
        size = _nbytes(front)
        if self.used + size <= self.budget:
            self.fronts[key] = front
            self.used += size

    # ------------------------------------------------------------ templates alone
    def _alone_key(self, tiler) -> tuple:
        t = tiler.t
        place = {name: k for k, name in enumerate(tiler.info.tensors)}
        holders = holders_by_place(t.holders, place)
        shape = (t.compute, t.compute_level, holders, t.spatial, tuple(sorted(t.blocked)))
        return (self.context, shape, _room(tiler))

    def result(self, tiler) -> TemplateResult | None:
        """What an earlier table's search found for this template that fuses nothing and
        holds nothing (``tiler.alone``), renamed to this Einsum's tensors."""
        got = self.alone.get(self._alone_key(tiler))
        if got is None:
            return None
        self.alone_hits += 1
        result, names = got
        tensors = dict(zip(names, tiler.info.tensors, strict=True))
        return renamed_result(result, tiler.t.einsum, tensors, {})

    def put_result(self, tiler, result: TemplateResult) -> None:
        """Offer the result of a template that fuses nothing and holds nothing. Its rows
        have the empty fused prefix (id 0 in every table), else it is not kept."""
        empty_prefix = result.seq is None or not result.seq.any()
        if self.frozen or not empty_prefix:
            return
        result = result.compact(np.arange(result.rows))  # only the trail of its rows
        size = sum(a.nbytes for a in (result.energy, *result.stage_sizes, *result.stage_mids))
        if self.used + size <= self.budget:
            self.alone[self._alone_key(tiler)] = (result, tuple(tiler.info.tensors))
            self.used += size


def _nbytes(front: Front) -> int:
    return sum(a.nbytes for a in (front.state, front.crit, front.mids, front.child))


def holders_by_place(holders, place: dict[str, int]) -> tuple:
    """Storage nodes with their tensors named by place in the Einsum (virtual holders
    keep their marker names): equal for Einsums equal up to names."""
    return tuple(
        (place.get(h.tensor, h.tensor), h.component, h.level, h.backing, h.virtual) for h in holders
    )


def _room(tiler) -> tuple:
    """What each memory leaves a tiler's template (its size less what is held)."""
    return tuple(sorted(tiler.reservations.capacity.items()))


FRONT_STORE_BYTES = 1 << 30
"""What a :class:`FrontStore` may hold (GPT-3 2048 tokens: Q's fronts take 830 MB)."""


class FrontCache:
    """Fronts shared between the templates of one search. Each is dropped once the last
    template that needs it is done: the live fronts stay small (GPT-3's Q: 60 MB at
    most), all of them would not (830 MB). ``store``: fronts kept across tables."""

    def __init__(self, store: FrontStore | None = None):
        self.store = store
        self.ceiling = np.inf
        """Energy above which no front row is of use any more (set by the search as the
        least energy falls, :func:`fusemap.mapper.tiling.search.tile_templates`; only falls)."""
        self.fronts: dict[int, Front] = {}
        self.floors: dict[int, FrontFloor] = {}
        """Per front id, its :class:`~.front_floor.FrontFloor` (dropped with the front)."""
        self.axes: dict[tuple, tuple] = {}
        self.tables: dict[tuple, np.ndarray] = {}  # count bases per tile shape code
        self._backed: dict[tuple, tuple] = {}
        self._ids: dict[tuple, int] = {}  # front key -> small id (long tuples hash slowly)
        self._key_of: list[tuple] = []  # small id -> front key
        self._by_tiler: dict[int, list[int]] = {}
        self._keys: dict[int, list[int]] = {}
        self._uses: Counter[int] = Counter()

    def register(self, i: int, front_ids: list[int]) -> None:
        """Template ``i`` will need the fronts ``front_ids`` (kept until it is done)."""
        self._keys[i] = front_ids
        self._uses.update(front_ids)

    def backed(self, prev: Stage | None, seq: np.ndarray, token: tuple, interner) -> np.ndarray:
        """The prefix rows' fused prefixes followed by the fused node ``token``. Templates
        that share the rows above their fused node come one after another: the last
        answer per token is kept for them."""
        last = self._backed.get(token)
        if last is None or last[0] is not prev or last[1] is not seq:
            extended = interner.extend(seq, [token], np.zeros(len(seq), dtype=np.int64))
            last = self._backed[token] = (prev, seq, interner.settled(extended))
        return last[2]

    def ids_of(self, tiler: TemplateTiler, front_keys: Callable[[], list[tuple]]) -> list[int]:
        """Front ids of a template's nodes from its deepest fused node down (their keys,
        ``front_keys()``, worked out once per tiler)."""
        got = self._by_tiler.get(id(tiler))
        if got is None:
            got = []
            for k in front_keys():
                if k not in self._ids:
                    self._ids[k] = len(self._key_of)
                    self._key_of.append(k)
                got.append(self._ids[k])
            self._by_tiler[id(tiler)] = got
        return got

    def kept(self, front_id: int, tiler) -> Front | None:
        """The front ``front_id`` as an earlier table built it, if the store has it."""
        return None if self.store is None else self.store.get(self._key_of[front_id], tiler)

    def keep(self, front_id: int, tiler, front: Front) -> None:
        """Offer a front just built to the store (for the next table of its kind)."""
        if self.store is not None:
            self.store.put(self._key_of[front_id], tiler, front)

    def done(self, i: int) -> None:
        """Template ``i`` needs no front any more."""
        for key in self._keys.pop(i, []):
            self._uses[key] -= 1
            if self._uses[key] == 0:
                del self._uses[key]
                self.fronts.pop(key, None)
                self.floors.pop(key, None)
