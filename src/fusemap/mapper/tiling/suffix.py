"""Below the deepest fused node, search bottom-up: one front per tile shape, not per prefix.

With fusion, the top-down search must keep rows with different fused prefixes apart
(each is another compatibility), so below the deepest fused node it would repeat the
same search once per prefix. But what happens below that node depends only on the tile
shape there. So the nodes below are searched bottom-up, once per template suffix (and
shared between templates): for every tile shape ``s`` at node ``j``, the Pareto front of
the costs of nodes ``j..leaf``. Each prefix row then meets the front of its tile shape.

A gap's loops pick, for every rank variable independently, a smaller tile (or none), so
the front of ``s`` is a union over per-variable choices; it is built one variable at a
time (a closure along each axis), pruning in between, as the top-down search does. The
only cost that couples a node's tile with its gap's choice is a lowered reservation
through a partially relevant variable; templates with one below the fused node keep the
top-down search (:meth:`SuffixSearch.applies`).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from ..pareto import closure_front, pareto_mask
from ..space.prefix import BackingEntry
from .fronts import Front, FrontCache, FrontStore, holders_by_place
from .stage import Stage
from .terms import fill_basis, first_basis
from .tiler import TemplateTiler

__all__ = ["Front", "FrontCache", "FrontStore", "SuffixSearch", "front_cache"]


MAX_SHAPE_TABLE = 1 << 18
"""Decode tile-shape codes by table lookup when there are at most this many shapes."""


def _axes(tiler) -> tuple:
    """Code strides and radices, closure sources per variable (for each candidate index,
    the candidate indices whose options, the loops one gap may add, include it), and,
    when there are few tile shapes, their table and the closure's scratch."""
    tiles = tiler.tiles
    radix = [len(c) for c in tiles.cands]
    strides = np.cumprod([1] + radix[::-1][:-1])[::-1].astype(np.int64)
    sources: list[tuple[np.ndarray, np.ndarray]] = []
    for k, (offsets, values) in enumerate(tiles.options):
        lists: list[list[int]] = [[] for _ in tiles.cands[k]]
        for c in range(len(tiles.cands[k])):
            for v in values[offsets[c] : offsets[c + 1]]:
                lists[int(tiles.index_of[k][v])].append(c)
        off = np.cumsum([0] + [len(x) for x in lists]).astype(np.int64)
        flat = np.array([c for x in lists for c in x], dtype=np.int64)
        sources.append((off, flat))
    shapes = head = None
    if math.prod(radix) <= MAX_SHAPE_TABLE:
        grids = np.meshgrid(*tiles.cands, indexing="ij")  # code order: last variable fastest
        shapes = (
            np.stack([g.ravel() for g in grids], axis=1).astype(np.int64)
            if grids  # an Einsum of no rank variable: one tile shape of no size
            else np.zeros((1, 0), dtype=np.int64)
        )
        # Closure steps prune in one pass when no tile has many sources (a long list of
        # rows per tile shape would make the one-pass front quadratic).
        if max((int(np.diff(off).max()) for off, _ in sources), default=0) <= 64:
            head = np.full(len(shapes), -1, dtype=np.int64)
    lookups = dense_lookups(tiles.index_of)
    return strides, np.array(radix, dtype=np.int64), sources, shapes, head, lookups


def dense_lookups(index_of: list) -> tuple[np.ndarray, np.ndarray] | None:
    """Every variable's size -> candidate index table end to end, and where each ends
    (None if some variable's is a binary search, too large for a table)."""
    if not index_of or not all(isinstance(x, np.ndarray) for x in index_of):
        return None
    ends = np.cumsum([0] + [len(x) for x in index_of]).astype(np.int64)
    return np.concatenate(index_of).astype(np.int64), ends


@numba.njit(cache=True)
def encode_dense(sizes, table, ends, strides):
    """:meth:`SuffixSearch.encode` by the end-to-end lookup tables of :func:`_axes`."""
    rows, n = sizes.shape
    out = np.empty(rows, dtype=np.int64)
    for r in range(rows):
        code = 0
        for k in range(n):
            s = sizes[r, k]
            if s < 0 or s >= ends[k + 1] - ends[k]:
                code = -1
                break
            idx = table[ends[k] + s]
            if idx < 0:
                code = -1
                break
            code += idx * strides[k]
        out[r] = code
    return out


def _has_partial(tiler, tensor: str) -> bool:
    """Whether a rank variable is partially relevant to ``tensor`` (once per Einsum)."""
    key = ("partial", tensor)
    got = tiler.memo.get(key)
    if got is None:
        got = tiler.memo[key] = any(
            tiler.info.relevance(tensor, v) == "partial" for v in tiler.tiles.vars
        )
    return got


class SuffixSearch:
    """Bottom-up fronts for one :class:`~fusemap.mapper.tiling.tiler.TemplateTiler`."""

    def __init__(self, tiler, cache: FrontCache):
        self.tiler = tiler
        self.owner = cache
        self.cache = cache.fronts
        self.n = len(tiler.t.holders)
        key = (tuple(int(b) for b in tiler.tiles.bounds), tuple(tiler.tiles.imperfect))
        if key not in cache.axes:  # the same for every template of the Einsum
            cache.axes[key] = _axes(tiler)
        self.strides, self.radix, self.sources, self.shapes, self.head, self.lookups = cache.axes[
            key
        ]
        self.tables = cache.tables
        self.depth_cols = {int(k) for cols in tiler.reservations.at_depth.values() for k in cols}
        self._first: dict[str, int] | None = None  # see _complete
        self._own: list[str] = []
        self.ids = cache.ids_of(tiler, self.front_keys)  # fronts of nodes p_max..n
        self._cols: dict[int, list[int]] = {}
        self.evaluated = 0

    @staticmethod
    def applies(tiler) -> bool:
        """Fused templates whose nodes below the deepest fused node cost separably."""
        if tiler.p_max < 0 or not tiler.prune or tiler.uneven is not None:
            return False  # (uneven spreads: a node's costs depend on more than its tiles)
        for j in range(tiler.p_max, len(tiler.t.holders)):
            h = tiler.t.holders[j]
            lowered = not h.backing and h.component in tiler.reservations.columns
            if lowered and _has_partial(tiler, h.tensor):
                return False
        return True

    # ------------------------------------------------------------ tile shape codes
    def encode(self, sizes: np.ndarray) -> np.ndarray:
        """One integer per tile shape (-1 when some size is not a candidate)."""
        if self.lookups is not None:
            table, ends = self.lookups
            return encode_dense(
                np.ascontiguousarray(sizes, dtype=np.int64), table, ends, self.strides
            )
        out = np.zeros(len(sizes), dtype=np.int64)
        bad = np.zeros(len(sizes), dtype=bool)
        for k, lookup in enumerate(self.tiler.tiles.index_of):
            col = sizes[:, k]
            inside = col < len(lookup)
            idx = np.where(inside, lookup[np.minimum(col, len(lookup) - 1)], -1)
            bad |= idx < 0
            out += np.maximum(idx, 0) * self.strides[k]
        out[bad] = -1
        return out

    def decode(self, state: np.ndarray) -> np.ndarray:
        """Tile sizes (R, V) of encoded tile shapes."""
        if self.shapes is not None:
            return self.shapes[state]
        out = np.empty((len(state), len(self.radix)), dtype=np.int64)
        for k, c in enumerate(self.tiler.tiles.cands):
            out[:, k] = c[(state // self.strides[k]) % self.radix[k]]
        return out

    def bases(self, kind: str, tensor: str) -> np.ndarray:
        """The fill or first basis of ``tensor`` for every tile shape code (once per
        Einsum: it depends on nothing but the tile shape)."""
        key = (kind, tensor, tuple(self.tiler.tiles.imperfect))  # the shapes tabulated
        got = self.tables.get(key)
        if got is None:
            sizes = {v: self.shapes[:, k] for k, v in enumerate(self.tiler.tiles.vars)}
            f = fill_basis if kind == "fill" else first_basis
            got = self.tables[key] = f(self.tiler.info, tensor, sizes)
        return got

    # ------------------------------------------------------------ fronts
    def front(self, j: int) -> Front:
        """Fronts of node ``j`` for every tile shape that can reach the leaf."""
        key = self.ids[j - self.tiler.p_max]
        got = self.cache.get(key)
        if got is None:
            got = self.owner.kept(key, self.tiler)
            if got is None or got.complete_to < self.owner.ceiling:
                got = self._build(j)
                self.owner.keep(key, self.tiler, got)
            self.cache[key] = got
        return got

    def front_keys(self) -> list[tuple]:
        """The fronts :meth:`meet` builds or reuses (fused node to compute leaf)."""
        x = self.tiler
        place = {name: k for k, name in enumerate(x.info.tensors)}
        costs = [  # what the nodes cost depends on the template above them too
            (
                node.position,
                tuple(
                    (u.component, u.action, place.get(u.tensor), u.basis, u.total, u.per_instance)
                    for u in node.terms
                ),
            )
            for node in x.costs.nodes
            if node.position >= x.p_max
        ]
        spatial = [(s.component, s.dimension, s.level, s.var, s.trips, s.slot) for s in x.t.spatial]
        common = (
            tuple(sorted(x.reservations.columns)),
            tuple(sorted(x.reservations.at_depth)),
            # The per-depth columns never reach a front (see _compared).
            tuple(k for k in x.pareto_cols if k not in self.depth_cols),
            x.layout.columns,
            tuple(x.tiles.imperfect),
        )
        return [self._key(j, place, costs, spatial, common) for j in range(x.p_max, self.n + 1)]

    def _key(self, j: int, place, costs, spatial, common) -> tuple:
        """What the fronts of node ``j`` depend on. Positions are counted from ``j``: a
        template with one more (virtual) holder above shares its fronts. Tensors are
        named by their place in the Einsum, so Einsums equal up to names (Q, K and V)
        can share fronts (:class:`FrontStore`)."""
        t = self.tiler.t
        return (
            t.compute,
            holders_by_place(t.holders[j:], place),
            tuple((p - j, terms) for p, terms in costs if p >= j),
            tuple((*s[:5], s[5] - j) for s in spatial if s[5] > j),
            tuple(sorted((b[0] - j, *b[1:]) for b in t.blocked if b[0] >= j)),
            common,
            j == self.tiler.p_max,
            self._complete(j),
        )

    def _compared(self, j: int) -> list[int]:
        """Criteria a front of node ``j`` compares (worked out once per node)."""
        if j not in self._cols:
            # Fronts never write the per-depth columns (those are reservations above the
            # deepest fused node), nor compare memories they check completely themselves.
            x = self.tiler
            done = {x.reservations.columns[c] for c in self._complete(j)} | self.depth_cols
            self._cols[j] = [k for k in x.pareto_cols if k not in done]
        return self._cols[j]

    def _complete(self, j: int) -> tuple[str, ...]:
        """Memories whose whole reservation is made at nodes ``j..leaf`` and shared with
        no other Einsum: a front checks their capacity itself, so it need not keep the
        amount reserved as a criterion."""
        x = self.tiler
        if self._first is None:  # each memory's first storage node
            self._first = {}
            for p, h in enumerate(x.t.holders):
                self._first.setdefault(h.component, p)
            res = x.reservations
            self._own = sorted(c for c in res.columns if c not in res.at_depth)
        return tuple(c for c in self._own if self._first.get(c, j) >= j)

    def _build(self, j: int) -> Front:
        x = self.tiler
        width = x.layout.front_width  # no per-depth columns below the deepest fused node
        if j == self.n:  # the compute leaf: tile shape 1 everywhere (its costs: finish)
            ones = np.ones((1, len(x.tiles.vars)), dtype=np.int64)
            none = np.full(1, -1, dtype=np.int64)
            return Front(self.encode(ones), np.zeros((1, width)), none, none)
        below = self.front(j + 1)
        ceiling = min(self.owner.ceiling, below.complete_to)
        # Sizes after this gap's temporal loops, from the next node's tile shapes.
        mids = self.decode(below.state)
        for s in x.t.spatial:
            if s.slot == j + 1:
                mids[:, x.tiles.vars.index(s.var)] *= s.trips
        mstate = self.encode(mids)
        ok = mstate >= 0
        crit, mids, mstate = below.crit[ok].copy(), mids[ok], mstate[ok]
        child = np.flatnonzero(ok)
        holder = x.t.holders[j]
        if not holder.backing and holder.component in x.reservations.columns:
            m = {v: mids[:, k] for k, v in enumerate(x.tiles.vars)}
            x.reservations.add(j, holder, m, m, crit, np.zeros(len(crit), dtype=np.int64))
        state = mstate
        keep = self._fit_and_prune(state, crit, j + 1)  # node j's own backing: not yet
        keep &= crit[:, 0] <= ceiling  # the nodes above only add energy
        state, crit, mstate, child = state[keep], crit[keep], mstate[keep], child[keep]
        for k, v in enumerate(x.tiles.vars):
            if (j, v) in x.t.blocked or not x.useful_loop(j, v):
                continue
            # A closure step moves rows to other tile shapes but leaves their criteria
            # (so their fit) as they were: prune each moved row against its source's
            # criteria, and copy only the survivors.
            compared = np.ascontiguousarray(crit[:, self._compared(j + 1)])
            if self.head is not None:
                off, flat = self.sources[k]
                stride, radix = int(self.strides[k]), int(self.radix[k])
                state, rows = closure_front(state, compared, off, flat, stride, radix, self.head)
            else:
                state, rows = self._close(state, k)
                keep = pareto_mask(state, compared, rows)
                state, rows = state[keep], rows[keep]
            crit, mstate, child = crit[rows], mstate[rows], child[rows]
        here = self.decode(state)
        h = {v: here[:, k] for k, v in enumerate(x.tiles.vars)}
        basis = None
        if self.shapes is not None:  # counts per tile shape: looked up, not recomputed

            def basis(kind: str, tensor: str) -> np.ndarray:
                return self.bases(kind, tensor)[state]

        for node in x.costs.nodes:
            if node.position == j:
                x.costs.add_node(node, h, crit, basis)
        if holder.backing and holder.component in x.reservations.columns:
            x.reservations.add(j, holder, h, h, crit, np.zeros(len(crit), dtype=np.int64))
        keep = self._fit_and_prune(state, crit, j) & (crit[:, 0] <= ceiling)
        return Front(state[keep], crit[keep], mstate[keep], child[keep], ceiling, below)

    def _close(self, state: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Every row moved up to each tile of variable ``k`` that may loop down to its
        own (itself included): (new states, source rows)."""
        off, flat = self.sources[k]
        idx = (state // self.strides[k]) % self.radix[k]
        count = off[idx + 1] - off[idx]
        rows = np.repeat(np.arange(len(state)), count)
        within = np.arange(len(rows)) - np.repeat(np.cumsum(count) - count, count)
        src = flat[np.repeat(off[idx], count) + within]
        self.evaluated += len(rows)
        return state[rows] + (src - idx[rows]) * self.strides[k], rows

    def _fit_and_prune(self, state: np.ndarray, crit: np.ndarray, j: int) -> np.ndarray:
        """Rows within every capacity, Pareto-optimal per tile shape; reservations in the
        memories complete from node ``j`` down are checked, not compared."""
        # Fronts never write the per-depth columns.
        keep = np.flatnonzero(self.tiler.reservations.fits_below_fused_node(crit))
        front = pareto_mask(state[keep], crit[:, self._compared(j)][keep])
        out = np.zeros(len(state), dtype=bool)
        out[keep[front]] = True
        return out

    # ------------------------------------------------------------ meeting the prefix
    def meet(self, sizes, crit, seq, depth, ceiling: float = np.inf):
        """Every prefix row (tile shape ``sizes`` at the deepest fused node) joined with
        the front of its tile shape, fitted and pruned per fused prefix; rows of energy
        above ``ceiling`` (all but the compute leaf's, which is added last) dropped.

        Returns (prefix row, per-node front rows, criteria, seq) of the survivors; the
        front rows list one array per node from the fused node down.
        """
        x = self.tiler
        front = self.front(x.p_max)
        order, sorted_state = front.by_state()
        want = self.encode(sizes)
        lo = np.searchsorted(sorted_state, want, side="left")
        hi = np.searchsorted(sorted_state, want, side="right")
        count = np.where(want >= 0, hi - lo, 0)
        pre = np.repeat(np.arange(len(sizes)), count)
        within = np.arange(len(pre)) - np.repeat(np.cumsum(count) - count, count)
        rows = order[np.repeat(lo, count) + within]
        total = crit[pre]
        total[:, : x.layout.front_width] += front.crit[rows]
        self.evaluated += len(pre)
        fits = (total[:, 0] <= ceiling) & x.reservations.fits(total)
        pre, rows, total = pre[fits], rows[fits], total[fits]
        ones = np.ones((len(pre), len(x.tiles.vars)), dtype=np.int64)
        keep = x.prune_rows(seq[pre], x.pruning_view(self.n, ones, total))
        pre, rows, total = pre[keep], rows[keep], total[keep]
        chain = [rows]
        node = front
        for _ in range(x.p_max, self.n - 1):
            chain.append(node.child[chain[-1]])
            assert node.below is not None  # every node down to the leaf has its front
            node = node.below
        return pre, chain, total, seq[pre], depth[pre], front

    def trail(self, chain: list[np.ndarray], pre: np.ndarray, top: Front) -> list[tuple]:
        """(sizes below, mids, parents) per node from the fused node (front ``top``) down."""
        out = []
        parents = pre
        f = top
        for rows in chain:
            nxt = f.below
            assert nxt is not None
            below = self.decode(nxt.state[f.child[rows]])
            out.append((below, self.decode(f.mids[rows]), parents))
            parents = np.arange(len(rows), dtype=np.int64)
            f = nxt
        return out


def front_cache(tilers: list[TemplateTiler], store: FrontStore | None = None) -> FrontCache:
    """The fronts the ``tilers`` searched together share, each registered with the fronts
    it needs (dropped once its last template is done)."""
    cache = FrontCache(store)
    for i, tiler in enumerate(tilers):
        if SuffixSearch.applies(tiler):
            cache.register(i, SuffixSearch(tiler, cache).ids)
    return cache


def stages_below_fused_node(
    tiler: TemplateTiler, prev: Stage | None, cache: FrontCache, ceiling: float = np.inf
) -> list[Stage]:
    """The stages from the deepest fused node down, searched bottom-up and met with the
    prefix rows ``prev`` (what :meth:`TemplateTiler.stage` would give, much faster).
    Complete rows whose energy less the compute leaf's passes ``ceiling`` are dropped."""
    search = SuffixSearch(tiler, cache)
    sizes, crit, seq, depth = tiler.rows_above(prev)
    holder = tiler.t.holders[tiler.p_max]
    token = (BackingEntry.of(holder.tensor, holder.component),)
    seq = cache.backed(prev, seq, token, tiler.interner)
    pre, chain, total, new_seq, new_depth, top = search.meet(sizes, crit, seq, depth, ceiling)
    stages = []
    for below, mids, parents in search.trail(chain, pre, top):
        empty = np.zeros((len(below), 0))
        stages.append(Stage(below, empty, mids, parents, 0, 0, new_seq, new_depth))
    stages[-1].crit = total
    stages[0].evaluated = search.evaluated
    stages[0].valid = len(total)
    return stages
