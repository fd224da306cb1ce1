"""Loop orders inside the gaps of a fused prefix: one row per order the join may need.

The tile-shape search writes the loops of a gap (the loops between two storage nodes) in
one canonical order: relevant to the node above, then partially relevant, then
irrelevant (`docs/mapspace.md`). For one Einsum that loses nothing: the model's counts do
not depend on the order, only how far the node's reservation is lowered, and the
canonical order lowers it furthest. In a fused prefix, though, the order is part of the
compatibility: an Einsum writing ``n`` then ``m`` above a fused tensor cannot meet one
writing ``m`` then ``n``. So every template's rows get, before the table is pruned, a
row for every order of their prefix gaps, with the same energy and latency and the
reservation of the node above each gap lowered as that order lowers it:

* below a virtual holder, a backing node (reserved right under itself), or a node whose
  memory the search does not track: every order costs the same;
* below any other node, the reservation passes the order's leading relevant loops and
  then one partially relevant loop, and stops at the first irrelevant one: an order
  that passes fewer loops reserves a larger tile, shallower (orders passing the same
  loops cost the same).

Each row's reservations (total and per loop depth) change by the difference, and a row
that no longer fits its memory is dropped. Within a template, the rows of one prefix
have the same tiles in that prefix's gaps (the search marks the template's own nodes
among the fused loops in the prefix, :data:`fusemap.mapper.space.prefix.MARK`, until the
orders are added), so each order changes all of them alike and the template's own
pruning loses none of them; the table is pruned after (across templates), with every
order present.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

from ...model.rules import lowered_past
from ...spec import limits
from ...spec import mapping as M
from ...spec.errors import FusemapError, Location
from ..distinct import sorted_distinct
from ..space.interner import PrefixInterner
from ..space.prefix import LOOP, SpatialTile
from ..space.templates import Holder
from .result import TemplateResult

_RANK = {"relevant": 0, "partial": 1, "irrelevant": 2}


@dataclass(frozen=True)
class GapContext:
    """What the loop orders of one template's fused prefix depend on (from its search)."""

    p_max: int  # position of the deepest fused node: gaps above it are in the prefix
    tracked: frozenset[str]  # memories whose reservations the search tracks
    by_depth: frozenset[str]  # of those, kept per loop depth (the rows' buckets)
    depths: int  # per-depth columns (the last one takes every deeper reservation)
    capacity: dict[str, float]  # what the template may fill of each memory
    bits: Callable[[Holder, dict[str, np.ndarray]], np.ndarray]  # a holder's tile, in bits


@dataclass(frozen=True)
class _Option:
    """One order of a gap: the loops (variable indices) and what it changes."""

    order: tuple[int, ...]
    canonical: bool
    delta: tuple  # (memory, depth column or -1, bits per prefix) for each change


class OrderCounter:
    """Rows added over an Einsum's templates, against the limit ``loop_orders``."""

    def __init__(self, where: Location) -> None:
        self.where, self.total = where, 0  # where: the Einsum in the workload file

    def add(self, n: int) -> None:
        self.total += n
        most = limits.current().loop_orders
        if self.total > most:
            what = (
                f"more than {most:,} rows for the loop orders of fused prefixes (each "
                "order of the loops between two fused nodes is a row); narrow the space "
                "with `tensors: {keep: ..., may_keep: ...}` on the memories"
            )
            raise FusemapError(limits.exceeded("loop_orders", what), self.where)


def with_gap_orders(
    res: TemplateResult, ctx: GapContext, interner: PrefixInterner, counter: OrderCounter
) -> tuple[TemplateResult, np.ndarray]:
    """``res`` with a row for every other loop order of its rows' prefix gaps, and per
    row of that, the row of ``res`` it is an order of (its own first: the canonical
    orders)."""
    return with_gap_orders_of([res], [ctx], interner, counter)[0]


def with_gap_orders_of(
    results: list[TemplateResult],
    contexts: list[GapContext],
    interner: PrefixInterner,
    counter: OrderCounter,
) -> list[tuple[TemplateResult, np.ndarray]]:
    """:func:`with_gap_orders` of each result, the prefixes of all their orders
    reordered in one call (few per order and gap pattern: the arrays pay only
    together)."""
    found = [_found(r, ctx, interner, counter) for r, ctx in zip(results, contexts, strict=True)]
    flat = [o for f in found for o in f]
    pieces = iter(_pieces(flat, interner))
    out = []
    for res, orders in zip(results, found, strict=True):
        same = np.arange(res.rows)
        mine = [next(pieces) for _ in orders]
        if not mine:
            out.append((res, same))
            continue
        idx = np.concatenate([same, *(p.rows for p in mine)])
        out.append((_appended(res, mine, idx), idx))
    return out


def _found(
    res: TemplateResult, ctx: GapContext, interner: PrefixInterner, counter: OrderCounter
) -> list[_Order]:
    """The other orders of ``res``'s rows whose prefix gaps hold two loops or more."""
    if res.seq is None or ctx.p_max < 1 or res.rows == 0:
        return []
    rows = np.flatnonzero(interner.loop_counts(res.seq) >= 2)  # two loops or more
    if len(rows) == 0:
        return []
    here, mids = res.gap_tiles(rows)
    masks = _looped_masks(res, here, mids)[:, : ctx.p_max]
    spatial = np.array([len(_spatial_in(res, j)) for j in range(ctx.p_max)], dtype=np.int64)
    loops = _popcount(masks)
    several = (loops + spatial >= 2).any(axis=1)  # in one gap
    rows, masks, loops = rows[several], masks[several], loops[several]
    if len(rows) == 0:
        return []
    # A gap of one loop or none has one order: only its count matters, not its variable.
    key = np.where(loops + spatial >= 2, masks, -1 - loops)
    _, first, which = np.unique(key, axis=0, return_index=True, return_inverse=True)
    by_pattern = rows[np.argsort(which.ravel(), kind="stable")]
    starts = np.concatenate([[0], np.cumsum(np.bincount(which.ravel(), minlength=len(first)))])
    found: list[_Order] = []
    for p, at in enumerate(first.tolist()):
        members = by_pattern[starts[p] : starts[p + 1]]
        found += _orders(res, ctx, interner, counter, members, masks[at].tolist())
    return found


class _Piece(NamedTuple):
    """Copies of some rows in another order: their prefixes and reservation changes."""

    rows: np.ndarray
    seq: np.ndarray
    delta: list[tuple[str, int, np.ndarray]]  # (memory, depth column or -1, bits per row)


class _Order(NamedTuple):
    """Another order of some rows of one gap pattern, before their prefixes are
    reordered."""

    members: np.ndarray  # the rows
    seqs: np.ndarray  # their prefixes (distinct)
    key_of: np.ndarray  # per row, its prefix's place in ``seqs``
    delta: list[tuple[str, int, np.ndarray]]  # (memory, depth column or -1, bits per prefix)
    src: list[int]  # per position of the new prefix, the position of its old entry


def _orders(res, ctx, interner, counter, members: np.ndarray, mask: list[int]) -> list[_Order]:
    """The other orders of the rows ``members``, whose gaps loop over ``mask``: for
    each, the rows that still fit."""
    seqs, key_of = np.unique(res.seq[members], return_inverse=True)
    key_of = key_of.ravel()
    first = members[np.unique(key_of, return_index=True)[1]]  # one row per prefix
    here, mids = res.gap_tiles(first)
    spatial = [_spatial_in(res, j) for j in range(len(mask))]
    depth_top = np.cumsum(
        [0, *(bin(m).count("1") + len(sp) for m, sp in zip(mask, spatial, strict=True))]
    )
    options = [
        _gap_options(res, ctx, j, m, spatial[j], (here[j], mids[j]), int(depth_top[j]))
        for j, m in enumerate(mask)
    ]
    layout = interner.prefixes[int(seqs[0])]  # every prefix of the rows has its layout
    where = [q for q, t in enumerate(layout) if t.kind == LOOP]  # spatial ones too
    out = []
    for combo in itertools.product(*options):
        if all(o.canonical for o in combo):
            continue
        delta = [d for o in combo for d in o.delta]
        ok = _fits(res, ctx, members, key_of, delta)
        if not ok.any():
            continue
        src = _source([o[0].order for o in options], [o.order for o in combo], where, layout)
        out.append(_Order(members[ok], seqs, key_of[ok], delta, src))
        counter.add(int(ok.sum()))
    return out


def _pieces(found: list[_Order], interner: PrefixInterner) -> list[_Piece]:
    """The rows of every order ``found``, their prefixes reordered all at once."""
    if not found:
        return []
    used = [sorted_distinct(o.key_of) for o in found]
    which = np.repeat(np.arange(len(found)), [len(u) for u in used])
    seqs = np.concatenate([o.seqs[u] for o, u in zip(found, used, strict=True)])
    moved = interner.reordered(seqs, [o.src for o in found], which)
    out, at = [], 0
    for o, u in zip(found, used, strict=True):
        ids = np.zeros(len(o.seqs), dtype=np.int64)
        ids[u] = moved[at : at + len(u)]
        at += len(u)
        out.append(_Piece(o.members, ids[o.key_of], [(m, c, b[o.key_of]) for m, c, b in o.delta]))
    return out


def _source(canon: list, orders: list, where: list[int], tokens: tuple) -> list[int]:
    """For each position of the new prefix, the position of its token in the old one."""
    src = list(range(len(tokens)))
    at = 0
    for c, o in zip(canon, orders, strict=True):
        for i, k in enumerate(o):
            src[where[at + i]] = where[at + c.index(k)]
        at += len(o)
    return src


def _spatial_in(res: TemplateResult, j: int) -> list[int]:
    """The template's spatial loops at the end of gap ``j`` (indices, in its order)."""
    return [i for i, s in enumerate(res.template.spatial) if s.slot == j + 1]


def _gap_options(
    res: TemplateResult, ctx: GapContext, j: int, mask: int, spatial: list[int], sizes, depth_top
) -> list[_Option]:
    """Every order of gap ``j``'s loops, the canonical one first: its temporal loops
    (``mask``, variable indices) and its ``spatial`` loops (template indices, as items
    ``len(variables) + i``). ``sizes``: (here, mids), the tiles above and below the gap's
    temporal loops, (prefixes, variables).

    The search writes the spatial loops last, where the model moves them in the view of
    every tensor whose next holder is below them; a prefix shared with another Einsum
    may need them higher, above an own node of that Einsum's below them. So they take
    every place among the temporal loops, but below a temporal loop over their own
    variable (the tile they split) and in the template's order among themselves. The
    node above the gap is above the fanout (the loops sit above the first node at or
    below it), so its lowering stops at a spatial loop (the model's rule for a spatial
    loop of another component)."""
    looped = [k for k in range(len(res.variables)) if mask >> k & 1]
    h = res.template.holders[j]
    lowered = lowers(h, ctx)
    rel = res.relevance.get(h.tensor, {}) if not h.virtual else {}
    n_vars = len(res.variables)
    spread = tuple(n_vars + i for i in spatial)
    canon = canonical_order(h, looped, lambda k: rel[res.variables[k]]) + spread
    out = [_Option(canon, True, ())]
    if len(canon) < 2:
        return out
    here, mids = sizes
    base = _passed(res, rel, canon) if lowered else ()
    bits0 = _bits(res, ctx, h, here, mids, base) if lowered else None
    for order in itertools.permutations(canon):
        if order == canon or not _spatial_order_ok(res, order, spread):
            continue
        passed = _passed(res, rel, order) if lowered else base
        if passed == base:
            out.append(_Option(order, False, ()))
            continue
        bits = _bits(res, ctx, h, here, mids, passed)
        assert bits0 is not None  # lowered: the order changed what it passes
        delta: tuple
        if h.component in ctx.by_depth:
            old = min(depth_top + len(base), ctx.depths - 1)
            new = min(depth_top + len(passed), ctx.depths - 1)
            delta = ((h.component, old, -bits0), (h.component, new, bits))
        else:
            delta = ((h.component, -1, bits - bits0),)
        out.append(_Option(order, False, delta))
    return out


def canonical_order(h: Holder, looped: list[int], kind: Callable[[int], str]) -> tuple[int, ...]:
    """The order the search writes the loops ``looped`` (variable indices) of the gap
    below ``h`` in: relevant to its tensor, partially relevant, irrelevant (``kind``),
    by index within each; by index alone below a virtual holder."""
    return tuple(sorted(looped, key=lambda k: (0 if h.virtual else _RANK[kind(k)], k)))


def lowers(h: Holder, ctx: GapContext) -> bool:
    """Whether node ``h`` lowers its reservation past the loops below it (so their order
    may change it): not a virtual holder nor a backing node, in a tracked memory."""
    return not (h.virtual or h.backing) and h.component in ctx.tracked


def _spatial_order_ok(res: TemplateResult, order: tuple[int, ...], spread: tuple) -> bool:
    """Spatial loops in the template's order, each below the temporal loop over its
    variable (if the gap has one)."""
    n_vars = len(res.variables)
    if [k for k in order if k >= n_vars] != list(spread):
        return False
    at = {k: p for p, k in enumerate(order)}
    for k in spread:
        var = res.template.spatial[k - n_vars].var
        v = res.variables.index(var)
        if v in at and at[v] > at[k]:
            return False
    return True


def _passed(res: TemplateResult, rel: dict[str, str], order: tuple[int, ...]) -> tuple:
    """Temporal loops (variable indices) a lowered reservation passes in ``order``: a
    spatial loop (an item past the variables) stops it."""
    n_vars = len(res.variables)
    kinds = ["irrelevant" if k >= n_vars else rel[res.variables[k]] for k in order]
    return tuple(sorted(order[: lowered_past(kinds)]))


def _bits(res, ctx: GapContext, h: Holder, here, mids, passed: tuple) -> np.ndarray:
    """(prefixes,) bits of ``h``'s tile at the reservation point after ``passed``."""
    sizes = {v: (mids if k in passed else here)[:, k] for k, v in enumerate(res.variables)}
    return np.broadcast_to(ctx.bits(h, sizes), (len(here),)).astype(np.float64)


def _fits(res, ctx: GapContext, rows: np.ndarray, key_of: np.ndarray, delta) -> np.ndarray:
    """(rows,) whether each row still fits every memory after ``delta`` (per prefix)."""
    ok = np.ones(len(rows), dtype=bool)
    change: dict[str, np.ndarray] = {}
    for m, _, b in delta:
        change[m] = change.get(m, 0.0) + b
    for m, b in change.items():
        if m in res.reservations:
            ok &= res.reservations[m][rows] + b[key_of] <= ctx.capacity[m] * (1 + 1e-9)
    return ok


def _popcount(masks: np.ndarray) -> np.ndarray:
    out = np.zeros(masks.shape, dtype=np.int64)
    m = masks.copy()
    while m.any():
        out += m & 1
        m >>= 1
    return out


def _looped_masks(res: TemplateResult, here: list, mids: list) -> np.ndarray:
    """(rows, gaps): per gap, the variables it loops over as bits (variable k: 1 << k)."""
    weights = np.int64(1) << np.arange(len(res.variables), dtype=np.int64)
    return np.stack([(m < h) @ weights for h, m in zip(here, mids, strict=True)], axis=1)


def _appended(res: TemplateResult, pieces: list[_Piece], idx: np.ndarray) -> TemplateResult:
    """``res`` with the rows of ``pieces`` (copies of its rows, other prefixes; ``idx``:
    the row of ``res`` behind each row of the outcome)."""
    assert res.seq is not None
    reservations = {m: v[idx] for m, v in res.reservations.items()}
    buckets = {m: b[idx] for m, b in res.buckets.items()}
    at = res.rows
    for piece in pieces:
        span = slice(at, at + len(piece.rows))
        for m, col, b in piece.delta:
            if m in reservations:
                reservations[m][span] += b
            if col >= 0 and m in buckets:
                buckets[m][span, col] += b
        at += len(piece.rows)
    n = len(res.stage_mids)
    sizes, mids, parents = list(res.stage_sizes), list(res.stage_mids), list(res.stage_parents)
    sizes[n], mids[n - 1], parents[n - 1] = sizes[n][idx], mids[n - 1][idx], parents[n - 1][idx]
    return replace(
        res,
        energy=res.energy[idx],
        latency=res.latency[idx],
        reservations=reservations,
        stage_sizes=sizes,
        stage_mids=mids,
        stage_parents=parents,
        latency_counts={k: v[idx] for k, v in res.latency_counts.items()},
        seq=np.concatenate([res.seq, *(p.seq for p in pieces)]),
        buckets=buckets,
    )


def ordered_as_prefix(mapping: M.Mapping, tokens: tuple) -> M.Mapping:
    """``mapping`` with its first loops, temporal and spatial, in the order of the
    prefix ``tokens`` (a permutation within gaps of the canonical order)."""
    loops = [t for t in tokens if t.kind == LOOP]
    if len(loops) < 2:
        return mapping
    nodes = list(mapping.nodes)
    at = [p for p, node in enumerate(nodes) if isinstance(node, (M.Temporal, M.Spatial))]
    spread = {
        (n.rank_variable, f"{n.component}.{n.name}"): n
        for n in (nodes[p] for p in at[: len(loops)])
        if isinstance(n, M.Spatial)
    }
    for p, loop in zip(at, loops, strict=False):
        if isinstance(loop.tile, SpatialTile):
            nodes[p] = spread[loop.var, loop.tile.where]
        else:
            nodes[p] = M.Temporal(rank_variable=loop.var, tile_shape=loop.tile)
    return M.Mapping(nodes=nodes)
