"""Rows of the full-space check that can join at all: a semi-join on compatibility
taken without its loop order.

The check of several fused loops per rank variable (:mod:`fusemap.mapper.full_space`)
gives every row it keeps a row per loop order of its prefix gaps
(:mod:`fusemap.mapper.tiling.gap_orders`): on GPT-3 at 512 tokens that passed the
``loop_orders`` limit. Most of those rows can never be joined. In a mapping every user
of a shared tensor has the same compatibility for it (the join groups partial mappings
on it), so a row whose tensor no other user can back in the same memory under the same
loops, in whatever order, is of no use in any order.

A shared tensor's *order-free key* in a prefix is its compatibility with the loops
above its backing node sorted (:func:`order_free_keys`). Every loop order of a row has
its key (an order permutes the loops of a gap, and a backing node has whole gaps above
it), and equal compatibilities have equal keys. The semi-join (:func:`joinable`) drops
a row when, for one of its shared tensors and another user of that tensor, no row of
that user has its key: neither a row of its table nor one of its check rows (before
orders) still kept; rounds until nothing more is dropped.

Exact: a row of an optimal mapping (of any mapping) has, for each shared tensor and
each other user, a row of that user in the same mapping with the same compatibility,
hence the same key; that row is in the user's table, or is a loop order of one of its
check rows, which is in the same mapping and so, by induction on the rounds, never
dropped.

With a :class:`CostBound` the semi-join also weighs costs: that row of the other user
costs at least the least of its rows with the tensor's key (the table's and the check
rows' still kept), so a key is dropped when its least row, completed with what its
partners so cost beyond their least and every other Einsum at its least, passes the
check's cut. Exact by the same induction (a row of a better mapping passes it).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from ..spec.resolve import WorkloadInfo
from .pmappings.signature import tensor_renaming, variable_renaming
from .pmappings.table import PmappingTable
from .space.interner import PrefixInterner
from .space.prefix import BACK, LOOP, Prefix, SpatialTile

LoopKey = tuple[str, int, str]  # rank variable, tile, fanout of a spatial loop ("" if none)
TensorKey = tuple[str, str, tuple[LoopKey, ...]]  # tensor, backing memory, loops sorted
RowKey = tuple[TensorKey, ...]  # one per shared tensor of the Einsum, by tensor name
Cost = tuple[float, float]  # the least energy and the least latency of some rows


def order_free_keys(prefix: Prefix, shared: Iterable[str], top: dict[str, str]) -> RowKey:
    """Per shared tensor (sorted): its backing memory and the loops above it, sorted
    (an unfused tensor: its ``top`` memory, no loops). The search's own storage nodes
    among the loops (marks) are skipped."""
    loops: list[LoopKey] = []
    fused: dict[str, tuple[str, tuple[LoopKey, ...]]] = {}
    for e in prefix:
        if e.kind == LOOP:
            loops.append(_loop_key(e))
        elif e.kind == BACK:
            fused[e.tensor] = (e.memory, tuple(sorted(loops)))
    return tuple((t, *fused.get(t, (top[t], ()))) for t in sorted(shared))


class OrderFreeKeys:
    """:func:`order_free_keys` of a search interner's prefixes by id, each worked out
    from its parent's along the interner's trie and memoized: a step of loops, a mark or
    a node of a tensor not shared leaves the key as it was; a backing node of a shared
    tensor sets that tensor's entry to its memory and the loops above it. The check of
    several fused loops per rank variable asks for the key of every row it keeps
    (millions of prefixes for GPT-3 at batch 64), each rebuilt and walked whole before
    (half the check's time)."""

    def __init__(self, interner: PrefixInterner, shared: Iterable[str], top: dict[str, str]):
        self.interner = interner
        self._shared = frozenset(shared)
        self._keys: list[RowKey] = [order_free_keys((), self._shared, top)]
        self._key_ids: dict[RowKey, int] = {self._keys[0]: 0}
        self._memo = np.full(1024, -1, dtype=np.int64)  # per prefix id: its key's index
        self._memo[0] = 0
        self._loops: dict[int, list[LoopKey]] = {}  # per step (a run of loops): their keys

    def __call__(self, q: int) -> RowKey:
        """The order-free key of prefix id ``q``."""
        if q >= len(self._memo):
            grown = np.full(max(2 * len(self._memo), q + 1), -1, dtype=np.int64)
            grown[: len(self._memo)] = self._memo
            self._memo = grown
        path = []
        while self._memo[q] < 0:
            path.append(q)
            q = self.interner.step_of(q)[0]
        k = int(self._memo[q])
        for p in reversed(path):
            e = self.interner.step_of(p)[2][0]
            if e.kind == BACK and e.tensor in self._shared:
                k = self._with(k, e.tensor, e.memory, tuple(sorted(self._loops_above(p))))
            self._memo[p] = k
        return self._keys[k]

    def _with(self, k: int, tensor: str, memory: str, loops: tuple[LoopKey, ...]) -> int:
        """The index of key ``k`` with ``tensor`` backed in ``memory`` under ``loops``."""
        key = tuple((tensor, memory, loops) if x[0] == tensor else x for x in self._keys[k])
        got = self._key_ids.get(key)
        if got is None:
            got = self._key_ids[key] = len(self._keys)
            self._keys.append(key)
        return got

    def _loops_above(self, q: int) -> list[LoopKey]:
        """The loop keys of prefix id ``q``, in no particular order."""
        out: list[LoopKey] = []
        while q > 0:
            parent, step, entries = self.interner.step_of(q)
            if entries[0].kind == LOOP:
                loops = self._loops.get(step)
                if loops is None:
                    loops = self._loops[step] = [_loop_key(e) for e in entries]
                out += loops
            q = parent
        return out


def _loop_key(e) -> LoopKey:
    where = e.tile.where if isinstance(e.tile, SpatialTile) else ""
    return (e.var, int(e.tile), where)


def table_key_costs(table: PmappingTable) -> dict[TensorKey, Cost]:
    """Per tensor key of a (fused) table's rows: the least energy and the least latency
    of the rows with it."""
    fusion = table.fusion
    if fusion is None or not len(fusion.seq):
        return {}
    ids, at = np.unique(fusion.seq, return_inverse=True)
    energy, latency = np.full(len(ids), np.inf), np.full(len(ids), np.inf)
    np.minimum.at(energy, at.ravel(), table.energy)
    np.minimum.at(latency, at.ravel(), table.latency)
    prefixes = fusion.interner.prefixes
    out: dict[TensorKey, Cost] = {}
    for s, e, lat in zip(ids.tolist(), energy.tolist(), latency.tolist(), strict=True):
        for tk in order_free_keys(prefixes[s], fusion.shared, fusion.top):
            out[tk] = least_of(out.get(tk), (e, lat))
    return out


def least_of(a: Cost | None, b: Cost) -> Cost:
    """The least energy and the least latency of two (``a`` may be missing)."""
    return b if a is None else (min(a[0], b[0]), min(a[1], b[1]))


def renamed_key(key: RowKey, tensors: dict[str, str], variables: dict[str, str]) -> RowKey:
    """``key`` of an Einsum as the key of an identical Einsum with other names."""
    out = [
        (tensors[t], m, tuple(sorted((variables.get(v, v), n, w) for v, n, w in loops)))
        for t, m, loops in key
    ]
    return tuple(sorted(out))


@dataclass(frozen=True)
class CostBound:
    """What the semi-join also asks of a key (:func:`joinable`): ``least``, per Einsum, a
    lower bound of its energy and latency over the whole space; ``keeps(table, energy,
    latency)``, whether rows of that table so costed, completed with the other
    Einsums' ``least``, may still be part of a better mapping (the check's cut)."""

    least: dict[str, Cost]
    keeps: Callable[[str, float, float], bool]


def joinable(
    wl: WorkloadInfo,
    groups: dict[str, list[str]],
    tables: dict[str, PmappingTable],
    found: dict[str, dict[RowKey, Cost]],
    bound: CostBound | None = None,
) -> dict[str, dict[RowKey, Cost]]:
    """Per table (``groups``: its Einsum -> the Einsums sharing it, renamed), the keys of
    ``found`` (its check rows' keys, before orders, with their rows' least energy and
    latency) that some mapping may use, each with what the other Einsums cost at least
    beyond their ``bound.least`` in such a mapping (energy, latency; zero without a
    bound): a user of a tensor the key shares costs at least the least of its rows of
    that tensor's key."""
    names = {n: b for b, ns in groups.items() for n in ns}
    renamings = {
        n: (
            tensor_renaming(wl.einsum(b), wl.einsum(n)),
            variable_renaming(wl.einsum(b), wl.einsum(n)),
        )
        for n, b in names.items()
    }
    users: dict[str, list[str]] = defaultdict(list)
    default: dict[str, dict[TensorKey, Cost]] = {}
    for n in names:
        fusion = tables[n].fusion
        for t in sorted(fusion.shared) if fusion is not None else ():
            users[t].append(n)
        default[n] = table_key_costs(tables[n])
    alive = {b: set(keys) for b, keys in found.items()}
    renamed = {  # each check key as each Einsum of its table sees it (once: rounds reuse)
        n: [(k, renamed_key(k, *renamings[n])) for k in found.get(b, {})] for n, b in names.items()
    }
    while True:
        live = {n: [(k, key) for k, key in renamed[n] if k in alive[names[n]]] for n in renamed}
        floors = {n: _key_floors(default[n], found.get(names[n], {}), live[n]) for n in names}
        kept: dict[str, dict[RowKey, Cost]] = {b: {} for b in alive}
        for n, b in names.items():
            for k, key in live[n]:
                extra = _beyond_least(n, key, users, floors, bound)
                cost = found[b][k]
                if extra is None or (
                    bound is not None and not bound.keeps(b, cost[0] + extra[0], cost[1] + extra[1])
                ):
                    continue
                kept[b][k] = least_of(kept[b].get(k), extra)
        if all(len(kept[b]) == len(alive[b]) for b in alive):
            return kept
        alive = {b: set(keys) for b, keys in kept.items()}


def _key_floors(
    default: dict[TensorKey, Cost], costs: dict[RowKey, Cost], live: list[tuple[RowKey, RowKey]]
) -> dict[TensorKey, Cost]:
    """Per tensor key an Einsum's rows may have (its table's, its live check keys' as it
    names them): their least energy and latency."""
    out = dict(default)
    for k, key in live:
        for tk in key:
            out[tk] = least_of(out.get(tk), costs[k])
    return out


def _beyond_least(
    n: str,
    key: RowKey,
    users: dict[str, list[str]],
    floors: dict[str, dict[TensorKey, Cost]],
    bound: CostBound | None,
) -> Cost | None:
    """What the other users of ``key``'s tensors cost at least beyond their least, in a
    mapping where Einsum ``n`` has ``key``; None if one of them has no row of it."""
    per_user: dict[str, Cost] = {}
    for tk in key:
        for m in users[tk[0]]:
            if m == n:
                continue
            got = floors[m].get(tk)
            if got is None:
                return None
            was = per_user.get(m, got)  # each of its floors bounds the same row
            per_user[m] = (max(was[0], got[0]), max(was[1], got[1]))
    if bound is None:
        return (0.0, 0.0)
    energy = sum(max(0.0, c[0] - bound.least[m][0]) for m, c in per_user.items())
    latency = sum(max(0.0, c[1] - bound.least[m][1]) for m, c in per_user.items())
    return (energy, latency)
