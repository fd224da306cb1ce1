"""The row arithmetic of one join step: partial mappings times pmappings, reservations
consolidated by loop level, capacity checked (see :mod:`fusemap.mapper.join.ffm_join`).

A step pairs many groups of partial mappings with many pieces of the next Einsum's
table, most of them a row or two each (GPT-3: 47,000 pairs, median 1 x 1). So the pairs
of one step are joined together, in batches of pairs with the same loop levels, and
their rows gathered by destination group afterwards; every row, and every value, is
what joining the pairs one by one gives, in the same order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np


@dataclass
class Group:
    """Partial mappings with the same live compatibility."""

    energy: np.ndarray
    latency: np.ndarray
    picks: np.ndarray  # (R, j) row of each joined Einsum's table
    S: dict[str, np.ndarray]  # memory -> (R, b) live sums per open level 1..b
    C: dict[str, np.ndarray]  # memory -> (R, b+1) closed peaks per level 0..b

    def take(self, keep: np.ndarray | slice) -> Group:
        """The rows ``keep``."""
        return Group(
            self.energy[keep], self.latency[keep], self.picks[keep],
            {m: v[keep] for m, v in self.S.items()}, {m: v[keep] for m, v in self.C.items()},
        )  # fmt: skip


class PieceLike(Protocol):
    """What joining needs of a piece (:class:`fusemap.mapper.join.pieces.Piece`)."""

    rows: np.ndarray
    b_prev: int
    b_next: int
    shared_adds: list[tuple[str, int, float]]


def join_pairs(
    pairs: Sequence[tuple[Group, PieceLike]],
    dest: list,
    table,
    memories: dict[str, float],
    adds: list[list[tuple[str, int, float]]] | None = None,
) -> dict:
    """Every partial mapping of each pair's group with every row of its piece, within
    every memory, gathered by destination ``dest[i]`` of pair ``i``: per destination,
    its pairs' rows in pair order (group rows major), destinations in the order of their
    first pair with a row that fits (what joining pair by pair and appending gives).
    ``adds[i]``: the (memory, level, bits) tiles pair ``i`` reserves besides its rows'
    own (default: its piece's fused backing tiles)."""
    adds = adds if adds is not None else [p.shared_adds for _, p in pairs]
    batches: dict[tuple[int, int], list[int]] = {}
    for i, (_, p) in enumerate(pairs):
        batches.setdefault((p.b_prev, p.b_next), []).append(i)
    by_width: dict[int, list[tuple[np.ndarray, Group]]] = {}
    for (b, b2), members in batches.items():
        pair, joined = _join_batch(
            [pairs[i] for i in members], [adds[i] for i in members], b, b2, table, memories
        )
        by_width.setdefault(b2, []).append((np.asarray(members, dtype=np.int64)[pair], joined))
    slot: dict = {}
    dest_id = np.array([slot.setdefault(d, len(slot)) for d in dest], dtype=np.int64)
    keys = list(slot)
    found: list[tuple[int, object, Group]] = []
    for parts in by_width.values():
        pair = np.concatenate([x for x, _ in parts])
        if len(pair) == 0:
            continue  # nothing of this width fits
        rows = concat([g for _, g in parts])
        order = np.argsort(dest_id[pair] * len(pairs) + pair, kind="stable")
        pair, rows = pair[order], rows.take(order)
        ids = dest_id[pair]
        starts = np.flatnonzero(np.diff(ids, prepend=-1))
        ends = np.append(starts[1:], len(ids))
        for a, z in zip(starts.tolist(), ends.tolist(), strict=True):
            found.append((int(pair[a]), keys[ids[a]], rows.take(slice(a, z))))
    return {key: g for _, key, g in sorted(found, key=lambda x: x[0])}


def _join_batch(pairs, adds, b: int, b2: int, table, memories) -> tuple[np.ndarray, Group]:
    """Pairs whose pieces all share ``b`` loops with the previous Einsum and ``b2`` with
    the next one: (pair of each row that fits, the rows)."""
    # The distinct groups, stacked once.
    slot: dict[int, int] = {}
    groups: list[Group] = []
    for g, _ in pairs:
        if id(g) not in slot:
            slot[id(g)] = len(groups)
            groups.append(g)
    g_start = np.cumsum([0] + [len(g.energy) for g in groups])[:-1]
    stacked = concat(groups)
    n1 = np.array([len(g.energy) for g, _ in pairs], dtype=np.int64)
    n2 = np.array([len(p.rows) for _, p in pairs], dtype=np.int64)
    p_rows = np.concatenate([p.rows for _, p in pairs]).astype(np.int64)
    p_start = np.cumsum(n2) - n2
    size = n1 * n2
    pair = np.repeat(np.arange(len(pairs)), size)  # pair of each joined row
    within = np.arange(len(pair)) - np.repeat(np.cumsum(size) - size, size)
    left = g_start[[slot[id(g)] for g, _ in pairs]][pair] + within // n2[pair]
    rows = p_rows[p_start[pair] + within % n2[pair]]
    energy = stacked.energy[left] + table.energy[rows]
    latency = stacked.latency[left] + table.latency[rows]
    ok = np.ones(len(pair), dtype=bool)
    S: dict[str, np.ndarray] = {}
    C: dict[str, np.ndarray] = {}
    top = max(b, b2)
    buckets = table.fusion.buckets
    n_adds = max(len(a) for a in adds)
    for m, capacity in memories.items():
        s = np.zeros((len(pair), top))
        c = np.zeros((len(pair), top + 1))
        s[:, :b] = stacked.S[m][left]
        c[:, : b + 1] = stacked.C[m][left]
        own = np.zeros(len(pair))
        if m in buckets:  # the pmappings' private reservations by loop depth
            private = buckets[m][rows]
            d = min(top, private.shape[1] - 1)
            s[:, :d] += private[:, :d]
            own += private[:, d:].sum(axis=1)
        for q in range(n_adds):  # fused backing tiles, in each piece's order
            level = np.zeros(len(pairs), dtype=np.int64)
            bits = np.zeros(len(pairs))
            for k, a in enumerate(adds):
                if q < len(a) and a[q][0] == m:
                    level[k], bits[k] = a[q][1], a[q][2]
            if not bits.any():
                continue
            lv, bt = level[pair], bits[pair]
            inside = (lv >= 1) & (lv <= top)
            hit = np.flatnonzero(inside)
            s[hit, lv[hit] - 1] += bt[hit]
            own += np.where(inside, 0.0, bt)
        peak = own
        for e in range(top, b2, -1):
            peak = s[:, e - 1] + np.maximum(c[:, e], peak)
        c[:, b2] = np.maximum(c[:, b2], peak)
        s, c = s[:, :b2], c[:, : b2 + 1]
        ok &= usage(s, c) <= capacity * (1 + 1e-9)
        S[m], C[m] = s, c
    kept = np.flatnonzero(ok)
    joined = Group(
        energy[kept], latency[kept],
        np.concatenate([stacked.picks[left[kept]], rows[kept, None]], axis=1),
        {m: v[kept] for m, v in S.items()}, {m: v[kept] for m, v in C.items()},
    )  # fmt: skip
    return pair[kept], joined


def usage(s: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Peak usage so far: ``max(C[0], S[1] + max(C[1], S[2] + ...))``."""
    peak = np.zeros(len(c))
    for e in range(s.shape[1], 0, -1):
        peak = s[:, e - 1] + np.maximum(c[:, e], peak)
    return np.maximum(c[:, 0], peak)


def concat(groups: list[Group]) -> Group:
    """The rows of all ``groups``, in order."""
    if len(groups) == 1:
        return groups[0]
    return Group(
        np.concatenate([g.energy for g in groups]),
        np.concatenate([g.latency for g in groups]),
        np.concatenate([g.picks for g in groups]),
        {m: np.concatenate([g.S[m] for g in groups]) for m in groups[0].S},
        {m: np.concatenate([g.C[m] for g in groups]) for m in groups[0].C},
    )
