"""What a partial mapping exposes of the tensors later Einsums still use: copies on open
loop levels (the join's part of :mod:`.copies`).

A node above loop ``e + 1`` of the fused prefix sits on the path of every Einsum sharing
that loop. So a user of a tensor may join only where every copy of it on its path is its
own too (:func:`exposures` refuses the rest): either no copy there, or a *shared copy*,
one node each user keeps alike (same memory, same level).

A shared copy's reservation is lowered to a depth ``d`` (loops above it). Users with
the same depth make one reservation in the model (one node, one anchor): it is live for
every Einsum from its first user to its last, each under its own loop ``d + 1``. The join
counts a reservation made under ``d`` loops for the Einsums sharing loop ``d + 1`` with
its owner, so an entry keeps ``shared``, the least loops shared since an Einsum last
counted it:

* ``shared > d``: the level is still open, the Einsum joining sees it; a user keeping the
  same reservation takes its own back out (:func:`shared_adds`).
* ``shared == d``: the level closed, the anchor (loop ``d``) is still common. A user with
  the same reservation counts its own; any other Einsum lies between two users of it
  only if a later user keeps it too, which the join cannot know yet. So both are tried:
  it counts it (``KEPT``, a promise a later user must keep) or it does not
  (``SKIPPED``: no later user may then keep it).
* ``shared < d``: the anchor is gone; a later user's reservation is another one.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import NamedTuple, Protocol

FRESH, KEPT, SKIPPED = 0, 1, 2


class SharedCopy(NamedTuple):
    """One shared copy of a tensor on an open level of a partial mapping."""

    level: int  # loops above its node, plus one
    memory: str
    depth: int  # loops above its reservation
    shared: int  # least loops shared with what follows since an Einsum last counted it
    bits: float  # its reservation (0 in a memory that is not tracked)
    promise: int  # FRESH, KEPT or SKIPPED (module doc)
    place: Place  # its place among the shared copies of its gap and memory (0, 0, 0), ...


Place = tuple[float, int, int]
OwnCopies = tuple[tuple[int, str, int, int], ...]
"""A pmapping's shareable copies of a tensor: (level, memory, depth, how many of its
shareable copies come before it in the same gap and memory), sorted."""
TensorExposure = tuple[str, int, int, tuple[SharedCopy, ...]]
"""One tensor still to be used: (tensor, shallowest open level a user keeps a private copy
of it above (0: none), deepest open level shared with one of its users so far, the shared
copies on open levels)."""
Exposure = tuple[TensorExposure, ...]
"""Per tensor still to be used, its :data:`TensorExposure`."""
Add = tuple[str, int, float]  # (memory, level, bits) a joining Einsum reserves


class Joining(Protocol):
    """What the exposure needs of the Einsum joining (the join's piece)."""

    b_next: int
    exposed: dict[str, int]
    copies: dict[str, OwnCopies]


def on_path(p: Joining, t: str, hi: int) -> OwnCopies:
    """``p``'s shared copies of ``t`` on the path of an earlier user sharing ``hi`` loops."""
    return tuple(c for c in p.copies.get(t, ()) if c[0] <= hi)


def exposures(
    exposure: Exposure,
    p: Joining,
    j: int,
    uses: set[str],
    accessors: dict[str, list[int]],
    bits_of: Callable[[str, str, int], float],
) -> list[tuple[Exposure, list[Add]]]:
    """The exposures after joining ``p`` (Einsum ``j``), each with the shared copies'
    reservations it makes it count (none: a user would share a loop with a node of
    another user's own copy, or a copy's promise is broken). ``bits_of(tensor, memory,
    depth)``: the reservation of ``p``'s copy."""
    state = {t: (lo, hi, cps) for t, lo, hi, cps in exposure}
    for t in uses:
        if len(accessors[t]) < 2:
            continue
        lo, hi, cps = state.get(t, (0, 0, ()))
        mine = p.exposed.get(t, 0)
        if lo > 0 or 0 < mine <= hi:
            return []
        if {c[:2] for c in on_path(p, t, hi)} != {c[:2] for c in cps}:
            return []  # not the same copies where they share a path
    if not p.copies and not any(cps for *_, cps in exposure):
        return [(_without_copies(state, p, j, uses, accessors), [])]
    placed = _places(exposure, p, uses)
    if placed is None:
        return []  # its shared copies in another order than an earlier user's
    b = p.b_next
    per_tensor: list[list[tuple[TensorExposure | None, list[Add]]]] = []
    for t in sorted(set(state) | {t for t in uses if len(accessors[t]) > 1}):
        lo, hi, cps = state.get(t, (0, 0, ()))
        own = p.copies.get(t, ()) if t in uses else ()
        own_keys = {c[:3] for c in own if c[0] <= hi}
        last = accessors[t][-1] <= j
        choices = [_carry(c, c[:3] in own_keys, last, b) for c in cps]
        if any(not alts for alts in choices):
            return []
        if last:  # no later user: it leaves the exposure (and nothing is counted again)
            continue
        lo, hi = _open_levels(lo, hi, t, p, uses)
        new = tuple(
            SharedCopy(lv, m, d, b, bits_of(t, m, d), FRESH, placed[t, lv, m])
            for lv, m, d, _ in own
        )
        options: list[tuple[TensorExposure | None, list[Add]]] = []
        for combo in itertools.product(*choices):
            kept = [e for e, _ in combo if e is not None] + list(new)
            if any(e.level > b and e.promise == KEPT for e in kept):
                continue  # it leaves every later user's path: the promise cannot hold
            entries = tuple(sorted({e for e in kept if e.level <= b}))
            adds = [a for _, x in combo for a in x]
            options.append(((t, lo, hi, entries) if lo or hi else None, adds))
        if not options:
            return []
        per_tensor.append(options)
    out = []
    for picked in itertools.product(*per_tensor):
        exposed = _renumbered(tuple(x for x, _ in picked if x is not None))
        out.append((exposed, [a for _, x in picked for a in x]))
    return out


def _without_copies(state: dict, p: Joining, j: int, uses: set[str], accessors) -> Exposure:
    """:func:`exposures` when no shared copy is in play (the usual case, kept fast)."""
    out = []
    for t in sorted(set(state) | {t for t in uses if len(accessors[t]) > 1}):
        if accessors[t][-1] <= j:
            continue  # no later user
        lo, hi, _ = state.get(t, (0, 0, ()))
        lo, hi = _open_levels(lo, hi, t, p, uses)
        if lo or hi:
            out.append((t, lo, hi, ()))
    return tuple(out)


def _open_levels(lo: int, hi: int, t: str, p: Joining, uses: set[str]) -> tuple[int, int]:
    """Tensor ``t``'s (shallowest open level of a private copy, deepest open level shared
    with a user) after ``p`` joins."""
    b = p.b_next
    if t in uses:
        mine = p.exposed.get(t, 0)
        lo = mine if lo == 0 or 0 < mine < lo else lo
        hi = b
    else:
        hi = min(hi, b)
    return (lo if 0 < lo <= b else 0), hi


def _places(exposure: Exposure, p: Joining, uses: set[str]) -> dict | None:
    """(tensor, level, memory) -> place of each of ``p``'s shareable copies among the
    shared copies of its gap and memory, as the assembly merges them
    (``assemble._merge_gap``): a copy an earlier user keeps keeps its place; the others
    go right before the next such copy of ``p``'s, or after all. None when two copies
    earlier users keep come in another order in ``p``."""
    at = {(t, c.level, c.memory): c.place for t, _, _, cps in exposure for c in cps}
    gaps: dict[tuple[int, str], list[tuple[int, str]]] = {}
    for t in sorted(uses):
        for lv, m, _, rank in p.copies.get(t, ()):
            gaps.setdefault((lv, m), []).append((rank, t))
    out = {}
    for (lv, m), mine in gaps.items():
        mine.sort()
        known = [at.get((t, lv, m)) for _, t in mine]
        anchors = [x for x in known if x is not None]
        if any(a >= b for a, b in zip(anchors, anchors[1:], strict=False)):
            return None
        for i, (_, t) in enumerate(mine):
            if known[i] is not None:
                out[t, lv, m] = known[i]
                continue
            nxt = next((x for x in known[i + 1 :] if x is not None), None)
            out[t, lv, m] = (nxt[0], -1, i) if nxt is not None else (math.inf, 0, i)
    return out


def _renumbered(exposure: Exposure) -> Exposure:
    """``exposure`` with its shared copies' places renumbered (0, 1, ... per gap and
    memory), so equal orders give equal keys."""
    places: dict[tuple[int, str], set] = {}
    for _, _, _, cps in exposure:
        for c in cps:
            places.setdefault((c.level, c.memory), set()).add(c.place)
    if all(x <= {(0, 0, 0)} for x in places.values()):
        return exposure
    rank = {k: {x: (i, 0, 0) for i, x in enumerate(sorted(v))} for k, v in places.items()}
    return tuple(
        (t, lo, hi, tuple(sorted(c._replace(place=rank[c.level, c.memory][c.place]) for c in cps)))
        for t, lo, hi, cps in exposure
    )


def _carry(
    c: SharedCopy, matched: bool, last: bool, b: int
) -> list[tuple[SharedCopy | None, list[Add]]]:
    """What becomes of entry ``c`` when an Einsum joins: alternatives (the entry after it,
    or None when the Einsum's own copy replaces it; the reservations it counts), none
    when it may not join. ``matched``: the Einsum keeps the same reservation; ``b``: the
    loops it shares with the next one."""
    if c.bits == 0:  # a memory whose usage is not tracked: only the node matters
        return [(None, [])] if matched else [(c._replace(shared=min(c.shared, b)), [])]
    if c.shared != c.depth:  # level open, or anchor gone
        if c.shared < c.depth and c.promise == KEPT:
            return []  # the later user's reservation would be another one
        return [(None, [])] if matched else [(c._replace(shared=min(c.shared, b)), [])]
    if matched:  # the same reservation again, counted by this user
        return [] if c.promise == SKIPPED else [(None, [])]
    add = [(c.memory, c.depth + 1, c.bits)]
    kept: tuple[SharedCopy | None, list[Add]] = (c._replace(shared=b, promise=KEPT), add)
    skipped: tuple[SharedCopy | None, list[Add]] = (
        c._replace(shared=min(c.depth, b), promise=SKIPPED),
        [],
    )
    if last:
        return [] if c.promise == KEPT else [(c, [])]
    if c.promise == KEPT:
        return [kept]
    return [skipped] if c.promise == SKIPPED else [kept, skipped]


def shared_adds(
    exposure: Exposure, p: Joining, uses: set[str], bits_of: Callable[[str, str, int], float]
) -> list[Add]:
    """(memory, level, -bits) of the shared copies ``p`` keeps where an earlier user
    already reserved them on a level still open: the model reserves a shared copy once,
    and ``p``'s own reservations (its rows' buckets) count it again."""
    out = []
    for t, _, hi, cps in exposure:
        if t not in uses:
            continue
        earlier = {c[:3] for c in cps if c.depth < c.shared and c.bits}
        for level, mem, depth, _ in on_path(p, t, hi):
            if (level, mem, depth) in earlier:
                out.append((mem, depth + 1, -bits_of(t, mem, depth)))
    return out
