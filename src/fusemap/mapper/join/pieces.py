"""Pieces: the rows of one Einsum's table that share one compatibility, with their
place in the join order (loops shared with each neighbour, fused backing reservations,
own copies of tensors other Einsums use)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from ..distinct import sorted_distinct
from ..space.prefix import LOOP, Compatibility, is_hosting
from .completion import prefix_compat
from .copies import copy_levels
from .exposure import OwnCopies
from .tile_bits import backing_bits


@dataclass
class Piece:
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


def table_pieces(
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
) -> list[Piece]:
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
    needed = sorted_distinct(inverse[rows])
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
    # Per fused prefix with a row to join (a capped join allows few): its place in the order.
    meta = _places(j, table, seqs, needed, (info, arch, workload, accessors, memories))
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
        out.append(Piece(idx, compat, b_prev, b_next, loops, adds, exposed, hosting, cps))
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


def _places(j, table, seqs: np.ndarray, needed: np.ndarray, where: tuple) -> dict:
    """Per index ``k`` of ``needed``, :func:`_prefix_place` of prefix ``seqs[k]``
    (``where``: info, arch, workload, accessors, memories). Not memoized across joins:
    at GPT-3's batch 64 most prefixes a cap asks were new, and a memo would hold a dict
    and lists per prefix for as long as the interner lives."""
    info, arch, workload, accessors, memories = where
    bits_of: dict[tuple, float] = {}  # fused tile bits by tensor, memory and tile shape
    return {
        k: _prefix_place(j, int(seqs[k]), table, info, arch, workload, accessors, memories, bits_of)
        for k in needed.tolist()
    }


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
                bits_of[tile] = backing_bits(info, t, c, table, arch, workload)
            adds.append((c.backing, c.depth + 1, bits_of[tile]))
    prefix = fusion.interner.prefixes[seq]
    loops = tuple((e.var, e.tile) for e in prefix if e.kind == LOOP)
    mark = next((k for k, e in enumerate(prefix) if is_hosting(e)), None)
    hosting = None if mark is None else sum(e.kind == LOOP for e in prefix[:mark])
    return compat, b_prev, b_next, loops, adds, hosting


def as_host(p: Piece, held: list[Compatibility]) -> Piece | None:
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
