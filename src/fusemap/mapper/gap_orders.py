"""Loop orders inside the gaps of a fused prefix: one row per order the join may need.

The tile-shape search writes the loops of a gap (the loops between two storage nodes) in
one canonical order: relevant to the node above, then partially relevant, then
irrelevant (`docs/mapspace.md`). For one Einsum that loses nothing: the model's counts do
not depend on the order, only how far the node's reservation is lowered, and the
canonical order lowers it furthest. In a fused prefix, though, the order is part of the
compatibility: an Einsum writing ``n`` then ``m`` above a fused tensor cannot meet one
writing ``m`` then ``n``, though both orders cost either Einsum the same. So for every
row, each order of its prefix gaps that gives the node above the same reservation
(same size, same depth) is added as a row of its own, with the same numbers:

* below a virtual holder, or a node of an unbounded memory (no reservation tracked),
  every order of the gap;
* below any other node, every order of the relevant loops, then the first partially
  relevant loop, then every order of the rest (lowering passes the relevant loops and
  the first partially relevant one, whatever their order among themselves).

Orders that lower the node above less (larger, shallower reservation) are not added
(`docs/ffm.md`, "Not done yet").
"""

from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING

import numpy as np

from ..spec import mapping as M
from ..spec.errors import FusemapError

if TYPE_CHECKING:
    from .pmappings import PmappingTable
    from .template_result import TemplateResult

MAX_ORDER_ROWS = 5_000_000
"""Most rows one table may gain from loop orders (an allocation bound)."""

_RANK = {"relevant": 0, "partial": 1, "irrelevant": 2}


def with_gap_orders(table: PmappingTable, unbounded: dict[int, set[int]]) -> PmappingTable:
    """``table`` with a row for every equivalent loop order of its prefix gaps.

    ``unbounded[k]``: positions of template ``k``'s holders in memories of unbounded size.
    Rows are handled per distinct (template, prefix, loops of each gap) pattern.
    """
    fusion = table.fusion
    if fusion is None or len(table) == 0:
        return table
    interner = fusion.interner
    n_loops = np.array([sum(t[0] == "loop" for t in p) for p in interner.prefixes])
    extra_rows: list[np.ndarray] = []
    extra_seq: list[np.ndarray] = []
    total = 0
    for k in np.unique(table.template).tolist():
        rows = np.flatnonzero((table.template == k) & (n_loops[fusion.seq] >= 2))
        if len(rows) == 0:
            continue
        res = table.results[k]
        masks = _looped_masks(res, table.row[rows])  # (rows, gaps) bit sets of variables
        keys = np.concatenate([fusion.seq[rows, None], masks], axis=1)
        uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
        by_key = np.argsort(inverse.ravel(), kind="stable")
        starts = np.searchsorted(inverse.ravel()[by_key], np.arange(len(uniq) + 1))
        orders: dict[tuple, list[list[int]]] = {}  # by (loops of each gap, prefix loops)
        for u, key in enumerate(uniq.tolist()):
            seq, shape = key[0], (tuple(key[1:]), int(n_loops[key[0]]))
            if shape not in orders:
                segments = _segments(res, shape[0], shape[1], unbounded.get(k, set()))
                orders[shape] = list(_orders(segments))
            if not orders[shape]:
                continue
            mine = rows[by_key[starts[u] : starts[u + 1]]]
            tokens = interner.prefixes[seq]
            where = [p for p, t in enumerate(tokens) if t[0] == "loop"]
            for order in orders[shape]:
                new = list(tokens)
                for p, src in zip(where, order, strict=True):
                    new[p] = tokens[where[src]]
                extra_rows.append(mine)
                extra_seq.append(np.full(len(mine), interner.intern(tuple(new))))
                total += len(mine)
            if total > MAX_ORDER_ROWS:
                raise FusemapError(
                    f"Einsum {table.einsum}: more than {MAX_ORDER_ROWS:,} loop orders of "
                    "fused prefixes; use fewer rank variables per shared tensor"
                )
    if not extra_rows:
        return table
    return _appended(table, np.concatenate(extra_rows), np.concatenate(extra_seq))


def _looped_masks(res: TemplateResult, rows: np.ndarray) -> np.ndarray:
    """(rows, gaps): per gap, the variables it loops over as bits (variable k: 1 << k)."""
    n = len(res.stage_mids)
    out = np.zeros((len(rows), n), dtype=np.int64)
    weights = np.int64(1) << np.arange(len(res.variables), dtype=np.int64)
    r = np.asarray(rows, dtype=np.int64)
    for j in range(n, 0, -1):
        mid = res.stage_mids[j - 1][r]
        r = res.stage_parents[j - 1][r]
        here = res.stage_sizes[j - 1][r]
        out[:, j - 1] = (mid < here) @ weights
    return out


def _segments(
    res: TemplateResult, gap_masks: list[int], n_loops: int, unbounded: set[int]
) -> list[list[int]]:
    """The prefix loops (numbered in canonical order) cut into runs whose members may
    be permuted without changing any number."""
    holders = res.template.holders
    out: list[list[int]] = []
    seen = 0
    for j, mask in enumerate(gap_masks):
        if seen >= n_loops:
            break
        looped = [k for k in range(len(res.variables)) if mask >> k & 1]
        if not looped:
            continue
        ids = list(range(seen, seen + len(looped)))
        seen += len(looped)
        h = holders[j]
        if h.virtual or j in unbounded:
            out.append(ids)
            continue
        rel = res.relevance[h.tensor]
        kinds = sorted(_RANK[rel[res.variables[k]]] for k in looped)  # canonical order
        n_rel = kinds.count(0)
        out.append(ids[:n_rel])
        rest = ids[n_rel:]
        if rest and kinds[n_rel] == 1:  # the first partially relevant loop stays
            out.append(rest[:1])
            rest = rest[1:]
        out.append(rest)
    return [s for s in out if s]


def _orders(segments: list[list[int]]):
    """Every order of the loops permuting within segments, the canonical one left out."""
    per = [list(itertools.permutations(s)) for s in segments]
    for combo in itertools.product(*per):
        flat = [x for part in combo for x in part]
        if flat != sorted(flat):
            yield flat


def _appended(table: PmappingTable, rows: np.ndarray, seq: np.ndarray) -> PmappingTable:
    """``table`` with copies of ``rows`` carrying the prefixes ``seq``."""
    assert table.fusion is not None
    out = table.take(np.concatenate([np.arange(len(table)), rows]))
    assert out.fusion is not None
    out.fusion.seq = np.concatenate([table.fusion.seq, seq.astype(table.fusion.seq.dtype)])
    return out


def unbounded_holders(results, flat_of) -> dict[int, set[int]]:
    """Per template: positions of its holders in memories of unbounded size."""
    out: dict[int, set[int]] = {}
    for k, res in enumerate(results):
        path = flat_of(res.template.compute).path
        out[k] = {
            j
            for j, h in enumerate(res.template.holders)
            if not h.virtual and math.isinf(path[h.level].size)
        }
    return out


def ordered_as_prefix(mapping: M.Mapping, tokens: tuple) -> M.Mapping:
    """``mapping`` with its first temporal loops in the order of the prefix ``tokens``
    (a permutation within gaps of the canonical order)."""
    loops = [(t[1], t[2]) for t in tokens if t[0] == "loop"]
    if len(loops) < 2:
        return mapping
    nodes = list(mapping.nodes)
    k = 0
    for p, node in enumerate(nodes):
        if k == len(loops):
            break
        if isinstance(node, M.Temporal):
            var, tile = loops[k]
            nodes[p] = M.Temporal(rank_variable=var, tile_shape=tile)
            k += 1
    return M.Mapping(nodes=nodes)
