"""Which rows the check of several fused loops per rank variable keeps
(:mod:`fusemap.mapper.full_space`): a :class:`RowCut` on the objectives, and the
``useful`` filters of its two searches, which read each row's order-free key
(:mod:`fusemap.mapper.joinable`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .joinable import OrderFreeKeys, RowKey
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


@dataclass(frozen=True)
class Joinable:
    """What the semi-join leaves to search again of one table: the order-free ``keys``
    that may join, and the templates (by key) whose first search found one of them
    (the others keep no row the second time)."""

    keys: frozenset[RowKey]
    templates: frozenset[tuple] = field(default_factory=frozenset)

    @classmethod
    def of(cls, keys: frozenset[RowKey], found: dict[tuple, set[RowKey]]) -> Joinable:
        """``keys`` and the templates of ``found`` (template key -> keys) with one."""
        return cls(keys, frozenset(k for k, got in found.items() if not keys.isdisjoint(got)))


class KeyedRows:
    """A ``useful`` filter that reads its rows' order-free keys (memoized per interner
    along its trie, :class:`~fusemap.mapper.joinable.OrderFreeKeys`)."""

    def __init__(self, cut: RowCut, sharing: tuple[frozenset[str], dict[str, str]]):
        self.cut, self.sharing = cut, sharing
        self._keys: OrderFreeKeys | None = None

    def kept_rows(
        self, result: TemplateResult, interner: PrefixInterner
    ) -> tuple[np.ndarray, dict[int, RowKey]]:
        """The rows the cut keeps whose prefix splits a variable (the others are in the
        table already; before the loop orders of their gaps are added, which change
        neither), and per prefix of theirs its order-free key (the prefixes' ids made
        unique once, for both)."""
        if result.seq is None:
            return np.zeros(result.rows, dtype=bool), {}
        ids, at = np.unique(result.seq, return_inverse=True)
        at = at.ravel()
        keep = self.cut.keeps(result.energy, result.latency) & interner.splits_a_variable(ids)[at]
        if not keep.any():
            return keep, {}
        if self._keys is None or self._keys.interner is not interner:
            self._keys = OrderFreeKeys(interner, *self.sharing)
        used = ids[np.bincount(at[keep], minlength=len(ids)) > 0].tolist()
        return keep, {s: self._keys(s) for s in used}


class FirstSearch(KeyedRows):
    """The check's first search of an Einsum (a ``useful`` filter): keeps what
    :meth:`KeyedRows.kept_rows` keeps until more than ``most`` rows are kept, then none
    (``tripped``: the table is searched again after the semi-join); records the
    order-free key of every row it would keep, per template (``found``)."""

    def __init__(self, cut: RowCut, sharing: tuple[frozenset[str], dict[str, str]], most: int):
        super().__init__(cut, sharing)
        self.found: dict[tuple, set[RowKey]] = {}  # per template (its key)
        self.kept, self.most, self.tripped = 0, most, False

    def __call__(self, result: TemplateResult, interner: PrefixInterner) -> np.ndarray:
        keep, keys = self.kept_rows(result, interner)
        if keys:
            self.found.setdefault(template_key(result.template), set()).update(keys.values())
        self.kept += int(keep.sum())
        self.tripped = self.tripped or self.kept > self.most
        return np.zeros_like(keep) if self.tripped else keep


class JoinableRows(KeyedRows):
    """The rows :meth:`KeyedRows.kept_rows` keeps whose order-free key is ``allowed``."""

    def __init__(self, cut: RowCut, sharing, allowed: frozenset[RowKey]):
        super().__init__(cut, sharing)
        self.allowed = allowed

    def __call__(self, result: TemplateResult, interner: PrefixInterner) -> np.ndarray:
        keep, keys = self.kept_rows(result, interner)
        if keys:
            assert result.seq is not None  # rows are kept only with a prefix
            keep[keep] = [keys[s] in self.allowed for s in result.seq[keep].tolist()]
        return keep
