"""The least energy the nodes from a template's deepest fused node down may add to a
partial tile shape above that node, per tile shape.

Tiles only shrink going down, so a row whose tiles above node ``j`` are ``B`` reaches
the fused node with a tile shape no larger than ``B`` in any rank variable. The fused
node's bottom-up front (:mod:`.suffix`) holds, per tile shape there, the least energy
of the nodes from it down; the least over the shapes no larger than ``B`` is a lower
bound of what those nodes add to the row. Over the grid of candidate tile shapes that
is a running minimum along each variable's axis (candidates are sorted), looked up by
the row's tile shape code. It is far tighter than the front's overall least where
small tiles at the fused node cost the nodes below much less (``docs/ffm.md``, "Nodes
below a stage").
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numba
import numpy as np

from .fronts import Front

MAX_CELLS = 1 << 22
"""Tile shape codes of an Einsum tabulated at most; past it only the front's overall
least is used (a bound as before, looser)."""


@dataclass(frozen=True)
class FrontFloor:
    """Per tile shape above the fused node, the least energy its nodes down may add."""

    overall: float  # the front's least (+inf: an empty front)
    least: np.ndarray | None  # per tile shape code: the least over shapes no larger
    encode: Callable[[np.ndarray], np.ndarray]

    @classmethod
    def of(cls, front: Front, radix: np.ndarray, encode) -> FrontFloor:
        """The floor of ``front`` (codes of mixed radix ``radix``, last variable
        fastest; ``encode``: tile sizes to codes, -1 if not a candidate shape)."""
        energy = front.crit[:, 0]
        overall = float(energy.min()) if len(energy) else math.inf
        cells = math.prod(int(r) for r in radix)
        if not len(energy) or cells > MAX_CELLS:
            return cls(overall, None, encode)
        state = np.ascontiguousarray(front.state, dtype=np.int64)
        energy = np.ascontiguousarray(energy, dtype=np.float64)
        grid = _running_least(state, energy, np.asarray(radix, dtype=np.int64), cells)
        return cls(overall, grid, encode)

    def above_overall(self, sizes: np.ndarray) -> np.ndarray:
        """Per row of tile ``sizes`` above the fused node, how much its floor passes
        the overall least (0 where the shape is not tabulated)."""
        if self.least is None or not math.isfinite(self.overall):
            return np.zeros(len(sizes))
        code = self.encode(sizes)
        return np.where(code >= 0, self.least[np.maximum(code, 0)] - self.overall, 0.0)


@numba.njit(cache=True)
def _running_least(state, energy, radix, cells):
    """The grid of codes of mixed radix ``radix`` (last variable fastest): per code, the
    least ``energy`` of the rows whose ``state`` code is no larger in any variable.
    Compiled: numpy's ``minimum.at`` and an ``accumulate`` per axis cost 0.28 ms a
    front, 9,295 fronts in GPT-3's 2,048-token run."""
    grid = np.full(cells, np.inf)
    for i in range(len(state)):
        if energy[i] < grid[state[i]]:
            grid[state[i]] = energy[i]
    stride = 1
    for axis in range(len(radix) - 1, -1, -1):  # a running minimum along each axis
        block = stride * radix[axis]
        for base in range(0, cells, block):
            for at in range(base + stride, base + block):
                if grid[at - stride] < grid[at]:
                    grid[at] = grid[at - stride]
        stride = block
    return grid
