"""The template's spatial loops in the search: the tiles they can spread, the rows they
leave, and the early drops that follow (a tile no spatial loop below can spread has no
complete tile shape)."""

from __future__ import annotations

import copy
import itertools
import math

import numpy as np

from ..space.templates import Template
from .rank_tiles import RankTiles, tiles_reaching
from .stage import Stage
from .uneven import UnevenCounts


class Spreads:
    """Spatial loops of one template, over the tiles of its rank variables; ``uneven``:
    the per-row counts when some loop may spread a rank unevenly (else None)."""

    def __init__(self, template: Template, tiles: RankTiles, uneven: UnevenCounts | None):
        self.template, self.tiles, self.uneven = template, tiles, uneven
        self.memo: dict[tuple, np.ndarray | None] = {}

    def with_uneven(self, uneven: UnevenCounts | None) -> Spreads:
        """These spreads over another copy of the uneven counts (its own shared trips);
        the tables worked out are shared (their keys name the trips)."""
        twin = copy.copy(self)
        twin.uneven = uneven
        return twin

    def _choices(self) -> tuple | None:
        return None if self.uneven is None else tuple(self.uneven.choices)

    def spreadable(self, j: int, k: int) -> np.ndarray | None:
        """The tiles of variable ``k`` that the spatial loops above node ``j + 1`` can
        spread (None: none of them is over ``k``).

        A row with another tile there is dropped after the gap (:meth:`spread` leaves it
        no tile below), and until then it shares no pruning group with a row that stays
        (their tiles of ``k`` differ), so dropping it as soon as its loop over ``k`` is
        chosen changes nothing else.
        """
        key = (j, k, self._choices())
        if key not in self.memo:
            v = self.tiles.vars[k]
            spatial = self.template.spatial
            loops = [i for i, s in enumerate(spatial) if s.slot == j + 1 and s.var == v]
            cands = self.tiles.cands[k]
            if not loops:
                self.memo[key] = None
            elif self.uneven is None:
                trips = math.prod(spatial[i].trips for i in loops)
                self.memo[key] = cands[cands % trips == 0]
            else:
                self.memo[key] = self.uneven.spreadable(k, loops, cands)
        return self.memo[key]

    def spreadable_only(
        self, j: int, k: int, cur: np.ndarray, par: np.ndarray, looks_ahead: bool
    ) -> tuple[np.ndarray, np.ndarray]:
        """The rows (``cur``, their parents ``par``) whose tile of variable ``k`` the
        spatial loops below gap ``j`` can still spread (with ``looks_ahead``, any of
        them: :meth:`reaching`) and, in the last gap, take to one operation."""
        spreadable = self.spreadable(j, k)
        if spreadable is None and looks_ahead:
            spreadable = self.reaching(j, k)
        if spreadable is not None:
            fine = np.isin(cur[:, k], spreadable)
            cur, par = cur[fine], par[fine]
        if j == len(self.template.holders) - 1:  # the last gap ends at one operation
            fine = np.zeros(len(cur), dtype=bool)
            for size in self.reaches_leaf(k):
                fine |= cur[:, k] == size
            cur, par = cur[fine], par[fine]
        return cur, par

    def reaching(self, j: int, k: int) -> np.ndarray | None:
        """The tiles of variable ``k`` after gap ``j`` from which temporal loops can still
        reach one that the nearest spatial loops over ``k`` further down can spread
        (None: no such loop below, or one right below the gap: :meth:`spreadable`).

        No spatial loop over ``k`` sits in between, so only temporal loops change the
        tile until then; a row with another tile has no complete tile shape. Only for a
        search whose stages no template with other loops below shares
        (:attr:`TemplateTiler.looks_ahead`).
        """
        key = ("reaching", j, k, self._choices())
        if key not in self.memo:
            v = self.tiles.vars[k]
            slots = [s.slot for s in self.template.spatial if s.var == v and s.slot > j]
            out = None
            if slots and min(slots) > j + 1:
                target = self.spreadable(min(slots) - 1, k)
                assert target is not None
                bound, imperfect = int(self.tiles.bounds[k]), bool(self.tiles.imperfect[k])
                out = tiles_reaching(bound, imperfect, tuple(int(x) for x in target))
            self.memo[key] = out
        return self.memo[key]

    def reaches_leaf(self, k: int) -> set[int]:
        """The sizes of variable ``k`` after the last gap's temporal loops that the
        spatial loops above the compute leaf (if any) take to one: their trips' product,
        or the whole rank (a first loop that cuts it unevenly: 5 over 3 instances as
        2 + 2 + 1, then 2)."""
        v, bound = self.tiles.vars[k], int(self.tiles.bounds[k])
        n = len(self.template.holders)
        spatial = self.template.spatial
        here = [i for i, s in enumerate(spatial) if s.slot == n and s.var == v]
        if not here:
            return {1}
        uneven = self.uneven
        trips = [uneven.trips(i) if uneven else (spatial[i].trips,) for i in here]
        return {math.prod(c) for c in itertools.product(*trips)} | {bound}

    def state_above(self, prev: Stage | None, rows: int) -> np.ndarray | None:
        """The uneven-spread state of the rows entering the next node (None: no such
        spatial loop in the template)."""
        if self.uneven is None:
            return None
        if prev is None or prev.state is None:
            return self.uneven.initial(rows)
        return self.uneven.fit(prev.state)

    def spread(self, j: int, mids: np.ndarray, origin, state):
        """The spatial loops above node ``j + 1``: (mids, tiles below them, valid,
        origin, state) of the rows they leave."""
        if self.uneven is None:
            below = mids.copy()
            ok = np.ones(len(below), dtype=bool)
            for s in self.template.spatial:
                if s.slot == j + 1:
                    k = self.tiles.vars.index(s.var)
                    ok &= below[:, k] % s.trips == 0
                    below[:, k] //= s.trips
            return mids, below, ok, origin, state
        assert state is not None
        rep, below, cols = self.uneven.spread(j, mids)
        mids, origin = mids[rep], origin[rep]
        state = state[origin]
        for i, s in enumerate(self.template.spatial):
            if s.slot == j + 1:
                state[:, 2 * i : 2 * i + 2] = cols[:, 2 * i : 2 * i + 2]
        return mids, below, self.uneven.allowed(j + 1, state), origin, state
