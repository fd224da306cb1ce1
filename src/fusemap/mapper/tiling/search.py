"""Tiling many templates at once, sharing the search stages of common prefixes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Protocol

import numpy as np

from ..space.prefix import BackingEntry
from . import uneven_suffix
from .front_floor import FrontFloor
from .fronts import FrontStore
from .rest_bound import within_ceilings
from .result import TemplateResult
from .stage import Stage
from .suffix import SuffixSearch, front_cache, stages_below_fused_node
from .tiler import TemplateTiler
from .uneven import UnevenCounts


@dataclass
class TilingCounts:
    """Work done by :func:`tile_templates` (each shared stage counted once)."""

    stages: int = 0
    evaluated: int = 0  # partial tile shapes costed
    valid: int = 0  # of those, within every capacity (and the ceiling, where one is set)
    complete_to: float = np.inf
    """Energy up to which the rows of the self-bounded tilers (bounded by their own
    least so far, :attr:`TemplateTiler.least_slack`) were all kept."""


class ResultPruner(Protocol):
    """Told of each template finished (``out[i]``, of ``tilers[i]``), may replace results
    of ``out`` by fewer of their rows: those a prune across templates would keep (what
    the search holds stays small)."""

    frees_prefixes: bool
    """Whether the results told of no longer refer to the search's prefixes (only its
    stages do)."""

    @property
    def keeps_no_row(self) -> bool:
        """Whether it will cut every result told of from now on to no row (it reads only
        their objectives and prefixes)."""
        ...

    def __call__(
        self, tilers: list[TemplateTiler], out: list[TemplateResult | None], i: int
    ) -> None: ...


def tile_templates(
    tilers: list[TemplateTiler],
    counts: TilingCounts | None = None,
    progress: Callable[[int], None] | None = None,
    store: FrontStore | None = None,
    pruner: ResultPruner | None = None,
) -> list[TemplateResult]:
    """Run the search for many templates, sharing the stages their prefixes agree on.

    Templates that differ only below node ``j`` (other spatial loops lower down, another
    order of the lower storage nodes) see the same partial tile shapes down to ``j``, so
    the search forks there instead of starting again. Results come in input order.
    """
    search = _SharedSearch(tilers, counts, progress, store, pruner)
    by_unit: dict[str, list[int]] = {}
    for i, t in enumerate(tilers):
        # Templates that fuse nothing and hold nothing, searched by an earlier table of
        # an Einsum equal up to names: that search's rows (they also bound the rest).
        kept = store.result(t) if store is not None and alone_with_nothing_held(t) else None
        if kept is not None:
            search.finished(i, kept, search=False)
        else:
            by_unit.setdefault(t.t.compute, []).append(i)
    for members in by_unit.values():
        search.descend(members, 0, [])
    bounded = [t.least_slack for t in tilers if t.bounded_by_least and not t.relaxed]
    if counts is not None and bounded:  # the least only fell: its last ceiling is the lowest
        counts.complete_to = min(counts.complete_to, search.least * (1 + min(bounded)))
    return [r for r in search.out if r is not None]


class _SharedSearch:
    """The state of one :func:`tile_templates` run: results so far, the bounds they set
    (branch and bound) and the bottom-up fronts the templates share."""

    def __init__(
        self,
        tilers: list[TemplateTiler],
        counts: TilingCounts | None,
        progress: Callable[[int], None] | None,
        store: FrontStore | None,
        pruner: ResultPruner | None = None,
    ) -> None:
        self.tilers, self.counts, self.progress, self.store = tilers, counts, progress, store
        self.pruner = pruner
        self.out: list[TemplateResult | None] = [None] * len(tilers)
        self.fronts = front_cache(tilers, store)  # bottom-up fronts of template suffixes
        # Branch and bound over templates that fuse nothing (energy objective): only their
        # least energy matters, so rows that cannot beat the best one finished are dropped.
        # One bound per amount held beside them (each is another capacity).
        self.best: dict[tuple, float] = {}
        # Relaxed tilers (twins of templates searched with them): only their rows under
        # the least energy of the others matter (full_space.py), which only falls.
        self.least = np.inf
        # A front row dearer than the loosest ceiling of the templates that meet fronts is
        # of no use: the nodes above only add energy (fronts record up to where they are
        # complete, for the next table of their kind).
        self.users = [t for t in tilers if SuffixSearch.applies(t)]
        self.fronts.ceiling = _front_ceiling(self.users, np.inf)
        self.floors: dict[int, FrontFloor] = {}
        _share_trips([t for t in tilers if t.uneven is not None])
        self.share_keys = [t.share_key() for t in tilers]  # fixed once the trips are shared

    def _finish(self, i: int, stages: list[Stage]) -> None:
        """Template ``i``'s result from its ``stages``, without its rows' reservations
        and latency counts when the pruner keeps none of them (and nothing else does)."""
        tiler = self.tilers[i]
        stored = self.store is not None and alone_with_nothing_held(tiler)
        light = self.pruner is not None and self.pruner.keeps_no_row
        light = light and not tiler.relaxed and not stored
        self.finished(i, tiler.finish(stages, rows_wanted=not light))
        result = self.out[i]
        if light and result is not None and result.rows:
            raise AssertionError("a pruner that keeps no row kept some")

    def finished(self, i: int, result: TemplateResult, search: bool = True) -> None:
        """Template ``i`` is done: keep its result, release its fronts, tighten bounds."""
        tiler = self.tilers[i]
        self.out[i] = result
        self.fronts.done(i)
        self.floors.pop(i, None)
        if search and self.store is not None and alone_with_nothing_held(tiler):
            self.store.put_result(tiler, result)
        if not tiler.relaxed and result.rows and result.energy.min() < self.least:
            self.least = float(result.energy.min())
            self.fronts.ceiling = _front_ceiling(self.users, self.least)  # when the least falls
        if tiler.alone and result.rows:
            key = tiler.held_key
            self.best[key] = min(self.best.get(key, np.inf), float(result.energy.min()))
        if self.pruner is not None:
            self.pruner(self.tilers, self.out, i)
        if self.progress:
            self.progress(1)

    def _below_floor(self, i: int, j: int) -> tuple[int, FrontFloor | None]:
        """What the nodes from the fused node down add at least to a row of tiler ``i``
        after stage ``j``, if bounded (by its own least so far, or a ceiling: the full
        space's check): the position of the first node it counts, and the floor of its
        fused node's bottom-up front (:mod:`.front_floor`; the front built now instead
        of when met: those nodes' energy is the front row's); (the compute leaf's
        position, None) if not known."""
        t = self.tilers[i]
        bounded = t.bounded_by_least or np.isfinite(t.ceiling)
        if not bounded or t.relaxed or j >= t.p_max or not SuffixSearch.applies(t):
            return len(t.t.holders), None
        if i not in self.floors:
            search = SuffixSearch(t, self.fronts)
            front, key = search.front(t.p_max), search.ids[0]
            got = self.fronts.floors.get(key)  # templates meeting one front: one floor
            if got is None:
                got = self.fronts.floors[key] = FrontFloor.of(front, search.radix, search.encode)
            self.floors[i] = got
        return t.p_max, self.floors[i]

    def _ceilings(self, members: list[int], j: int) -> list[tuple]:
        """Per member of a stage after node ``j``: (tiler, most energy so far a row may
        have, first node position not yet counted in that, what a row's floor adds to
        that, per tile shape: a :class:`FrontFloor`, or None)."""
        out = []
        for i in members:
            stop, floor = self._below_floor(i, j)
            least_below = floor.overall if floor is not None else 0.0
            least_below += _leaf_floor(self.tilers[i], j)
            ceiling = _ceiling(self.best, [self.tilers[i]], self.least) - least_below
            out.append((self.tilers[i], ceiling, stop, floor))
        return out

    def _count(self, stage: Stage) -> None:
        if self.counts is not None:
            self.counts.stages += 1
            self.counts.evaluated += stage.evaluated
            self.counts.valid += stage.valid

    def descend(self, group: list[int], j: int, stages: list[Stage]) -> None:
        """Search the templates of ``group`` (equal down to node ``j``) from node ``j``,
        the stages above given."""
        first = self.tilers[group[0]]
        if j == len(first.t.holders):
            for i in group:  # identical prefixes all the way down: one template each
                self._finish(i, _own(self.tilers[i], stages))
            return
        if j == first.p_max and stages and first.prefix_raise is not None and not first.relaxed:
            stages = stages[:-1] + [self._of_use(group, j, stages[-1])]
        group = self._below_fused_nodes(group, j, stages)
        forks: dict[tuple, list[int]] = {}
        for i in group:
            forks.setdefault(self.tilers[i].stage_key(j), []).append(i)
        for members in forks.values():
            tiler = self.tilers[members[0]]
            interned = len(tiler.interner)
            bounds = self._ceilings(members, j)
            ceiling = max(b[1] for b in bounds)
            # The nodes below each member add at least so much (rest_bound).
            within = partial(within_ceilings, j=j, members=bounds)
            st = tiler.stage(j, stages[-1] if stages else None, ceiling,
                             within if np.isfinite(ceiling) else None)  # fmt: skip
            self._count(st)
            if len(st.crit) == 0:
                for i in members:
                    self._finish(i, stages + [st])
            else:
                self.descend(members, j + 1, stages + [st])
            self._forget_since(tiler, interned)

    def _forget_since(self, tiler: TemplateTiler, interned: int) -> None:
        """Forget the prefixes a fork interned (``tiler``'s interner held ``interned``
        before it), when they are many, if the pruner moves the results off the
        search's interner: only the fork's stages, done now, referred to them. The
        stages above it are older, and so is what :meth:`~.fronts.FrontCache.backed`
        keeps (the rows entering a fused node, extended before the forks below it)."""
        if self.pruner is None or not self.pruner.frees_prefixes or tiler.relaxed:
            return
        made = len(tiler.interner) - interned
        if made >= FORGET_FROM and made >= FORGET_SHARE * interned:  # a pass over them all
            tiler.interner.forget_from(interned)

    def _of_use(self, group: list[int], j: int, prev: Stage) -> Stage:
        """The rows of ``prev`` entering the deepest fused node ``j`` (shared by
        ``group``: their stages agree down to it, so do their fused nodes) whose
        complete prefix leaves their energy so far room under a member's ceiling
        (:attr:`TemplateTiler.prefix_raise`): the others end here, before the nodes
        below. Exact: the raise of a prefix is what every row with it adds at least,
        and rows of one prefix are pruned only among themselves."""
        tiler = self.tilers[group[0]]
        assert prev.seq is not None and tiler.prefix_raise is not None
        holder = tiler.t.holders[j]
        entry = BackingEntry.of(holder.tensor, holder.component)
        ids, at = np.unique(prev.seq, return_inverse=True)
        ids = tiler.interner.extend(ids, [(entry,)], np.zeros(len(ids), dtype=np.int64))
        raised = tiler.prefix_raise(tiler.interner.settled(ids), tiler.interner)[at.ravel()]
        ceiling = max(b[1] for b in self._ceilings(group, j))
        return prev.take(np.isfinite(raised) & (prev.crit[:, 0] + raised <= ceiling))

    def _below_fused_nodes(self, group: list[int], j: int, stages: list[Stage]) -> list[int]:
        """Finish the templates of ``group`` whose deepest fused node is node ``j`` and
        whose nodes below it are searched at once (bottom-up fronts, or once per start
        with uneven spreads); the others, which go on top-down."""
        rest = []
        shared: dict[tuple, list[Stage]] = {}  # suffixes of templates searched together
        sharing: dict[tuple, list[TemplateTiler]] = {}  # their templates
        for i in group:
            key = self.share_keys[i]
            if self.tilers[i].p_max == j and key is not None:
                sharing.setdefault(key, []).append(self.tilers[i])
        for i in group:
            tiler = self.tilers[i]
            below = None
            if tiler.p_max == j and SuffixSearch.applies(tiler):
                below = stages_below_fused_node
            elif tiler.p_max == j and uneven_suffix.applies(tiler):
                below = uneven_suffix.stages_below_fused_node
            if below is None:
                rest.append(i)
                continue
            key = self.share_keys[i]
            more = shared.get(key) if key is not None else None
            if more is None:
                prev = stages[-1] if stages else None
                # The loosest ceiling of the templates sharing the result.
                users = [tiler] if key is None else sharing[key]
                ceiling = max(_ceiling(self.best, [t], self.least) for t in users)
                more = below(tiler, prev, self.fronts, ceiling)
                if key is not None:
                    shared[key] = more
                self._count(more[0])
            self._finish(i, _own(tiler, stages + more))
        return rest


FORGET_FROM = 1 << 20
"""Prefixes a finished fork must have interned for the search to forget them."""

FORGET_SHARE = 1.0
"""And at least this share of those there were before it: each forgetting is one pass
over them all."""


def alone_with_nothing_held(tiler: TemplateTiler) -> bool:
    """Whether ``tiler``'s template fuses nothing, runs alone (energy decides) and has
    nothing held beside it: its result is kept for the next table of its kind, and its
    cheapest rows decide which held variants are searched (:func:`tile_held_variants_last`)."""
    return tiler.alone and not tiler.held_key


def _share_trips(tilers: list[TemplateTiler]) -> None:
    """Templates with uneven spreads that differ only in their free loops' trips are
    searched together (:meth:`TemplateTiler.share_key`): one search instead of one per
    trips (a rank of 16 on 16 instances: 16 counts), each keeping its own rows."""
    together: dict[tuple, list[UnevenCounts]] = {}
    for t in tilers:
        key = t.share_key()
        assert key is not None and t.uneven is not None
        together.setdefault(key, []).append(t.uneven)
    for members in together.values():
        choices = [u.own for u in members]
        for u in members:
            u.share(choices)


def _own(tiler: TemplateTiler, stages: list[Stage]) -> list[Stage]:
    """The rows of ``tiler``'s own template among complete ones of a shared search."""
    if tiler.uneven is None or len(tiler.uneven.choices) == 1:
        return stages
    state = stages[-1].state
    assert state is not None
    return stages[:-1] + [stages[-1].take(tiler.uneven.own_rows(state))]


def _leaf_floor(tiler: TemplateTiler, j: int) -> float:
    """What the compute leaf adds per row at least with uneven spreads
    (:meth:`UnevenCounts.leaf_energy_floor`), for the checks of stage ``j`` made before
    the leaf's costs: every stage's but the last's, whose rows are bounded again once
    the leaf is counted (:meth:`TemplateTiler._leave`)."""
    if tiler.uneven is None or j >= len(tiler.t.holders) - 1:
        return 0.0
    return tiler.uneven.leaf_energy_floor()


def _front_ceiling(users: list[TemplateTiler], least: float) -> float:
    """Most energy a row of a front met by ``users`` may have and still be of use: the
    loosest of their ceilings on a complete row's energy (:func:`_ceiling`'s own part,
    with the compute leaf's energy not taken off: a front row's energy excludes it)."""
    return max(
        (
            min(t.ceiling, least * (1 + t.least_slack) if t.bounded_by_least else np.inf)
            for t in users
        ),
        default=np.inf,
    ) * (1 + 1e-9)


def _ceiling(best: dict[tuple, float], members: list[TemplateTiler], least: float) -> float:
    """Most energy so far a row of a stage shared by ``members`` may have: the best
    finished energy (templates that fuse nothing, :attr:`TemplateTiler.alone`) or each
    template's own :attr:`TemplateTiler.ceiling` (a relaxed one's, with the energy
    objective: at most ``least``),
    less the compute leaf's energy (energy so far + the leaf's <= the final energy:
    costs add up)."""
    bound = best.get(members[0].held_key, np.inf)
    out = np.inf
    if np.isfinite(bound) and all(t.alone for t in members):
        out = bound * (1 + 1e-9) - min(t.costs.leaf_energy for t in members)
    own = max(
        min(t.ceiling, least * (1 + t.least_slack) if t.bounded_by_least else np.inf) * (1 + 1e-9)
        - t.costs.leaf_energy
        for t in members
    )
    return min(out, own)


def tile_held_variants_last(
    tilers: list[TemplateTiler],
    variants: set[int],
    counts: TilingCounts | None = None,
    progress: Callable[[int], None] | None = None,
    store: FrontStore | None = None,
    pruner: ResultPruner | None = None,
) -> list[TemplateResult]:
    """:func:`tile_templates`, the tilers ``variants`` last: those of templates that fuse
    nothing, searched again with another Einsum's tensors held beside them (less room).

    Only the least energy of such a tiler matters (energy objective): the join takes,
    for each amount held, the cheapest pmapping that fuses nothing and fits beside it.
    Every tile shape that fits with less room fits with more, at the same costs, so if
    the least-energy one found with nothing held fits beside an amount, it is that
    amount's cheapest too, and already in the table: its variants search nothing.
    """
    first = [i for i in range(len(tilers)) if i not in variants]
    done = tile_templates([tilers[i] for i in first], counts, progress, store, pruner)
    out = dict(zip(first, done, strict=True))
    rest = _variants_to_search(out, tilers, variants)
    if rest:
        again = tile_templates([tilers[i] for i in rest], counts, progress, store, pruner)
        out.update(zip(rest, again, strict=True))
    for i in variants.difference(rest):
        out[i] = tilers[i].finish([_empty(tilers[i])])
        if progress:
            progress(1)
    return [out[i] for i in range(len(tilers))]


def _variants_to_search(
    out: dict[int, TemplateResult], tilers: list[TemplateTiler], variants: set[int]
) -> list[int]:
    """The variants that may find a row cheaper than any the table has for their amount.

    A variant's rows cost at least its template's least energy with nothing held (what
    is held only takes room). Some row of a template that fuses nothing, holding nothing,
    that fits beside the variant's amount is in the table already, and the join may take
    it for that amount: a variant whose template's least is no lower than the cheapest
    such row can give nothing better, and is not searched. (When the least-energy row
    of all fits, this skips every variant of the amount.)"""
    alone = [r for i, r in out.items() if alone_with_nothing_held(tilers[i]) and r.rows]
    cheapest: dict[tuple, float] = {}
    rest, base = [], -1
    for i in range(len(tilers)):
        if i not in variants:
            base = i  # a variant follows the first tiler of its template
            continue
        tiler, own = tilers[i], out[base]
        floor = own.least_energy  # as searched (rows may have been pruned since)
        key = (tiler.held_key, tuple(sorted(tiler.reservations.capacity.items())))
        if key not in cheapest:
            cheapest[key] = min((_cheapest_fitting(r, tiler) for r in alone), default=np.inf)
        if floor < cheapest[key]:
            rest.append(i)
    return rest


def _cheapest_fitting(result: TemplateResult, tiler: TemplateTiler) -> float:
    """The least energy of ``result``'s rows that fit in the room ``tiler`` leaves in
    every memory where something is held beside it (inf: none, or amounts not known)."""
    fit = np.ones(len(result.energy), dtype=bool)
    for memory, held in tiler.held.items():
        if held > 0:
            if memory not in result.reservations:
                return np.inf
            room = tiler.reservations.capacity[memory] * (1 + 1e-9)
            fit &= result.reservations[memory] <= room
    return float(result.energy[fit].min()) if fit.any() else np.inf


def _empty(tiler: TemplateTiler) -> Stage:
    """A stage with no row (the result of a search skipped)."""
    ints = np.zeros(0, dtype=np.int64)
    sizes = np.zeros((0, len(tiler.tiles.vars)), dtype=np.int64)
    crit = np.zeros((0, len(tiler.layout)))
    return Stage(sizes, crit, sizes.copy(), ints, 0, 0, ints, ints.copy())
