"""Fused template results with every loop order of their prefix gaps, pruned across
templates into one table; and the same prune run while the search goes on
(:class:`PrunedAsFinished`), so a search of thousands of templates holds a few of its
rows at a time, not all of them until the end.

Rows of use (a ``useful`` filter) are picked as each template finishes, before any
prune: such filters decide per prefix and keep every row dominating one they keep
(:meth:`~fusemap.mapper.space.interner.PrefixInterner.splits_a_variable` and cuts on
energy and latency), so
picking them before the prunes or after keeps the same rows, and each result is shown
to the filter once (the full-space check's first search counts what it keeps).

Pruning as templates finish keeps exactly the rows the prune at the end keeps: a row
dropped early is dominated by a row held then, which is either kept at the end or
dropped by a row dominating both (dominance is transitive), and of rows equal in every
criterion the first in template order is kept either way (every prune stacks the
templates in their order). Each prune keeps the orders it kept (:class:`HeldOrders`)
and the next starts from them: the prune at the end sees every row no other row of the
whole search dominates, and the prune of any set holding all of those keeps just them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from ..distinct import sorted_distinct
from ..space.interner import PrefixInterner
from ..tiling.gap_orders import GapContext, OrderCounter, with_gap_orders_of
from ..tiling.result import TemplateResult
from ..tiling.search import alone_with_nothing_held
from ..tiling.tiler import TemplateTiler
from .combine import combined_fused_table
from .fused_rows import rows_kept_before_orders
from .table import PmappingTable

RowFilter = Callable[[TemplateResult, PrefixInterner], np.ndarray]
"""Which rows of a template's result may be of use (a boolean per row)."""

PRUNE_FROM_ROWS = 400_000
"""Rows held (searched since the last prune, and kept by it) before the templates
finished so far are pruned across (:class:`PrunedAsFinished`); the tests set it low."""


@dataclass(frozen=True)
class HeldOrders:
    """A template's result as a prune left it (``source``), and the rows with loop
    orders that prune kept (``ordered``; ``rows``: each one's row of ``source``).

    The next prune starts from these instead of every order of ``source`` again: an
    order a prune dropped is dominated by (or equal to, and after) a row of the whole
    search, so no later prune keeps it (the prune of a set holding every row no other
    dominates keeps just those, whatever else the set holds)."""

    source: TemplateResult
    ordered: TemplateResult
    rows: np.ndarray

    def kept(self, kept: np.ndarray) -> HeldOrders:
        """Only the orders ``kept`` (sorted rows of ``ordered``), ``source`` cut to the
        rows they are orders of."""
        rows = sorted_distinct(self.rows[kept])
        source = self.source if len(rows) == self.source.rows else self.source.compact(rows)
        ordered = self.ordered if len(kept) == self.ordered.rows else self.ordered.compact(kept)
        return HeldOrders(source, ordered, np.searchsorted(rows, self.rows[kept]))

    def cut_to(self, kept: np.ndarray | None) -> HeldOrders:
        """Only the orders of the rows ``kept`` of ``source`` (sorted; None: all)."""
        if kept is None:
            return self
        pick = np.flatnonzero(np.isin(self.rows, kept))
        return HeldOrders(self.source, self.ordered.compact(pick), self.rows[pick])


@dataclass
class Ordering:
    """How the fused results of one Einsum's templates become one table: the rows
    another template's row dominates in every order dropped, every loop order of their
    prefix gaps added, one Pareto prune per prefix."""

    einsum: str
    objective: str
    shared: frozenset[str]
    interner: PrefixInterner
    top: dict[str, str]
    prune: bool
    alone: bool  # the Einsum hosts nothing: rows that fuse nothing run alone

    def ordered(
        self,
        results: list[TemplateResult],
        contexts: list[GapContext],
        counter: OrderCounter,
        done: list[HeldOrders | None] | None = None,
    ) -> tuple[list[TemplateResult], list[np.ndarray]]:
        """``results`` with their loop orders (own-node marks taken out of their
        prefixes), and per row of each, the row of the given result behind it. A result
        with orders ``done`` (worked out by an earlier prune, of these very rows) is
        not ordered again: its held orders are cut alike."""
        done = done or [None] * len(results)
        kept: list[np.ndarray | None] = [None] * len(results)
        if self.prune:
            kept = rows_kept_before_orders(results, contexts, self.objective, self.alone)
        fresh = [j for j, d in enumerate(done) if d is None]
        compacted = [_cut(results[j], kept[j]) for j in fresh]
        found = with_gap_orders_of(compacted, [contexts[j] for j in fresh], self.interner, counter)
        unmarked = iter(_unmarked([r for r, _ in found], self.interner))
        picked = iter([_behind(idx, kept[j]) for j, (_, idx) in zip(fresh, found, strict=True)])
        out, sources = [], []
        for d, k in zip(done, kept, strict=True):
            if d is None:
                out.append(next(unmarked))
                sources.append(next(picked))
            else:
                held = d.cut_to(k)
                out.append(held.ordered)
                sources.append(held.rows)
        return out, sources

    def table(self, results: list[TemplateResult]) -> PmappingTable:
        """The ordered ``results``' rows in one table, Pareto-pruned per prefix."""
        return combined_fused_table(
            self.einsum, results, self.objective, self.shared, self.interner, self.top,
            self.prune, self.alone,
        )  # fmt: skip


class PrunedAsFinished:
    """A :class:`~fusemap.mapper.tiling.search.ResultPruner`: each finished template's
    result cut to its ``useful`` rows; with ``prune``, when the rows held pass what the
    last prune kept by :data:`PRUNE_FROM_ROWS` (or by as many as it kept, if more),
    every finished template's result cut to the rows whose orders the prune across
    templates keeps. Each result's orders are worked out once, at the first prune
    that sees it (:class:`HeldOrders`), but every prune compares all the orders held,
    so it waits for as many new rows as the last one kept (at least
    :data:`PRUNE_FROM_ROWS`).

    Relaxed twins (floors over the whole fused space) are left out, and the results of
    templates that fuse nothing and hold nothing are left whole (their cheapest rows
    decide which variants are searched again, :mod:`fusemap.mapper.tiling.search`)."""

    def __init__(
        self, ordering: Ordering, counter: Callable[[], OrderCounter], useful: RowFilter | None
    ) -> None:
        self.ordering, self.counter, self.useful = ordering, counter, useful
        self.held = 0  # rows of the results finished so far
        self.next_at = PRUNE_FROM_ROWS
        # Per tiler (by identity; the tiler kept so its id stays its own), the orders of
        # its result the last prune kept.
        self.held_orders: dict[int, tuple[TemplateTiler, HeldOrders]] = {}
        self.frees_prefixes = True
        """Whether the results told of refer to the ordering's interner, not to the
        search's: each is moved there as it finishes (false once a result came from a
        search sharing the ordering's interner), so only the search's stages refer to
        the search's prefixes (:meth:`~fusemap.mapper.tiling.search._SharedSearch.
        descend` forgets them)."""

    @property
    def keeps_no_row(self) -> bool:
        """Whether every result from now on is cut to no row: ``useful`` is a first
        search past its rows (:class:`~fusemap.mapper.check_rows.FirstSearch`)."""
        return bool(getattr(self.useful, "tripped", False))

    def __call__(
        self, tilers: list[TemplateTiler], out: list[TemplateResult | None], i: int
    ) -> None:
        r = out[i]
        if r is None or tilers[i].relaxed:
            return
        searched = tilers[i].interner
        if self.useful is not None:
            keep = np.flatnonzero(np.asarray(self.useful(r, searched), dtype=bool))
            if len(keep) < r.rows:
                r = out[i] = r.compact(keep)
            if self.keeps_no_row and self.held:
                self._discard(tilers, out)
        r = out[i] = self._moved(r, searched)
        self.held += r.rows
        if self.ordering.prune and self.held >= self.next_at:
            self.held = self.prune(tilers, out)
            self.next_at = self.held + max(PRUNE_FROM_ROWS, self.held)

    def _moved(self, r: TemplateResult, searched: PrefixInterner) -> TemplateResult:
        """``r`` with its prefixes in the ordering's interner (``searched``: the
        search's), copied there a level of the trie at a time."""
        interner = self.ordering.interner
        if searched is interner:  # nothing to move, and the search may not forget
            self.frees_prefixes = False
            return r
        return r if r.seq is None else replace(r, seq=searched.copied_into(r.seq, interner))

    def _discard(self, tilers: list[TemplateTiler], out: list[TemplateResult | None]) -> None:
        """The table is given up: every result held cut to no row (less to hold), its
        orders dropped."""
        for k, r in enumerate(out):
            if r is not None and r.rows and not tilers[k].relaxed:
                out[k] = r.compact(np.zeros(0, dtype=np.int64))
        self.held_orders.clear()
        self.held = 0

    def prune(self, tilers: list[TemplateTiler], out: list[TemplateResult | None]) -> int:
        """Cut the results of ``out`` to the rows some order of which the prune across
        them keeps, and their held orders to those it keeps; the rows held after."""
        idx, results = [], []
        for k, r in enumerate(out):
            if r is not None and r.rows and not tilers[k].relaxed:
                idx.append(k)
                results.append(r)
        ordered, sources = self.ordered_of(results, [tilers[k] for k in idx])
        table = self.ordering.table(ordered)
        order = np.argsort(table.template, kind="stable")
        starts = np.searchsorted(table.template[order], np.arange(len(idx) + 1))
        held = 0
        for j, k in enumerate(idx):
            r = results[j]
            if not alone_with_nothing_held(tilers[k]):
                kept = sorted_distinct(table.row[order[starts[j] : starts[j + 1]]])
                orders = HeldOrders(r, ordered[j], sources[j]).kept(kept)
                r = out[k] = orders.source
                self.held_orders[id(tilers[k])] = (tilers[k], orders)
            held += r.rows
        return held

    def ordered_of(
        self, results: list[TemplateResult], tilers: list[TemplateTiler]
    ) -> tuple[list[TemplateResult], list[np.ndarray]]:
        """:meth:`Ordering.ordered` of ``results`` (of ``tilers``), starting from the
        orders the last prune held where it left a result as it is."""
        done = []
        for r, t in zip(results, tilers, strict=True):
            _, held = self.held_orders.get(id(t), (None, None))
            done.append(held if held is not None and held.source is r else None)
        contexts = [t.gap_context() for t in tilers]
        return self.ordering.ordered(results, contexts, self.counter(), done)


def _cut(result: TemplateResult, kept: np.ndarray | None) -> TemplateResult:
    """``result``'s rows ``kept`` (None: all)."""
    return result if kept is None else result.compact(kept)


def _behind(idx: np.ndarray, kept: np.ndarray | None) -> np.ndarray:
    """The rows behind ``idx``, rows of a result cut to its rows ``kept`` (None: all)."""
    return idx if kept is None else kept[idx]


def _unmarked(results: list[TemplateResult], interner: PrefixInterner) -> list[TemplateResult]:
    """``results`` with the own-node marks taken out of their prefixes (their loop
    orders are in: from here on, rows of one prefix compete whatever nodes lie among
    its loops); all at once."""
    fused = [r for r in results if r.seq is not None]
    if not fused:
        return results
    seq = interner.unmarked(np.concatenate([r.seq for r in fused if r.seq is not None]))
    parts = iter(np.split(seq, np.cumsum([r.rows for r in fused])[:-1]))
    return [r if r.seq is None else replace(r, seq=next(parts)) for r in results]
