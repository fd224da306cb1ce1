"""The FFM join: Einsum by Einsum, group by compatibility, join, consolidate, prune.

A *partial mapping* maps the first ``j`` Einsums of an order. What its future depends on
is (FFM §4–§5):

* its *live* compatibility: for every shared tensor accessed both by one of the first
  ``j`` Einsums and by a later one, the memory backing it and the loops above that node.
  Partial mappings with equal live compatibility form a group; the next Einsum's
  pmappings join a group only if they agree on every tensor they share with it.
* its reservations, consolidated by lifetime. Einsum ``j`` and ``j+1`` share the first
  ``b_j`` loops (the deepest fused tensor they exchange). A reservation made under ``d``
  loops lives during every Einsum that shares loop ``d+1`` with its owner (and a fused
  tensor's backing tile, from its producer to its last consumer). So per bounded memory
  it is enough to keep, for every open loop level ``e = 1..b``, the sum ``S[e]`` of the
  reservations live for that whole level, and ``C[e]``, the peak of the already closed
  parts below it: the final usage is ``max(C[0], S[1] + max(C[1], S[2] + ...))``. The
  number of tracked values depends on the loop depth, not on the number of Einsums.

Within a group, a partial mapping that is no better in any objective and reserves at
least as much at every level is pruned (optimality-preserving, FFM §6.4).

A node above loop ``e + 1`` sits on the path of every Einsum sharing that loop: the
assembled LoopTree has one path there. So a pmapping's own copy of a tensor that
another Einsum uses (any node of it but the top-memory and fused backing nodes every
user shares), kept under ``e`` loops, would also be a holder of that tensor for each
other user sharing loop ``e + 1``: its chain would no longer be its pmapping (another
level of data movement, a reservation that is no longer lowered), and neither the
energy nor the capacity the join counted would be the model's. Such pairs are never
formed (:func:`.exposure.exposures`; groups are also keyed by the tensors exposed on open levels),
unless both keep the same copy there: a shared copy (:mod:`.copies`), reserved once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...spec.arch_eval import ArchEvaluator
from ...spec.resolve import WorkloadInfo
from ..pareto import pareto_mask
from ..pmappings.table import PmappingTable
from ..space.templates import top_memory
from .bound import Bound
from .completion import Key, live_key
from .copies import same_view
from .dependencies import EMPTY, FusionRules, State
from .exposure import Exposure, exposures, shared_adds
from .pieces import Piece, as_host, table_pieces
from .rows import Group, join_pairs
from .tile_bits import CopyBits, HostedTiles, no_copy_bits

GroupKey = tuple[Key, State, Exposure]
"""A group of partial mappings: live compatibility, dependency state, exposed copies."""

START: GroupKey = ((), EMPTY, ())
"""The key of the empty partial mapping, and of the complete ones."""


@dataclass
class JoinStats:
    """What the join did, per step."""

    groups: list[int] = field(default_factory=list)  # groups after each step
    rows_joined: list[int] = field(default_factory=list)  # combinations formed
    rows_kept: list[int] = field(default_factory=list)  # after capacity and pruning
    group_pairs: list[int] = field(default_factory=list)  # compatible group pairs tried
    rows_bounded: list[int] = field(default_factory=list)  # dropped by the bound


@dataclass
class Joined:
    """Complete mappings (one order): objectives and each Einsum's chosen row."""

    order: list[str]
    energy: np.ndarray
    latency: np.ndarray
    picks: np.ndarray  # (R, n) rows, in ``order``
    stats: JoinStats


def join(
    order: list[str],
    tables: dict[str, PmappingTable],
    workload: WorkloadInfo,
    arch: ArchEvaluator,
    objective: str,
    memories: dict[str, float],
    *,
    epsilon: float = 0.0,
    bound: Bound | None = None,
    rules: FusionRules | None = None,
) -> Joined:
    """Join the tables along ``order``; keep what the objective needs.

    ``memories``: the bounded memories whose reservations can overlap between Einsums,
    with their sizes. ``epsilon`` > 0 makes the *dirty* join of FFM §6.3: pruning keeps
    one row per (1+epsilon)-box of objectives and reservations, so what it returns is
    valid but only near-optimal. ``bound`` (the *clean* pass) drops partial mappings
    that cannot beat a known mapping even with the best rows of every later Einsum.
    ``rules`` (default: the workload's): the data dependencies fusion must respect
    (:mod:`fusemap.mapper.join.dependencies`); groups are also keyed by their state.
    """
    along = JoinOrder.of(order, tables, workload, arch, memories, rules)
    stats = JoinStats()
    groups: dict[GroupKey, Group] = {START: _empty_group(memories)}
    for j, name in enumerate(order):
        allowed = bound.allowed(tables[name], j) if bound is not None else None
        pairs, dest, adds = along.pairs(j, groups, along.pieces(j, groups, allowed))
        joined = join_pairs(pairs, dest, tables[name], memories, adds)
        if bound is not None:  # before pruning: the cut rows need not be compared
            joined = _bounded(joined, bound, j, stats)
        groups = _prune(joined, objective, epsilon)
        stats.groups.append(len(groups))
        stats.group_pairs.append(len(pairs))
        stats.rows_joined.append(sum(len(g.energy) * len(p.rows) for g, p in pairs))
        stats.rows_kept.append(sum(len(g.energy) for g in groups.values()))
    final = groups.get(START)
    if final is None:
        empty = np.zeros(0)
        return Joined(order, empty, empty, np.zeros((0, len(order)), dtype=np.int64), stats)
    return Joined(order, final.energy, final.latency, final.picks, stats)


def _empty_group(memories: dict[str, float]) -> Group:
    """The one partial mapping of no Einsum: nothing spent, nothing reserved."""
    return Group(
        np.zeros(1), np.zeros(1), np.zeros((1, 0), dtype=np.int64),
        {m: np.zeros((1, 0)) for m in memories}, {m: np.zeros((1, 1)) for m in memories},
    )  # fmt: skip


def _bounded(joined: dict, bound: Bound, j: int, stats: JoinStats) -> dict:
    """The groups' rows that may still reach the bound (the count of those cut in
    ``stats``)."""
    before = sum(len(g.energy) for g in joined.values())
    joined = {k: g for k, g in ((k, bound.keep(g, j, k[0])) for k, g in joined.items()) if g}
    stats.rows_bounded.append(before - sum(len(g.energy) for g in joined.values()))
    return joined


@dataclass
class JoinOrder:
    """What every step of the join along one order reads: the tables, where each tensor's
    users are in the order, and the caches of reserved bits."""

    order: list[str]
    tables: dict[str, PmappingTable]
    workload: WorkloadInfo
    arch: ArchEvaluator
    memories: dict[str, float]
    rules: FusionRules
    accessors: dict[str, list[int]]  # tensor -> positions in the order of its users
    top: str  # the top memory
    hosted: HostedTiles
    shareable: set  # tensors whose copies the users may share (:func:`.copies.same_view`)
    copy_bits: dict[tuple, float]

    @classmethod
    def of(cls, order, tables, workload, arch, memories, rules) -> JoinOrder:
        """The join of ``tables`` along ``order`` (``rules``: None for the workload's)."""
        rules = rules or FusionRules.of(workload)
        accessors = {t: [i for i, e in enumerate(order) if t in workload.einsum(e).tensors]
                     for t in workload.tensors}  # fmt: skip
        top = top_memory(arch, order[0])
        hosted = HostedTiles(tables, workload, arch, accessors, order, memories)
        shareable = same_view(workload, accessors, order)
        return cls(
            order, tables, workload, arch, memories, rules, accessors, top, hosted, shareable, {}
        )

    def pieces(
        self, j: int, groups: dict[GroupKey, Group], allowed: np.ndarray | None
    ) -> tuple[list[str], dict[tuple, list[Piece]]]:
        """The ``j``-th Einsum's pieces (its ``allowed`` rows) that may join a group, by
        their compatibility on the tensors exchanged with earlier Einsums (the sorted
        names, first)."""
        table = self.tables[self.order[j]]
        fusion = table.fusion
        assert fusion is not None, "the join needs pmappings generated with fusion on"
        # Tensors exchanged with earlier Einsums that may be fused (the others are backed
        # in the top memory by every pmapping, so they are always compatible).
        earlier = sorted(t for t in fusion.shared if self.accessors[t][0] < j)
        wanted = {
            tuple(live[t] for t in earlier)
            for live in ({c.tensor: c for c in key} for key, _, _ in groups)
            if all(t in live for t in earlier)
        }
        pieces = table_pieces(j, self.order, table, self.workload, self.arch, self.accessors,
                              self.memories, allowed, (earlier, wanted), self.shareable)  # fmt: skip
        by_match: dict[tuple, list[Piece]] = {}
        for p in pieces:
            by_match.setdefault(tuple(p.compat[t] for t in earlier), []).append(p)
        return earlier, by_match

    def pairs(
        self,
        j: int,
        groups: dict[GroupKey, Group],
        matching: tuple[list[str], dict[tuple, list[Piece]]],
    ) -> tuple[list[tuple[Group, Piece]], list[GroupKey], list[list[tuple[str, int, float]]]]:
        """Each group with each piece it may join (``matching``: from :meth:`pieces`):
        the pairs, the key of the group each forms, and the (memory, level, bits) it
        reserves besides its rows' own."""
        earlier, by_match = matching
        name = self.order[j]
        uses = set(self.workload.einsum(name).tensors)
        pairs: list[tuple[Group, Piece]] = []
        dest: list[GroupKey] = []
        adds: list[list[tuple[str, int, float]]] = []
        live_keys: dict[tuple, Key] = {}
        for (key, state, exposure), g in groups.items():
            live = {c.tensor: c for c in key}
            if any(t not in live for t in earlier):
                continue
            held = [c for c in key if c.tensor not in uses and c.backing != self.top]
            for candidate in by_match.get(tuple(live[t] for t in earlier), []):
                p = as_host(candidate, held)
                if p is None:
                    continue  # does not share the loops of a tensor it holds tiled
                nstate = self.rules.step(self.order, j, state, p.loops, p.b_prev, p.b_next)
                if nstate is None:
                    continue  # would read a value not yet complete (dependencies.py)
                bits_of = self._copy_bits(name, p)
                options = exposures(exposure, p, j, uses, self.accessors, bits_of)
                if not options:
                    continue  # a copy of a tensor on another user's path (module doc)
                lk = (key, id(p.compat))  # p.compat: one dict per prefix, alive all step
                if lk not in live_keys:
                    live_keys[lk] = live_key(live, p.compat, j, self.accessors)
                own = p.shared_adds + self.hosted.adds(held, p.b_prev)
                if p.copies:
                    own = own + shared_adds(exposure, p, uses, bits_of)
                for nexposure, counted in options:  # counted: shared copies it lies between
                    pairs.append((g, p))
                    dest.append((live_keys[lk], nstate, nexposure))
                    adds.append(own + counted)
        return pairs, dest, adds

    def _copy_bits(self, name: str, p: Piece):
        """The bits of ``p``'s shareable copies (:class:`.tile_bits.CopyBits`)."""
        if not p.copies:
            return no_copy_bits
        return CopyBits(
            self.copy_bits, self.tables[name], p.loops, self.workload, self.arch, self.memories
        )


def _prune(merged: dict[tuple, Group], objective: str, epsilon: float = 0.0) -> dict:
    """Per key, the Pareto-optimal partial mappings of its group (objectives and open
    reservations; ``C[0]`` is left out: the future only takes a maximum with it). With
    ``epsilon``, criteria are first rounded up to powers of ``1 + epsilon`` (ε-pruning).
    All groups are pruned in one call, their criteria padded with zeros (equal within a
    group, so they decide nothing)."""
    blocks = []
    for g in merged.values():
        cols = []
        if objective in ("energy", "edp", "pareto"):
            cols.append(g.energy[:, None])
        if objective in ("latency", "edp", "pareto"):
            cols.append(g.latency[:, None])
        for m in sorted(g.S):
            cols += [g.S[m], g.C[m][:, 1:]]
        blocks.append(np.concatenate(cols, axis=1))
    if not blocks:
        return {}
    width = max(b.shape[1] for b in blocks)
    crit = np.zeros((sum(len(b) for b in blocks), width))
    start = 0
    for b in blocks:
        crit[start : start + len(b), : b.shape[1]] = b
        start += len(b)
    if epsilon > 0:
        with np.errstate(divide="ignore"):
            crit = np.where(crit > 0, np.ceil(np.log(crit) / np.log1p(epsilon)), -np.inf)
    sizes = [len(b) for b in blocks]
    keep = pareto_mask(np.repeat(np.arange(len(blocks)), sizes), crit)
    ends = np.cumsum(sizes).tolist()
    out = {}
    for (k, g), n, end in zip(merged.items(), sizes, ends, strict=True):
        mask = keep[end - n : end]
        out[k] = g if mask.all() else g.take(mask)
    return out
