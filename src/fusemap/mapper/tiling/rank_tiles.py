"""The tiles each rank variable of an Einsum can take in a search, and the loops between
them: tables shared, read-only, by every template's tiler."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ...spec.resolve import EinsumInfo
from ..space.config import MapperConfig
from ..space.templates import Template
from ..space.tiles import candidate_sizes, next_sizes

UNEVEN_FROM = 3
"""Smallest rank a loop can cut into unequal tiles (3 as 2 + 1): below it, every size
divides the rank."""

MAX_DENSE_LOOKUP = 1 << 16
"""Up to this bound, tile size -> candidate index is a table; above it, a binary search
(a table as long as the rank would cost memory growing with the rank size)."""


class SizeIndex:
    """Tile size -> candidate index (-1 when not a candidate), by binary search."""

    def __init__(self, cands: np.ndarray, bound: int) -> None:
        self.cands, self.bound = cands, bound

    def __len__(self) -> int:
        return self.bound + 1

    def __getitem__(self, sizes: np.ndarray | int) -> np.ndarray:
        sizes = np.asarray(sizes, dtype=np.int64)
        pos = np.minimum(np.searchsorted(self.cands, sizes), len(self.cands) - 1)
        return np.where(self.cands[pos] == sizes, pos, -1)


Options = tuple[np.ndarray, np.ndarray]
"""CSR table: for each candidate tile, the tiles one loop below it may leave."""


@lru_cache(maxsize=256)
def tile_tables(bound: int, imperfect: bool) -> tuple[np.ndarray, Options, np.ndarray | SizeIndex]:
    """Candidate tiles of a rank variable, the tiles one loop below each may leave (CSR)
    and tile size -> candidate index; shared, read-only, by every template's tiler."""
    c = np.array(candidate_sizes(bound, imperfect), dtype=np.int64)
    options = next_sizes(c, bound, imperfect)
    for a in (c, *options):
        a.flags.writeable = False
    if bound > MAX_DENSE_LOOKUP:
        return c, options, SizeIndex(c, bound)
    lookup = np.full(bound + 1, -1, dtype=np.int64)
    lookup[c] = np.arange(len(c))
    lookup.flags.writeable = False
    return c, options, lookup


@lru_cache(maxsize=1024)
def tiles_reaching(bound: int, imperfect: bool, target: tuple[int, ...]) -> np.ndarray:
    """The candidate tiles from which loops (none, one or more) can leave one of
    ``target`` (shared by every template's tiler, read-only)."""
    cands, (offsets, values), index_of = tile_tables(bound, imperfect)
    good = np.isin(cands, target)
    for i in np.argsort(cands, kind="stable"):  # a loop leaves only smaller tiles
        if not good[i]:
            nxt = values[offsets[i] : offsets[i + 1]]
            good[i] = bool(good[index_of[nxt[nxt < cands[i]]]].any())
    out = cands[good]
    out.flags.writeable = False
    return out


@dataclass(frozen=True)
class RankTiles:
    """Per rank variable of one template's Einsum: its bound, whether its tiles may cut
    it unevenly, its candidate tiles, the loops between them and size -> index."""

    vars: list[str]
    bounds: np.ndarray
    imperfect: list[bool]
    cands: list[np.ndarray]
    options: list[Options]
    index_of: list[np.ndarray | SizeIndex]

    @classmethod
    def of(cls, info: EinsumInfo, template: Template, config: MapperConfig) -> RankTiles:
        """A variable spread by a spatial loop may be cut unevenly up to the spread
        bound, any other up to the imperfect bound. A rank of 1 or 2 is cut evenly
        whatever its bound: each of its sizes divides it, so an imperfect cut or an
        uneven spread leaves the tiles an even one does (and the even search is far
        cheaper: GPT-3 at batch 2)."""
        spread = {s.var for s in template.spatial}
        names = list(info.rank_variables)
        imperfect = [
            UNEVEN_FROM
            <= info.bounds[v]
            <= (config.spread_bound if v in spread else config.imperfect_bound)
            for v in names
        ]
        tables = [tile_tables(info.bounds[v], i) for v, i in zip(names, imperfect, strict=True)]
        return cls(
            names,
            np.array([info.bounds[v] for v in names], dtype=np.int64),
            imperfect,
            [c for c, _, _ in tables],
            [o for _, o, _ in tables],
            [x for _, _, x in tables],
        )

    def group(
        self,
        sizes: np.ndarray,
        above: np.ndarray | None = None,
        cols: list[int] | None = None,
        ids: np.ndarray | None = None,
    ) -> np.ndarray:
        """One integer per distinct row of ``sizes``, of the ``cols`` columns of the
        sizes ``above`` and of ``ids`` (mixed radix over candidate indices; exact, and
        falls back to renumbering when the radix would overflow)."""
        parts: list[tuple[np.ndarray, int]] = []
        for k, c in enumerate(self.cands):
            parts.append((self.index_of[k][sizes[:, k]], len(c)))
        for k in cols or []:
            assert above is not None
            parts.append((self.index_of[k][above[:, k]], len(self.cands[k])))
        if ids is not None and len(ids):
            parts.append((ids, int(ids.max()) + 1))
        key = np.zeros(len(sizes), dtype=np.int64)
        radix = 1
        for values, n in parts:
            if radix * n >= 2**62:
                _, key = np.unique(key, return_inverse=True)
                key = key.ravel().astype(np.int64)
                radix = int(key.max()) + 1 if len(key) else 1
            key = key * n + values
            radix *= n
        return key

    def expand_one(self, sizes: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Every choice of one variable's loop in a gap: (new sizes, parent row)."""
        offsets, values = self.options[k]
        idx = self.index_of[k][sizes[:, k]]
        start, count = offsets[idx], offsets[idx + 1] - offsets[idx]
        total = int(count.sum())
        rep = np.repeat(np.arange(len(sizes)), count)
        within = np.arange(total) - np.repeat(np.cumsum(count) - count, count)
        out = sizes[rep]
        out[:, k] = values[np.repeat(start, count) + within]
        return out, rep
