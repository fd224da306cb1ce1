"""Tile shapes of one template: a dynamic program over the storage nodes, top to bottom.

Every count of a storage node depends only on the tile shape at the node (and, for its
reservation, at the end of its gap; see :mod:`fusemap.mapper.tiling.terms`). So the
search walks the chain one node at a time, keeping *partial tile shapes* (all loops
above the current node): two partials that reach the node with the same tile shape face
the same future, and the one that is no better in any criterion so far (energy, latency
counts, reservations) is pruned before anything below is enumerated. What survives at
the compute leaf is exactly the Pareto front of the template's complete tile shapes.

The tiler runs that search; its collaborators hold the rest: the criteria columns
(:class:`~.columns.ColumnLayout`), the tiles of each rank variable
(:class:`~.rank_tiles.RankTiles`), node costs (:class:`~.costs.NodeCosts`), latency
(:class:`~.latency.TemplateLatency`), reservations and capacities
(:class:`~.reservations.Reservations`) and spatial spreads (:class:`~.spreads.Spreads`).
Below the deepest fused node, :mod:`.suffix` and :mod:`.uneven_suffix` search through
its public methods.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from ...spec.arch_eval import FlatArch
from ...spec.resolve import EinsumInfo
from ..pareto import pareto_mask
from ..space.config import MapperConfig
from ..space.interner import ForgetfulInterner, PrefixInterner
from ..space.prefix import BackingEntry, Entry, MarkEntry
from ..space.templates import Template, fused_positions, top_level
from .columns import ColumnLayout
from .costs import NodeCosts
from .gap_orders import GapContext
from .latency import TemplateLatency, template_leak
from .prefix_tokens import gap_tokens
from .pruning_view import pruning_view
from .rank_tiles import RankTiles
from .reservations import Reservations, Sizes, build_reservations
from .result import TemplateResult
from .spreads import Spreads
from .stage import Stage, any_smaller, bounded_in_slices, combined_ids
from .terms import node_terms, passed_loops
from .uneven import UnevenCounts

RowBound = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""Which rows (tile shapes above the next node, energy so far) may still be of use."""

PrefixRaise = Callable[[np.ndarray, PrefixInterner], np.ndarray]
"""Per complete fused prefix id, the energy its rows add at least (+inf: of no use)."""


class _Entering(NamedTuple):
    """The rows entering a node, its own costs added (see :meth:`TemplateTiler.stage`)."""

    sizes: np.ndarray  # tile shapes at the node
    cost: np.ndarray  # criteria with the node's traffic (and backing reservation)
    seq: np.ndarray  # fused prefixes, the node's token added
    depth: np.ndarray  # loops above the node
    state: np.ndarray | None  # uneven spreads
    state_ids: np.ndarray | None


class TemplateTiler:
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
        self.t, self.info, self.flat = template, info, flat
        self.held = dict(held or {})
        self.fusion = config.fusion
        self.relaxed = config.relaxed_prefixes
        self.bounded_by_least = self.relaxed  # see relaxed_twin
        self.least_slack = 0.0
        """With :attr:`bounded_by_least`: rows above the least energy so far times
        ``1 + least_slack`` are of no use (0 for relaxed twins; see
        :func:`fusemap.mapper.pmappings.generate.generate_pmappings`'s ``self_bound``)."""
        self.ceiling = np.inf
        """Energy above which a row is of no use (branch and bound; set by the caller)."""
        self.prefix_raise: PrefixRaise | None = None  # set by the caller (search._of_use)
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
        self.tiles = RankTiles.of(info, template, config)
        tiles = self.tiles
        uneven = any(tiles.imperfect[tiles.vars.index(s.var)] for s in template.spatial)
        self.depths = 2 * len(tiles.vars) + 1
        self.layout = ColumnLayout.build(flat, self.join_memories, uneven, self.depths)
        comp = {c.name: c for c in flat.path}
        # Count terms (a constant per node; with uneven spreads, counts per row instead).
        nodes = [] if uneven else node_terms(template, info, flat, self.memo)
        self.costs = NodeCosts(template, info, comp, bits, scale, self.layout, nodes, self.memo)
        self.uneven = UnevenCounts(template, info, flat, tiles, self.costs) if uneven else None
        self.spreads = Spreads(template, tiles, self.uneven)
        # Drop rows whose tiles no spatial loop further down can spread (Spreads.reaching):
        # only where every template sharing the stages has the same loops below.
        self.looks_ahead = False
        capacity = {
            c.name: c.size - self.held.get(c.name, 0.0) for c in flat.path if c.kind == "memory"
        }
        self.reservations: Reservations = build_reservations(
            template, info, comp, bits, capacity, self.layout, self.join_memories,
            self.fused_pos, self.depths, self.memo,
        )  # fmt: skip
        leak = template_leak(flat, template, self.memo)
        self.latency = TemplateLatency(template, info, flat, self.layout, leak, scale, self.memo)
        self.want_latency = want_latency or leak > 0
        # A template that fuses nothing, of an Einsum that hosts no other Einsum's tensor,
        # runs alone: no other reservation is live beside its own, which it checks itself.
        hosts = config.hosts is None or info.name in config.hosts
        self.runs_alone = self.p_max < 0 and (not hosts or held is not None)
        # Energy alone then decides among its pmappings: the join compares them on energy
        # only, so one optimum is enough.
        self.alone = self.fusion and self.prune and not want_latency and self.runs_alone
        self.pareto_cols = self._pareto_columns()
        """The criteria pruning compares: energy, the reservations this template can
        make, and latency counts only when wanted."""

    def _pareto_columns(self) -> list[int]:
        written = {0, *self.reservations.written(self.t)}
        return [
            k
            for k, col in enumerate(self.layout.columns)
            if (self.want_latency and col.latency_count) or k in written
        ]

    def gap_context(self) -> GapContext:
        """What the loop orders of this template's prefix gaps depend on
        (:mod:`fusemap.mapper.tiling.gap_orders`)."""
        return self.reservations.gap_context()

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
            twin.spreads = self.spreads.with_uneven(twin.uneven)
        return twin

    def below_fused_node(self, interner: PrefixInterner) -> TemplateTiler:
        """This tiler for a search of its nodes from the deepest fused node down, once
        per start (:mod:`.uneven_suffix`), its rows' ids kept by ``interner``: the
        prefix's reservations are not known there (every reservation is an objective),
        and its stages are its own (it may drop rows no spatial loop further down can
        spread)."""
        twin = copy.copy(self)
        twin.interner = interner
        twin.reservations_are_objectives = True
        twin.looks_ahead = True
        return twin

    # ------------------------------------------------------------ keys
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
            tuple(sorted(self.reservations.columns)),
            tuple(self.tiles.imperfect),
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

    # ------------------------------------------------------------ the search
    def rows_above(self, prev: Stage | None):
        """(sizes, criteria, fused prefix, depth) of the rows entering the next node:
        the previous stage's, or the root row (whole ranks, nothing spent)."""
        if prev is None:
            sizes = self.tiles.bounds[None, :].copy()
            crit = np.zeros((1, len(self.layout)))
            return sizes, crit, np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64)
        assert prev.seq is not None and prev.depth is not None
        return prev.sizes, prev.crit, prev.seq, prev.depth

    def stage(
        self,
        j: int,
        prev: Stage | None,
        ceiling: float | np.ndarray = np.inf,
        within: RowBound | None = None,
    ) -> Stage:
        """Extend the partial tile shapes above node ``j`` through its gap, and prune.

        The gap's loops are chosen one rank variable at a time, pruning in between (below
        the fused prefix): rows that agree on every size so far (and on what the node's
        reservation still needs, and, with fusion, on the fused prefix) face the same
        future, so only their Pareto-optimal ones go on. Rows whose energy so far passes ``ceiling`` (one, or
        one per row entering) are dropped once the node is costed (branch and bound:
        costs only add up); so are rows ``within`` rejects (given the tile shapes above
        the next node and the energy so far), before their prefixes are interned: most
        partial prefixes of several fused loops per rank variable end there.
        """
        rows = self._enter(j, prev)
        cur, origin, evaluated = self._gap_loops(j, rows, ceiling)
        return self._leave(j, rows, cur, origin, evaluated, within)

    def _enter(self, j: int, prev: Stage | None) -> _Entering:
        """The rows above node ``j`` with the node's token in their prefixes and its
        traffic (and backing reservation) costed: it depends only on the sizes there."""
        sizes, crit, seq, depth = self.rows_above(prev)
        state = self.spreads.state_above(prev, len(sizes))
        holder = self.t.holders[j]
        # A fused node; or an own node among the fused loops, marked until the loop
        # orders are added (gap_orders): rows placing the loops differently around it
        # stay apart.
        own = 0 < j < self.p_max and not self.relaxed
        entry: Entry | None = None
        if j in self.fused_pos:
            entry = BackingEntry.of(holder.tensor, holder.component)
        elif own:
            entry = MarkEntry.of(holder.tensor, holder.component)
        if entry is not None:
            seq = self.interner.extend(seq, [(entry,)], np.zeros(len(seq), dtype=np.int64))
        if j == self.p_max:
            seq = self.interner.settled(seq)
        cost = crit.copy()
        top = {v: sizes[:, k] for k, v in enumerate(self.tiles.vars)}
        state_ids = None
        if self.uneven is not None:
            assert state is not None
            self.uneven.node_costs(j, top, state, cost)
            state_ids = self.uneven.ids(state)
        else:
            self.costs.add_nodes_at(j, top, cost)
        if holder.component in self.reservations.columns and holder.backing:
            self.reservations.add(j, holder, top, top, cost, depth)
        return _Entering(sizes, cost, seq, depth, state, state_ids)

    def _gap_loops(self, j: int, rows: _Entering, ceiling) -> tuple:
        """Gap ``j``'s temporal loops, one rank variable at a time, pruning in between:
        (sizes after them, row entering each comes from, rows evaluated). The loops add
        no cost: a row's criteria stay those of the row it comes from.

        In the fused prefix the loops' rows are grouped by the sizes above too, so a
        group holds rows of one entering tile shape and prefix, which the last stage
        pruned together: no prune there (it found nothing in 77 million rows of GPT-3's
        checks and tables); :meth:`_leave` prunes after the spatial loops."""
        t, tiles, sizes = self.t, self.tiles, rows.sizes
        holder = t.holders[j]
        lowered = holder.component in self.reservations.columns and not holder.backing
        keep_here = [
            k
            for k, v in enumerate(tiles.vars)
            if lowered and self.info.relevance(holder.tensor, v) == "partial"
        ]
        in_prefix = j < self.p_max  # this gap's loops belong to the fused prefix
        cur = sizes
        origin = np.arange(len(sizes), dtype=np.int64)
        if np.ndim(ceiling) or np.isfinite(ceiling):
            origin = np.flatnonzero(rows.cost[:, 0] <= ceiling)
            cur = sizes[origin]
        evaluated = 0
        for k, v in enumerate(tiles.vars):
            if (j, v) in t.blocked or not self.useful_loop(j, v):
                continue
            cur, par = tiles.expand_one(cur, k)
            cur, par = self.spreads.spreadable_only(j, k, cur, par, self.looks_ahead)
            origin = origin[par]
            if in_prefix and self.once:  # one loop per rank variable above fused nodes
                above = sizes[origin, k]
                once = (cur[:, k] == above) | (above == tiles.bounds[k])
                cur, origin = cur[once], origin[once]
            evaluated += len(cur)
            if in_prefix:
                continue  # rows of one group were pruned together on entering (see above)
            ids = combined_ids(rows.seq[origin] if self.fusion else None, rows.state_ids, origin)
            key = tiles.group(cur, sizes[origin] if keep_here else None, keep_here, ids)
            view = self.pruning_view(j if lowered else j + 1, cur, rows.cost, origin)
            keep = self.prune_rows(key, view)
            cur, origin = cur[keep], origin[keep]
        return cur, origin, evaluated

    def _leave(
        self, j: int, rows: _Entering, cur, origin, evaluated: int, within: RowBound | None
    ) -> Stage:
        """The rows after gap ``j``: spread by its spatial loops, bounded (``within``),
        the node's lowered reservation added, fitted, their prefixes extended, pruned.

        Bounding before pruning keeps the same rows: rows pruned together have the same
        tile shapes, so a row the bound drops drops every row it dominates. The bound
        reads the energy so far alone, which a reservation does not change, so it comes
        before the criteria are gathered (in the check most rows end there)."""
        t, sizes, holder = self.t, rows.sizes, self.t.holders[j]
        last = j == len(t.holders) - 1
        mids, below, ok, origin, state = self.spreads.spread(j, cur, origin, rows.state)
        if last:
            ok &= (below == 1).all(axis=1)
        spatial_here = sum(s.slot == j + 1 for s in t.spatial)
        if (j + 1) in self.fused_pos and not self._may_touch(j) and not spatial_here:
            ok &= any_smaller(mids, sizes, origin)  # a fused node opens its gap
        leaf = self.uneven is not None and last  # the leaf's costs per row, added below
        if within is not None and not leaf:
            ok[ok] = bounded_in_slices(within, below, rows.cost[:, 0], origin, ok)
        mids, origin, below = mids[ok], origin[ok], below[ok]
        cost = rows.cost[origin]
        state = None if state is None else state[ok]
        if leaf:
            assert self.uneven is not None and state is not None
            self.uneven.add_leaf(state, cost)
            if within is not None:
                keep = within(below, cost[:, 0])
                mids, origin, below, cost = mids[keep], origin[keep], below[keep], cost[keep]
                state = state[keep]
        if holder.component in self.reservations.columns and not holder.backing:
            here = sizes[origin]
            passed = passed_loops(self.info, holder.tensor, self.tiles.vars, here, mids)
            self.reservations.add(
                j, holder, self._named(here), self._named(mids), cost, rows.depth[origin] + passed
            )
        fits = self.reservations.fits(cost)
        valid = int(fits.sum())
        mids, origin, below, cost = mids[fits], origin[fits], below[fits], cost[fits]
        state = None if state is None else state[fits]
        new_seq, new_depth = rows.seq[origin], rows.depth[origin]
        uneven = self.uneven  # rows carry a state with uneven spreads (only then)
        if self.fusion:
            new_depth = new_depth + (mids < sizes[origin]).sum(axis=1) + spatial_here
            if j < self.p_max and self.relaxed:
                new_seq = np.zeros(len(new_seq), dtype=np.int64)  # prefixes forgotten
            elif j < self.p_max:  # the gap's loops, in the canonical order
                tiles = None
                if uneven is not None and state is not None:
                    tiles = uneven.tiles_at(j + 1, state)  # those its spatial loops leave
                new_seq = gap_tokens(self.t, self.info, self.tiles.vars, self.interner, j,
                                     new_seq, sizes[origin], mids, below, tiles)  # fmt: skip
        ids = None
        if uneven is not None and state is not None:
            state = uneven.canonical(j + 1, state)
            ids = uneven.ids(state)
        key = self.tiles.group(below, ids=combined_ids(new_seq if self.fusion else None, ids))
        keep = self.prune_rows(key, self.pruning_view(j + 1, below, cost))
        return Stage(
            below[keep], cost[keep], mids[keep], origin[keep], max(evaluated, len(sizes)),
            valid, new_seq[keep], new_depth[keep],
            None if state is None else state[keep],
        )  # fmt: skip

    def _named(self, sizes: np.ndarray) -> Sizes:
        return {v: sizes[:, k] for k, v in enumerate(self.tiles.vars)}

    def _may_touch(self, j: int) -> bool:
        """Whether a fused node may follow node ``j`` with no loop in between: only a
        top-memory backing node or another fused node may (so a fused node opens its
        gap, which lets the join put it above a split in every branch's order)."""
        holder = self.t.holders[j]
        return (holder.backing and holder.level == self.top_level) or j in self.fused_pos

    def useful_loop(self, gap: int, v: str) -> bool:
        """Whether a loop over ``v`` in this gap can differ from one in the next gap.

        Moving it down one gap changes only what the node above the gap reserves (when
        it is lowered through ``v`` and its memory can overflow) and what the node below
        sees at its position (when ``v`` is not fully relevant to its tensor, or it is a
        backing node whose memory can overflow).
        Otherwise the two are the same mapping, and the search keeps the lower one.
        """
        holders, tracked = self.t.holders, self.reservations.columns
        if gap == len(holders) - 1 or (gap + 1, v) in self.t.blocked:
            return True
        if gap < self.p_max:
            return True  # a loop's place in the fused prefix is part of compatibility
        if any(s.slot == gap + 1 and s.var == v for s in self.t.spatial):
            return True
        here, below = holders[gap], holders[gap + 1]
        lowered = not here.backing and here.component in tracked
        if lowered and self.info.relevance(here.tensor, v) != "irrelevant":
            return True
        if self.info.relevance(below.tensor, v) != "relevant":
            return True
        return below.backing and below.component in tracked

    # ------------------------------------------------------------ pruning
    def prune_rows(self, key: np.ndarray, view: np.ndarray) -> np.ndarray:
        """The rows no row of their group (equal ``key``) dominates in ``view``."""
        if not self.prune:
            return np.ones(len(key), dtype=bool)
        return pareto_mask(key, view)

    def pruning_view(
        self, first: int, below: np.ndarray, crit: np.ndarray, rows: np.ndarray | None = None
    ) -> np.ndarray:
        """The criteria pruning compares (:func:`.pruning_view.pruning_view`)."""
        return pruning_view(self, first, below, crit, rows)

    # ------------------------------------------------------------ results
    def finish(self, stages: list[Stage], rows_wanted: bool = True) -> TemplateResult:
        """The template's complete tile shapes (the last stage plus the compute leaf),
        with their energy and latency, and the trail to rebuild each one. Without
        ``rows_wanted`` (a pruner that keeps no row of it: a first search past its rows)
        the rows' reservations and latency counts are left out (no row of them, the
        result good only to be cut to no row): GPT-3's softmax at batch 64 finishes
        templates of 6 million rows, each such copy gigabytes."""
        last, res, layout = stages[-1], self.reservations, self.layout
        leaf = self.costs.leaf_costs()
        crit = last.crit + leaf if rows_wanted or self.want_latency else last.crit
        if self.want_latency:
            energy, latency = self.latency.objectives(crit)
        else:  # energy alone prunes: latency only of the kept rows (see latency_of)
            energy, latency = last.crit[:, 0] + leaf[:, 0], np.full(len(crit), np.nan)
        crit = crit if rows_wanted else crit[:0]
        variables = self.tiles.vars
        relevance = {
            x: {v: self.info.relevance(x, v) for v in variables} for x in self.info.tensors
        }
        return TemplateResult(
            self.t,
            energy,
            latency,
            res.totals(crit),
            [self.tiles.bounds[None, :].copy()] + [st.sizes for st in stages],
            [st.mids for st in stages],
            [st.parents for st in stages],
            variables,
            relevance,
            {col: crit[:, k] for k, col in enumerate(layout.columns) if col.latency_count},
            last.seq if self.fusion else None,
            res.buckets(crit),
        )

    def latency_of(self, result: TemplateResult, rows: np.ndarray) -> np.ndarray:
        """Latency of some of ``result``'s rows (pruned on energy alone), from their
        latency counts."""
        return self.latency.of_rows(result, rows)
