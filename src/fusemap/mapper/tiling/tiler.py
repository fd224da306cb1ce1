"""Tile shapes of one template: a dynamic program over the storage nodes, top to bottom.

Every count of a storage node depends only on the tile shape at the node (and, for its
reservation, at the end of its gap; see :mod:`fusemap.mapper.tiling.terms`). So the search walks
the chain one node at a time, keeping *partial tile shapes* (all loops above the current
node): two partials that reach the node with the same tile shape face the same future,
and the one that is no better in any criterion so far (energy, latency counts,
reservations) is pruned before anything below is enumerated. What survives at the
compute leaf is exactly the Pareto front of the template's complete tile shapes.
"""

from __future__ import annotations

import copy
import itertools
import math
from functools import lru_cache

import numpy as np

from ...model.costs import gated_fraction, total_leak_power
from ...model.reuse import projection_terms
from ...spec.arch_eval import FlatArch
from ...spec.resolve import EinsumInfo
from ..distinct import unique_rows
from ..pareto import pareto_mask
from ..space.prefix import MARK, ForgetfulInterner, PrefixInterner, SpatialTile
from ..space.templates import (
    MapperConfig,
    Template,
    candidate_sizes,
    fused_positions,
    next_sizes,
    top_level,
)
from .costs import NodeCosts
from .gap_orders import GapContext, canonical_order
from .latency import OPS_COLUMN, finish_template
from .result import TemplateResult
from .stage import Layout, Stage
from .terms import memoized, node_terms, reservation_sizes, tile_values
from .uneven import UnevenCounts, spatial_tiles

MAX_DENSE_LOOKUP = 1 << 16
"""Up to this bound, tile size -> candidate index is a table; above it, a binary search
(a table as long as the rank would cost memory growing with the rank size)."""


class SizeIndex:
    """Tile size -> candidate index (-1 when not a candidate), by binary search."""

    def __init__(self, cands: np.ndarray, bound: int) -> None:
        self.cands, self.bound = cands, bound

    def __len__(self) -> int:
        return self.bound + 1

    def __getitem__(self, sizes: np.ndarray | int) -> np.ndarray:
        sizes = np.asarray(sizes, dtype=np.int64)
        pos = np.minimum(np.searchsorted(self.cands, sizes), len(self.cands) - 1)
        return np.where(self.cands[pos] == sizes, pos, -1)


@lru_cache(maxsize=256)
def _tile_tables(bound: int, imperfect: bool) -> tuple[np.ndarray, tuple, np.ndarray | SizeIndex]:
    """Candidate tiles of a rank variable, the tiles one loop below each may leave (CSR)
    and tile size -> candidate index; shared, read-only, by every template's tiler."""
    c = np.array(candidate_sizes(bound, imperfect), dtype=np.int64)
    options = next_sizes(c, bound, imperfect)
    for a in (c, *options):
        a.flags.writeable = False
    if bound > MAX_DENSE_LOOKUP:
        return c, options, SizeIndex(c, bound)
    lookup = np.full(bound + 1, -1, dtype=np.int64)
    lookup[c] = np.arange(len(c))
    lookup.flags.writeable = False
    return c, options, lookup


@lru_cache(maxsize=1024)
def tiles_reaching(bound: int, imperfect: bool, target: tuple[int, ...]) -> np.ndarray:
    """The candidate tiles from which loops (none, one or more) can leave one of
    ``target`` (shared by every template's tiler, read-only)."""
    cands, (offsets, values), index_of = _tile_tables(bound, imperfect)
    good = np.isin(cands, target)
    for i in np.argsort(cands, kind="stable"):  # a loop leaves only smaller tiles
        if not good[i]:
            nxt = values[offsets[i] : offsets[i + 1]]
            good[i] = bool(good[index_of[nxt[nxt < cands[i]]]].any())
    out = cands[good]
    out.flags.writeable = False
    return out


class TemplateTiler(NodeCosts):
    """Runs the dynamic program for one template."""

    def __init__(
        self,
        template: Template,
        info: EinsumInfo,
        flat: FlatArch,
        config: MapperConfig,
        scale: float,
        bits: dict[str, float],
        want_latency: bool,
        reservations_are_objectives: bool = False,
        shared: frozenset[str] = frozenset(),
        interner: PrefixInterner | None = None,
        prune: bool = True,
        join_memories: frozenset[str] = frozenset(),
        memo: dict | None = None,
        held: dict[str, float] | None = None,
    ):
        """``held``: bits of other Einsums' tensors held in each memory while this
        template, if it fuses nothing, runs (one of the amounts its Einsum may host; None:
        unknown, so such a template does not run alone)."""
        self.t, self.info, self.flat, self.scale, self.bits = template, info, flat, scale, bits
        self.held = dict(held or {})
        self.fusion = config.fusion
        self.relaxed = config.relaxed_prefixes
        self.bounded_by_least = self.relaxed  # see relaxed_twin
        self.least_slack = 0.0
        """With :attr:`bounded_by_least`: rows above the least energy so far times
        ``1 + least_slack`` are of no use (0 for relaxed twins; see
        :func:`fusemap.mapper.pmappings.generate.generate_pmappings`'s ``self_bound``)."""
        self.ceiling = math.inf
        """Energy above which a row is of no use (branch and bound; set by the caller)."""
        self.once = config.fused_loops_once and not self.relaxed
        self.reservations_are_objectives = reservations_are_objectives
        # Fusion: memories where another Einsum's reservations may be live at the same
        # time; their reservations are objectives, split by loop depth.
        self.join_memories = join_memories if config.fusion else frozenset()
        self.prune = prune
        self.interner = ForgetfulInterner() if self.relaxed else interner or PrefixInterner()
        self.memo = {} if memo is None else memo  # shared by the tilers of one Einsum
        self.top_level = top_level(flat)
        # Fused backing nodes (shared tensors backed below the top memory), and a
        # virtual hosting holder: the loops above are shared.
        top = flat.path[self.top_level].name
        self.fused_pos = fused_positions(template, shared, top) if config.fusion else []
        self.p_max = max(self.fused_pos, default=-1)
        self.vars = list(info.rank_variables)
        self.bounds = np.array([info.bounds[v] for v in self.vars], dtype=np.int64)
        spatial_vars = {s.var for s in template.spatial}
        self.imperfect: list[bool] = []
        self.cands: list[np.ndarray] = []
        self.index_of: list[np.ndarray] = []
        self.options: list[tuple[np.ndarray, np.ndarray]] = []
        for v in self.vars:
            n = info.bounds[v]
            spread = v in spatial_vars
            imperfect = n <= (config.spread_bound if spread else config.imperfect_bound)
            self.imperfect.append(imperfect)
            c, options, lookup = _tile_tables(n, imperfect)
            self.cands.append(c)
            self.options.append(options)
            self.index_of.append(lookup)
        self.imperfect_spread = any(
            self.imperfect[self.vars.index(s.var)] for s in template.spatial
        )
        # Count terms (a constant per node; with uneven spreads, counts per row instead).
        self.nodes = [] if self.imperfect_spread else node_terms(template, info, flat, self.memo)
        self.terms = self._memoized(
            ("projections",), lambda: {x: projection_terms(info, x) for x in info.tensors}
        )
        self.comp = {c.name: c for c in flat.path}
        # What this template may fill of each memory: its size, less what it hosts.
        self.capacity = {
            c.name: c.size - self.held.get(c.name, 0.0) for c in flat.path if c.kind == "memory"
        }
        # One column layout per compute unit, so templates can share search stages.
        self.layout = Layout()
        self.layout.add("energy")
        for c in flat.path:
            if c.kind == "memory" and not math.isinf(c.size):
                self.layout.add("res:" + c.name)
        for c in flat.path:
            if c.kind in ("memory", "toll"):
                for a in c.actions:
                    self._latency_column(c, a)
        # A spatial loop over a variable that may be cut unevenly: per-row counts.
        self.uneven = UnevenCounts(self) if self.imperfect_spread else None
        self._spreadable_memo: dict[tuple, np.ndarray | None] = {}
        # Drop rows whose tiles no spatial loop further down can spread (_reaching):
        # only where every template sharing the stages has the same loops below.
        self.looks_ahead = False
        if self.uneven is not None:
            self.layout.add(OPS_COLUMN)
        used = self._used()
        self.leak = self._memoized(
            ("leak", template.compute, tuple(sorted(used.items()))),
            lambda: sum(
                total_leak_power(flat, lv) * gated_fraction(flat, lv, used)
                for lv in range(len(flat.path))
            ),
        )
        self.want_latency = want_latency or self.leak > 0
        # A template that fuses nothing, of an Einsum that hosts no other Einsum's tensor,
        # runs alone: no other reservation is live beside its own, which it checks itself.
        hosts = config.hosts is None or info.name in config.hosts
        self.runs_alone = self.p_max < 0 and (not hosts or held is not None)
        # Energy alone then decides among its pmappings: the join compares them on energy
        # only, so one optimum is enough.
        self.alone = self.fusion and self.prune and not want_latency and self.runs_alone
        # Reservations are tracked only in memories they could overflow: if every tensor
        # it holds fits whole, a memory's reservations never rule anything out.
        self.res_cols: dict[str, int] = {}
        whole: dict[str, float] = {}
        for h in (x for x in template.holders if not x.virtual):
            values = self._memoized(("values", h.tensor), lambda t=h.tensor: self._whole(t))
            comp = self.comp[h.component]
            whole[h.component] = whole.get(h.component, 0.0) + values * comp.value_bits(
                h.tensor, self.bits[h.tensor]
            )
        for h in (x for x in template.holders if not x.virtual):
            bounded = not math.isinf(self.comp[h.component].size)
            if whole[h.component] > self.capacity[h.component] * (1 + 1e-9) or (
                bounded and h.component in self.join_memories
            ):
                self.res_cols[h.component] = self.layout.names.index("res:" + h.component)
        # Fusion: private reservations above the deepest fused node go to one column
        # per loop depth (their lifetime depends on how deep neighbours share loops);
        # fused backing nodes to one "shared" column (the join counts them once).
        self.depths = 2 * len(self.vars) + 1
        self.depth_cols: dict[str, np.ndarray] = {}
        self.shared_cols: dict[str, int] = {}
        if self.fusion:
            joined = [
                c.name for c in flat.path if c.name in self.join_memories and not math.isinf(c.size)
            ]
            for c in joined:
                self.shared_cols[c] = self.layout.add("shared:" + c)
            # The per-depth columns come last: searches below the deepest fused node never
            # write them, so they keep only the columns before (``front_width``).
            self.front_width = len(self.layout.names)
            for c in joined:
                cols = [self.layout.add(f"res:{c}@{d}") for d in range(self.depths)]
                assert cols == list(range(cols[0], cols[0] + self.depths))
                self.depth_cols[c] = np.array(cols, dtype=np.int64)
        self.width = len(self.layout.names)
        if not self.fusion:
            self.front_width = self.width
        # Pruning compares energy, the reservations this template can make, and latency
        # counts only when wanted.
        written = {0, *self.res_cols.values()}
        for c, cols in self.depth_cols.items():
            if any(
                j < self.p_max and h.component == c and j not in self.fused_pos
                for j, h in enumerate(template.holders)
            ):
                written.update(int(k) for k in cols)
            if any(template.holders[p].component == c for p in self.fused_pos):
                written.add(self.shared_cols[c])
        self.pareto_cols = [
            k
            for k, name in enumerate(self.layout.names)
            if (self.want_latency and name.startswith(("lat:", "calls:"))) or k in written
        ]

    def gap_context(self) -> GapContext:
        """What the loop orders of this template's prefix gaps depend on
        (:mod:`fusemap.mapper.tiling.gap_orders`)."""

        def bits(h, sizes: dict[str, np.ndarray]) -> np.ndarray:
            comp = self.comp[h.component]
            return tile_values(self.terms[h.tensor], sizes) * comp.value_bits(
                h.tensor, self.bits[h.tensor]
            )

        return GapContext(
            self.p_max,
            frozenset(self.res_cols),
            frozenset(c for c in self.depth_cols if c in self.res_cols),
            self.depths,
            dict(self.capacity),
            bits,
        )

    def _memoized(self, key: tuple, make):
        """What ``make()`` gives, once per Einsum (``memo`` is shared by its tilers)."""
        return memoized(self.memo, key, make)

    def _whole(self, tensor: str) -> float:
        """Values of the whole tensor."""
        full = {v: np.array([self.info.bounds[v]]) for v in self.vars}
        return float(tile_values(projection_terms(self.info, tensor), full)[0])

    def _used(self) -> dict[tuple[str, str], int]:
        used: dict[tuple[str, str], int] = {}
        for s in self.t.spatial:
            key = (s.component, s.dimension)
            used[key] = used.get(key, 1) * s.trips
        return used

    def relaxed_twin(self, bounded: bool = True) -> TemplateTiler:
        """This tiler with relaxed prefixes (``MapperConfig.relaxed_prefixes``): rows of
        every prefix compared together, several fused loops per rank variable.
        ``bounded`` (energy objective): rows above the Einsum's least energy so far are
        of no use (:func:`fusemap.mapper.tiling.search.tile_templates`)."""
        twin = copy.copy(self)
        twin.relaxed, twin.once = True, False
        twin.bounded_by_least, twin.least_slack = bounded, 0.0
        twin.interner = ForgetfulInterner()
        if self.uneven is not None:  # its own trips to share (UnevenCounts.share)
            twin.uneven = copy.copy(self.uneven)
            twin.uneven.tiler = twin
        return twin

    # ------------------------------------------------------------ the search
    def stage_key(self, j: int) -> tuple:
        """What stage ``j`` depends on; templates with equal keys up to ``j`` share it."""
        return self._key(j, self._loops_key(j + 1))

    def share_key(self) -> tuple | None:
        """Templates with uneven spreads that differ only in their free loops' trips
        (equal keys) are searched together, each keeping its own rows at the end
        (:meth:`UnevenCounts.share`); None: searched alone."""
        if self.uneven is None:
            return None
        return self._key(len(self.t.holders), self.uneven.key(len(self.t.holders))[0])

    def _key(self, j: int, loops: tuple) -> tuple:
        t = self.t
        return (
            t.compute,
            len(t.holders),
            tuple(t.holders[: j + 2]),
            loops,
            tuple(sorted(b for b in t.blocked if b[0] <= j + 1)),
            tuple(sorted(self.res_cols)),
            tuple(self.imperfect),
            self.uneven is not None,  # its rows carry state, and one more column
            tuple(self.pareto_cols),
            self.reservations_are_objectives,
            tuple(self.fused_pos),
            self.prune,
            self.once,
            self.relaxed,
            tuple(sorted(self.join_memories)),
            self.held_key,
        )

    def _loops_key(self, slot: int) -> tuple:
        """The spatial loops down to ``slot`` (with uneven spreads, the trips their
        templates searched together may take)."""
        if self.uneven is not None:
            return self.uneven.key(slot)
        return tuple(x for x in self.t.spatial if x.slot <= slot)

    @property
    def held_key(self) -> tuple:
        """The amounts held beside this Einsum, hashable (templates with equal ones share
        a capacity, and a branch-and-bound best)."""
        return tuple(sorted(self.held.items()))

    def stage(self, j: int, prev: Stage | None, ceiling: float | np.ndarray = np.inf) -> Stage:
        """Extend the partial tile shapes above node ``j`` through its gap, and prune.

        The gap's loops are chosen one rank variable at a time, pruning in between: rows
        that agree on every size so far (and on what the node's reservation still needs,
        and, with fusion, on the fused prefix) face the same future, so only their
        Pareto-optimal ones go on. Rows whose energy so far passes ``ceiling`` (one, or
        one per row entering) are dropped once the node is costed (branch and bound:
        costs only add up).
        """
        t = self.t
        sizes, crit, seq, depth = self.rows_above(prev)
        state = self._state_above(prev, len(sizes))
        holder = t.holders[j]
        tracked = holder.component in self.res_cols
        # A fused node; or an own node among the fused loops, marked until the loop
        # orders are added (gap_orders): rows placing the loops differently around it
        # stay apart.
        own = 0 < j < self.p_max and not self.relaxed
        kind = "back" if j in self.fused_pos else MARK if own else None
        if kind is not None:
            token = ((kind, holder.tensor, holder.component),)
            seq = self.interner.extend(seq, [token], np.zeros(len(seq), dtype=np.int64))
        if j == self.p_max:
            seq = self.interner.settled(seq)
        # Traffic of this node depends only on the sizes at the node: cost it first.
        cost = crit.copy()
        top = {v: sizes[:, k] for k, v in enumerate(self.vars)}
        if self.uneven is not None:
            state = self.uneven.node_costs(j, top, state, cost)
        else:
            for node in self.nodes:
                if node.position == j:
                    self._node_costs(node, top, cost)
        state_ids = None if self.uneven is None else self.uneven.ids(state)
        if tracked and holder.backing:
            self._add_reservation(j, holder, top, top, cost, depth)
        lowered = tracked and not holder.backing
        keep_here = [
            k
            for k, v in enumerate(self.vars)
            if lowered and self.info.relevance(holder.tensor, v) == "partial"
        ]
        in_prefix = j < self.p_max  # this gap's loops belong to the fused prefix
        cur = sizes
        origin = np.arange(len(sizes), dtype=np.int64)
        if np.ndim(ceiling) or np.isfinite(ceiling):
            origin = np.flatnonzero(cost[:, 0] <= ceiling)
            cur, cost = sizes[origin], cost[origin]
        evaluated = 0
        for k, v in enumerate(self.vars):
            if (j, v) in t.blocked or not self._useful(j, v):
                continue
            cur, par = self._expand_one(cur, k)
            spreadable = self._spreadable(j, k)
            if spreadable is None and self.looks_ahead:
                spreadable = self._reaching(j, k)
            if spreadable is not None:
                fine = np.isin(cur[:, k], spreadable)
                cur, par = cur[fine], par[fine]
            if j == len(t.holders) - 1:  # the last gap ends at one operation
                fine = np.zeros(len(cur), dtype=bool)
                for size in self._reaches_leaf(k):
                    fine |= cur[:, k] == size
                cur, par = cur[fine], par[fine]
            origin, cost = origin[par], cost[par]
            if in_prefix and self.once:  # one loop per rank variable above fused nodes
                once = (cur[:, k] == sizes[origin, k]) | (sizes[origin, k] == self.bounds[k])
                cur, origin, cost = cur[once], origin[once], cost[once]
            evaluated += len(cur)
            cols = list(range(len(self.vars))) if in_prefix else keep_here
            ids = self._ids(seq[origin] if self.fusion else None, state_ids, origin)
            key = self._group(cur, sizes[origin] if cols else None, cols, ids)
            keep = self._prune(key, self._pruning_view(j if lowered else j + 1, cur, cost))
            cur, origin, cost = cur[keep], origin[keep], cost[keep]
        mids, below, ok, origin, cost, state = self._spread(j, cur, origin, cost, state)
        if j == len(t.holders) - 1:
            ok &= (below == 1).all(axis=1)
        spatial_here = sum(s.slot == j + 1 for s in t.spatial)
        if (j + 1) in self.fused_pos and not self._may_touch(j) and not spatial_here:
            ok &= (mids < sizes[origin]).any(axis=1)  # a fused node opens its gap
        mids, origin, below, cost = mids[ok], origin[ok], below[ok], cost[ok]
        state = None if state is None else state[ok]
        if self.uneven is not None and j == len(t.holders) - 1:
            self._leaf_rows(state, cost)
        if lowered:
            here = sizes[origin]
            h_sizes = {v: here[:, k] for k, v in enumerate(self.vars)}
            m_sizes = {v: mids[:, k] for k, v in enumerate(self.vars)}
            passed = self._passed(holder, here, mids)
            self._add_reservation(j, holder, h_sizes, m_sizes, cost, depth[origin] + passed)
        fits = np.ones(len(cost), dtype=bool)
        for c in self.res_cols:
            fits &= self._memory_total(cost, c) <= self.capacity[c] * (1 + 1e-9)
        mids, origin, below, cost = mids[fits], origin[fits], below[fits], cost[fits]
        state = None if state is None else state[fits]
        new_seq, new_depth = seq[origin], depth[origin]
        if self.fusion:
            new_depth = new_depth + (mids < sizes[origin]).sum(axis=1) + spatial_here
            if in_prefix:
                tiles = None if state is None else self.uneven.tiles_at(j + 1, state)
                new_seq = self._gap_tokens(j, new_seq, sizes[origin], mids, below, tiles)
        if state is not None:
            state = self.uneven.canonical(j + 1, state)
        ids = None if state is None else self.uneven.ids(state)
        key = self._group(below, ids=self._ids(new_seq if self.fusion else None, ids))
        keep = self._prune(key, self._pruning_view(j + 1, below, cost))
        return Stage(
            below[keep], cost[keep], mids[keep], origin[keep], max(evaluated, len(sizes)),
            int(fits.sum()), new_seq[keep], new_depth[keep],
            None if state is None else state[keep],
        )  # fmt: skip

    def _spreadable(self, j: int, k: int) -> np.ndarray | None:
        """The tiles of variable ``k`` that the spatial loops above node ``j + 1`` can
        spread (None: none of them is over ``k``).

        A row with another tile there is dropped after the gap (:meth:`_spread` leaves it
        no tile below), and until then it shares no pruning group with a row that stays
        (their tiles of ``k`` differ), so dropping it as soon as its loop over ``k`` is
        chosen changes nothing else.
        """
        key = (j, k, None if self.uneven is None else tuple(self.uneven.choices))
        if key not in self._spreadable_memo:
            v = self.vars[k]
            loops = [i for i, s in enumerate(self.t.spatial) if s.slot == j + 1 and s.var == v]
            cands = self.cands[k]
            if not loops:
                self._spreadable_memo[key] = None
            elif self.uneven is None:
                trips = math.prod(self.t.spatial[i].trips for i in loops)
                self._spreadable_memo[key] = cands[cands % trips == 0]
            else:
                self._spreadable_memo[key] = self.uneven.spreadable(k, loops, cands)
        return self._spreadable_memo[key]

    def _reaching(self, j: int, k: int) -> np.ndarray | None:
        """The tiles of variable ``k`` after gap ``j`` from which temporal loops can still
        reach one that the nearest spatial loops over ``k`` further down can spread
        (None: no such loop below, or one right below the gap: :meth:`_spreadable`).

        No spatial loop over ``k`` sits in between, so only temporal loops change the
        tile until then; a row with another tile has no complete tile shape. Only for a
        tiler whose stages no template with other loops below shares (:attr:`looks_ahead`).
        """
        key = ("reaching", j, k, None if self.uneven is None else tuple(self.uneven.choices))
        if key not in self._spreadable_memo:
            v = self.vars[k]
            slots = [s.slot for s in self.t.spatial if s.var == v and s.slot > j]
            out = None
            if slots and min(slots) > j + 1:
                target = self._spreadable(min(slots) - 1, k)
                assert target is not None
                bound, imperfect = int(self.bounds[k]), bool(self.imperfect[k])
                out = tiles_reaching(bound, imperfect, tuple(int(x) for x in target))
            self._spreadable_memo[key] = out
        return self._spreadable_memo[key]

    def _reaches_leaf(self, k: int) -> set[int]:
        """The sizes of variable ``k`` after the last gap's temporal loops that the
        spatial loops above the compute leaf (if any) take to one: their trips' product,
        or the whole rank (a first loop that cuts it unevenly: 5 over 3 instances as
        2 + 2 + 1, then 2)."""
        v, bound = self.vars[k], int(self.bounds[k])
        n = len(self.t.holders)
        here = [i for i, s in enumerate(self.t.spatial) if s.slot == n and s.var == v]
        if not here:
            return {1}
        uneven = self.uneven
        trips = [uneven.trips(i) if uneven else (self.t.spatial[i].trips,) for i in here]
        return {math.prod(c) for c in itertools.product(*trips)} | {bound}

    def _state_above(self, prev: Stage | None, rows: int) -> np.ndarray | None:
        """The uneven-spread state of the rows entering the next node (None: no such
        spatial loop in the template)."""
        if self.uneven is None:
            return None
        if prev is None or prev.state is None:
            return self.uneven.initial(rows)
        return self.uneven.fit(prev.state)

    @staticmethod
    def _ids(seq: np.ndarray | None, state_ids: np.ndarray | None, origin=None):
        """Fused prefix ids and state ids (of ``origin`` rows), as one id per row."""
        if state_ids is None:
            return seq
        ids = state_ids if origin is None else state_ids[origin]
        if seq is None or not len(ids):
            return ids
        return seq * (int(ids.max()) + 1) + ids

    def _spread(self, j: int, mids: np.ndarray, origin, cost, state):
        """The spatial loops above node ``j + 1``: (mids, tiles below them, valid,
        origin, cost, state) of the rows they leave."""
        if self.uneven is None:
            below = mids.copy()
            ok = np.ones(len(below), dtype=bool)
            for s in self.t.spatial:
                if s.slot == j + 1:
                    k = self.vars.index(s.var)
                    ok &= below[:, k] % s.trips == 0
                    below[:, k] //= s.trips
            return mids, below, ok, origin, cost, state
        assert state is not None
        rep, below, cols = self.uneven.spread(j, mids)
        mids, origin, cost = mids[rep], origin[rep], cost[rep]
        state = state[origin]
        base = self.uneven.base
        for i, s in enumerate(self.t.spatial):
            if s.slot == j + 1:
                state[:, base + 2 * i : base + 2 * i + 2] = cols[:, base + 2 * i : base + 2 * i + 2]
        return mids, below, self.uneven.allowed(j + 1, state), origin, cost, state

    def _leaf_rows(self, state: np.ndarray, cost: np.ndarray) -> None:
        """Uneven spatial loops: the compute leaf's traffic and operations per instance,
        per row (the constant part is :meth:`leaf_costs`), once per distinct state."""
        assert self.uneven is not None
        ids = self.uneven.ids(state)
        _, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
        leaf = np.zeros((len(first), cost.shape[1]))
        ones = {v: np.ones(len(first), dtype=np.int64) for v in self.vars}
        self.uneven.node_costs(len(self.t.holders), ones, state[first], leaf)
        leaf[:, self.layout.names.index(OPS_COLUMN)] += self.uneven.operations_per_instance(
            state[first]
        )
        cost += leaf[inverse.ravel()]

    def rows_above(self, prev: Stage | None):
        """(sizes, criteria, fused prefix, depth) of the rows entering the next node:
        the previous stage's, or the root row (whole ranks, nothing spent)."""
        if prev is None:
            sizes, crit = self.bounds[None, :].copy(), np.zeros((1, self.width))
            return sizes, crit, np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64)
        assert prev.seq is not None and prev.depth is not None
        return prev.sizes, prev.crit, prev.seq, prev.depth

    def _prune(self, key: np.ndarray, view: np.ndarray) -> np.ndarray:
        if not self.prune:
            return np.ones(len(key), dtype=bool)
        return pareto_mask(key, view)

    def _may_touch(self, j: int) -> bool:
        """Whether a fused node may follow node ``j`` with no loop in between: only a
        top-memory backing node or another fused node may (so a fused node opens its
        gap, which lets the join put it above a split in every branch's order)."""
        holder = self.t.holders[j]
        return (holder.backing and holder.level == self.top_level) or j in self.fused_pos

    def _passed(self, holder, here: np.ndarray, mids: np.ndarray) -> np.ndarray:
        """Loops of the gap a lowered reservation passes (relevant ones, then the first
        partially relevant one)."""
        rel = [self.info.relevance(holder.tensor, v) for v in self.vars]
        looped = mids < here
        full = [k for k, r in enumerate(rel) if r == "relevant"]
        part = [k for k, r in enumerate(rel) if r == "partial"]
        n = looped[:, full].sum(axis=1) if full else np.zeros(len(here), dtype=np.int64)
        if part:
            n = n + looped[:, part].any(axis=1)
        return n

    def _gap_tokens(
        self,
        j: int,
        seq: np.ndarray,
        here: np.ndarray,
        mids: np.ndarray,
        below: np.ndarray,
        tiles: np.ndarray | None = None,
    ):
        """Append gap ``j``'s loops, in the canonical order, to the fused prefixes
        (``tiles``: those its spatial loops leave, when the rows carry them)."""
        if self.relaxed:
            return np.zeros(len(seq), dtype=np.int64)  # prefixes forgotten
        holder = self.t.holders[j]
        order = canonical_order(
            holder, list(range(len(self.vars))),
            lambda k: self.info.relevance(holder.tensor, self.vars[k]),
        )  # fmt: skip
        n = len(self.vars)
        # A row's temporal tokens depend only on the tiles its loops leave (0: no loop);
        # its spatial ones, on the sizes after and below the gap (and the tiles left).
        cols = [np.where(mids < here, mids, 0)]
        spread = any(s.slot == j + 1 for s in self.t.spatial)
        if spread:
            cols += [mids, below] + ([] if tiles is None else [tiles])
        uniq, inverse = unique_rows(np.concatenate(cols, axis=1))
        tokens = [
            tuple(("loop", self.vars[k], int(u[k])) for k in order if u[k])
            + (
                self._spatial_tokens(j, u[n : 2 * n], u[2 * n : 3 * n], u[3 * n :])
                if spread
                else ()
            )
            for u in uniq
        ]
        return self.interner.extend(seq, tokens, inverse)

    def _spatial_tokens(self, j: int, mids: np.ndarray, below: np.ndarray, tiles) -> tuple:
        """The spatial loops at the end of gap ``j`` (above node ``j + 1``), in the
        order :func:`~fusemap.mapper.pmappings.generate.materialize` writes them, each with the
        tile it leaves (``tiles``, if not empty)."""
        loops = [s for s in self.t.spatial if s.slot == j + 1]
        tiles = (
            [int(x) for x in tiles] if len(tiles) else spatial_tiles(loops, self.vars, mids, below)
        )
        return tuple(
            ("loop", s.var, SpatialTile.on(tile, s.component, s.dimension))
            for s, tile in zip(loops, tiles, strict=True)
        )

    def _memory_total(self, cost: np.ndarray, memory: str) -> np.ndarray:
        total = cost[:, self.res_cols[memory]].copy()
        if memory in self.depth_cols:
            cols = self.depth_cols[memory]  # consecutive columns: a slice, not a copy
            total += cost[:, cols[0] : cols[-1] + 1].sum(axis=1)
            total += cost[:, self.shared_cols[memory]]
        return total

    def _add_reservation(
        self, j: int, holder, here: dict, below: dict, cost: np.ndarray, depth: np.ndarray
    ) -> None:
        r = reservation_sizes(self.info, holder.tensor, holder.backing, here, below)
        comp = self.comp[holder.component]
        bits = tile_values(self.terms[holder.tensor], r) * comp.value_bits(
            holder.tensor, self.bits[holder.tensor]
        )
        if holder.component not in self.depth_cols:
            cost[:, self.res_cols[holder.component]] += bits
        elif j in self.fused_pos:
            cost[:, self.shared_cols[holder.component]] += bits
        elif j > self.p_max:
            cost[:, self.res_cols[holder.component]] += bits
        else:
            col = self.depth_cols[holder.component][np.minimum(depth, self.depths - 1)]
            cost[np.arange(len(cost)), col] += bits

    def _pruning_view(self, first: int, below: np.ndarray, crit: np.ndarray) -> np.ndarray:
        """The criteria pruning compares, with reservations that cannot matter zeroed.

        In capacity mode (``reservations_are_objectives`` false), a row whose memory
        cannot overflow whatever the nodes below choose (their tiles are at most the
        current ones) is feasible for every future: its reservation there is irrelevant.
        That holds in a memory the join shares too when the template fuses nothing: no
        other Einsum's reservation is live while an unfused Einsum runs.
        """
        if self.relaxed and self.depth_cols:
            return self._relaxed_view(first, below, crit)
        view = crit[:, self.pareto_cols].copy()
        if self.reservations_are_objectives or not self.res_cols:
            return view
        live_beside = not self.runs_alone  # depth columns: other Einsums' tiles beside
        self._zero_slack(view, first, below, crit, live_beside)
        return view

    def _zero_slack(self, view, first: int, below, crit, live_beside: bool) -> None:
        sizes = {v: below[:, k] for k, v in enumerate(self.vars)}
        for c, col in self.res_cols.items():
            if c in self.depth_cols and live_beside:
                continue  # live beside another Einsum's tiles: always an objective
            worst = crit[:, col]
            for h in self.t.holders[first:]:
                if h.component == c:
                    bits = tile_values(self.terms[h.tensor], sizes)
                    worst = worst + bits * self.comp[c].value_bits(h.tensor, self.bits[h.tensor])
            slack = worst <= self.capacity[c] * (1 + 1e-9)
            view[slack, self.pareto_cols.index(col)] = 0.0

    def _relaxed_view(self, first: int, below: np.ndarray, crit: np.ndarray) -> np.ndarray:
        """Relaxed prefixes: each memory's reservations by their total only (no other
        Einsum's tiles are counted, so only the total can overflow, whatever the depths)."""
        totals = crit.copy()
        dropped: set[int] = set()
        for c in self.res_cols:
            if c in self.depth_cols:
                totals[:, self.res_cols[c]] = self._memory_total(crit, c)
                dropped.update(int(k) for k in self.depth_cols[c])
                dropped.add(self.shared_cols[c])
        view = totals[:, self.pareto_cols]
        if not self.reservations_are_objectives:
            self._zero_slack(view, first, below, totals, live_beside=False)
        return view[:, [i for i, k in enumerate(self.pareto_cols) if k not in dropped]]

    def finish(self, stages: list[Stage]) -> TemplateResult:
        """The template's complete tile shapes, with their energy and latency."""
        return finish_template(self, stages)

    def _useful(self, gap: int, v: str) -> bool:
        """Whether a loop over ``v`` in this gap can differ from one in the next gap.

        Moving it down one gap changes only what the node above the gap reserves (when
        it is lowered through ``v`` and its memory can overflow) and what the node below
        sees at its position (when ``v`` is not fully relevant to its tensor, or it is a
        backing node whose memory can overflow).
        Otherwise the two are the same mapping, and the search keeps the lower one.
        """
        holders = self.t.holders
        if gap == len(holders) - 1 or (gap + 1, v) in self.t.blocked:
            return True
        if gap < self.p_max:
            return True  # a loop's place in the fused prefix is part of compatibility
        if any(s.slot == gap + 1 and s.var == v for s in self.t.spatial):
            return True
        here, below = holders[gap], holders[gap + 1]
        lowered = not here.backing and here.component in self.res_cols
        if lowered and self.info.relevance(here.tensor, v) != "irrelevant":
            return True
        if self.info.relevance(below.tensor, v) != "relevant":
            return True
        return below.backing and below.component in self.res_cols

    def _group(
        self,
        sizes: np.ndarray,
        above: np.ndarray | None = None,
        cols: list[int] | None = None,
        ids: np.ndarray | None = None,
    ) -> np.ndarray:
        """One integer per distinct row of ``sizes``, of the ``cols`` columns of the
        sizes ``above`` and of ``ids`` (mixed radix over candidate indices; exact, and
        falls back to renumbering when the radix would overflow)."""
        parts: list[tuple[np.ndarray, int]] = []
        for k, c in enumerate(self.cands):
            parts.append((self.index_of[k][sizes[:, k]], len(c)))
        for k in cols or []:
            assert above is not None
            parts.append((self.index_of[k][above[:, k]], len(self.cands[k])))
        if ids is not None and len(ids):
            parts.append((ids, int(ids.max()) + 1))
        key = np.zeros(len(sizes), dtype=np.int64)
        radix = 1
        for values, n in parts:
            if radix * n >= 2**62:
                _, key = np.unique(key, return_inverse=True)
                key = key.ravel().astype(np.int64)
                radix = int(key.max()) + 1 if len(key) else 1
            key = key * n + values
            radix *= n
        return key

    def _expand_one(self, sizes: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Every choice of one variable's loop in a gap: (new sizes, parent row)."""
        offsets, values = self.options[k]
        idx = self.index_of[k][sizes[:, k]]
        start, count = offsets[idx], offsets[idx + 1] - offsets[idx]
        total = int(count.sum())
        rep = np.repeat(np.arange(len(sizes)), count)
        within = np.arange(total) - np.repeat(np.cumsum(count) - count, count)
        out = sizes[rep]
        out[:, k] = values[np.repeat(start, count) + within]
        return out, rep
