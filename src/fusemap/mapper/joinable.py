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
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass

import numpy as np

from ..spec.resolve import WorkloadInfo
from .distinct import distinct_values
from .pmappings.signature import tensor_renaming, variable_renaming
from .pmappings.table import PmappingTable
from .space.interner import PrefixInterner
from .space.prefix import BACK, LOOP, BackingEntry, Prefix, SpatialTile

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
    """:func:`order_free_keys` of a search interner's prefixes by id, numbered
    (:attr:`keys`), each worked out from its parent's along the interner's trie, for
    many ids at once: a step of loops adds its loops to the (sorted) loops above; a
    backing node of a shared tensor sets that tensor's entry to its memory and those
    loops; any other step leaves both as they were. Per id only two numbers are kept
    (its key's and its loops'), and each move from a parent's numbers along a step is
    worked out once (a dict of packed integers). The check of several fused loops per
    rank variable asks for the key of every row it keeps: tens of millions of prefixes
    for GPT-3 at batch 64, where a Python walk per prefix took a third of the check."""

    def __init__(self, interner: PrefixInterner, shared: Iterable[str], top: dict[str, str]):
        self.interner = interner
        self._shared = frozenset(shared)
        self.keys: list[RowKey] = [order_free_keys((), self._shared, top)]
        self._key_ids: dict[RowKey, int] = {self.keys[0]: 0}
        self._loop_sets: list[tuple[LoopKey, ...]] = [()]
        self._loop_set_ids: dict[tuple[LoopKey, ...], int] = {(): 0}
        self._tensor_keys: list[TensorKey] = []
        self._tensor_key_ids: dict[TensorKey, int] = {}
        self._key = np.zeros(1, dtype=np.int32)  # per prefix id: its key's number (-1: not yet)
        self._loops = np.zeros(1, dtype=np.int32)  # per prefix id: its loops' number
        self._kinds = np.zeros(0, dtype=np.int8)  # per step id: _OTHER, _LOOPS or _SHARED
        self._loop_moves: dict[int, int] = {}  # packed (loop set, step) -> loop set
        self._tensor_moves: dict[int, int] = {}  # packed (loop set, step) -> tensor key
        self._key_moves: dict[int, int] = {}  # packed (key, tensor key) -> key
        interner.when_forgetting(self._forget)

    def _forget(self, size: int) -> None:
        """The interner forgot its ids ``size`` on: their keys are to be worked out
        again (the ids are given to other prefixes)."""
        self._key[size:] = -1

    def __call__(self, q: int) -> RowKey:
        """The order-free key of prefix id ``q``."""
        return self.keys[int(self.indices(np.array([q]))[0])]

    def indices(self, ids: np.ndarray) -> np.ndarray:
        """The numbers (in :attr:`keys`) of the order-free keys of prefix ids ``ids``."""
        ids = np.asarray(ids, dtype=np.int64)
        self._grow()
        levels = []  # ids not worked out yet, then their parents not worked out, ...
        todo = distinct_values(ids[self._key[ids] < 0])[0]
        while len(todo):
            levels.append(todo)
            parents, _ = self.interner.parents_and_steps(todo)
            todo = distinct_values(parents[self._key[parents] < 0])[0]
        for todo in reversed(levels):  # each level's parents worked out before it
            self._work_out(todo)
        return self._key[ids].astype(np.int64)

    def _grow(self) -> None:
        """Room for every prefix id and step id of the interner."""
        n = len(self.interner)
        if n > len(self._key):
            size = max(n, 2 * len(self._key))
            self._key = np.concatenate([self._key, np.full(size - len(self._key), -1, np.int32)])
            self._loops = np.concatenate([self._loops, np.zeros(size - len(self._loops), np.int32)])
        steps = self.interner.step_count()
        if steps > len(self._kinds):
            more = [self._kind(k) for k in range(len(self._kinds), steps)]
            self._kinds = np.concatenate([self._kinds, np.array(more, dtype=np.int8)])

    def _kind(self, step: int) -> int:
        entries = self.interner.step_entries(step)
        if entries[0].kind == LOOP:
            return _LOOPS
        shared = entries[0].kind == BACK and entries[0].tensor in self._shared
        return _SHARED if shared else _OTHER

    def _work_out(self, ids: np.ndarray) -> None:
        """Keys and loops of ``ids``, from their parents' (worked out) along their steps."""
        parents, steps = self.interner.parents_and_steps(ids)
        kinds = self._kinds[steps]
        key, loops = self._key[parents], self._loops[parents]
        step_loops = kinds == _LOOPS
        loops[step_loops] = _moved(
            self._loop_moves, loops[step_loops], steps[step_loops], self._with_loops
        )
        back = kinds == _SHARED
        tensor_keys = _moved(self._tensor_moves, loops[back], steps[back], self._tensor_key)
        key[back] = _moved(self._key_moves, key[back], tensor_keys, self._with_tensor_key)
        self._key[ids], self._loops[ids] = key, loops

    def _with_loops(self, loop_set: int, step: int) -> int:
        """Loop set ``loop_set`` with step ``step``'s loops added."""
        entries = self.interner.step_entries(step)
        loops = tuple(sorted(self._loop_sets[loop_set] + tuple(_loop_key(e) for e in entries)))
        return number_of(loops, self._loop_sets, self._loop_set_ids)

    def _tensor_key(self, loop_set: int, step: int) -> int:
        """The tensor key of step ``step``'s backing node under loop set ``loop_set``."""
        e = self.interner.step_entries(step)[0]
        assert isinstance(e, BackingEntry)
        tensor_key = (e.tensor, e.memory, self._loop_sets[loop_set])
        return number_of(tensor_key, self._tensor_keys, self._tensor_key_ids)

    def _with_tensor_key(self, key: int, tensor_key: int) -> int:
        """Key ``key`` with tensor key ``tensor_key`` in place of its tensor's entry."""
        tk = self._tensor_keys[tensor_key]
        new = tuple(tk if x[0] == tk[0] else x for x in self.keys[key])
        return number_of(new, self.keys, self._key_ids)


def _moved(
    memo: dict[int, int], numbers: np.ndarray, by: np.ndarray, move: Callable[[int, int], int]
) -> np.ndarray:
    """Per pair, ``move(numbers[i], by[i])``, each distinct pair worked out once (``memo``:
    the pairs packed in one integer)."""
    if not len(numbers):
        return numbers.astype(np.int32)
    codes = (numbers.astype(np.int64) << 32) | by.astype(np.int64)
    uniq, inverse = np.unique(codes, return_inverse=True)
    out = [memo.get(c) for c in uniq.tolist()]
    for i, got in enumerate(out):
        if got is None:
            c = int(uniq[i])
            out[i] = memo[c] = move(c >> 32, c & 0xFFFFFFFF)
    return np.array(out, dtype=np.int32)[inverse.ravel()]


_OTHER, _LOOPS, _SHARED = 0, 1, 2
"""Steps that leave the key and loops as they are, runs of loops, backing nodes of a
shared tensor."""


def number_of(item: Hashable, items: list, ids: dict) -> int:
    """``item``'s number in ``items`` (appended if new)."""
    got = ids.get(item)
    if got is None:
        got = ids[item] = len(items)
        items.append(item)
    return got


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


def renamed_keys(
    keys: Iterable[RowKey], tensors: dict[str, str], variables: dict[str, str]
) -> list[RowKey]:
    """:func:`renamed_key` of each of ``keys``, each tensor key renamed once (millions of
    check keys share a few thousand)."""
    memo: dict[TensorKey, TensorKey] = {}

    def renamed(tk: TensorKey) -> TensorKey:
        got = memo.get(tk)
        if got is None:
            got = memo[tk] = renamed_key((tk,), tensors, variables)[0]
        return got

    return [tuple(sorted(renamed(tk) for tk in key)) for key in keys]


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
        n: list(zip(found.get(b, {}), renamed_keys(found.get(b, {}), *renamings[n]), strict=True))
        for n, b in names.items()
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
