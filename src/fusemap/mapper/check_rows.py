"""Which rows the check of several fused loops per rank variable keeps
(:mod:`fusemap.mapper.full_space`): a :class:`RowCut` on the objectives, and the
``useful`` filters of its two searches, which read each row's order-free key
(:mod:`fusemap.mapper.joinable`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from .distinct import distinct_values, sorted_distinct
from .joinable import Cost, OrderFreeKeys, RowKey, number_of
from .space.interner import PrefixInterner
from .space.templates import template_key
from .tiling.result import TemplateResult

GAIN = 1e-9
"""Relative energy below ``best`` a mapping must reach to count as better."""


@dataclass(frozen=True)
class RowCut:
    """Which pmappings of one Einsum may be part of a better mapping: completed with the
    least energy and latency of every other Einsum (``rest_*``; objectives add up along
    the order), their objective is at most ``limit`` (the best found, less ``GAIN``)."""

    objective: str  # energy | latency | edp | pareto
    limit: float
    rest_energy: float = 0.0
    rest_latency: float = 0.0
    front: tuple[tuple[float, float], ...] = ()  # pareto: (energy, latency) points found
    own_latency: float = 0.0  # the Einsum's own least latency (over the whole space)

    def keeps(self, energy, latency):
        """Whether rows (or floors) of these energies and latencies may do better."""
        e = np.asarray(energy, dtype=np.float64) + self.rest_energy
        lat = np.asarray(latency, dtype=np.float64) + self.rest_latency
        if self.objective == "pareto":
            return ~self._dominated(e, lat)
        value = e if self.objective == "energy" else lat if self.objective == "latency" else e * lat
        return value <= self.limit

    def _dominated(self, e: np.ndarray, lat: np.ndarray) -> np.ndarray:
        """Whether some point of the front, less ``GAIN``, is no worse in both."""
        if not self.front:
            return np.zeros(e.shape, dtype=bool)
        points = np.array(sorted(self.front)) * (1 - GAIN)
        least = np.minimum.accumulate(points[:, 1])  # least latency at most each energy
        k = np.searchsorted(points[:, 0], e, side="right")  # points of energy <= e
        return (k > 0) & (least[np.maximum(k - 1, 0)] <= lat)

    def energy_ceiling(self) -> float:
        """Most energy such a row may have (the tile search's branch and bound): every
        row's latency is at least ``own_latency``, so with EDP ``(E + rest_energy) *
        (own_latency + rest_latency)`` is at most ``limit`` (latencies are positive);
        for a front, the energy of a point whose latency is at most that sum dominates
        any row above it."""
        slowest = self.rest_latency + self.own_latency  # least latency of any completion
        if self.objective == "energy":
            return self.limit - self.rest_energy
        if self.objective == "edp" and slowest > 0:
            return self.limit / slowest - self.rest_energy
        if self.objective == "pareto":
            under = [e for e, lat in self.front if lat * (1 - GAIN) <= slowest]
            return min(under) * (1 - GAIN) - self.rest_energy if under else math.inf
        return math.inf

    def keeps_one(self, energy: float, latency: float) -> bool:
        """:meth:`keeps` of one row."""
        return bool(self.keeps(energy, latency))


@dataclass(frozen=True)
class Joinable:
    """What the semi-join leaves to search again of one table: the order-free keys that
    may join, each with what the other Einsums cost at least beyond their least where a
    row has it (``extra``: energy, latency), and the templates (by key) whose first
    search found a row of one of them within the cut so raised
    (:meth:`KeysFound.templates_kept`; the others keep no row the second time)."""

    extra: dict[RowKey, Cost]
    templates: frozenset[tuple] = field(default_factory=frozenset)


Costed = tuple[np.ndarray, np.ndarray, np.ndarray]  # key numbers, least energy, least latency

KEY_NUMBER = np.int32
"""A key's number in :class:`KeysFound` (fewer keys than a search's prefix ids, which
are 4-byte: ``space/trie.py``): GPT-3's softmax at batch 64, 256 tokens records over a
hundred million (template, key) pairs."""


class KeysFound:
    """The order-free keys of the rows a first search would keep, each numbered once
    (``keys``), and per template the numbers of its rows' keys with their least energy
    and latency, as arrays: GPT-3's softmax at batch 64 finds millions of (template,
    key) pairs, which a dict per template of cost tuples took 13 GB to hold."""

    def __init__(self) -> None:
        self.keys: list[RowKey] = []
        self._number: dict[RowKey, int] = {}
        self._chunks: dict[tuple, list[Costed]] = {}
        self._source: Sequence[RowKey] | None = None  # the key list last added from
        self._numbers = np.zeros(0, dtype=KEY_NUMBER)  # its keys' numbers (-1: not yet)

    def add(self, template: tuple, keys: Sequence[RowKey], energy, latency, index=None) -> None:
        """Rows of ``template`` having keys ``keys[index]`` (all of ``keys`` if None), at
        least ``energy`` and ``latency`` each. Added from one growing list (a search's
        :attr:`~fusemap.mapper.joinable.OrderFreeKeys.keys`), each key is looked up
        once."""
        index = np.arange(len(keys)) if index is None else np.asarray(index, dtype=np.int64)
        if keys is not self._source:
            self._source, self._numbers = keys, np.zeros(0, dtype=KEY_NUMBER)
        if len(keys) > len(self._numbers):
            grown = np.full(len(keys), -1, dtype=KEY_NUMBER)
            grown[: len(self._numbers)] = self._numbers
            self._numbers = grown
        for i in sorted_distinct(index[self._numbers[index] < 0]).tolist():
            self._numbers[i] = number_of(keys[i], self.keys, self._number)
        numbers = self._numbers[index]
        chunk = (numbers, np.asarray(energy, dtype=np.float64), np.asarray(latency, np.float64))
        self._chunks.setdefault(template, []).append(chunk)

    def per_template(self) -> dict[tuple, Costed]:
        """Per template, its keys' numbers (once each) with their least costs."""
        for template, chunks in self._chunks.items():
            if len(chunks) > 1:
                self._chunks[template] = [_merged(chunks)]
        return {t: chunks[0] for t, chunks in self._chunks.items()}

    def least(self) -> dict[RowKey, Cost]:
        """Per key, the least energy and latency of its rows over every template."""
        if not self._chunks:
            return {}
        costed = [c for chunks in self._chunks.values() for c in chunks]
        numbers, energy, latency = _merged(costed)
        return {
            self.keys[n]: (e, lat)
            for n, e, lat in zip(numbers.tolist(), energy.tolist(), latency.tolist(), strict=True)
        }

    def templates_kept(self, extra: dict[RowKey, Cost], cut: RowCut) -> frozenset[tuple]:
        """The templates with a key of ``extra`` whose least row, raised by it, ``cut``
        keeps."""
        more, allowed = _excess(self.keys, extra)
        out = []
        for template, (numbers, energy, latency) in self.per_template().items():
            ok = allowed[numbers]
            at = numbers[ok]
            if ok.any() and cut.keeps(energy[ok] + more[at, 0], latency[ok] + more[at, 1]).any():
                out.append(template)
        return frozenset(out)

    def __getstate__(self) -> dict:
        """Sent back from a worker: without the numbering, its chunks merged."""
        self.per_template()
        return {**self.__dict__, "_number": {}, "_source": None, "_numbers": self._numbers[:0]}


def _excess(keys: list[RowKey], extra: dict[RowKey, Cost]) -> tuple[np.ndarray, np.ndarray]:
    """Per key, its excess (energy, latency; +inf if none) and whether it has one."""
    allowed = np.array([k in extra for k in keys], dtype=bool)
    more = np.array([extra.get(k, (np.inf, np.inf)) for k in keys], dtype=np.float64)
    return more.reshape(len(keys), 2), allowed


def _merged(chunks: list[Costed]) -> Costed:
    """Each key number of ``chunks`` once, with the least energy and latency it comes with."""
    numbers = np.concatenate([c[0] for c in chunks])
    energy = np.concatenate([c[1] for c in chunks])
    latency = np.concatenate([c[2] for c in chunks])
    once, at = np.unique(numbers, return_inverse=True)
    least_e, least_l = np.full(len(once), np.inf), np.full(len(once), np.inf)
    np.minimum.at(least_e, at.ravel(), energy)
    np.minimum.at(least_l, at.ravel(), latency)
    return once, least_e, least_l


class KeyedRows:
    """A ``useful`` filter that reads its rows' order-free keys (worked out per
    interner along its trie, :class:`~fusemap.mapper.joinable.OrderFreeKeys`)."""

    def __init__(self, cut: RowCut, sharing: tuple[frozenset[str], dict[str, str]]):
        self.cut, self.sharing = cut, sharing
        self._keys: OrderFreeKeys | None = None

    def kept_rows(
        self, result: TemplateResult, interner: PrefixInterner
    ) -> tuple[np.ndarray, np.ndarray, list[RowKey]]:
        """The rows the cut keeps whose prefix splits a variable (the others are in the
        table already; before the loop orders of their gaps are added, which change
        neither); per row kept, the number of its order-free key in the list returned
        (the interner's :attr:`~fusemap.mapper.joinable.OrderFreeKeys.keys`; -1 for
        rows not kept)."""
        key_at = np.full(result.rows, -1, dtype=np.int64)
        if result.seq is None:
            return np.zeros(result.rows, dtype=bool), key_at, []
        ids, _, at = distinct_values(result.seq)
        keep = self.cut.keeps(result.energy, result.latency) & interner.splits_a_variable(ids)[at]
        if not keep.any():
            return keep, key_at, []
        keys = self._order_free(interner)
        used = np.flatnonzero(np.bincount(at[keep], minlength=len(ids)))
        of_id = np.full(len(ids), -1, dtype=np.int64)
        of_id[used] = keys.indices(ids[used])
        key_at[keep] = of_id[at[keep]]
        return keep, key_at, keys.keys

    def _order_free(self, interner: PrefixInterner) -> OrderFreeKeys:
        """The order-free keys of ``interner``'s prefixes (one per search)."""
        if self._keys is None or self._keys.interner is not interner:
            self._keys = OrderFreeKeys(interner, *self.sharing)
        return self._keys

    def prefix_raise(self, ids: np.ndarray, interner: PrefixInterner) -> np.ndarray:
        """Per complete prefix id, what :meth:`kept_rows` asks of its rows beyond the
        cut: +inf where the prefix splits no variable (none is kept), else 0."""
        return np.where(interner.splits_a_variable(ids), 0.0, np.inf)


class FirstSearch(KeyedRows):
    """The check's first search of an Einsum (a ``useful`` filter): keeps what
    :meth:`KeyedRows.kept_rows` keeps until more than ``most`` rows are kept, then none
    (``tripped``: the table is searched again after the semi-join); records the
    order-free key of every row it would keep, per template (``found``), with the least
    energy and latency of its rows with that key."""

    def __init__(self, cut: RowCut, sharing: tuple[frozenset[str], dict[str, str]], most: int):
        super().__init__(cut, sharing)
        self.found = KeysFound()
        self.kept, self.most, self.tripped = 0, most, False

    def __call__(self, result: TemplateResult, interner: PrefixInterner) -> np.ndarray:
        keep, key_at, keys = self.kept_rows(result, interner)
        if keys:
            index, _, at = distinct_values(key_at[keep])
            energy, latency = np.full(len(index), np.inf), np.full(len(index), np.inf)
            np.minimum.at(energy, at.ravel(), result.energy[keep])
            known = np.nan_to_num(result.latency[keep], nan=0.0)  # energy searches: unknown
            np.minimum.at(latency, at.ravel(), known)
            self.found.add(template_key(result.template), keys, energy, latency, index)
        self.kept += int(keep.sum())
        self.tripped = self.tripped or self.kept > self.most
        return np.zeros_like(keep) if self.tripped else keep


class JoinableRows(KeyedRows):
    """The rows :meth:`KeyedRows.kept_rows` keeps whose order-free key is in ``extra``
    and that the cut keeps once raised by what ``extra`` says the other Einsums cost
    beyond their least with that key."""

    def __init__(self, cut: RowCut, sharing, extra: dict[RowKey, Cost]):
        super().__init__(cut, sharing)
        self.extra = extra
        self._source: list[RowKey] | None = None  # the key list numbered
        self._more = np.zeros((0, 2))  # per key number so far: its excess (+inf: none)
        self._allowed = np.zeros(0, dtype=bool)  # and whether it has one

    def __call__(self, result: TemplateResult, interner: PrefixInterner) -> np.ndarray:
        keep, key_at, keys = self.kept_rows(result, interner)
        if not keys:
            return keep
        self._number(keys)
        rows = np.flatnonzero(keep)
        at = key_at[rows]
        energy = result.energy[rows] + self._more[at, 0]
        latency = result.latency[rows] + self._more[at, 1]
        keep[rows] = self._allowed[at] & self.cut.keeps(energy, latency)
        return keep

    def _number(self, keys: list[RowKey]) -> None:
        """Each key's excess and whether it has one, for the keys new since the last
        call (``keys``: one growing list)."""
        if keys is not self._source:
            self._source, self._more, self._allowed = keys, self._more[:0], self._allowed[:0]
        if len(keys) > len(self._allowed):
            more, allowed = _excess(keys[len(self._allowed) :], self.extra)
            self._more = np.concatenate([self._more, more])
            self._allowed = np.concatenate([self._allowed, allowed])

    def prefix_raise(self, ids: np.ndarray, interner: PrefixInterner) -> np.ndarray:
        """Per complete prefix id, what its rows must add: +inf where the prefix splits
        no variable or its order-free key may not join, else the energy the other
        Einsums cost beyond their least with that key."""
        out = super().prefix_raise(ids, interner)
        split = np.flatnonzero(np.isfinite(out))
        if not len(split):
            return out
        keys = self._order_free(interner)
        at = keys.indices(ids[split])
        self._number(keys.keys)
        out[split] = np.where(self._allowed[at], self._more[at, 0], np.inf)
        return out
