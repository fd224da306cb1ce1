"""Counts of templates whose spatial loops may spread a rank unevenly (3 over 2: 2 + 1).

For totals the model counts every real tile, so a node's counts still depend only on the
tile shape at the node. Per instance (latency) and under a multicast or a reduction, a
spatial loop keeps *one* tile per parent tile (``model/reuse.py``, ``split``). Below the
first loop over a variable (which may take any size) every loop divides the tile above,
so in that view a variable still has ``B // s`` tiles of its tile ``s`` and one of
``B % s``, for a *virtual bound* ``B``: the rank's bound, cut by each such spatial loop
above the point from ``B`` to ``(B // S) * s + min(s, B % S)`` (``S`` the tile above the
loop, ``s`` the one below). With even spreads that is ``B / trips``, the constant the
coefficients of :mod:`fusemap.mapper.tiling.terms` divide by; with uneven ones it depends on the
row's tiles around its spatial loops, so those are carried as *state* columns of the
rows. An output's first visits count, per instance that starts its own partial sums,
the tile that instance really gets (the model's ``first_visits``), from the same
columns. The counts follow ``count_tensor`` term by term.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

import numpy as np

from ...model.rules import shares_parent_transfer, skips_first_reads
from ...spec.arch_eval import FlatArch
from ...spec.resolve import EinsumInfo
from ..distinct import sorted_distinct
from ..space.spatial import SpatialLoop
from ..space.templates import Template
from .columns import OPERATIONS
from .costs import NodeCosts
from .rank_tiles import RankTiles
from .terms import fill_basis, holder_traffic
from .uneven_first import first_visits, most_first_visits

Mode = tuple[int, ...]
"""Spatial loops (indices into the template's) counted one tile per parent tile."""


def spread_tiles(bound: int, tile: int, trips: int, uneven: bool = True) -> list[int]:
    """Tiles a spatial loop over ``trips`` instances may leave below ``tile``: its even
    share, or, when ``tile`` is the whole rank (the variable's first loop, which may take
    any size) and the variable may be cut unevenly (``uneven``: its tiles may be any
    size, not only divisors of the rank), every size that needs exactly ``trips``
    instances."""
    if tile == bound and uneven:
        return [s for s in range(1, bound + 1) if -(-bound // s) == trips]
    return [tile // trips] if tile % trips == 0 else []


@lru_cache(maxsize=256)
def _spread_table(
    bound: int, trips: tuple[int, ...], uneven: bool
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`spread_tiles` of every tile up to ``bound``, over each of ``trips`` in
    turn, as CSR (offsets, values)."""
    lists = [
        [s for t in trips for s in spread_tiles(bound, tile, t, uneven)] if tile else []
        for tile in range(bound + 1)
    ]
    offsets = np.cumsum([0] + [len(x) for x in lists]).astype(np.int64)
    values = np.array([x for o in lists for x in o], dtype=np.int64)
    return offsets, values


def spatial_tiles(loops: list[SpatialLoop], variables: list[str], mid, below) -> list[int]:
    """The tile each of one slot's spatial ``loops`` leaves, given the tiles above them
    (``mid``) and below them all (``below``): only a variable's first loop may cut
    unevenly, so each other loop's tile is the next one's times its trips."""
    out = [0] * len(loops)
    tile = {v: int(below[k]) for k, v in enumerate(variables)}
    for i in range(len(loops) - 1, -1, -1):
        out[i] = tile[loops[i].var]
        tile[loops[i].var] *= loops[i].trips
    return out


def virtual_bound(bound, above, below):
    """The bound a variable's tiles cut, counted one tile per parent tile, below a spatial
    loop from tile ``above`` to tile ``below`` when it was ``bound`` above the loop."""
    return (bound // above) * below + np.minimum(below, bound % above)


class UnevenCounts:
    """Per-row counts of one template's nodes, with the state the rows carry."""

    def __init__(
        self, t: Template, info: EinsumInfo, flat: FlatArch, tiles: RankTiles, costs: NodeCosts
    ) -> None:
        self.template, self.info, self.tiles, self.costs = t, info, tiles, costs
        self.loops = list(t.spatial)
        self.n = len(t.holders)
        level = {c.name: i for i, c in enumerate(flat.path)}
        self.may_reuse = {(c.name, d.name): d.may_reuse for c in flat for d in c.spatial}
        self.skip = {c.name: c.skip_initial_output_write for c in flat}
        # Views: 0 (totals), 1 + level (per instance of a component at that level).
        # State columns: per spatial loop its tiles above and below. Templates that
        # agree down to a node have the same columns up to their spatial loops there
        # (they share stages; a stage's state is cut or padded, see :meth:`fit`).
        self.views: list[Mode] = [()] + [
            tuple(i for i, s in enumerate(self.loops) if s.level <= lv)
            for lv in range(len(flat.path))
        ]
        self.view_of = {c.name: 1 + level[c.name] for c in flat.path}
        self.width = 2 * len(self.loops)
        # Loops over a variable that may be cut unevenly are *free*: templates that differ
        # only in their trips are searched together (:meth:`share`), each row's trips
        # read from its state (a spread's trips are ceil(tile above / tile below)).
        self.free = [
            i for i, s in enumerate(self.loops) if tiles.imperfect[tiles.vars.index(s.var)]
        ]
        # Trips codes: mixed radix, a free loop's trips at most its variable's bound.
        bounds = [int(tiles.bounds[tiles.vars.index(self.loops[i].var)]) for i in self.free]
        self.radix = 1 + max(bounds, default=0)
        if self.radix ** len(self.free) >= 2**62:  # codes would overflow: search alone
            self.free = []
        # Loops over a variable cut evenly only (its tiles divide its rank): their
        # virtual bound is the bound over their trips whatever their tiles (see
        # :meth:`canonical`).
        self.even = [
            i for i, s in enumerate(self.loops) if not tiles.imperfect[tiles.vars.index(s.var)]
        ]
        self.choices: list[tuple[int, ...]] = [self.own]
        self.holders: dict[int, list[tuple[str, int, tuple, tuple]]] = {}
        for x in info.tensors:
            chain = tuple(j for j, h in enumerate(t.holders) if h.tensor == x) + (self.n,)
            comps = tuple(t.holders[j].component for j in chain[:-1]) + (t.compute,)
            for k in range(1, len(chain)):
                self.holders.setdefault(chain[k], []).append((x, k, chain, comps))

    # ------------------------------------------------------------ shared trips
    @property
    def own(self) -> tuple[int, ...]:
        """This template's trips of its free loops."""
        return tuple(self.loops[i].trips for i in self.free)

    def share(self, choices: list[tuple[int, ...]]) -> None:
        """Search for every template of ``choices`` (their free loops' trips; templates
        otherwise equal): rows carry their trips, and each template keeps its own at
        the end (:meth:`trips_code`)."""
        self.choices = sorted(set(choices))

    def key(self, slot: int) -> tuple:
        """What the search down to the spatial loops of ``slot`` depends on of the loops:
        their places, and the trips each may take (for free loops, as combinations)."""
        free = set(self.free)
        loops = tuple(
            replace(s, trips=0) if i in free else s
            for i, s in enumerate(self.loops)
            if s.slot <= slot
        )
        reached = [k for k, i in enumerate(self.free) if self.loops[i].slot <= slot]
        return loops, tuple(sorted({tuple(c[k] for k in reached) for c in self.choices}))

    def trips(self, i: int) -> tuple[int, ...]:
        """The trips loop ``i`` may take in the shared search."""
        if i not in self.free:
            return (self.loops[i].trips,)
        k = self.free.index(i)
        return tuple(sorted({c[k] for c in self.choices}))

    def trips_code(self, state: np.ndarray, slot: int | None = None) -> np.ndarray:
        """Per row, one integer for the trips of its free loops (those above ``slot``,
        or all), mixed radix."""
        code = np.zeros(len(state), dtype=np.int64)
        radix = self.radix
        for i in self.free:
            if slot is None or self.loops[i].slot <= slot:
                big, small = self.tiles_around(i, state)
                code = code * radix + -(-big // np.maximum(small, 1))
        return code

    def _code(self, choice: tuple[int, ...], slot: int | None = None) -> int:
        code, radix = 0, self.radix
        for k, i in enumerate(self.free):
            if slot is None or self.loops[i].slot <= slot:
                code = code * radix + choice[k]
        return code

    def tiles_at(self, slot: int, state: np.ndarray) -> np.ndarray:
        """Per row, the tile each spatial loop of ``slot`` leaves (loop order)."""
        cols = [2 * i + 1 for i, s in enumerate(self.loops) if s.slot == slot]
        return state[:, cols].astype(np.int64)

    def allowed(self, slot: int, state: np.ndarray) -> np.ndarray:
        """Rows whose trips so far (spatial loops down to ``slot``) some template has."""
        if len(self.choices) == 1:
            return np.ones(len(state), dtype=bool)
        codes = np.array(sorted({self._code(c, slot) for c in self.choices}), dtype=np.int64)
        return np.isin(self.trips_code(state, slot), codes)

    def own_rows(self, state: np.ndarray) -> np.ndarray:
        """Rows of this template (its own trips) among those of the shared search."""
        if len(self.choices) == 1:
            return np.ones(len(state), dtype=bool)
        return self.trips_code(state) == self._code(self.own)

    # ------------------------------------------------------------ state
    def initial(self, rows: int) -> np.ndarray:
        """State of rows above every node: no spatial loop yet."""
        return np.zeros((rows, self.width))

    def fit(self, state: np.ndarray) -> np.ndarray:
        """A shared stage's state in this template's width (the columns of spatial loops
        not reached yet are 0 in every template)."""
        if state.shape[1] >= self.width:
            return state[:, : self.width]
        return np.concatenate([state, np.zeros((len(state), self.width - state.shape[1]))], 1)

    def canonical(self, slot: int, state: np.ndarray) -> np.ndarray:
        """``state`` with the tiles around each evenly cut spatial loop down to ``slot``
        written as (trips, 1): rows that differ only there face the same future.

        Every count reads those tiles through :func:`virtual_bound` (first visits
        read a variable cut evenly through its loops' trips alone). For a variable cut
        evenly the tile ``S`` above the loop divides the (virtual) bound ``B`` and
        leaves ``S / trips`` below, so
        ``virtual_bound(B, S, S / trips) = B / trips = virtual_bound(B, trips, 1)``.
        """
        for i in self.even:
            if self.loops[i].slot <= slot:
                col = 2 * i
                state[:, col] = self.loops[i].trips
                state[:, col + 1] = 1
        return state

    def spread(self, j: int, mids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The spatial loops above node ``j + 1``: (row of ``mids`` each result row comes
        from, tiles below them, state-wide columns where each of these loops has its
        tiles above and below)."""
        rep = np.arange(len(mids), dtype=np.int64)
        below = mids.copy()
        cols = np.zeros((len(mids), self.width), dtype=np.int64)
        variables, bounds = self.tiles.vars, self.tiles.bounds
        for i, s in enumerate(self.loops):
            if s.slot != j + 1:
                continue
            k = variables.index(s.var)
            # A variable cut evenly only (a rank above the spread bound: its tiles are
            # divisors) is spread evenly, even in a template with uneven spreads.
            offsets, values = _spread_table(
                int(bounds[k]), self.trips(i), bool(self.tiles.imperfect[k])
            )
            start, stop = offsets[below[:, k]], offsets[below[:, k] + 1]
            count = stop - start
            pick = np.repeat(np.arange(len(below)), count)
            within = np.arange(len(pick)) - np.repeat(np.cumsum(count) - count, count)
            tiles = values[np.repeat(start, count) + within]
            rep, below, cols = rep[pick], below[pick], cols[pick]
            cols[:, 2 * i] = below[:, k]
            cols[:, 2 * i + 1] = tiles
            below[:, k] = tiles
        return rep, below, cols

    def spreadable(self, k: int, loops: list[int], cands: np.ndarray) -> np.ndarray:
        """The tiles among ``cands`` of variable ``k`` that spatial ``loops`` (all of one
        slot, over ``k``, in order) can spread, each with some trips it may take: those
        :meth:`spread` leaves some tile below."""
        bound, imperfect = int(self.tiles.bounds[k]), bool(self.tiles.imperfect[k])
        origin = np.arange(len(cands))
        tiles = cands.astype(np.int64)
        for i in loops:
            offsets, values = _spread_table(bound, self.trips(i), imperfect)
            count = offsets[tiles + 1] - offsets[tiles]
            pick = np.repeat(np.arange(len(tiles)), count)
            within = np.arange(len(pick)) - np.repeat(np.cumsum(count) - count, count)
            tiles = values[np.repeat(offsets[tiles], count) + within]
            origin = origin[pick]
        return cands[sorted_distinct(origin)]

    def ids(self, state: np.ndarray) -> np.ndarray:
        """One integer per distinct state (rows with equal tiles but other states face
        other futures): mixed radix over the columns (tiles) that vary, renumbered when
        the radix would overflow."""
        key = np.zeros(len(state), dtype=np.int64)
        radix = 1
        n = int(self.tiles.bounds.max()) + 1
        for c in range(state.shape[1]):
            col = state[:, c]
            if not len(col) or col.min() == col.max():
                continue
            values = col.astype(np.int64)
            if radix * n >= 2**62:
                _, inverse = np.unique(key, return_inverse=True)
                key = inverse.ravel().astype(np.int64)
                radix = int(key.max()) + 1
            key = key * n + values
            radix *= n
        return key

    # ------------------------------------------------------------ virtual bounds
    def _cut(self, i: int, bound, state: np.ndarray):
        return virtual_bound(bound, *self.tiles_around(i, state))

    def tiles_around(self, i: int, state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Tiles above and below spatial loop ``i``, per row."""
        col = 2 * i
        return state[:, col].astype(np.int64), state[:, col + 1].astype(np.int64)

    def bounds(self, mode: Mode, position: int, state: np.ndarray) -> dict:
        """Per variable, the virtual bound at a node's ``position`` in ``mode``."""
        out: dict = {v: int(b) for v, b in zip(self.tiles.vars, self.tiles.bounds, strict=True)}
        for i, s in enumerate(self.loops):
            if s.slot <= position and i in mode:
                out[s.var] = self._cut(i, out[s.var], state)
        return out

    def multicast_loops(self, tensor: str, chain: tuple, k: int) -> set[int]:
        """The spatial loops (indices) between ``tensor``'s holder ``k`` of ``chain`` and
        its parent whose instances share one transfer from the parent (multicast or
        reduction): the loops a parent's traffic is cut by."""
        info = self.info
        return {
            i
            for i, s in enumerate(self.loops)
            if chain[k - 1] < s.slot <= chain[k]
            and shares_parent_transfer(
                info.relevance(tensor, s.var),
                tensor,
                self.may_reuse.get((s.component, s.dimension), frozenset()),
            )
        }

    # ------------------------------------------------------------ counts
    def node_costs(self, position: int, sizes: dict, state: np.ndarray, crit: np.ndarray) -> None:
        """Add the counts of the nodes at ``position`` to ``crit`` (rows as given)."""
        for tensor, k, chain, comps in self.holders.get(position, []):
            self._holder_costs(tensor, k, chain, comps, sizes, state, crit)

    def _holder_costs(self, tensor, k, chain, comps, sizes, state, crit) -> None:
        info = self.info
        is_output = tensor in info.outputs
        is_compute = k == len(chain) - 1
        copy_output = info.is_copy and is_output
        multicast = self.multicast_loops(tensor, chain, k)
        sk = skips_first_reads(is_output, self.skip.get(comps[k], True), is_compute and copy_output)
        parent_skips = self.skip.get(comps[k - 1], True)
        above = {i for i, s in enumerate(self.loops) if s.slot <= chain[k]}
        fills: dict[Mode, np.ndarray] = {}
        seen: dict[int, tuple] = {}

        def fill(mode: Mode) -> np.ndarray:
            mode = tuple(sorted(above.intersection(mode)))  # views that agree here: once
            if mode not in fills:
                fills[mode] = fill_basis(info, tensor, sizes, self.bounds(mode, chain[k], state))
            return fills[mode]

        def counts(view: int) -> tuple:
            """(amount sent, own fills / amount, first visits per transfer sent and of
            all the holder's instances) in a view (once: both components read it)."""
            if view in seen:
                return seen[view]
            mode = self.views[view]
            own = fill(mode)
            shares = multicast - set(mode)
            amount = fill(tuple(set(mode) | multicast)) if shares else own
            first = own_first = 0.0 * own
            if is_output:
                bounds = self.bounds(mode, chain[k], state)
                at = (chain[k], sizes, bounds, state)
                first = own_first = first_visits(self, tensor, set(mode) | multicast, *at)
                if shares:
                    own_first = first_visits(self, tensor, set(mode), *at)
            seen[view] = amount, own / amount, first, own_first
            return seen[view]

        for comp, role in ((comps[k], "own"), (comps[k - 1], "parent")):
            if role == "own" and is_compute:
                continue
            pair = [counts(0), counts(self.view_of[comp])]
            for action in ("read", "write"):
                values = []
                for amount, ratio, first, own_first in pair:
                    sent = 0.0 * amount if (is_compute and copy_output) else amount
                    back = amount if is_output else 0.0 * amount
                    traffic = holder_traffic(
                        role, action, sent, back, first, ratio, sk, parent_skips, own_first
                    )
                    values.append(traffic.values())
                self.costs.add_per_row(comp, action, tensor, values[0], values[1], crit)

    def operations_per_instance(self, state: np.ndarray) -> np.ndarray:
        """Compute operations of the busiest instance (every spatial loop one tile)."""
        if self.info.is_copy:
            return np.zeros(len(state))
        b = self.bounds(self.views[self.view_of[self.template.compute]], self.n, state)
        out = np.ones(len(state))
        for v in self.tiles.vars:
            out = out * b[v]
        return out

    def leaf_energy_floor(self) -> float:
        """Least energy :meth:`add_leaf` adds to any row of this (shared) search, from
        bounds on the counts of ``_holder_costs`` at the leaf (view 0): each multicast
        loop cuts a bound ``B`` to no less than ``ceil(B / T)`` (``T`` the most trips
        the loop may take), and an output's first visits are at most its distinct
        values times ``T`` per spatial loop that may start partial sums or multiply
        them in. Proof in ``docs/ffm.md`` ("Uneven spatial spreads"). 0 if an action
        of the leaf's parents has a negative energy."""
        memo = self.__dict__.get("_leaf_floor")
        if memo is not None and memo[0] == self.choices:  # the trips shared may change
            return memo[1]
        out = self._leaf_energy_floor()
        self.__dict__["_leaf_floor"] = (list(self.choices), out)
        return out

    def _leaf_energy_floor(self) -> float:
        state = self.initial(1)
        for i in range(len(self.loops)):
            state[0, 2 * i] = max(self.trips(i))
            state[0, 2 * i + 1] = 1
        ones = {v: np.ones(1, dtype=np.int64) for v in self.tiles.vars}
        total = 0.0
        for tensor, k, chain, comps in self.holders.get(self.n, []):
            multicast = self.multicast_loops(tensor, chain, k)
            amount = float(
                fill_basis(
                    self.info, tensor, ones, self.bounds(tuple(sorted(multicast)), self.n, state)
                )[0]
            )
            reads, writes = amount, 0.0
            if tensor in self.info.outputs:
                writes = amount
                skips = skips_first_reads(True, self.skip.get(comps[k], True))
                if self.info.is_copy:  # a copy's leaf writes its output unread
                    reads = 0.0
                elif skips and self.skip.get(comps[k - 1], True):
                    reads = amount - most_first_visits(self, tensor, multicast, ones)
            for action, count in (("read", reads), ("write", writes)):
                per_value = self.costs.value_energy(comps[k - 1], action, tensor)
                if per_value < 0:
                    return 0.0
                total += count * per_value
        return total

    def add_leaf(self, state: np.ndarray, crit: np.ndarray) -> None:
        """The compute leaf's traffic and operations per instance, per row (the constant
        part is :meth:`NodeCosts.leaf_costs`), once per distinct state."""
        ids = self.ids(state)
        _, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
        leaf = np.zeros((len(first), crit.shape[1]))
        ones = {v: np.ones(len(first), dtype=np.int64) for v in self.tiles.vars}
        self.node_costs(self.n, ones, state[first], leaf)
        leaf[:, self.costs.layout.of(OPERATIONS)] += self.operations_per_instance(state[first])
        crit += leaf[inverse.ravel()]
