"""Below the deepest fused node of a template with uneven spreads: searched once per start.

The bottom-up fronts of :mod:`fusemap.mapper.tiling.suffix` key a node's future by its tile
shape alone; with uneven spreads the costs below also depend on the rows' state
(:mod:`fusemap.mapper.tiling.uneven`). So such a template searches its nodes from the deepest
fused node down top-down, but once per distinct *start* (tile shape and state at that
node), not once per fused prefix: what happens below depends on nothing else. Each start
keeps the Pareto front of its own costs, every reservation compared (a row's fit depends
on the prefix it meets), and each prefix row then meets the front of its start, as it
meets a bottom-up front.
"""

from __future__ import annotations

import numpy as np

from ..space.prefix import BackingEntry
from .rest_bound import input_fill_terms
from .stage import Stage, combined_ids
from .terms import fill_basis


class _PassThrough:
    """An interner that keeps ids as they are: the suffix rows' ids are their starts."""

    def extend(self, seq: np.ndarray, tokens, inverse) -> np.ndarray:
        return seq

    def settled(self, seq: np.ndarray) -> np.ndarray:
        return seq


def applies(tiler) -> bool:
    """Fused templates with uneven spreads (the bottom-up fronts do not apply)."""
    return tiler.uneven is not None and tiler.p_max >= 0 and tiler.prune and not tiler.relaxed


def stages_below_fused_node(
    tiler, prev: Stage | None, cache, ceiling: float = np.inf
) -> list[Stage]:
    """The stages from the deepest fused node down (what :meth:`TemplateTiler.stage`
    would give, searched once per start). ``ceiling``: most energy a complete row may
    have spent before the compute leaf's (branch and bound, as in the top-down stages);
    a start's rows may spend it less the cheapest prefix row that meets them, and less
    what the compute leaf adds to every row at least."""
    sizes, crit, seq, depth = tiler.rows_above(prev)
    state = tiler.spreads.state_above(prev, len(sizes))
    holder = tiler.t.holders[tiler.p_max]
    token = (BackingEntry.of(holder.tensor, holder.component),)
    seq = cache.backed(prev, seq, token, tiler.interner)
    starts = np.concatenate([sizes.astype(np.float64), state], axis=1)
    _, first, inverse = np.unique(starts, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    cheapest = np.full(len(first), np.inf)
    np.minimum.at(cheapest, inverse, crit[:, 0])
    # Every row's compute leaf adds at least the floor (UnevenCounts.leaf_energy_floor).
    room = ceiling - cheapest - tiler.uneven.leaf_energy_floor()
    suffix = _search(tiler, sizes[first], state[first], room)
    last = suffix[-1]
    assert last.seq is not None and last.state is not None
    # Every prefix row with every row of its start's front.
    order = np.argsort(last.seq, kind="stable")
    lo = np.searchsorted(last.seq[order], inverse, side="left")
    hi = np.searchsorted(last.seq[order], inverse, side="right")
    count = hi - lo
    pre = np.repeat(np.arange(len(sizes)), count)
    within = np.arange(len(pre)) - np.repeat(np.cumsum(count) - count, count)
    rows = order[np.repeat(lo, count) + within]
    total = crit[pre] + last.crit[rows]
    fits = tiler.reservations.fits(total)
    pre, rows, total = pre[fits], rows[fits], total[fits]
    ones = np.ones((len(pre), len(tiler.tiles.vars)), dtype=np.int64)
    # Templates searched together (UnevenCounts.share) keep their rows apart.
    group = combined_ids(seq[pre], tiler.uneven.trips_code(last.state[rows]))
    keep = tiler.prune_rows(group, tiler.pruning_view(len(tiler.t.holders), ones, total))
    pre, rows, total = pre[keep], rows[keep], total[keep]
    paths = [rows]
    for st in reversed(suffix[1:]):
        paths.append(st.parents[paths[-1]])
    paths.reverse()
    out = []
    for k, (st, path) in enumerate(zip(suffix, paths, strict=True)):
        parents = pre if k == 0 else np.arange(len(pre), dtype=np.int64)
        out.append(
            Stage(
                st.sizes[path],
                np.zeros((len(pre), 0)),
                st.mids[path],
                parents,
                0,
                0,
                seq[pre],
                depth[pre],
            )  # fmt: skip
        )
    out[-1].crit = total
    out[-1].state = last.state[rows]
    out[0].evaluated = sum(st.evaluated for st in suffix)
    out[0].valid = len(total)
    return out


def _search(tiler, sizes: np.ndarray, state: np.ndarray, ceilings: np.ndarray) -> list[Stage]:
    """Top-down stages from the deepest fused node to the leaf, for rows that start
    there with ``sizes`` and ``state``, each start its own id (``seq``) and its own
    ceiling on the energy its rows spend."""
    # The prefix's reservations are not known; its stages are its own (and its
    # share_key's, same loops); the rows' ids are their starts.
    twin = tiler.below_fused_node(_PassThrough())
    ids = np.arange(len(sizes), dtype=np.int64)
    st = Stage(
        sizes, np.zeros((len(sizes), len(tiler.layout))), sizes, ids, 0, 0, ids,
        np.zeros(len(sizes), dtype=np.int64), state,
    )  # fmt: skip
    out: list[Stage] = []
    terms = input_fill_terms(tiler) if len(ceilings) else []
    for j in range(tiler.p_max, len(tiler.t.holders)):
        ceiling = ceilings[st.seq] if len(ceilings) else np.inf
        floor = nodes_floor(tiler, terms, j, st.sizes)  # the tiles entering node j
        if floor is not None:  # node j costed, the nodes below still add so much
            ceiling = ceiling - floor
        st = twin.stage(j, st, ceiling)
        floor = nodes_floor(tiler, terms, j, st.sizes)
        if floor is not None:
            st = st.take(st.crit[:, 0] + floor <= ceilings[st.seq])
        out.append(st)
    return out


def nodes_floor(tiler, terms: list, j: int, sizes: np.ndarray) -> np.ndarray | None:
    """Per row after stage ``j`` (tiles ``sizes`` above node ``j + 1``), the least
    energy the storage nodes below add: the inputs' fills at those tiles
    (:func:`input_fill_terms`; an output's terms are never negative); None where
    nothing is bounded."""
    below = [(x, factor) for position, x, factor in terms if position > j]
    if not below or not len(sizes):
        return None
    named = {v: sizes[:, k] for k, v in enumerate(tiler.tiles.vars)}
    return sum(factor * fill_basis(tiler.info, x, named) for x, factor in below)
