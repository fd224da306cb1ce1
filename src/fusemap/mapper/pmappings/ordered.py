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
templates in their order). Only rows no order of which survives are dropped, so the
prune at the end sees every order it would have kept.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

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
        self, results: list[TemplateResult], contexts: list[GapContext], counter: OrderCounter
    ) -> tuple[list[TemplateResult], list[np.ndarray]]:
        """``results`` with their loop orders (own-node marks taken out of their
        prefixes), and per row of each, the row of the given result behind it."""
        kept: list[np.ndarray | None] = [None] * len(results)
        if self.prune:
            kept = rows_kept_before_orders(results, contexts, self.objective, self.alone)
        compacted = [r if k is None else r.compact(k) for r, k in zip(results, kept, strict=True)]
        ordered = with_gap_orders_of(compacted, contexts, self.interner, counter)
        out = _unmarked([r for r, _ in ordered], self.interner)
        sources = [idx if k is None else k[idx] for (_, idx), k in zip(ordered, kept, strict=True)]
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
    templates keeps. A prune costs about the rows held (their orders are worked out
    again), so it waits for as many new rows: at twice what the last one kept, or
    :data:`PRUNE_FROM_ROWS`, a prune that kept 350,000 rows would run again after
    50,000 new ones.

    Relaxed twins (floors over the whole fused space) are left out, and the results of
    templates that fuse nothing and hold nothing are left whole (their cheapest rows
    decide which variants are searched again, :mod:`fusemap.mapper.tiling.search`)."""

    def __init__(
        self, ordering: Ordering, counter: Callable[[], OrderCounter], useful: RowFilter | None
    ) -> None:
        self.ordering, self.counter, self.useful = ordering, counter, useful
        self.held = 0  # rows of the results finished so far
        self.next_at = PRUNE_FROM_ROWS

    def __call__(
        self, tilers: list[TemplateTiler], out: list[TemplateResult | None], i: int
    ) -> None:
        r = out[i]
        if r is None or tilers[i].relaxed:
            return
        if self.useful is not None:
            keep = np.flatnonzero(np.asarray(self.useful(r, self.ordering.interner), dtype=bool))
            if len(keep) < r.rows:
                r = out[i] = r.compact(keep)
        self.held += r.rows
        if self.ordering.prune and self.held >= self.next_at:
            self.held = self.prune(tilers, out)
            self.next_at = self.held + max(PRUNE_FROM_ROWS, self.held)

    def prune(self, tilers: list[TemplateTiler], out: list[TemplateResult | None]) -> int:
        """Cut the results of ``out`` to the rows some order of which the prune across
        them keeps; the rows held after."""
        idx, results = [], []
        for k, r in enumerate(out):
            if r is not None and r.rows and not tilers[k].relaxed:
                idx.append(k)
                results.append(r)
        contexts = [tilers[k].gap_context() for k in idx]
        ordered, sources = self.ordering.ordered(results, contexts, self.counter())
        table = self.ordering.table(ordered)
        order = np.argsort(table.template, kind="stable")
        starts = np.searchsorted(table.template[order], np.arange(len(idx) + 1))
        held = 0
        for j, k in enumerate(idx):
            r = results[j]
            if not alone_with_nothing_held(tilers[k]):
                rows = np.unique(sources[j][table.row[order[starts[j] : starts[j + 1]]]])
                if len(rows) < r.rows:
                    r = out[k] = r.compact(rows)
            held += r.rows
        return held


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
