"""Which rows the check of several fused loops per rank variable keeps
(:mod:`fusemap.mapper.full_space`): a :class:`RowCut` on the objectives, and the
``useful`` filters of its two searches, which read each row's order-free key
(:mod:`fusemap.mapper.joinable`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .joinable import Cost, OrderFreeKeys, RowKey, least_of
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
    search found a row of one of them within the cut so raised (the others keep no row
    the second time)."""

    extra: dict[RowKey, Cost]
    templates: frozenset[tuple] = field(default_factory=frozenset)

    @classmethod
    def of(
        cls, extra: dict[RowKey, Cost], found: dict[tuple, dict[RowKey, Cost]], cut: RowCut
    ) -> Joinable:
        """``extra``, and the templates of ``found`` (template key -> its rows' keys with
        their least energy and latency) with a row of a key of ``extra`` ``cut`` keeps
        once raised by it."""
        return cls(extra, frozenset(t for t, got in found.items() if _any_kept(got, extra, cut)))


def _any_kept(got: dict[RowKey, Cost], extra: dict[RowKey, Cost], cut: RowCut) -> bool:
    """Whether some key of ``got`` is in ``extra`` and its cost, raised, passes ``cut``."""
    for k, (energy, latency) in got.items():
        more = extra.get(k)
        if more is not None and cut.keeps_one(energy + more[0], latency + more[1]):
            return True
    return False


class KeyedRows:
    """A ``useful`` filter that reads its rows' order-free keys (memoized per interner
    along its trie, :class:`~fusemap.mapper.joinable.OrderFreeKeys`)."""

    def __init__(self, cut: RowCut, sharing: tuple[frozenset[str], dict[str, str]]):
        self.cut, self.sharing = cut, sharing
        self._keys: OrderFreeKeys | None = None

    def kept_rows(
        self, result: TemplateResult, interner: PrefixInterner
    ) -> tuple[np.ndarray, np.ndarray, list[RowKey]]:
        """The rows the cut keeps whose prefix splits a variable (the others are in the
        table already; before the loop orders of their gaps are added, which change
        neither); per row, the index of its order-free key in the list returned (the
        prefixes' ids made unique once, for the cut and the keys)."""
        if result.seq is None:
            return np.zeros(result.rows, dtype=bool), np.zeros(result.rows, dtype=np.int64), []
        ids, at = np.unique(result.seq, return_inverse=True)
        at = at.ravel()
        keep = self.cut.keeps(result.energy, result.latency) & interner.splits_a_variable(ids)[at]
        if not keep.any():
            return keep, at, []
        if self._keys is None or self._keys.interner is not interner:
            self._keys = OrderFreeKeys(interner, *self.sharing)
        used = np.bincount(at[keep], minlength=len(ids)) > 0
        keys: list[RowKey] = []
        key_at = np.full(len(ids), -1, dtype=np.int64)
        index: dict[RowKey, int] = {}
        for i in np.flatnonzero(used).tolist():
            key = self._keys(int(ids[i]))
            key_at[i] = index.setdefault(key, len(keys))
            if key_at[i] == len(keys):
                keys.append(key)
        return keep, key_at[at], keys


class FirstSearch(KeyedRows):
    """The check's first search of an Einsum (a ``useful`` filter): keeps what
    :meth:`KeyedRows.kept_rows` keeps until more than ``most`` rows are kept, then none
    (``tripped``: the table is searched again after the semi-join); records the
    order-free key of every row it would keep, per template (``found``), with the least
    energy and latency of its rows with that key."""

    def __init__(self, cut: RowCut, sharing: tuple[frozenset[str], dict[str, str]], most: int):
        super().__init__(cut, sharing)
        self.found: dict[tuple, dict[RowKey, Cost]] = {}  # per template (its key)
        self.kept, self.most, self.tripped = 0, most, False

    def __call__(self, result: TemplateResult, interner: PrefixInterner) -> np.ndarray:
        keep, key_at, keys = self.kept_rows(result, interner)
        if keys:
            got = self.found.setdefault(template_key(result.template), {})
            energy, latency = np.full(len(keys), np.inf), np.full(len(keys), np.inf)
            np.minimum.at(energy, key_at[keep], result.energy[keep])
            known = np.nan_to_num(result.latency[keep], nan=0.0)  # energy searches: unknown
            np.minimum.at(latency, key_at[keep], known)
            for key, e, lat in zip(keys, energy.tolist(), latency.tolist(), strict=True):
                got[key] = least_of(got.get(key), (e, lat))
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

    def __call__(self, result: TemplateResult, interner: PrefixInterner) -> np.ndarray:
        keep, key_at, keys = self.kept_rows(result, interner)
        if not keys:
            return keep
        more = np.array([self.extra.get(k, (np.inf, np.inf)) for k in keys], dtype=np.float64)
        allowed = np.array([k in self.extra for k in keys], dtype=bool)
        rows = np.flatnonzero(keep)
        at = key_at[rows]
        energy = result.energy[rows] + more[at, 0]
        latency = result.latency[rows] + more[at, 1]
        keep[rows] = allowed[at] & self.cut.keeps(energy, latency)
        return keep
