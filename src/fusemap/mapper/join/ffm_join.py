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

import math
from dataclasses import dataclass, field, replace

import numpy as np

from ...model.reuse import projection_terms
from ...spec.arch_eval import ArchEvaluator
from ...spec.resolve import WorkloadInfo
from ..pareto import pareto_mask
from ..pmappings.generate import PmappingTable
from ..space.prefix import Compatibility
from ..space.templates import HOSTING, top_memory
from ..tiling.terms import box_array
from .completion import Completion, Key, live_key, prefix_compat, relaxed
from .copies import copy_levels, same_view
from .dependencies import EMPTY, FusionRules, State
from .exposure import Exposure, OwnCopies, exposures, shared_adds
from .rows import Group, join_pairs


@dataclass
class _Piece:
    """The rows of one Einsum's table that share one compatibility, ready to join."""

    rows: np.ndarray  # indices into the Einsum's table
    compat: dict[str, Compatibility]
    b_prev: int  # loops shared with the previous Einsum
    b_next: int  # loops shared with the next Einsum
    loops: tuple[tuple[str, int], ...]  # the fused prefix's loops, root first
    shared_adds: list[tuple[str, int, float]]  # (memory, level, bits) of fused backings
    exposed: dict[str, int] = field(default_factory=dict)
    """Tensor used by another Einsum -> shallowest open level ``e + 1`` of a private copy
    of it kept under ``e`` loops (levels deeper than the prefix's loops left out)."""
    hosting: int | None = None
    """Loops above the pmapping's virtual hosting holder (None: it has none): what it
    shares with the users of a tensor it holds tiled, and nothing else."""
    copies: dict[str, OwnCopies] = field(default_factory=dict)
    """Tensor used by another Einsum -> its shareable copies (:mod:`.copies`) on levels
    within the prefix's loops."""


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
    rules = rules or FusionRules.of(workload)
    accessors = {t: [i for i, e in enumerate(order) if t in workload.einsum(e).tensors]
                 for t in workload.tensors}  # fmt: skip
    stats = JoinStats()
    top = top_memory(arch, order[0])
    hosted = _Hosted(tables, workload, arch, accessors, order, memories)
    shareable = same_view(workload, accessors, order)
    copy_bits: dict[tuple, float] = {}
    groups: dict[tuple[Key, State, Exposure], Group] = {
        ((), EMPTY, ()): Group(
            np.zeros(1), np.zeros(1), np.zeros((1, 0), dtype=np.int64),
            {m: np.zeros((1, 0)) for m in memories}, {m: np.zeros((1, 1)) for m in memories},
        )
    }  # fmt: skip
    for j, name in enumerate(order):
        allowed = bound.allowed(tables[name], j) if bound is not None else None
        fusion = tables[name].fusion
        assert fusion is not None, "the join needs pmappings generated with fusion on"
        uses = set(workload.einsum(name).tensors)
        # Tensors exchanged with earlier Einsums that may be fused (the others are backed
        # in the top memory by every pmapping, so they are always compatible).
        earlier = sorted(t for t in fusion.shared if accessors[t][0] < j)
        wanted = {
            tuple(live[t] for t in earlier)
            for live in ({c.tensor: c for c in key} for key, _, _ in groups)
            if all(t in live for t in earlier)
        }
        pieces = _pieces(j, order, tables[name], workload, arch, accessors, memories, allowed,
                         (earlier, wanted), shareable)  # fmt: skip
        by_match: dict[tuple, list[_Piece]] = {}
        for p in pieces:
            by_match.setdefault(tuple(p.compat[t] for t in earlier), []).append(p)
        pairs: list[tuple[Group, _Piece]] = []
        dest: list[tuple[Key, State, Exposure]] = []
        adds: list[list[tuple[str, int, float]]] = []
        live_keys: dict[tuple, Key] = {}
        for (key, state, exposure), g in groups.items():
            live = {c.tensor: c for c in key}
            if any(t not in live for t in earlier):
                continue
            held = [c for c in key if c.tensor not in uses and c.backing != top]
            for p in by_match.get(tuple(live[t] for t in earlier), []):
                p = _as_host(p, held)
                if p is None:
                    continue  # does not share the loops of a tensor it holds tiled
                nstate = rules.step(order, j, state, p.loops, p.b_prev, p.b_next)
                if nstate is None:
                    continue  # would read a value not yet complete (dependencies.py)
                bits_of = (
                    _CopyBits(copy_bits, tables[name], p.loops, workload, arch, memories)
                    if p.copies
                    else _no_bits
                )
                options = exposures(exposure, p, j, uses, accessors, bits_of)
                if not options:
                    continue  # a copy of a tensor on another user's path (module doc)
                lk = (key, id(p.compat))  # p.compat: one dict per prefix, alive all step
                if lk not in live_keys:
                    live_keys[lk] = live_key(live, p.compat, j, accessors)
                own = p.shared_adds + hosted.adds(held, p.b_prev)
                if p.copies:
                    own = own + shared_adds(exposure, p, uses, bits_of)
                for nexposure, counted in options:  # counted: shared copies it lies between
                    pairs.append((g, p))
                    dest.append((live_keys[lk], nstate, nexposure))
                    adds.append(own + counted)
        joined = join_pairs(pairs, dest, tables[name], memories, adds)
        if bound is not None:  # before pruning: the cut rows need not be compared
            before = sum(len(g.energy) for g in joined.values())
            joined = {
                k: g for k, g in ((k, bound.keep(g, j, k[0])) for k, g in joined.items()) if g
            }
            stats.rows_bounded.append(before - sum(len(g.energy) for g in joined.values()))
        groups = _prune(joined, objective, epsilon)
        stats.groups.append(len(groups))
        stats.group_pairs.append(len(pairs))
        stats.rows_joined.append(sum(len(g.energy) * len(p.rows) for g, p in pairs))
        stats.rows_kept.append(sum(len(g.energy) for g in groups.values()))
    final = groups.get(((), EMPTY, ()))
    if final is None:
        empty = np.zeros(0)
        return Joined(order, empty, empty, np.zeros((0, len(order)), dtype=np.int64), stats)
    return Joined(order, final.energy, final.latency, final.picks, stats)


def _pieces(
    j,
    order,
    table,
    workload,
    arch,
    accessors,
    memories,
    allowed=None,
    match=None,
    shareable: set | frozenset = frozenset(),
) -> list[_Piece]:
    """Group one table's rows by compatibility and work out their place in the order
    (only the ``allowed`` rows, when given; with ``match = (tensors, wanted)``, only the
    rows whose compatibility on ``tensors`` is in ``wanted``: the others join no group)."""
    fusion = table.fusion
    assert fusion is not None, "the join needs pmappings generated with fusion on"
    info = workload.einsum(order[j])
    multi = sorted(t for t in info.tensors if len(accessors[t]) > 1)
    later = {t for t in multi if accessors[t][0] < j}
    seqs, first, inverse = np.unique(fusion.seq, return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    rows = np.arange(len(inverse)) if allowed is None else np.flatnonzero(allowed)
    if len(rows) == 0:
        return []
    needed = np.unique(inverse[rows])
    if match is not None:
        tensors, wanted = frozenset(match[0]), match[1]
        joins = [
            tuple(c for c in prefix_compat(table, int(seqs[k])) if c.tensor in tensors) in wanted
            for k in needed.tolist()
        ]
        needed = needed[np.array(joins, dtype=bool)]
        rows = rows[np.isin(inverse[rows], needed)]
        if len(rows) == 0:
            return []
    copies = copy_levels(table, workload, multi, set(shareable), later, rows)
    bits_of: dict[tuple, float] = {}  # fused tile bits by tensor, memory and tile shape
    # Per fused prefix with a row to join (a capped join allows few): its place in the order.
    meta = {
        int(k): _prefix_place(j, int(seqs[k]), table, info, arch, workload, accessors,
                              memories, bits_of)
        for k in needed.tolist()
    }  # fmt: skip
    # Rows whose own copies of tensors used elsewhere sit on different open levels join
    # differently: one piece per (prefix, pattern of those levels, deeper ones left out).
    deepest = np.zeros(len(seqs), dtype=np.int64)
    for k, m in meta.items():
        deepest[k] = len(m[3])
    row_deepest = deepest[inverse[rows]]
    levels = np.concatenate([copies.private[:, rows], copies.shared[:, rows]])
    pattern = np.where(levels <= row_deepest, levels, 0)  # (tensors + shared copies, rows)
    n_shared = len(copies.shared_keys)
    depths = np.where(pattern[len(multi) :] > 0, copies.depth[:, rows], 0)
    ranks = np.where(pattern[len(multi) :] > 0, copies.rank[:, rows], 0)
    pattern = np.concatenate([pattern, depths, ranks])
    rank = np.empty(len(seqs), dtype=np.int64)  # prefixes in order of their first row
    rank[np.argsort(first, kind="stable")] = np.arange(len(seqs))
    piece = _lexicographic_ids(np.concatenate([rank[inverse[rows]][None, :], pattern]))
    order_rows = np.argsort(piece, kind="stable")  # each piece's rows stay in order
    rows, pattern, piece = rows[order_rows], pattern[:, order_rows], piece[order_rows]
    starts = np.flatnonzero(np.diff(piece, prepend=-1))
    out = []
    n_private = len(multi)
    for s0, idx in zip(starts.tolist(), np.split(rows, starts[1:]), strict=True):
        compat, b_prev, b_next, loops, adds, hosting = meta[inverse[idx[0]]]
        pat = pattern[:, s0].tolist()
        exposed = {t: e for t, e in zip(multi, pat[:n_private], strict=True) if e > 0}
        shared: dict[str, list[tuple[int, str, int, int]]] = {}
        lv = pat[n_private : n_private + n_shared]
        dp = pat[n_private + n_shared : n_private + 2 * n_shared]
        rk = pat[n_private + 2 * n_shared :]
        for (t, mem), e, d, r in zip(copies.shared_keys, lv, dp, rk, strict=True):
            if e > 0:
                shared.setdefault(t, []).append((e, mem, d, r))
        cps = {t: tuple(sorted(v)) for t, v in shared.items()}
        out.append(_Piece(idx, compat, b_prev, b_next, loops, adds, exposed, hosting, cps))
    return out


def _lexicographic_ids(columns: np.ndarray) -> np.ndarray:
    """(rows,) for a (keys, rows) array of non-negative integers: ids in the
    lexicographic order of the rows' keys (first key major); one int64 key when the mixed
    radix fits (the usual case, much faster than a unique over rows)."""
    radix = [int(c.max()) + 1 if c.size else 1 for c in columns]
    if float(np.prod(np.array(radix, dtype=np.float64))) < 2.0**62:
        key = np.zeros(columns.shape[1], dtype=np.int64)
        for c, r in zip(columns, radix, strict=True):
            key = key * r + c
        return key
    _, ids = np.unique(columns.T, axis=0, return_inverse=True)
    return ids.ravel()


def _prefix_place(j, seq, table, info, arch, workload, accessors, memories, bits_of) -> tuple:
    """One fused prefix's compatibility and place in the order: (compat, b_prev, b_next,
    loops, fused backing reservations, loops above its hosting mark or None)."""
    fusion = table.fusion
    compat = {c.tensor: c for c in prefix_compat(table, seq)}
    fused = {t: c for t, c in compat.items() if c.backing != fusion.top[t]}
    b_prev = max((c.depth for t, c in fused.items() if accessors[t][0] < j), default=0)
    b_next = max((c.depth for t, c in fused.items() if accessors[t][-1] > j), default=0)
    adds = []
    for t, c in fused.items():
        users = accessors[t]
        # b_prev over *all* fused tensors: a tile the previous Einsum already holds
        # open under loop depth + 1 is not reserved again.
        if c.backing in memories and (users[0] == j or b_prev < c.depth + 1):
            # A fused tile is reserved once per run of users sharing the loop below it.
            tile = (t, c.backing, tuple(sorted(dict(c.loops).items())))  # innermost
            if tile not in bits_of:
                bits_of[tile] = _backing_bits(info, t, c, table, arch, workload)
            adds.append((c.backing, c.depth + 1, bits_of[tile]))
    tokens = fusion.interner.prefixes[seq]
    loops = tuple((t[1], t[2]) for t in tokens if t[0] == "loop")
    mark = next((k for k, t in enumerate(tokens) if t[0] == "back" and t[1] == HOSTING), None)
    hosting = None if mark is None else sum(t[0] == "loop" for t in tokens[:mark])
    return compat, b_prev, b_next, loops, adds, hosting


def _as_host(p: _Piece, held: list[Compatibility]) -> _Piece | None:
    """``p`` as the pmapping of an Einsum between users of the ``held`` tensors, or None.

    A tensor held tiled under loops ``L`` needs the Einsums between its users to share
    ``L``: the pmapping's first loops are ``L`` and it shares at least that many loops
    with both neighbours. A pmapping with a virtual hosting holder exposes its loops
    above it only for that, so it serves exactly when the deepest such ``L`` is all
    they are (another depth has its own pmapping, the holder placed there)."""
    need = max((c.depth for c in held), default=0)
    if need == 0:
        return p if p.hosting is None else None
    if p.hosting is not None and p.hosting != need:
        return None
    if len(p.loops) < need or any(p.loops[: c.depth] != c.loops for c in held if c.depth):
        return None
    if p.b_prev >= need and p.b_next >= need:
        return p
    return replace(p, b_prev=max(p.b_prev, need), b_next=max(p.b_next, need))


@dataclass
class _Hosted:
    """Fused tensors of other Einsums held while an Einsum runs (it lies between their
    users): each is reserved again, at the level under its loops, by every Einsum of its
    live range that does not share that level with the one before."""

    tables: dict[str, PmappingTable]
    workload: WorkloadInfo
    arch: ArchEvaluator
    accessors: dict[str, list[int]]
    order: list[str]
    memories: dict[str, float]
    bits: dict[Compatibility, float] = field(default_factory=dict)

    def adds(self, held: list[Compatibility], b_prev: int) -> list[tuple[str, int, float]]:
        """(memory, level, bits) of the ``held`` tiles this Einsum reserves again."""
        out = []
        for c in held:
            if c.backing not in self.memories or b_prev >= c.depth + 1:
                continue
            if c not in self.bits:
                user = self.order[self.accessors[c.tensor][0]]
                info = self.workload.einsum(user)
                self.bits[c] = _backing_bits(
                    info, c.tensor, c, self.tables[user], self.arch, self.workload
                )
            out.append((c.backing, c.depth + 1, self.bits[c]))
        return out


def _no_bits(tensor: str, memory: str, depth: int) -> float:
    """A piece without shareable copies is never asked for their bits."""
    raise AssertionError("no copies")


@dataclass
class _CopyBits:
    """The reservation of a piece's copy of a tensor under its first ``depth`` loops (0 in
    a memory whose usage is not tracked), cached per Einsum and tile."""

    cache: dict[tuple, float]
    table: PmappingTable
    loops: tuple[tuple[str, int], ...]
    workload: WorkloadInfo
    arch: ArchEvaluator
    memories: dict[str, float]

    def __call__(self, tensor: str, memory: str, depth: int) -> float:
        if memory not in self.memories:
            return 0.0
        c = Compatibility(tensor, memory, self.loops[:depth])
        key = (self.table.einsum, c)
        if key not in self.cache:
            info = self.workload.einsum(self.table.einsum)
            self.cache[key] = _backing_bits(info, tensor, c, self.table, self.arch, self.workload)
        return self.cache[key]


def _backing_bits(info, tensor: str, c: Compatibility, table: PmappingTable, arch, workload):
    """Bits of a fused tensor's tile at its backing node (under its shared loops)."""
    sizes = {v: np.array([info.bounds[v]]) for v in info.rank_variables}
    for var, tile in c.loops:
        sizes[var] = np.array([tile])
    values = float(box_array(projection_terms(info, tensor), sizes)[0])
    res = table.results[0].template
    comp = arch.flat(info.name, res.compute).component(c.backing)
    return values * comp.value_bits(tensor, workload.tensors[tensor].bits_per_value)


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


@dataclass
class Bound:
    """The cut of a bounded join: a partial mapping whose objective, completed with the
    least every later Einsum can add, is worse than ``best`` cannot reach a mapping of
    objective at most ``best``; nor can a pmapping whose objective, completed with the
    least the other Einsums can add around it, is worse. Exact for every mapping within
    ``best``: objectives only add up along the order, and a row that dominates another
    (no worse in energy and latency) is never cut when the other is kept.

    The least added is each Einsum's best row alone, or, with ``completion``, the relaxed
    join's least from the live compatibility reached (:mod:`.completion`): tighter on long
    chains, where the best rows of neighbours disagree on the tensor between them."""

    objective: str  # energy | latency | edp
    best: float
    least_energy: np.ndarray  # [j]: least energy of the j-th Einsum of the order
    least_latency: np.ndarray
    floor: float = 0.0  # a lower bound of the objective known besides
    completion: Completion | None = None

    @classmethod
    def of(cls, objective, best, order, tables, workload: WorkloadInfo | None = None) -> Bound:
        """The bound for ``order``, knowing (or trying) an objective value ``best``
        (with the ``workload``, completed by the relaxed join)."""
        e = np.array([float(tables[n].energy.min()) for n in order])
        lat = np.array([float(tables[n].latency.min()) for n in order])
        bound = cls(objective, best, e, lat)
        if workload is not None:
            # The rows the plain bound allows are all a mapping within ``best`` may use.
            rows = None
            if math.isfinite(best):
                rows = [bound.allowed(tables[n], j) for j, n in enumerate(order)]
            bound.completion = relaxed(order, tables, workload, rows)
        if objective == "edp":  # some row of each Einsum is in the mapping
            bound.floor = max(
                float(bound._value(*bound._completed(tables[n], j)).min())
                for j, n in enumerate(order)
            )
        return bound

    def _value(self, energy, latency):
        if self.objective == "energy":
            return energy
        return latency if self.objective == "latency" else energy * latency

    def lowest(self) -> float:
        """A lower bound of the objective: the least of every Einsum together."""
        if self.completion is not None:
            together = float(self._value(*self.completion.lowest))
        else:
            together = float(self._value(self.least_energy.sum(), self.least_latency.sum()))
        return max(together, self.floor)

    def _completed(self, table, j: int) -> tuple[np.ndarray, np.ndarray]:
        """Each row of the ``j``-th Einsum's table with the least of the others."""
        if self.completion is not None:
            around = self.completion.around[j]
            return table.energy + around[:, 0], table.latency + around[:, 1]
        energy = table.energy + (self.least_energy.sum() - self.least_energy[j])
        latency = table.latency + (self.least_latency.sum() - self.least_latency[j])
        return energy, latency

    def _within(self, value) -> np.ndarray:
        return value <= self.best * (1 + 1e-9)

    def keep(self, g: Group, j: int, key: Key) -> Group | None:
        """The rows of ``g`` (after Einsum ``j``, live compatibility ``key``) that may
        still reach ``best``."""
        if self.completion is not None:
            rest_energy, rest_latency = self.completion.rest(j + 1, key)
        else:
            rest_energy = self.least_energy[j + 1 :].sum()
            rest_latency = self.least_latency[j + 1 :].sum()
        keep = self._within(self._value(g.energy + rest_energy, g.latency + rest_latency))
        if keep.all():
            return g
        return g.take(keep) if keep.any() else None

    def energy_allowance(self, j: int) -> float:
        """Energy objective: the most a pmapping of the ``j``-th Einsum may cost in a
        mapping within ``best`` (the others at their least alone)."""
        rest = float(self.least_energy.sum() - self.least_energy[j])
        return self.best * (1 + 1e-9) - rest

    def allowed(self, table: PmappingTable, j: int) -> np.ndarray:
        """The rows of the ``j``-th Einsum's table that may be part of a mapping within
        ``best``."""
        return self._within(self._value(*self._completed(table, j)))
