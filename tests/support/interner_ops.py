"""Random growth of a prefix interner for property tests: one id extended by a run of
entries (as the tile-shape search does) or a whole prefix interned."""

from __future__ import annotations

import numpy as np

from fusemap.mapper.space.interner import PrefixInterner


def grow(p: PrefixInterner, op: str, entries: list, pick: int) -> bool:
    """Apply ``op`` ("extend" or "intern") to id ``pick`` (modulo the ids) followed by
    ``entries``; False for any other op (the caller's own)."""
    q = pick % len(p.prefixes)
    if op == "extend":
        p.extend(np.array([q]), [tuple(entries)], np.zeros(1, dtype=np.int64))
    elif op == "intern":
        p.intern(p.prefixes[q] + tuple(entries))
    else:
        return False
    return True
