"""The rows a tile-shape search carries from one node to the next, and its columns."""

from __future__ import annotations

from dataclasses import dataclass, field

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


@dataclass
class Layout:
    """Columns of the criteria matrix."""

    names: list[str] = field(default_factory=list)

    def add(self, name: str) -> int:
        if name not in self.names:
            self.names.append(name)
        return self.names.index(name)
