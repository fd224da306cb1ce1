"""The mapspace the baseline mappers search: one pmapping per Einsum, drawn from the
pmapping tables FFM joins, and valid exactly when FFM's join accepts the combination.

Following the FFM paper's methodology (§7.3), baselines only ever draw
compatibility-valid pmappings: an Einsum's pmapping is drawn among those that agree
with the pmappings already chosen on every tensor they share (its backing memory and
the loops above it), and when a move changes one Einsum's pmapping, the others that no
longer agree are drawn again among the compatible ones (repair). Whatever the drawing,
a combination is scored by FFM's own join over one row per table, so capacity, the
data dependencies and shared copies are checked by the same rules as FFM's answer.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ...spec.arch_eval import ArchEvaluator
from ...spec.resolve import WorkloadInfo
from ..join.dependencies import FusionRules
from ..join.ffm_join import join
from ..pmappings.table import PmappingTable
from ..space.prefix import Compatibility

Picks = tuple[int, ...]
"""One row of each Einsum's table, in the join order."""


@dataclass
class Score:
    """A combination's objectives (None when the join rejects it)."""

    energy: float
    latency: float

    def value(self, objective: str) -> float:
        """The objective to minimise (``edp``: energy times latency)."""
        if objective == "energy":
            return self.energy
        if objective == "latency":
            return self.latency
        return self.energy * self.latency


@dataclass
class _EinsumRows:
    """One Einsum's rows by their compatibility on its tensors shared with others."""

    tensors: tuple[str, ...]  # shared with another Einsum of the order, sorted
    keys: list[tuple[Compatibility, ...]]  # distinct compatibilities (in ``tensors``)
    rows: list[np.ndarray]  # the rows of each key
    key_of_row: np.ndarray  # (R,) index into ``keys``
    keys_with: dict[tuple[str, Compatibility], np.ndarray] = field(init=False, repr=False)
    """(tensor, compatibility) -> the keys (sorted indices) that have it: a draw looks
    keys up by what is fixed instead of comparing every key (thousands per Einsum)."""

    def __post_init__(self) -> None:
        found: dict[tuple[str, Compatibility], list[int]] = {}
        for k, key in enumerate(self.keys):
            for t, c in zip(self.tensors, key, strict=True):
                found.setdefault((t, c), []).append(k)
        self.keys_with = {tc: np.array(ks, dtype=np.int64) for tc, ks in found.items()}

    def agreeing(self, fixed: dict[str, Compatibility]) -> np.ndarray:
        """The keys (ascending) that agree with ``fixed`` on every tensor they share."""
        out: np.ndarray | None = None
        for t in self.tensors:
            c = fixed.get(t)
            if c is None:
                continue
            ks = self.keys_with.get((t, c))
            if ks is None:
                return np.zeros(0, dtype=np.int64)
            out = ks if out is None else np.intersect1d(out, ks, assume_unique=True)
        return np.arange(len(self.keys)) if out is None else out


@dataclass
class JoinSpace:
    """Tables along one order, what they share, and the scoring of one combination."""

    order: list[str]
    tables: dict[str, PmappingTable]
    workload: WorkloadInfo
    arch: ArchEvaluator
    memories: dict[str, float]
    rules: FusionRules
    objective: str
    rows: list[_EinsumRows] = field(default_factory=list)
    evaluations: int = 0
    joins: int = 0  # evaluations not answered from the cache
    seconds: float = 0.0  # spent scoring (joins)
    cache: dict[Picks, Score | None] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        order: list[str],
        tables: dict[str, PmappingTable],
        workload: WorkloadInfo,
        arch: ArchEvaluator,
        memories: dict[str, float],
        objective: str,
    ) -> JoinSpace:
        """The space of ``tables`` along ``order`` for ``objective``."""
        space = cls(order, tables, workload, arch, memories, FusionRules.of(workload), objective)
        users: dict[str, int] = {}
        for name in order:
            for t in workload.einsum(name).tensors:
                users[t] = users.get(t, 0) + 1
        for name in order:
            space.rows.append(_rows_by_compatibility(tables[name], users))
        return space

    # ------------------------------------------------------------ drawing
    def fixed_by(self, picks: dict[int, int], but: int = -1) -> dict[str, Compatibility]:
        """The compatibility of every shared tensor that the chosen ``picks`` (position
        -> row; position ``but`` left out) fix."""
        out: dict[str, Compatibility] = {}
        for j, row in picks.items():
            if j == but:
                continue
            er = self.rows[j]
            for t, c in zip(er.tensors, er.keys[int(er.key_of_row[row])], strict=True):
                out[t] = c
        return out

    def compatible(self, j: int, fixed: dict[str, Compatibility]) -> np.ndarray:
        """Einsum ``j``'s rows that agree with ``fixed`` on every tensor they share."""
        er = self.rows[j]
        found = [er.rows[k] for k in er.agreeing(fixed).tolist()]
        return np.concatenate(found) if found else np.zeros(0, dtype=np.int64)

    def draw(self, rng: np.random.Generator) -> Picks | None:
        """One compatibility-valid combination, Einsum by Einsum along the order (None
        if some Einsum has no row agreeing with those drawn before it)."""
        picks: dict[int, int] = {}
        for j in range(len(self.order)):
            rows = self.compatible(j, self.fixed_by(picks))
            if not len(rows):
                return None
            picks[j] = int(rows[rng.integers(len(rows))])
        return tuple(picks[j] for j in range(len(self.order)))

    def repaired(self, picks: Picks, keep: int, rng: np.random.Generator) -> Picks | None:
        """``picks`` with every Einsum but ``keep`` that disagrees with the others on a
        shared tensor drawn again among the rows that agree (in order; None if one has
        none): the paper's "other pmappings transformed into compatible equivalents"."""
        chosen = dict(enumerate(picks))
        for j in [keep] + [j for j in range(len(picks)) if j != keep]:
            fixed = self.fixed_by(chosen, but=j)
            rows = self.compatible(j, fixed)
            if not len(rows):
                return None
            if chosen[j] not in set(rows.tolist()):
                chosen[j] = int(rows[rng.integers(len(rows))])
        return tuple(chosen[j] for j in range(len(picks)))

    # ------------------------------------------------------------ scoring
    def score(self, picks: Picks) -> Score | None:
        """The combination's energy and latency by FFM's join over one row per table
        (None: the join rejects it: a buffer overflows, a dependency breaks, ...). Each
        call counts as one evaluation, even when the answer is remembered."""
        self.evaluations += 1
        if picks in self.cache:
            return self.cache[picks]
        start = time.perf_counter()
        self.joins += 1
        one = {
            name: self.tables[name].take(np.array([row], dtype=np.int64))
            for name, row in zip(self.order, picks, strict=True)
        }
        target = "pareto" if self.objective == "edp" else self.objective
        joined = join(self.order, one, self.workload, self.arch, target, self.memories,
                      rules=self.rules)  # fmt: skip
        got = None
        if len(joined.energy):
            values = [
                Score(float(e), float(lat))
                for e, lat in zip(joined.energy, joined.latency, strict=True)
            ]
            got = min(values, key=lambda s: s.value(self.objective))
        self.seconds += time.perf_counter() - start
        self.cache[picks] = got
        return got


def _rows_by_compatibility(table: PmappingTable, users: dict[str, int]) -> _EinsumRows:
    """Group ``table``'s rows by their compatibility on the tensors another Einsum uses
    (once per distinct fused prefix: the prefix fixes the compatibility)."""
    fusion = table.fusion
    assert fusion is not None, "baselines draw from tables generated with fusion on"
    tensors = tuple(sorted(t for t in fusion.shared if users.get(t, 0) > 1))
    seqs, first, inverse = np.unique(fusion.seq, return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    key_index: dict[tuple[Compatibility, ...], int] = {}
    key_of_seq = np.empty(len(seqs), dtype=np.int64)
    for k in range(len(seqs)):
        compat = {c.tensor: c for c in fusion.compatibility(int(first[k]))}
        key = tuple(compat[t] for t in tensors)
        key_of_seq[k] = key_index.setdefault(key, len(key_index))
    key_of_row = key_of_seq[inverse]
    keys = list(key_index)
    by_key = np.argsort(key_of_row, kind="stable")
    ends = np.cumsum(np.bincount(key_of_row, minlength=len(keys)))[:-1]
    rows = np.split(by_key.astype(np.int64), ends)
    return _EinsumRows(tensors, keys, rows, key_of_row)
