"""The fused-prefix entries a gap of the search appends: its loops, in the canonical
order, then its spatial loops with the tiles they leave (interned as integers)."""

from __future__ import annotations

import numpy as np

from ...spec.resolve import EinsumInfo
from ..distinct import unique_rows
from ..space.interner import PrefixInterner
from ..space.prefix import LoopEntry, SpatialTile
from ..space.templates import Template
from .gap_orders import canonical_order
from .uneven import spatial_tiles


def gap_tokens(
    template: Template,
    info: EinsumInfo,
    variables: list[str],
    interner: PrefixInterner,
    j: int,
    seq: np.ndarray,
    here: np.ndarray,
    mids: np.ndarray,
    below: np.ndarray,
    tiles: np.ndarray | None = None,
) -> np.ndarray:
    """The prefixes ``seq`` with gap ``j``'s loops appended: a row's temporal entries
    depend only on the tiles its loops leave (``mids`` where smaller than ``here``);
    its spatial ones on the sizes after and below the gap (``tiles``: those its spatial
    loops leave, when the rows carry them)."""
    holder = template.holders[j]
    order = canonical_order(
        holder, list(range(len(variables))),
        lambda k: info.relevance(holder.tensor, variables[k]),
    )  # fmt: skip
    n = len(variables)
    cols = [np.where(mids < here, mids, 0)]
    spread = any(s.slot == j + 1 for s in template.spatial)
    if spread:
        cols += [mids, below] + ([] if tiles is None else [tiles])
    uniq, inverse = unique_rows(np.concatenate(cols, axis=1))
    tokens = [
        tuple(LoopEntry.of(variables[k], int(u[k])) for k in order if u[k])
        + (
            _spatial_tokens(template, variables, j, u[n : 2 * n], u[2 * n : 3 * n], u[3 * n :])
            if spread
            else ()
        )
        for u in uniq
    ]
    return interner.extend(seq, tokens, inverse)


def _spatial_tokens(
    template: Template, variables: list[str], j: int, mids: np.ndarray, below: np.ndarray, tiles
) -> tuple:
    """The spatial loops at the end of gap ``j`` (above node ``j + 1``), in the order
    :func:`~fusemap.mapper.pmappings.table.materialize` writes them, each with the
    tile it leaves (``tiles``, if not empty)."""
    loops = [s for s in template.spatial if s.slot == j + 1]
    tiles = [int(x) for x in tiles] if len(tiles) else spatial_tiles(loops, variables, mids, below)
    return tuple(
        LoopEntry.of(s.var, SpatialTile.on(tile, s.component, s.dimension))
        for s, tile in zip(loops, tiles, strict=True)
    )
