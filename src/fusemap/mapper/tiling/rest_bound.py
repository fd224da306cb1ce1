"""The least energy the storage nodes below a search stage may still add, per row.

A node's energy is a sum of count terms, each a constant times the ``fill`` or ``first``
basis of the tile shape at the node (:mod:`fusemap.mapper.tiling.terms`). Tiles only shrink
going down the chain, so every node below a stage has a tile shape at most the one
entering the next node. If each of a node's terms never falls as tiles shrink (a
positive constant on a basis that never falls, a negative one on a basis that never
rises), its energy at that larger tile shape is at most what it will add: a lower bound,
per row, that lets the branch and bound drop rows nodes earlier than "costs only add
up" alone (``docs/ffm.md``, "Nodes below a stage").

Templates with uneven spreads count per row, not by node terms: theirs are the inputs'
fills (:func:`input_fill_terms`), which bound those counts from below.

Whether a basis never falls (or never rises) is checked, not assumed: a dense box of a
strided projection (``2p + r`` with a kernel of 1) counts the holes between the
windows, and smaller tiles then fetch less. The check evaluates the basis itself over
every candidate tile shape (the candidates are all the sizes a tile can take), one
group of variables at a time, which is exact because the bases factor over them.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass

import numpy as np

from ...model.reuse import projection_terms
from ...spec.errors import SpecError
from ...spec.resolve import EinsumInfo
from ..distinct import first_codes
from .terms import NodeTerms, fill_basis, first_basis

MAX_GRID = 1 << 20
"""Candidate tile shapes of one group of variables checked at most; above it, the basis
counts as unknown (its nodes get no bound)."""


@dataclass(frozen=True)
class Trend:
    """How a basis moves as any tile shrinks (both: it is constant)."""

    never_falls: bool
    never_rises: bool


UNKNOWN = Trend(False, False)


def basis_trend(info: EinsumInfo, tensor: str, basis: str, cands: dict[str, np.ndarray]) -> Trend:
    """The trend of ``tensor``'s ``basis`` ("fill" or "first") over the tile shapes whose
    sizes are ``cands`` (per rank variable, the candidate sizes).

    Both bases are a product over groups of variables: the variables of one rank of the
    projection (each in one rank only, else :data:`UNKNOWN`), and each other variable
    alone. So the basis never falls as tiles shrink if every factor is non-negative and
    never falls along each of its variables: each factor is evaluated on its own grid,
    the other variables whole (where every factor is positive)."""
    ranks = [[v for v, _ in rank] for rank in projection_terms(info, tensor)]
    seen = [v for rank in ranks for v in rank]
    if len(seen) != len(set(seen)):
        return UNKNOWN
    groups = [sorted(set(rank)) for rank in ranks if rank]
    groups += [[v] for v in info.rank_variables if v not in seen]
    f = fill_basis if basis == "fill" else first_basis
    falls = rises = True
    for group in groups:
        grid = [np.asarray(cands[v], dtype=np.int64) for v in group]
        if math.prod(len(g) for g in grid) > MAX_GRID:
            return UNKNOWN
        if any((np.diff(g) <= 0).any() for g in grid):
            return UNKNOWN  # not in increasing order: the differences below would lie
        mesh = np.meshgrid(*grid, indexing="ij")
        rows = mesh[0].size
        sizes = {v: np.full(rows, info.bounds[v], dtype=np.int64) for v in info.rank_variables}
        for v, m in zip(group, mesh, strict=True):
            sizes[v] = m.ravel()
        values = np.broadcast_to(np.asarray(f(info, tensor, sizes)), (rows,)).reshape(mesh[0].shape)
        if (values < 0).any() or not np.isfinite(values).all():
            return UNKNOWN
        for axis in range(len(group)):
            grows = np.diff(values, axis=axis)  # as the tile along ``axis`` grows
            falls &= bool((grows <= 0).all())  # growing never raises it: shrinking never lowers
            rises &= bool((grows >= 0).all())
    return Trend(falls, rises)


_BOUNDED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""Per tiler, its :func:`bounded_terms` (worked out once; gone with the tiler)."""


def bounded_terms(tiler) -> list[tuple[int, int, float]]:
    """(position, basis index, energy per value) of every term of the tiler's storage
    nodes (not the compute leaf) whose energy never falls as tiles shrink; the basis
    index is into :func:`basis_keys` (worked out once per tiler, and once per node of
    the Einsum: templates share their nodes' terms). With uneven spreads, the inputs'
    fills (:func:`input_fill_terms`), worked out again if the trips the tiler's
    search shares have changed (they divide the parents' reads)."""
    shared = None if tiler.uneven is None else list(tiler.uneven.choices)
    got = _BOUNDED.get(tiler)
    if got is None or got[0] != shared:
        got = _BOUNDED[tiler] = (shared, _bounded_terms(tiler))
    return got[1]


def _bounded_terms(tiler) -> list[tuple[int, int, float]]:
    if tiler.uneven is not None:  # counted per row: no node terms, but a floor
        keys = basis_keys(tiler.info)
        return [(p, keys.index((x, "fill")), f) for p, x, f in input_fill_terms(tiler)]
    return [
        (node.position, k, factor)
        for node in tiler.costs.nodes
        if node.position < len(tiler.t.holders)
        for k, factor in _node_terms(tiler, node)
    ]


def _node_terms(tiler, node: NodeTerms) -> list[tuple[int, float]]:
    """(basis index, energy per value) of a node's terms; none if its energy may fall
    as tiles shrink."""
    key = ("rest terms", id(node.terms), tuple(tiler.tiles.imperfect))  # shared by templates
    got = tiler.memo.get(key)
    if got is None or got[0] is not node.terms:  # kept with it: the id stays its own
        got = tiler.memo[key] = (node.terms, _terms_if_never_falling(tiler, node))
    return got[1]


def basis_keys(info: EinsumInfo) -> list[tuple[str, str]]:
    """Every (tensor, basis) a node's term may use, in a fixed order."""
    return [(t, b) for t in info.tensors for b in ("fill", "first")]


def trend_of(tiler, tensor: str, basis: str) -> Trend:
    """:func:`basis_trend` over the tiler's candidate tiles, worked out once per Einsum
    (its tilers share the memo) and per set of variables cut imperfectly."""
    key = ("trend", tensor, basis, tuple(tiler.tiles.imperfect))
    trend = tiler.memo.get(key)
    if trend is None:
        cands = dict(zip(tiler.tiles.vars, tiler.tiles.cands, strict=True))
        trend = tiler.memo[key] = basis_trend(tiler.info, tensor, basis, cands)
    return trend


def _terms_if_never_falling(tiler, node: NodeTerms) -> list[tuple[int, float]]:
    """(basis index, energy per value) of the node's terms that cost energy, if each
    never falls as tiles shrink (else none: the node gets no bound)."""
    keys = {k: i for i, k in enumerate(basis_keys(tiler.info))}
    out = []
    for term in node.terms:
        try:
            factor = tiler.costs.energy_per_value(term)
        except SpecError:  # no energy for the action: raised where the node is costed
            return []
        if not factor:
            continue
        trend = trend_of(tiler, term.tensor, term.basis)
        if not (trend.never_falls if factor > 0 else trend.never_rises):
            return []
        out.append((keys[(term.tensor, term.basis)], factor))
    return out


def within_ceilings(
    sizes: np.ndarray, energy: np.ndarray, j: int, members: list[tuple]
) -> np.ndarray:
    """Rows after node ``j``'s gap (tile ``sizes`` above the next node, ``energy`` so
    far) that may still end within the ceiling of one of ``members``: (tiler, ceiling
    on its energy so far, first node position not to count, and the floor of the nodes
    from there down: a :class:`~.front_floor.FrontFloor`, whose overall least the
    ceiling has taken off, or None), each with its own nodes below (templates sharing a
    stage differ there). A row's energy so far plus what its member's nodes below add
    at least must be at most that member's ceiling: the bounded nodes ``j + 1 .. stop -
    1`` at the row's tile shape and the floor per tile shape from ``stop`` down, or the
    bounded nodes all the way down (both are lower bounds: the larger is taken)."""
    first = members[0][0]
    keys = basis_keys(first.info)
    loosest: dict[tuple, tuple] = {}  # loosest ceiling per coefficient sets and floor
    for tiler, ceiling, stop, floor in members:
        above, down = [0.0] * len(keys), [0.0] * len(keys)
        for position, k, factor in bounded_terms(tiler):
            if j < position < stop:
                above[k] += factor
            if j < position:
                down[k] += factor
        c = (tuple(above), tuple(down) if floor is not None else None, id(floor))
        if c not in loosest or loosest[c][0] < ceiling:
            loosest[c] = (ceiling, floor)
    used = [k for k in range(len(keys)) if any(a[k] or (d and d[k]) for a, d, _ in loosest)]
    # The bounds depend on the tile shape alone, and many rows share one (they differ
    # in their prefixes): each distinct shape is worked out once.
    shape_of, at = first_codes(first.tiles.group(sizes))
    shapes = sizes[at]
    named = {v: shapes[:, k] for k, v in enumerate(first.tiles.vars)}
    bases = np.empty((len(shapes), len(used)))
    for col, k in enumerate(used):
        tensor, basis = keys[k]
        f = fill_basis if basis == "fill" else first_basis
        bases[:, col] = f(first.info, tensor, named)
    keep = np.zeros(len(energy), dtype=bool)
    for (above, down, _), (ceiling, floor) in loosest.items():
        rest = bases @ np.array([above[k] for k in used])  # least the nodes below add
        if floor is not None:
            rest += floor.above_overall(shapes)
            rest = np.maximum(rest, bases @ np.array([down[k] for k in used]) - floor.overall)
        keep |= energy + rest[shape_of] <= ceiling
    return keep


def input_fill_terms(tiler) -> list[tuple[int, str, float]]:
    """(position, input tensor, energy per value of its fill) of the storage nodes:
    an input's traffic there is its own writes (its fills with the ranks' bounds,
    state-free) and its parent's reads (those fills cut by the multicast loops above
    it: at least the fills over the product of their most trips), so at least a
    constant times ``fill_basis``; where that basis may fall as tiles shrink, the
    term is left out (its counts are not negative). None at all if an action of a
    tensor there has a negative energy. Proof in ``docs/ffm.md`` ("Uneven spatial
    spreads")."""
    uneven, info, costs = tiler.uneven, tiler.info, tiler.costs
    out = []
    for position in sorted(p for p in uneven.holders if p < len(tiler.t.holders)):
        for x, k, chain, comps in uneven.holders[position]:
            if x in info.outputs:  # its terms (counts never negative) count 0 here
                if any(
                    costs.value_energy(c, a, x) < 0
                    for c in comps[k - 1 : k + 1]
                    for a in ("read", "write")
                ):
                    return []
                continue
            own = costs.value_energy(comps[k], "write", x)
            parent = costs.value_energy(comps[k - 1], "read", x)
            if own < 0 or parent < 0:
                return []
            if own + parent == 0 or not trend_of(tiler, x, "fill").never_falls:
                continue
            trips = math.prod(max(uneven.trips(i)) for i in uneven.multicast_loops(x, chain, k))
            out.append((position, x, own + parent / trips))
    return out
