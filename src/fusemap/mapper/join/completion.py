"""Least objectives before and after each step of a join, per live compatibility.

A capped join (:class:`fusemap.mapper.join.bound.Bound`) drops a partial mapping whose
objective, completed with the least the later Einsums can add, exceeds the cap. The
least each Einsum costs alone is a weak completion on a long chain: Einsum ``j``'s
cheapest rows keep its input in one place, Einsum ``j-1``'s cheapest keep that tensor
in another, and the slack adds up along the order.

This module runs the join *relaxed* to compatibility alone: a state is the live
compatibility after a step (the join's group key without the dependency state, the
exposure and the reservations), and each step keeps, per compatibility of the next
Einsum's rows, only their least energy and least latency. Every step the join takes
is a step of the relaxation (the join refuses more pairs, for dependencies, copies,
hosting and capacity, never fewer; and energies and latencies add up along the order,
nothing else adds to them), so the relaxation's least after a state bounds from below
what any completion of a partial mapping with that live compatibility adds, and its
least before a state, what any way of reaching it cost. Energy and latency are bounded
apart (each least may come from another row).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...spec.resolve import WorkloadInfo
from ..distinct import sorted_distinct, unique_rows
from ..pmappings.table import PmappingTable
from ..space.prefix import Compatibility

Key = tuple[Compatibility, ...]

EDGE_LIMIT = 2_000_000
"""Most (state, compatibility) pairs the relaxation visits; beyond it the caller falls
back to each Einsum's least alone (a bound too, only weaker)."""


def prefix_compat(table: PmappingTable, seq: int) -> tuple[Compatibility, ...]:
    """The compatibility of one fused prefix of the table, per shared tensor (sorted).
    Memoized on the table's interner: every join (order, cap) asks again, of tables
    merged with more rows between caps (they keep the interner)."""
    fusion = table.fusion
    assert fusion is not None
    memo = _compat_memo(table, fusion)
    got = memo.get(seq)
    if got is None:
        got = memo[seq] = fusion.interner.compatibility(seq, fusion.shared, fusion.top)
    return got


def _compat_memo(table: PmappingTable, fusion) -> dict:
    """The interner's memo of the table's compatibilities; its key (which sorts the
    fusion's top levels) worked out once per table and fusion, not per prefix asked.
    Only the key is kept on the table: a pickled table does not carry the memo."""
    held = table.__dict__.get("_compat_key")
    if held is None or held[0] is not fusion:
        key = ("compat", fusion.shared, tuple(sorted(fusion.top.items())))
        held = table.__dict__["_compat_key"] = (fusion, key)
    return fusion.interner.memo_of(held[1])


def live_key(live: dict, compat: dict, j: int, accessors: dict) -> Key:
    """Live compatibility after Einsum ``j``: tensors used both up to ``j`` and after."""
    merged = dict(live)
    merged.update(compat)
    keep = [c for t, c in merged.items() if accessors[t][0] <= j < accessors[t][-1]]
    return tuple(sorted(keep, key=lambda c: c.tensor))


Cost = tuple[float, float]  # energy, latency


@dataclass
class _Boundary:
    """The states of the relaxation before one step: per state, per tensor carried over
    the boundary (``carried``, sorted), the id of its compatibility (-1: none)."""

    carried: list[str]
    states: np.ndarray  # (m, len(carried)) int64
    before: np.ndarray  # (m, 2): least energy and latency reaching each state
    after: np.ndarray | None = None  # (m, 2): least completing it (the backward pass)
    index: dict[tuple[int, ...], int] | None = None  # state -> row, made when asked


@dataclass
class _Step:
    """One Einsum's classes (rows of one compatibility) and the relaxed step's pairs."""

    row_class: np.ndarray  # per row of the table: its class (-1: no row of interest)
    least: np.ndarray  # (classes, 2): least energy and latency of each class
    edges: np.ndarray  # (pairs, 3): state before, class, state after


@dataclass
class Completion:
    """Per step ``j`` of an order and live compatibility before it: the least energy and
    latency of Einsums ``0..j-1`` reaching it and of ``j..`` after it; per row of step
    ``j``'s table, the least of every other Einsum around it (``around``)."""

    boundaries: list[_Boundary]  # [0..n]
    around: list[np.ndarray]  # [j]: (rows, 2)
    ids: dict[Compatibility, int]  # compatibility -> its id in states

    def rest(self, j: int, key: Key) -> Cost:
        """Least energy and latency of Einsums ``j..`` from live compatibility ``key``
        (the join's; infinite: no completion)."""
        b = self.boundaries[j]
        row = self._row(b, key)
        if row is None or b.after is None:
            return (math.inf, math.inf)
        e, lat = b.after[row].tolist()
        return (e, lat)

    def _row(self, b: _Boundary, key: Key) -> int | None:
        live = {c.tensor: c for c in key}
        if len(live) != len(key) or any(t not in b.carried for t in live):
            return None
        state = []
        for t in b.carried:
            c = live.get(t)
            k = -1 if c is None else self.ids.get(c)
            if k is None:
                return None
            state.append(k)
        if b.index is None:
            b.index = {s: i for i, s in enumerate(map(tuple, b.states.tolist()))}
        return b.index.get(tuple(state))

    @property
    def lowest(self) -> Cost:
        """Least energy and latency of the whole order (each a lower bound)."""
        return self.rest(0, ())


def relaxed(
    order: list[str],
    tables: dict[str, PmappingTable],
    workload: WorkloadInfo,
    rows: list[np.ndarray] | None = None,
) -> Completion | None:
    """The relaxed join of ``order`` (None: more than ``EDGE_LIMIT`` pairs).

    ``rows[j]`` (a mask of the ``j``-th table; default all): the rows a mapping of
    interest may use (e.g. those a cap allows). The least of a subset of rows bounds what
    the mappings using only that subset cost; the others get no completion."""
    accessors = {t: [i for i, e in enumerate(order) if t in workload.einsum(e).tensors]
                 for t in workload.tensors}  # fmt: skip
    ids: dict[Compatibility, int] = {}
    bounds = [_Boundary([], np.zeros((1, 0), dtype=np.int64), np.zeros((1, 2)))]
    steps: list[_Step] = []
    visited = 0
    for j, name in enumerate(order):
        table = tables[name]
        mask = None if rows is None else rows[j]
        shared, row_class, codes, least = _classes(table, mask, ids)
        here = bounds[j]
        carried = sorted(t for t, a in accessors.items() if a and a[0] <= j < a[-1])
        # Matched on the tensors shared with earlier Einsums; the state after holds, per
        # tensor carried on, the class's compatibility if it has one, else the state's
        # (as ``live_key``).
        earlier = [t for t in here.carried if t in shared and accessors[t][0] < j]
        s_key = here.states[:, [here.carried.index(t) for t in earlier]]
        c_key = codes[:, [shared.index(t) for t in earlier]]
        valid = np.flatnonzero((s_key >= 0).all(axis=1))
        pairs = _equi_join(s_key[valid], c_key, EDGE_LIMIT - visited)
        if pairs is None:
            return None
        visited += len(pairs[0])
        s_idx, c_idx = valid[pairs[0]], pairs[1]
        cols = [
            codes[c_idx, shared.index(t)]
            if t in shared
            else here.states[s_idx, here.carried.index(t)]
            for t in carried
        ]
        new = np.stack(cols, axis=1) if cols else np.zeros((len(s_idx), 0), dtype=np.int64)
        states, n_idx = unique_rows(new)
        cost = np.full((len(states), 2), math.inf)
        np.minimum.at(cost, n_idx, here.before[s_idx] + least[c_idx])
        bounds.append(_Boundary(carried, states, cost))
        steps.append(_Step(row_class, least, np.stack([s_idx, c_idx, n_idx], axis=1)))
    return _backward(bounds, steps, ids)


def _equi_join(left: np.ndarray, right: np.ndarray, limit: int):
    """(left rows, right rows) of every pair with equal keys (rows of the two int
    arrays, same width), or None if more than ``limit``."""
    keys, inverse = unique_rows(np.concatenate([left, right]))
    lk, rk = inverse[: len(left)], inverse[len(left) :]
    order = np.argsort(rk, kind="stable")
    lo = np.searchsorted(rk[order], lk, side="left")
    hi = np.searchsorted(rk[order], lk, side="right")
    sizes = hi - lo
    total = int(sizes.sum())
    if total > limit:
        return None
    li = np.repeat(np.arange(len(left)), sizes)
    within = np.arange(total) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    return li, order[np.repeat(lo, sizes) + within]


def _classes(table: PmappingTable, mask: np.ndarray | None, ids: dict[Compatibility, int]):
    """(shared tensors sorted, class of each row (-1: not in ``mask``), per class the id
    of each shared tensor's compatibility, per class its least energy and latency)."""
    picked = np.arange(len(table.energy)) if mask is None else np.flatnonzero(mask)
    shared, codes, local = _row_codes(table, picked)
    glob = np.array([ids.setdefault(c, len(ids)) for c in local], dtype=np.int64)
    classes, inverse = unique_rows(glob[codes])
    row_class = np.full(len(table.energy), -1, dtype=np.int64)
    row_class[picked] = inverse
    least = np.full((len(classes), 2), math.inf)
    np.minimum.at(least[:, 0], inverse, table.energy[picked])
    np.minimum.at(least[:, 1], inverse, table.latency[picked])
    return shared, row_class, classes, least


def _row_codes(table, picked: np.ndarray) -> tuple[list[str], np.ndarray, list[Compatibility]]:
    """(shared tensors sorted, per picked row and tensor the index of its compatibility
    in the list, the list). A renamed table (``renamed_from``) reads the first table's
    codes (row ``i`` is its row ``i`` renamed) and renames the few distinct
    compatibilities instead of every prefix."""
    origin = table.__dict__.get("renamed_from")
    if origin is not None:
        base, tensors, var = origin
        names, codes, local = _row_codes(base, picked)
        renamed = table.__dict__.setdefault("_renamed_codes", [])  # the base's list grows
        renamed += [
            Compatibility(
                tensors[c.tensor], c.backing, tuple((var.get(v, v), n) for v, n in c.loops)
            )
            for c in local[len(renamed) :]
        ]
        new = [tensors[t] for t in names]
        shared = sorted(new)
        return shared, codes[:, [new.index(t) for t in shared]], renamed
    fusion = table.fusion
    assert fusion is not None
    shared = sorted(fusion.shared)
    cache = table.__dict__.get("_prefix_codes")
    size = int(fusion.seq.max()) + 1 if len(fusion.seq) else 0
    if cache is None:
        cache = table.__dict__["_prefix_codes"] = (
            np.full((size, len(shared)), -2, dtype=np.int64),
            [],
            {},
        )
    per_prefix, local, index = cache
    seqs = sorted_distinct(fusion.seq[picked])
    for s in seqs[per_prefix[seqs, 0] == -2].tolist() if len(shared) else []:
        row = []  # (not through ``prefix_compat``: its cache is for the few the join asks)
        for c in fusion.interner.compatibility(s, fusion.shared, fusion.top):
            k = index.get(c)
            if k is None:
                k = index[c] = len(local)
                local.append(c)
            row.append(k)
        per_prefix[s] = row
    return shared, per_prefix[fusion.seq[picked]], local


def _backward(bounds: list[_Boundary], steps: list[_Step], ids) -> Completion:
    n = len(steps)
    bounds[n].after = np.zeros((len(bounds[n].states), 2))
    around = []
    for j in range(n - 1, -1, -1):
        step, here, later = steps[j], bounds[j], bounds[j + 1]
        s_idx, c_idx, n_idx = step.edges.T
        assert later.after is not None
        rest = later.after[n_idx]
        here.after = np.full((len(here.states), 2), math.inf)
        np.minimum.at(here.after, s_idx, step.least[c_idx] + rest)
        per_class = np.full((len(step.least) + 1, 2), math.inf)  # last: no class (-1)
        np.minimum.at(per_class, c_idx, here.before[s_idx] + rest)
        around.append(per_class[step.row_class])
    around.reverse()
    return Completion(bounds, around, ids)
