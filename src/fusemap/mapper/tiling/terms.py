"""The model's counting rules for one template, as per-storage-node terms over tile shapes.

For a template (structure fixed, spatial loops fixed) every count of the model is a sum of
per-storage-node terms, and each term is a constant times one of two functions of the
tile shape *at that node*: ``fill`` (values delivered into all its tiles, the model's
``fill_count``) or ``first`` (values of its distinct output tiles, ``first_visits``).
The constants carry the multicast ratios, the per-instance division by spatial loops and
the partial-sum rules of :func:`fusemap.model.reuse.count_tensor`. The reservation of a
node depends on the tile shape at the node and at the end of its gap.

Tile distributions are exact: a rank variable of bound ``N`` whose current tile is ``s``
(reached through an outermost loop of any size and inner loops that divide the tile above)
has ``N // s`` tiles of size ``s`` and one of ``N % s``.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...model.reuse import projection_terms
from ...model.rules import (
    box_values,
    holder_reads,
    holder_writes,
    parent_reads,
    parent_writes,
    shares_parent_transfer,
    skips_first_reads,
    starts_partial_sums,
)
from ...spec.arch_eval import FlatArch
from ...spec.resolve import EinsumInfo
from ..space.spatial import SpatialLoop
from ..space.templates import Template


@dataclass
class Term:
    """Contribution of one storage node to one (component, action) count, in values."""

    component: str
    action: str  # read | write
    tensor: str
    basis: str  # fill | first
    total: float  # coefficient of the total count
    per_instance: float  # coefficient of the per-instance count (latency)


@dataclass
class NodeTerms:
    """Everything the tiling search needs about one storage node (or the compute leaf)."""

    position: int  # chain position (len(holders) = compute)
    tensor: str
    component: str
    backing: bool
    terms: list[Term] = field(default_factory=list)


def _product(loops: list[SpatialLoop]) -> float:
    return float(math.prod(s.trips for s in loops))


def node_terms(
    template: Template, info: EinsumInfo, flat: FlatArch, memo: dict | None = None
) -> list[NodeTerms]:
    """Per storage node of the template: its count terms (see the module docstring).

    A tensor's terms depend only on its chain's components and on where each spatial
    loop sits among its chain's nodes (between which two: the positions themselves never
    enter a count); ``memo`` (one per Einsum and architecture) shares them between
    templates, whose nodes then hold the same term lists. The terms are never modified."""
    holders = template.holders
    n = len(holders)
    out: list[NodeTerms] = []
    for t in info.tensors:
        chain = [j for j, h in enumerate(holders) if h.tensor == t] + [n]
        comps = [holders[j].component for j in chain[:-1]] + [template.compute]
        spatial = tuple(
            (s.component, s.dimension, s.level, s.var, s.trips, bisect_left(chain, s.slot))
            for s in template.spatial
        )
        key = ("terms", t, tuple(comps), spatial)
        shared = memo.get(key) if memo is not None else None
        if shared is None:
            shared = _tensor_terms(template, info, flat, t, chain, comps, memo)
            if memo is not None:
                memo[key] = shared
        out += [
            NodeTerms(chain[k], node.tensor, node.component, node.backing, node.terms)
            for k, node in zip(range(1, len(chain)), shared, strict=True)
        ]
    return out


def _tensor_terms(
    template: Template,
    info: EinsumInfo,
    flat: FlatArch,
    t: str,
    chain: list,
    comps: list,
    memo: dict | None,
) -> list[NodeTerms]:
    may_reuse, skip, level = _arch_facts(flat, template.compute, memo)
    out: list[NodeTerms] = []
    is_output = t in info.outputs
    copy_output = info.is_copy and is_output
    coefficients = _Coefficients(template, info, t, chain, may_reuse)
    for k in range(1, len(chain)):
        node = NodeTerms(chain[k], t, comps[k], False)
        is_compute = k == len(chain) - 1
        parent = comps[k - 1]
        sk = skips_first_reads(is_output, skip.get(comps[k], True), is_compute and copy_output)
        parent_skips = skip.get(parent, True)  # off: the parent serves initial values
        for comp, role in ((comps[k], "own"), (parent, "parent")):
            if role == "own" and is_compute:
                continue
            in_view = tuple(s for s in template.spatial if s.level <= level[comp])
            tot, inst = coefficients(k, ()), coefficients(k, in_view)
            for action in ("read", "write"):
                pair = []
                for amount, first, ratio in (tot, inst):
                    fill = 0.0 if (is_compute and copy_output) else amount
                    back = amount if is_output else 0.0
                    pair.append(
                        holder_traffic(role, action, fill, back, first, ratio, sk, parent_skips)
                    )
                total, per_instance = pair
                if total.fill or per_instance.fill:
                    node.terms.append(Term(comp, action, t, "fill", total.fill, per_instance.fill))
                if total.first or per_instance.first:
                    node.terms.append(
                        Term(comp, action, t, "first", total.first, per_instance.first)
                    )
        out.append(node)
    return out


class _Coefficients:
    """The constants of one tensor's terms along its ``chain`` of holders: for holder
    ``k`` in a view (the spatial loops ``m`` counted one tile per parent tile: per
    instance), (amount / fill, first visits / first basis, its instances' own copies per
    shared transfer)."""

    def __init__(
        self, template: Template, info: EinsumInfo, tensor: str, chain: list, may_reuse: dict
    ) -> None:
        self.spatial, self.chain = template.spatial, chain
        self.relevance = {s.var: info.relevance(tensor, s.var) for s in template.spatial}
        # Per holder, the spatial loops above it (below its parent) sharing one transfer.
        self.multicast: list[list[SpatialLoop]] = [[]] + [
            [
                s
                for s in template.spatial
                if chain[k - 1] < s.slot <= chain[k]
                and shares_parent_transfer(
                    self.relevance[s.var],
                    tensor,
                    may_reuse.get((s.component, s.dimension), frozenset()),
                )
            ]
            for k in range(1, len(chain))
        ]
        self.memo: dict[tuple, tuple[float, float, float]] = {}

    def __call__(self, k: int, m: tuple[SpatialLoop, ...]) -> tuple[float, float, float]:
        key = (k, m)
        if key not in self.memo:
            self.memo[key] = self._of(k, m)
        return self.memo[key]

    def _of(self, k: int, m: tuple[SpatialLoop, ...]) -> tuple[float, float, float]:
        if k == 0:
            return 0.0, 0.0, 1.0
        relevance, multicast = self.relevance, self.multicast
        ups = [s for s in self.spatial if s.slot <= self.chain[k]]
        in_mode = [s for s in ups if s in m]
        d = _product(in_mode)
        mc = [s for s in multicast[k] if s not in m]
        dm = d * _product(mc)
        e = _product([s for s in in_mode if relevance[s.var] == "relevant"])
        up = 1.0
        shared = list(multicast[k])
        for kk in range(1, k):
            mk = [s for s in multicast[kk] if s not in m]
            up *= _product(mk)
            shared += multicast[kk]
        # Each instance of a spatial loop that does not index the tensor starts its own
        # partial sums (reductions count through ``up``).
        starts = _product(
            [
                s
                for s in ups
                if s not in m and s not in shared and starts_partial_sums(relevance[s.var])
            ]
        )
        return 1.0 / dm, up * starts / e, dm / d


@dataclass(frozen=True)
class Counts:
    """A count kept as its two parts: ``fill`` multiplies the fill basis and ``first``
    the first-visit basis (coefficients of a node's terms, or per-row values with uneven
    spreads). The model's traffic rules (:mod:`fusemap.model.rules`) compute on it as
    on a number."""

    fill: Any
    first: Any

    def __add__(self, other: Counts) -> Counts:
        return Counts(self.fill + other.fill, self.first + other.first)

    def __sub__(self, other: Counts) -> Counts:
        return Counts(self.fill - other.fill, self.first - other.first)

    def __mul__(self, k: Any) -> Counts:
        return Counts(self.fill * k, self.first * k)

    __rmul__ = __mul__

    def values(self) -> Any:
        """The count itself (per-row values: both parts added)."""
        return self.fill + self.first


def holder_traffic(
    role: str,
    action: str,
    fill,
    back,
    first,
    ratio,
    skips: bool,
    parent_skips: bool,
    own_first=None,
) -> Counts:
    """One holder's part of a component's reads or writes of its tensor, by the model's
    rules (:mod:`fusemap.model.rules`): at the holder's own component (``role`` "own")
    or at its parent's. ``fill``/``back``: the values it receives and writes back;
    ``first``: its first visits per transfer; ``ratio``: its instances' own copies per
    transfer (under a multicast); ``skips``: it skips its first reads of the output;
    ``parent_skips``: its parent's flag (off: the parent serves them anyway);
    ``own_first``: its instances' first visits where not ``first * ratio`` (uneven
    spreads). Works on coefficients and on per-row arrays alike."""
    fills, backs = Counts(fill, 0.0), Counts(back, 0.0)
    skipped = Counts(0.0, first) if skips else Counts(0.0, 0.0)
    if role == "own":
        if action == "write":
            if own_first is not None:
                own = Counts(0.0, own_first) if skips else Counts(0.0, 0.0)
                return holder_writes(fills, skipped, ratio, own)
            return holder_writes(fills, skipped, ratio)
        return holder_reads(backs, ratio)
    if action == "write":
        return parent_writes(backs)
    return parent_reads(fills, skipped, parent_skips)


def memoized(memo: dict | None, key: tuple, make):
    """``make()``, once per ``memo`` (one per Einsum, shared by its templates)."""
    if memo is None:
        return make()
    got = memo.get(key)
    if got is None:
        got = memo[key] = make()
    return got


def _arch_facts(flat: FlatArch, compute: str, memo: dict | None) -> tuple[dict, dict, dict]:
    """Per (component, spatial dimension) the tensors it may multicast, per component
    whether it skips initial output writes, and its level (once per compute unit: the
    path ``flat`` is the Einsum's to ``compute``)."""
    return memoized(
        memo,
        ("arch facts", compute),
        lambda: (
            {(c.name, d.name): d.may_reuse for c in flat for d in c.spatial},
            {c.name: c.skip_initial_output_write for c in flat},
            {c.name: i for i, c in enumerate(flat.path)},
        ),
    )


# ---------------------------------------------------------------- vectorized bases
def _entries(bound, s: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """Tile distribution entries (size, count) of a variable whose tile is ``s``."""
    main = (s, bound // s)
    rem = bound % s
    if not np.any(rem):
        return [main]
    return [main, (rem, (rem > 0).astype(np.int64))]


def box_array(terms, sizes: dict[str, np.ndarray]) -> np.ndarray:
    """Dense box occupancy per row (:func:`fusemap.model.rules.box_values`, as floats).
    A tensor of no rank (a scalar) is one value in every row."""
    return _per_row(box_values(terms, sizes, 1.0), sizes)


def fill_basis(
    info: EinsumInfo, tensor: str, sizes: dict[str, np.ndarray], bounds: Mapping | None = None
) -> np.ndarray:
    """Values delivered into all tiles of ``tensor`` (``fill_count``), per row.
    ``bounds``: per variable, the (virtual, per-row) bound its tiles cut (default: the
    rank's; see :mod:`fusemap.mapper.tiling.uneven`)."""
    bounds = info.bounds if bounds is None else bounds
    terms = projection_terms(info, tensor)
    used = [v for v in info.rank_variables if any(v == x for r in terms for x, _ in r)]
    total = _sum_over_entries(bounds, terms, used, sizes, {})
    for v in info.rank_variables:
        if v not in used:
            s = sizes[v]
            total = total * (bounds[v] // s + (bounds[v] % s > 0))
    return _per_row(total, sizes)


def first_basis(
    info: EinsumInfo, tensor: str, sizes: dict[str, np.ndarray], bounds: Mapping | None = None
) -> np.ndarray:
    """Values of the distinct tiles of ``tensor`` (``first_visits`` with every spatial
    loop one tile per parent tile), per row."""
    bounds = info.bounds if bounds is None else bounds
    terms = projection_terms(info, tensor)
    used = [v for v in info.rank_variables if any(v == x for r in terms for x, _ in r)]
    relevant = [v for v in used if info.relevance(tensor, v) == "relevant"]
    fixed = {v: sizes[v] for v in used if v not in relevant}
    return _per_row(_sum_over_entries(bounds, terms, relevant, sizes, fixed), sizes)


def _per_row(values, sizes: dict[str, np.ndarray]) -> np.ndarray:
    """``values`` for each row of ``sizes`` (a scalar tensor's are one for all rows)."""
    out = np.asarray(values, dtype=np.float64)
    rows = max((np.size(s) for s in sizes.values()), default=1)
    return out if out.shape == (rows,) else np.full(rows, out, dtype=np.float64)


def _sum_over_entries(bounds, terms, variables, sizes, fixed) -> np.ndarray:
    combos: list[tuple[dict[str, np.ndarray], np.ndarray | float]] = [(dict(fixed), 1.0)]
    for v in variables:
        nxt = []
        for size, count in _entries(bounds[v], sizes[v]):
            for chosen, weight in combos:
                d = dict(chosen)
                d[v] = size
                nxt.append((d, weight * count))
        combos = nxt
    total: np.ndarray | float = 0.0
    for chosen, weight in combos:
        total = total + weight * box_array(terms, chosen)
    return np.asarray(total, dtype=np.float64)


def reservation_sizes(
    info: EinsumInfo,
    tensor: str,
    backing: bool,
    here: dict[str, np.ndarray],
    below: dict[str, np.ndarray],
) -> dict[str, np.ndarray]:
    """Tile sizes at a node's reservation point (the model's lowering rule).

    Backing nodes reserve right under the node. Others are lowered through their gap,
    whose loops come fully relevant first, then partially relevant: past every fully
    relevant loop and the first partially relevant one.
    """
    if backing:
        return here
    out = {}
    passed = np.zeros(len(next(iter(here.values()))), dtype=bool) if here else None
    for v in info.rank_variables:
        kind = info.relevance(tensor, v)
        if kind == "relevant":
            out[v] = below[v]
        elif kind == "partial":
            assert passed is not None
            looped = below[v] < here[v]
            take = looped & ~passed
            out[v] = np.where(take, below[v], here[v])
            passed = passed | looped
        else:
            out[v] = here[v]
    return out


def passed_loops(
    info: EinsumInfo, tensor: str, variables: list[str], here: np.ndarray, mids: np.ndarray
) -> np.ndarray:
    """Per row, the loops of a gap (from tiles ``here`` to ``mids``, in the canonical
    order) a lowered reservation of ``tensor`` passes: the relevant ones, then the first
    partially relevant one (the model's lowering, :func:`fusemap.model.rules.lowered_past`)."""
    rel = [info.relevance(tensor, v) for v in variables]
    looped = mids < here
    full = [k for k, r in enumerate(rel) if r == "relevant"]
    part = [k for k, r in enumerate(rel) if r == "partial"]
    n = looped[:, full].sum(axis=1) if full else np.zeros(len(here), dtype=np.int64)
    if part:
        n = n + looped[:, part].any(axis=1)
    return n
