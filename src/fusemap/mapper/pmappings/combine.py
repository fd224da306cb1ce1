"""The rows of every template of one Einsum in one table, Pareto-pruned per
compatibility (rows that exchange shared tensors differently are never compared)."""

from __future__ import annotations

import numpy as np

from ..pareto import pareto_mask
from ..space.interner import PrefixInterner
from ..tiling.columns import Column
from ..tiling.result import TemplateResult
from .fused_rows import fused_criteria, stacked_buckets
from .table import FusionColumns, PmappingTable, compatibility_of, empty_table, materialize


def combined_table(
    einsum: str, results: list[TemplateResult], objective: str, shared: frozenset[str]
) -> PmappingTable:
    """All templates' rows, Pareto-pruned (energy, latency, reservations) per compatibility.

    Rows that exchange shared tensors differently (another backing memory, other loops
    above it) are never compared: either may be the one a neighbour needs.
    """
    if not results:
        return empty_table(einsum)
    tmpl, row, energy, latency, res = _stack(results)
    cols = [energy] + ([latency] if objective != "energy" else []) + list(res.values())
    keys: dict[tuple, int] = {}
    groups = np.zeros(len(energy), dtype=np.int64)
    for i in range(len(energy)):
        res_i = results[int(tmpl[i])]
        if not any(
            h.tensor in shared and not _backed_at_top(res_i, h) for h in res_i.template.holders
        ):
            key: tuple = ()  # every shared tensor backed at the top with no loop above
        else:
            key = tuple(compatibility_of(materialize(res_i, int(row[i])), shared))
        groups[i] = keys.setdefault(key, len(keys))
    keep = pareto_mask(groups, np.stack(cols, axis=1))
    return _kept(einsum, results, (tmpl, row, energy, latency, res), keep)


def combined_fused_table(
    einsum: str,
    results: list[TemplateResult],
    objective: str,
    shared: frozenset[str],
    interner: PrefixInterner,
    top: dict[str, str],
    prune: bool,
    alone: bool = False,
) -> PmappingTable:
    """Like :func:`combined_table`, grouped by compatibility (the interned fused prefix) and
    compared on the private reservations of every loop depth (``alone``: the Einsum
    never hosts another Einsum's tensor)."""
    if not results:
        table = empty_table(einsum)
        table.fusion = FusionColumns(np.zeros(0, dtype=np.int64), {}, interner, shared, top)
        return table
    tmpl, row, energy, latency, res = _stack(results)
    seq = np.concatenate([r.seq for r in results])
    buckets = stacked_buckets(results)
    crit = fused_criteria(results, seq, buckets, objective, alone)
    keep = pareto_mask(seq, crit) if prune else np.ones(len(seq), dtype=bool)
    fusion = FusionColumns(seq, buckets, interner, shared, top).take(keep)
    return _kept(einsum, results, (tmpl, row, energy, latency, res), keep, fusion)


def _kept(einsum, results, stacked, keep, fusion: FusionColumns | None = None) -> PmappingTable:
    """The table of the ``keep`` rows of the stacked template results."""
    tmpl, row, energy, latency, res = stacked
    return PmappingTable(
        einsum,
        results,
        tmpl[keep],
        row[keep],
        energy[keep],
        latency[keep],
        {m: v[keep] for m, v in res.items()},
        _counts(results, keep),
        fusion=fusion,
    )


def _stack(results: list[TemplateResult]):
    tmpl = np.concatenate([np.full(r.rows, i) for i, r in enumerate(results)])
    row = np.concatenate([np.arange(r.rows) for r in results])
    energy = np.concatenate([r.energy for r in results])
    latency = np.concatenate([r.latency for r in results])
    memories = sorted({m for r in results for m in r.reservations})
    res = {
        m: np.concatenate([r.reservations.get(m, np.zeros(r.rows)) for r in results])
        for m in memories
    }
    return tmpl, row, energy, latency, res


def _counts(results: list[TemplateResult], keep: np.ndarray) -> dict[Column, np.ndarray]:
    names = sorted({n for r in results for n in r.latency_counts})
    return {
        n: np.concatenate([r.latency_counts.get(n, np.zeros(r.rows)) for r in results])[keep]
        for n in names
    }


def _backed_at_top(res: TemplateResult, holder) -> bool:
    """Backing in the first memory with no loop above (what fusion-off gives)."""
    return holder.backing and holder.level == res.template.holders[0].level
