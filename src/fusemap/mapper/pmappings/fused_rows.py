"""The criteria fused pmappings are pruned on, and the pruning across templates that
can run before the loop orders of their prefix gaps are added.

A fused pmapping is compared only with rows of its own prefix, on energy (and latency
unless the objective is energy alone) and its private reservations per loop depth
(:func:`fused_criteria`). :func:`rows_kept_before_orders` finds, before
:func:`fusemap.mapper.tiling.gap_orders.with_gap_orders` multiplies them, the rows no
other template's row dominates in every order of their gaps (the proof is in
``docs/ffm.md``, "Loop orders in a fused prefix").
"""

from __future__ import annotations

import numpy as np

from ..pareto import pareto_mask
from ..tiling.gap_orders import GapContext, lowers
from ..tiling.result import TemplateResult


def stacked_buckets(results: list[TemplateResult]) -> dict[str, np.ndarray]:
    """Per memory, every result's per-depth reservations, one below the other (zeros
    where a result has fewer columns or none)."""
    memories = sorted({m for r in results for m in r.buckets})
    width = {m: max(r.buckets[m].shape[1] for r in results if m in r.buckets) for m in memories}
    out = {}
    for m in memories:
        parts = []
        for r in results:
            b = r.buckets.get(m)
            part = np.zeros((r.rows, width[m]))
            if b is not None:
                part[:, : b.shape[1]] = b
            parts.append(part)
        out[m] = np.concatenate(parts, axis=0)
    return out


def fused_criteria(
    results: list[TemplateResult],
    seq: np.ndarray,
    buckets: dict[str, np.ndarray],
    objective: str,
    alone: bool,
) -> np.ndarray:
    """(rows, criteria) of the stacked results: energy, latency unless the objective is
    energy, then every memory's per-depth reservations. ``alone``: the Einsum hosts no
    other Einsum's tensor, so its rows that fuse nothing (empty prefix) run alone, each
    fits by itself and their reservations decide nothing."""
    cols = [np.concatenate([r.energy for r in results])[:, None]]
    if objective != "energy":
        cols.append(np.concatenate([r.latency for r in results])[:, None])
    cols += [buckets[m] for m in sorted(buckets)]
    crit = np.concatenate(cols, axis=1)
    if alone:
        crit[seq == 0, 1 + (objective != "energy") :] = 0.0
    return crit


def rows_kept_before_orders(
    results: list[TemplateResult], contexts: list[GapContext], objective: str, alone: bool
) -> list[np.ndarray | None]:
    """Per result of ``results`` (each template's, with its search's context), its rows
    no row of another template dominates in the same prefix, where both templates have
    the same nodes above their prefix gaps, in the same memories of the same capacities
    (None: all of them).

    Every order of the gaps then gives both rows one prefix and changes their costs by
    the same amounts (one prefix fixes the tiles of its gaps, the nodes fix what an
    order passes), so the dominated row's orders are dominated too. Where a node lowers
    its reservation, the totals of its memory are compared as well: the dominating row's
    order then fits wherever the dominated one's does."""
    by_kind: dict[tuple, list[int]] = {}
    for i, (r, ctx) in enumerate(zip(results, contexts, strict=True)):
        if r.seq is not None and r.rows:
            by_kind.setdefault(_order_kind(r, ctx), []).append(i)
    out: list[np.ndarray | None] = [None] * len(results)
    for kind, members in by_kind.items():
        if len(members) < 2:
            continue
        group = [results[i] for i in members]
        seq = np.concatenate([r.seq for r in group])
        crit = fused_criteria(group, seq, stacked_buckets(group), objective, alone)
        totals = [
            np.concatenate([r.reservations.get(m, np.zeros(r.rows)) for r in group])[:, None]
            for m in kind[-1]
        ]
        keep = pareto_mask(seq, np.concatenate([crit, *totals], axis=1))
        at = 0
        for i, r in zip(members, group, strict=True):
            rows = np.flatnonzero(keep[at : at + r.rows])
            at += r.rows
            if len(rows) < r.rows:
                out[i] = rows
    return out


def _order_kind(r: TemplateResult, ctx: GapContext) -> tuple:
    """What the loop orders of a template's prefix gaps, and what they change, depend
    on besides the prefix; last, the memories of the nodes that lower a reservation."""
    holders = r.template.holders[: max(ctx.p_max, 0)]
    nodes = tuple((h.tensor, h.component, h.virtual, h.backing, lowers(h, ctx)) for h in holders)
    lowering = tuple(sorted({h.component for h in holders if lowers(h, ctx)}))
    limits = tuple(sorted((m, ctx.capacity.get(m, np.inf)) for m in lowering))
    return (
        ctx.p_max, ctx.depths, tuple(r.variables), nodes,
        tuple(sorted(ctx.by_depth & set(lowering))), limits, lowering,
    )  # fmt: skip
