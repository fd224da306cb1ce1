"""Where a pmapping keeps its own copies of tensors that other Einsums also use.

A node above loop ``e + 1`` of the fused prefix sits on the path of every Einsum that
shares that loop (the assembled LoopTree has one path there). So a copy of a tensor
other Einsums use, kept under ``e`` loops (its *level* is ``e + 1``), is also a holder
for each other user sharing loop ``e + 1``. The join allows that in one case only: the
other user keeps the *same* copy there (same memory, same level), so the assembled tree
has one node that is exactly each user's own (a *shared copy*). Each chain then sees
the same node with the same loops above it, so the same counts; the assembly puts the
first user's nodes of a gap first, so the conditions below keep every chain's order:

* every user projects the tensor alike (:func:`same_view`: the loops they share cut
  the same tile in each; its ranks may be indexed by differently named variables that
  no shared loop can cut) and none keeps it persistent (a persistent tile is reserved
  for every instance);
* spatial loops need no condition: a spatial loop above the copy, or at the end of its
  gap, lies above a fused or hosting node (the copy lies above a loop its Einsum
  shares), so it is in the fused prefix, and the users sharing the copy share it too
  (same loop, same place); one below the shared loops is in one user's branch only.
  The model moves a spatial loop in a tensor's view only among loops no holder of the
  tensor separates, so each view is that user's pmapping (checked by the brute force
  of ``tests/oracles/test_ffm_bruteforce.py`` with a fanout);
* for a user that is not the tensor's first in the order: no fused backing node
  follows the copy in its gap (a guard: a fused backing node opens its gap). The
  assembly merges the users' nodes of a gap keeping each user's order
  (``assemble._merge_gap``); the join keeps their shared copies in one order
  (``exposure._places``, from :attr:`CopyLevels.rank`).

The copy's reservation is lowered through its gap as in each pmapping alone (in the
order its prefix writes the gap's loops): to *depth* ``d`` (loops above the
reservation point). Two users with the same depth make one reservation in the model
(same node, same anchor), live from the first user to the last; the join counts it
once, and for the Einsums between them (:mod:`.exposure`). Every other copy of such a
tensor is *private*: the join never pairs it with another user sharing the loop below
it (:func:`fusemap.mapper.join.exposure.exposures`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...spec.resolve import EinsumInfo, WorkloadInfo
from ..distinct import sorted_distinct
from ..space.prefix import LOOP, is_spatial
from ..tiling.gap_orders import lowered_past


@dataclass(frozen=True)
class CopyLevels:
    """Per row of a table: its copies of the tensors other Einsums use."""

    private: np.ndarray  # (tensors, rows): level of the shallowest private copy (0: none)
    shared: np.ndarray  # (len(shared_keys), rows): level of the shareable copy (0: none)
    depth: np.ndarray  # (len(shared_keys), rows): loops above its reservation point
    shared_keys: tuple[tuple[str, str], ...]  # (tensor, memory) of each row of ``shared``
    rank: np.ndarray  # (len(shared_keys), rows): shareable copies before it, same gap and memory


def same_view(workload: WorkloadInfo, accessors: dict[str, list[int]], order: list[str]) -> set:
    """Tensors every user projects alike (and none keeps persistent): their copies may be
    shared. Alike: per rank, the same terms over the variables all users have (the only
    ones a shared loop can cut), and in each user either no other term or others adding
    the same extent. So the loops they share cut the same tile in each, and each
    variable they share is as relevant to the tensor in each (alone in a rank in all of
    them, or in none)."""
    out = set()
    for t, users in accessors.items():
        if len(users) < 2:
            continue
        infos = [workload.einsum(order[u]) for u in users]
        if any(t in i.persistent for i in infos):
            continue
        common = set.intersection(*(set(i.rank_variables) for i in infos))
        first = _view(infos[0], t, common)
        if all(_view(i, t, common) == first for i in infos[1:]):
            out.add(t)
    return out


def _view(info: EinsumInfo, tensor: str, common: set) -> tuple:
    """Per rank of ``tensor`` (by name): its terms over ``common`` variables, whether it
    has others, and the extent those others add (no shared loop can cut them)."""
    out = []
    for rank, expr in sorted(info.projections[tensor].items()):
        terms = [(v, abs(c), info.bounds[v]) for v, c in expr.coeffs]
        shared = tuple(sorted(t for t in terms if t[0] in common))
        own = [t for t in terms if t[0] not in common]
        out.append((rank, shared, bool(own), sum(c * (n - 1) for _, c, n in own)))
    return tuple(out)


def copy_levels(
    table,
    workload: WorkloadInfo,
    tensors: list[str],
    shareable: set,
    later: set,
    rows: np.ndarray | None = None,
) -> CopyLevels:
    """The copies of ``tensors`` in the rows of ``table`` (those ``rows`` at least: the
    others may be left at 0); ``shareable``: tensors whose copies may be shared,
    ``later``: those an Einsum before this one uses. Worked out per template, once
    (cached on the table: the join runs once per order and cap, and a capped join asks
    for few rows). A table renamed for an identical Einsum (``renamed_from``) reads its
    first table's levels (row ``i`` is its row ``i`` renamed), so a chain of identical
    Einsums works them out once, not once per Einsum."""
    origin = table.__dict__.get("renamed_from")
    if origin is not None:
        return _renamed_levels(origin, workload, tensors, shareable, later, rows)
    info = workload.einsum(table.einsum)
    cache = table.__dict__.setdefault("_copy_levels_cache", {})
    mine = set(tensors)
    key = (tuple(tensors), tuple(sorted(shareable & mine)), tuple(sorted(later & mine)))
    if key not in cache:
        cache[key] = _Levels(len(table), tensors, shareable & mine, later & mine)
    levels = cache[key]
    wanted = sorted_distinct(table.template if rows is None else table.template[rows])
    todo = [k for k in wanted.tolist() if k not in levels.done]
    if todo:
        levels.add(table, info, todo)
    return levels.view(tensors)


def _renamed_levels(origin, workload, tensors, shareable, later, rows) -> CopyLevels:
    """:func:`copy_levels` of a renamed table, from its first table's (``origin``: that
    table, its tensor renaming and its variable renaming)."""
    base, names, _ = origin
    back = {new: old for old, new in names.items()}
    mine = set(tensors)
    got = copy_levels(
        base,
        workload,
        [back[t] for t in tensors],
        {back[t] for t in shareable & mine},
        {back[t] for t in later & mine},
        rows,
    )
    keys = [(names[t], m) for t, m in got.shared_keys]
    order = sorted(range(len(keys)), key=keys.__getitem__)
    return CopyLevels(
        got.private,  # rows in the order of ``tensors`` already
        got.shared[order],
        got.depth[order],
        tuple(keys[i] for i in order),
        got.rank[order],
    )


class _Levels:
    """Copy levels of a table's rows, filled template by template."""

    def __init__(self, n: int, tensors: list[str], shareable: set, later: set) -> None:
        self.n, self.shareable, self.later = n, shareable, later
        self.private = {t: np.zeros(n, dtype=np.int64) for t in tensors}
        self.shared: dict[tuple[str, str], np.ndarray] = {}
        self.depth: dict[tuple[str, str], np.ndarray] = {}
        self.slot: dict[tuple[str, str], np.ndarray] = {}  # its holder's index
        self.done: set[int] = set()

    def view(self, tensors: list[str]) -> CopyLevels:
        keys = tuple(sorted(self.shared))
        empty = np.zeros((0, self.n), np.int64)
        shared = np.stack([self.shared[k] for k in keys]) if keys else empty
        slot = np.stack([self.slot[k] for k in keys]) if keys else empty
        rank = np.zeros_like(shared)
        for a, (_, mem) in enumerate(keys):
            for b, (_, other) in enumerate(keys):
                if a != b and mem == other:
                    rank[a] += (shared[b] == shared[a]) & (slot[b] < slot[a])
        return CopyLevels(
            np.stack([self.private[t] for t in tensors]) if tensors else empty,
            shared,
            np.stack([self.depth[k] for k in keys]) if keys else empty,
            keys,
            rank,
        )

    def add(self, table, info: EinsumInfo, templates: list[int]) -> None:
        """Work out the rows of ``templates``."""
        self.done.update(templates)
        if not self.private:
            return
        fusion = table.fusion
        assert fusion is not None
        by_template = _rows_by_template(table.template, templates)
        for k in templates:
            mine = by_template[k]
            res = table.results[k]
            holders = res.template.holders
            top_level = holders[0].level
            seen = [
                j
                for j, h in enumerate(holders)
                if h.tensor in self.private
                and not (h.backing and h.level != top_level and h.tensor in fusion.shared)
            ]
            if not seen or len(mine) == 0:
                continue
            self._add_template(info, fusion, res, holders, top_level, seen, mine, table.row[mine])

    def _add_template(self, info, fusion, res, holders, top_level, seen, mine, in_result) -> None:
        here, mids = res.gap_tiles(in_result)
        looped = np.stack([m < h for h, m in zip(here, mids, strict=True)], axis=1)
        above = np.zeros((len(mine), len(holders)), dtype=np.int64)
        above[:, 1:] = np.cumsum(looped.sum(axis=2), axis=1)[:, : len(holders) - 1]
        above += [sum(s.slot <= j for s in res.template.spatial) for j in range(len(holders))]
        lead = 0  # the leading top-memory nodes go to the root
        while (
            lead < len(holders)
            and holders[lead].backing
            and not holders[lead].virtual
            and holders[lead].level == top_level
        ):
            lead += 1
        ok = _shareable(res, holders, above, self.shareable, self.later, fusion, top_level, lead)
        n = self.n
        for j in seen:
            h = holders[j]
            level = above[:, j] + 1
            if j < lead:
                level = np.where(above[:, j] == 0, 0, level)
            share = ok.get(j, np.zeros(len(mine), dtype=bool)) & (level > 0)
            if share.any():
                col = self.shared.setdefault((h.tensor, h.component), np.zeros(n, dtype=np.int64))
                col[mine] = np.where(share, level, col[mine])
                dep = self.depth.setdefault((h.tensor, h.component), np.zeros(n, dtype=np.int64))
                slot = self.slot.setdefault((h.tensor, h.component), np.zeros(n, dtype=np.int64))
                slot[mine] = np.where(share, j, slot[mine])
                passed = _passed(info, h.tensor, res, looped[:, j], above[:, j], fusion, mine)
                dep[mine] = np.where(share, above[:, j] + passed, dep[mine])
            level = np.where(share, 0, level)
            cur = self.private[h.tensor][mine]
            self.private[h.tensor][mine] = np.where(
                (level > 0) & ((cur == 0) | (level < cur)), level, cur
            )


def _rows_by_template(template: np.ndarray, wanted: list[int]) -> dict[int, np.ndarray]:
    """Per template of ``wanted``: its rows of the table (in order)."""
    order = np.argsort(template, kind="stable")
    sorted_t = template[order]
    out = {}
    for k in wanted:
        lo, hi = np.searchsorted(sorted_t, [k, k + 1])
        out[k] = order[lo:hi]
    return out


def _passed(
    info: EinsumInfo, tensor: str, res, looped: np.ndarray, above: np.ndarray, fusion, rows
) -> np.ndarray:
    """(rows,) loops of a gap a non-backing node's reservation is lowered past, in the
    order the row's fused prefix writes them (:mod:`fusemap.mapper.tiling.gap_orders`): the
    leading relevant ones, then one partially relevant one; an irrelevant one stops it.
    A gap below the prefix is in the canonical order (relevant loops first)."""
    kinds = [info.relevance(tensor, v) for v in res.variables]
    rel = np.array([k == "relevant" for k in kinds], dtype=bool)
    part = np.array([k == "partial" for k in kinds], dtype=bool)
    out = looped[:, rel].sum(axis=1) + looped[:, part].any(axis=1)
    n = looped.sum(axis=1)
    keys = np.stack([fusion.seq[rows], above, n], axis=1)
    uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
    # Memoized on the interner: tables merged with more rows between caps keep it.
    relevance = dict(zip(res.variables, kinds, strict=True))
    memo = fusion.interner.memo_of(("lowered past", tuple(relevance.items())))
    found = np.full(len(uniq), -1, dtype=np.int64)
    for u, key in enumerate(map(tuple, uniq.tolist())):
        got = memo.get(key)
        if got is None:
            got = memo[key] = _lowered_in_prefix(relevance, fusion.interner, *key)
        found[u] = got
    got = found[inverse.ravel()]
    return np.where(got >= 0, got, out)


def _lowered_in_prefix(relevance: dict[str, str], interner, seq: int, at: int, n: int) -> int:
    """Loops lowered past of the ``n`` loops of prefix ``seq`` from its loop ``at`` on,
    in the prefix's order (``relevance``: of each rank variable to the tensor); -1 if
    they are not all in it (below it: the canonical order)."""
    loops = [e for e in interner.prefixes[seq] if e.kind == LOOP]  # spatial too
    if at + n > len(loops):
        return -1
    # A spatial loop in a copy's gap is of a fanout below it: the lowering stops there.
    kinds = ["irrelevant" if is_spatial(e) else relevance[e.var] for e in loops[at : at + n]]
    return lowered_past(kinds)


def _shareable(res, holders, above, shareable, later, fusion, top_level, lead) -> dict:
    """Per holder: (rows,) whether it is a copy the other users may share (module doc)."""
    rows = above.shape[0]
    fused = [
        h.backing and h.level != top_level and h.tensor in fusion.shared and not h.virtual
        for h in holders
    ]
    out: dict[int, np.ndarray] = {}
    for j, h in enumerate(holders):
        if h.tensor not in shareable or h.virtual or h.backing or j < lead:
            continue
        cand = np.ones(rows, dtype=bool)
        if h.tensor in later:
            for i in range(j + 1, len(holders)):
                if fused[i]:
                    cand &= above[:, i] != above[:, j]  # a fused backing node after it in the gap
        out[j] = cand
    return out
