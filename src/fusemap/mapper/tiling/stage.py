"""The rows a tile-shape search carries from one node to the next."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass
class Stage:
    """Partial tile shapes after one node's gap (with the trail to rebuild them)."""

    sizes: np.ndarray  # (R, V) tile sizes above the next node
    crit: np.ndarray  # (R, K) criteria so far
    mids: np.ndarray  # (R, V) sizes after this gap's temporal loops
    parents: np.ndarray  # (R,) row of the previous stage
    evaluated: int
    valid: int
    seq: np.ndarray | None = None  # (R,) interned fused prefix so far (fusion only)
    depth: np.ndarray | None = None  # (R,) loops above the next node (fusion only)
    state: np.ndarray | None = None  # (R, S) uneven spatial spreads (mapper/uneven.py)

    def take(self, keep: np.ndarray) -> Stage:
        """The ``keep`` rows (their trail to earlier stages unchanged)."""
        pick = lambda a: None if a is None else a[keep]  # noqa: E731
        return Stage(
            self.sizes[keep], self.crit[keep], self.mids[keep], self.parents[keep],
            self.evaluated, self.valid, pick(self.seq), pick(self.depth), pick(self.state),
        )  # fmt: skip


def combined_ids(
    seq: np.ndarray | None, state_ids: np.ndarray | None, origin: np.ndarray | None = None
) -> np.ndarray | None:
    """Fused prefix ids and state ids (of the ``origin`` rows), as one id per row: rows
    are compared only with rows of the same prefix and state."""
    if state_ids is None:
        return seq
    ids = state_ids if origin is None else state_ids[origin]
    if seq is None or not len(ids):
        return ids
    return seq * (int(ids.max()) + 1) + ids


def any_smaller(mids: np.ndarray, sizes: np.ndarray, origin: np.ndarray) -> np.ndarray:
    """Per row ``r``, whether some column of ``mids[r]`` is smaller than in
    ``sizes[origin[r]]``: a column at a time (the rows' entering sizes gathered whole,
    with the comparison's table, were a large stage's peak of memory)."""
    out = np.zeros(len(mids), dtype=bool)
    for k in range(mids.shape[1]):
        out |= mids[:, k] < sizes[origin, k]
    return out


BOUND_SLICE = 1 << 21
"""Rows a row bound (``within``) is given at once: a large stage's candidate rows are
tens of millions in the check, and the bound's copies of their tiles and its own
arrays, for all of them at once, were gigabytes on top of the stage."""


def bounded_in_slices(
    within: Callable[[np.ndarray, np.ndarray], np.ndarray],
    below: np.ndarray,
    energy: np.ndarray,
    origin: np.ndarray,
    ok: np.ndarray,
) -> np.ndarray:
    """``within(below[r], energy[origin[r]])`` of each row ``r`` that is ``ok``, a slice
    of :data:`BOUND_SLICE` rows at a time (the bound is one of each row alone)."""
    rows = np.flatnonzero(ok)
    out = np.empty(len(rows), dtype=bool)
    for start in range(0, len(rows), BOUND_SLICE):
        at = rows[start : start + BOUND_SLICE]
        out[start : start + len(at)] = within(below[at], energy[origin[at]])
    return out
