"""The single-Einsum mapspace: templates (structure) and the rules for their tile shapes.

A *template* fixes everything but tile shapes: the compute unit, which memory holds each
tensor (one storage node per tensor, sorted by memory level, any order inside a level),
and the spatial loops (which rank variable, how many instances, on which fanout). The
tile shapes are then chosen by :mod:`fusemap.mapper.tiling.tiler`.

Canonical LoopTree of a template (what the generator and the brute-force enumerator in
the tests both produce, see ``docs/mapspace.md``):

* Below every storage node, a *gap* of temporal loops, at most one per rank variable,
  ordered: fully relevant to the tensor of the node above first, then partially relevant,
  then irrelevant (rank-variable order breaks ties). Loop order among different rank
  variables changes no count; only how far a buffer's reservation is lowered, and this
  order lowers it the most.
* At the end of the gap above the first storage node (or compute) at or below a fanout,
  that fanout's spatial loops.
* Tile shapes shrink down the chain. The first loop over a rank variable, temporal or
  spatial, may take any size (imperfect factorization) when the variable's bound is at
  most ``imperfect_max_bound``; every later loop divides the tile above it. A spatial
  loop then spreads a rank over any number of instances up to its bound (3 over 2 as
  2 + 1); above that bound its trips divide the rank.
* No temporal loop between two backing storage nodes of unbounded memories (it cannot
  change any count).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np

from ...spec.arch_eval import ArchEvaluator, FlatArch, SpatialInfo
from ...spec.errors import FusemapError, Location
from ...spec.expressions import evaluate
from ...spec.resolve import EinsumInfo
from ...spec.sets import TensorSet, evaluate_set_expression
from .divisors import MAX_SIZE, divisors
from .prefix import HOSTING

MAX_IMPERFECT_BOUND = 1024
"""Imperfect tiles are tried only for ranks this small: each size up to the bound is a
candidate, so the search grows with the bound (divisors alone above it)."""


@dataclass(frozen=True)
class MapperConfig:
    """Knobs of the single-Einsum search."""

    imperfect: bool = True
    """Explore tile shapes that do not divide the rank (outermost loop of a variable)."""
    imperfect_max_bound: int = 16
    """Only for rank variables of at most this bound (the state space grows with it)."""

    spread_max_bound: int = MAX_IMPERFECT_BOUND
    """Spatial loops over rank variables of at most this bound (and at most
    ``imperfect_max_bound``, which decides by default) may spread them unevenly (3 over
    2 instances as 2 + 1), and such a variable may have an imperfect loop above its
    spatial loop. A lower value only makes the search faster: it shrinks the space
    (``docs/mapspace.md``)."""

    @property
    def imperfect_bound(self) -> int:
        """Largest rank bound whose temporal tiles need not divide it."""
        return self.imperfect_max_bound if self.imperfect else 0

    @property
    def spread_bound(self) -> int:
        """Largest rank bound a spatial loop may spread unevenly."""
        return min(self.imperfect_bound, self.spread_max_bound)

    fusion: bool = False
    """Let shared tensors be backed below the top memory (fusion); off for ``--einsum``."""
    fused_loops_once: bool = True
    """Above fused nodes, the search puts at most one loop per rank variable: shared
    tensors are tiled once (any order, any tile shape); with the energy objective the
    mapper then checks its answer over several loops per variable and searches them
    where they may pay (:mod:`fusemap.mapper.full_space`). Off, the fused prefix may
    split a variable over several loops from the start, a much larger space (each split
    multiplies the compatibilities)."""
    relaxed_prefixes: bool = False
    """Internal (not a spec key): forget fused prefixes, so rows of every prefix and every
    loop depth are compared together and several fused loops per rank variable are
    allowed. Each template's least energy is then its least over the whole fused space
    (:mod:`fusemap.mapper.full_space`); the rows are no pmappings a join can use."""
    fusable: frozenset[str] | None = None
    """Shared tensors that may be fused (None: all)."""
    held_loops: dict[str, frozenset[str]] = field(default_factory=dict)
    """Fusable tensors whose users are never consecutive in an order the join tries (the
    Einsums between hold them too): the rank variables that may loop above their
    backing node (the hosts must share those loops; none: fused whole or not at all)."""
    hosts: frozenset[str] | None = None
    """Einsums that may run while another Einsum's tensor is held (between two users of a
    fused tensor in some order); None: every Einsum. An Einsum that hosts nothing and
    fuses nothing runs alone, so its reservations decide nothing."""
    hosted: dict[str, frozenset[str]] = field(default_factory=dict)
    """Per hosting Einsum, the tensors that may be held while it runs."""
    host_loops: dict[str, frozenset[str]] = field(default_factory=dict)
    """Per hosting Einsum, the rank variables it may share with the users of a tensor it
    holds tiled (its pmappings then expose those loops above a virtual node)."""

    def may_fuse(self, tensor: str, workload) -> bool:
        """Whether ``tensor`` is shared and may be backed below the top memory."""
        return tensor in workload.shared and (self.fusable is None or tensor in self.fusable)

    def sharing(self, info, workload) -> tuple[frozenset[str], frozenset[str]]:
        """The Einsum's shared tensors that may be fused, and those pinned to the top."""
        fused = frozenset(t for t in info.tensors if self.may_fuse(t, workload))
        pinned = frozenset(t for t in info.tensors if t in workload.shared and t not in fused)
        return fused, pinned


def config_from_spec(spec) -> MapperConfig:
    """The knobs given under the spec's ``mapper:`` key (others keep their defaults)."""
    extra = dict(getattr(spec.mapper, "model_extra", None) or {})
    out = {}
    for key, kind in (
        ("imperfect", bool),
        ("imperfect_max_bound", int),
        ("spread_max_bound", int),
        ("fused_loops_once", bool),
    ):
        if key in extra:
            value = extra[key]
            if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
                want = "true or false" if kind is bool else "an integer"
                raise FusemapError(f"expected {want}, got {value!r}", spec.locate("mapper", key))
            if key.endswith("max_bound") and not 0 <= value <= MAX_IMPERFECT_BOUND:
                raise FusemapError(
                    f"expected an integer from 0 to {MAX_IMPERFECT_BOUND} (every tile size "
                    f"up to the bound is a candidate), got {value!r}",
                    spec.locate("mapper", key),
                )
            out[key] = value
    return MapperConfig(**out)


@dataclass(frozen=True)
class Holder:
    """One storage node of a template: ``tensor`` kept in ``component``.

    A *virtual* holder is no storage node: it marks how many loops a pmapping of a host
    exposes, so the Einsums around it may share them (:data:`HOSTING`)."""

    tensor: str
    component: str
    level: int  # depth on the arch path
    backing: bool
    virtual: bool = False


ROOT = "@root"
"""Tensor name of the virtual holder that stands for the top of the tree when every
tensor of an Einsum is fused (no top-memory backing node): loops go below a holder, so
without it nothing could sit above the first fused backing node (an elementwise Einsum
between two fused tensors, e.g. a softmax, would lose every shared loop)."""


@dataclass(frozen=True)
class SpatialLoop:
    """A spatial loop of a template: ``var`` over ``trips`` instances of a fanout."""

    component: str
    dimension: str
    level: int
    var: str
    trips: int
    slot: int = -1  # chain position (holder index, or len(holders) = compute) it sits above


@dataclass(frozen=True)
class Template:
    """A structure to be tiled: compute unit, storage nodes in order, spatial loops."""

    einsum: str
    compute: str
    compute_level: int
    holders: tuple[Holder, ...]
    spatial: tuple[SpatialLoop, ...]
    blocked: frozenset[tuple[int, str]] = field(default=frozenset())
    """(gap, var) pairs where no temporal loop may sit."""

    def describe(self) -> str:
        """One line, for statistics and debugging."""
        hs = " ".join(f"{h.component}:{h.tensor}{'*' if h.backing else ''}" for h in self.holders)
        sp = " ".join(f"{s.component}.{s.dimension}[{s.var}x{s.trips}]" for s in self.spatial)
        return f"{self.compute} | {hs} | {sp}"


def candidate_sizes(bound: int, imperfect: bool) -> list[int]:
    """Tile sizes a rank variable can take: its divisors (found from its prime factors, so
    the cost grows with their number, not with the bound), or every size when imperfect
    (only for small bounds, ``imperfect_max_bound``)."""
    if imperfect:
        return list(range(1, bound + 1))
    return list(divisors(bound))


def next_sizes(cands: np.ndarray, bound: int, imperfect: bool) -> tuple[np.ndarray, np.ndarray]:
    """CSR table: for each candidate tile, the tiles one loop below it may leave (itself,
    then its proper divisors ascending; below the whole rank, any smaller imperfect tile)."""
    offsets = [0]
    values: list[int] = []
    for c in cands:
        c = int(c)
        nxt = [c]
        if c == bound and imperfect:
            nxt += [int(d) for d in cands if d < c]
        else:
            nxt += list(divisors(c)[:-1])
        values += nxt
        offsets.append(len(values))
    return np.array(offsets, dtype=np.int64), np.array(values, dtype=np.int64)


def compute_units(info: EinsumInfo, arch: ArchEvaluator) -> list[str]:
    """Compute units enabled for the Einsum."""
    comps = arch.components(info.name)
    return [name for name, c in comps.items() if c.kind == "compute" and c.enabled]


def backing_choices(info: EinsumInfo, flat: FlatArch, tensor: str, fusion: bool) -> list[int]:
    """Arch levels that may back ``tensor``: the top memory, or (fusion) any allowed one."""
    memories = [i for i, c in enumerate(flat.path) if c.kind == "memory"]
    out = []
    for i in memories:
        comp = flat.path[i]
        if tensor not in comp.keep and tensor not in comp.may_keep:
            continue
        if any(tensor in flat.path[j].keep for j in memories if j < i):
            break  # a memory above must keep it
        out.append(i)
        if not fusion:
            break
    return out


def holder_sets(info: EinsumInfo, flat: FlatArch, backing: dict[str, int]) -> list[list[Holder]]:
    """Every choice of lower memories (``keep``: must, ``may_keep``: may) per tensor.

    A copy Einsum moves data from its input's backing node to its output's and does no
    computes: its tensors have their backing nodes only (another copy on the way could
    only add traffic; the format keeps ``keep`` out of copies)."""
    per_tensor: list[list[list[Holder]]] = []
    for t in info.tensors:
        b = backing[t]
        must: list[Holder] = [Holder(t, flat.path[b].name, b, True)]
        optional: list[Holder] = []
        for i in range(b + 1, len(flat.path) if not info.is_copy else 0):
            comp = flat.path[i]
            if comp.kind != "memory":
                continue
            if t in comp.keep:
                must.append(Holder(t, comp.name, i, False))
            elif t in comp.may_keep:
                optional.append(Holder(t, comp.name, i, False))
        choices = []
        for k in range(len(optional) + 1):
            for extra in itertools.combinations(optional, k):
                choices.append(sorted(must + list(extra), key=lambda h: h.level))
        per_tensor.append(choices)
    return [sum(combo, []) for combo in itertools.product(*per_tensor)]


def holder_orders(holders: list[Holder], flat: FlatArch) -> list[tuple[Holder, ...]]:
    """Chain orders: by level; any order inside a level (fixed for unbounded backing)."""
    by_level: dict[int, list[Holder]] = {}
    for h in holders:
        by_level.setdefault(h.level, []).append(h)
    per_level = []
    for level in sorted(by_level):
        group = by_level[level]
        fixed = [h for h in group if h.backing and math.isinf(flat.path[level].size)]
        free = [h for h in group if h not in fixed]
        per_level.append([tuple(fixed) + p for p in itertools.permutations(free)])
    return [sum(combo, ()) for combo in itertools.product(*per_level)]


def _dim_options(
    info: EinsumInfo, dim: SpatialInfo, comp_name: str, spread_bound: int = 0
) -> list[tuple[tuple[tuple[str, int], ...], int]]:
    """Every set of spatial loops one fanout dimension may carry, with the instances it
    uses: ((var, trips), ...), within the fanout, obeying ``reuse`` and ``loop_bounds``.
    Trips divide their variable, or are any count up to it when its bound is at most
    ``spread_bound`` (an uneven spread)."""
    tensors = set(info.tensors)
    allowed = []
    for v in info.rank_variables:
        if info.bounds[v] < 2:
            continue
        if any(info.relevance(t, v) != "irrelevant" for t in dim.reuse & tensors):
            continue
        allowed.append(v)
    options: list[tuple[tuple[tuple[str, int], ...], int]] = []

    def rec(i: int, used: int, acc: tuple) -> None:
        if i == len(allowed):
            if _bounds_ok(info, dim, acc, comp_name):
                options.append((acc, used))
            return
        v = allowed[i]
        rec(i + 1, used, acc)
        for trips in trip_counts(info.bounds[v], spread_bound):
            if 2 <= trips <= dim.fanout // used:
                rec(i + 1, used * trips, acc + ((v, trips),))

    rec(0, 1, ())
    return options


def trip_counts(bound: int, spread_bound: int) -> list[int]:
    """Instances a spatial loop over a rank of ``bound`` may use: its divisors, or every
    count up to it when the rank may be cut unevenly."""
    if bound <= spread_bound:
        return list(range(1, bound + 1))
    return list(divisors(bound))


def min_usage_need(info: EinsumInfo, dim: SpatialInfo) -> int:
    """Instances a dimension must use (``min_usage``; not applied to copy Einsums)."""
    if dim.min_usage <= 0 or info.is_copy:
        return 1
    return math.ceil(dim.min_usage * dim.fanout - 1e-9)


def _dim_assignments(
    info: EinsumInfo, dim: SpatialInfo, comp_name: str, spread_bound: int
) -> list[tuple[tuple[str, int], ...]]:
    """Spatial loops one fanout dimension may carry: (var, trips) tuples reaching its
    ``min_usage``, or, when none can, those of the highest usage any reaches (the
    format's fallback)."""
    options = _dim_options(info, dim, comp_name, spread_bound)
    need = min_usage_need(info, dim)
    if not any(used >= need for _, used in options):
        need = max((used for _, used in options), default=1)
    return [acc for acc, used in options if used >= need]


def min_usage_fallbacks(info: EinsumInfo, flat: FlatArch, spread_bound: int) -> list[str]:
    """One line per fanout dimension whose ``min_usage`` no spatial loop set reaches for
    ``info`` (the highest-usage mappings compete instead)."""
    out = []
    for comp in flat.path:
        for dim in comp.spatial:
            need = min_usage_need(info, dim)
            options = _dim_options(info, dim, comp.name, spread_bound)
            best = max((used for _, used in options), default=1)
            if best < need:
                out.append(
                    f"Einsum {info.name}: {comp.name}.{dim.name} can use at most {best} of "
                    f"its {dim.fanout} instances (min_usage {dim.min_usage:g} needs {need}); "
                    f"mappings using {best} competed"
                )
    return out


def _bounds_ok(info: EinsumInfo, dim: SpatialInfo, acc: tuple, comp_name: str) -> bool:
    """The dimension's ``loop_bounds`` constraints, on the trip counts of its loops."""
    if not dim.loop_bounds:
        return True
    trips = dict(acc)
    for lb in dim.loop_bounds:
        names = _var_set(info, lb.expression, comp_name)
        value = _bound_value(info, lb.value, comp_name)
        op = lb.operator.strip()
        if op.startswith("product"):
            vals = [math.prod(trips.get(v, 1) for v in names)]
            op = op[len("product") :]
        else:
            vals = [trips.get(v, 1) for v in names]
        for x in vals:
            if not _compare(x, op, value):
                return False
    return True


def _var_set(info: EinsumInfo, expr, comp_name: str) -> set[str]:
    names = frozenset(info.bounds)
    space = TensorSet(names, names, "rank_variable")
    try:
        found = evaluate_set_expression(expr, info.scope, kind="rank_variable", space=space)
        return set(found.items)
    except FusemapError as err:
        raise FusemapError(f"{comp_name}: loop_bounds expression {expr!r}: {err}") from None


def _bound_value(info: EinsumInfo, expr, comp_name: str) -> float:
    try:
        return float(evaluate(expr, info.scope))
    except (FusemapError, TypeError, ValueError) as err:
        raise FusemapError(f"{comp_name}: loop_bounds value {expr!r}: {err}") from None


def _compare(x: float, op: str, value: float) -> bool:
    ops = {
        "==": x == value,
        "<=": x <= value,
        ">=": x >= value,
        "<": x < value,
        ">": x > value,
        "!=": x != value,
    }
    if op not in ops:
        raise FusemapError(f"loop_bounds: unknown operator '{op}' (use ==, <=, >=, <, >, !=)")
    return ops[op]


def spatial_choices(
    info: EinsumInfo, flat: FlatArch, spread_bound: int = 0
) -> list[tuple[SpatialLoop, ...]]:
    """Every assignment of spatial loops to the fanouts on the path. Several loops over
    one variable divide its bound together, unless it may be cut unevenly (then the
    tiler keeps the tile shapes that give every loop its trips)."""
    dims = []
    for level, comp in enumerate(flat.path):
        for dim in comp.spatial:
            opts = _dim_assignments(info, dim, comp.name, spread_bound)
            loops = [
                tuple(SpatialLoop(comp.name, dim.name, level, v, n) for v, n in a) for a in opts
            ]
            dims.append(loops)
    out = []
    for combo in itertools.product(*dims):
        loops = tuple(sum(combo, ()))
        per_var: dict[str, int] = {}
        for s in loops:
            per_var[s.var] = per_var.get(s.var, 1) * s.trips
        if all(
            info.bounds[v] % n == 0 or info.bounds[v] <= spread_bound for v, n in per_var.items()
        ):
            out.append(loops)
    return out


def place_spatial(
    holders: tuple[Holder, ...], loops: tuple[SpatialLoop, ...]
) -> tuple[SpatialLoop, ...]:
    """Put each spatial loop above the first node at or below its fanout.

    Storage nodes are sorted by level, so every node below that slot lies at or below the
    fanout: in each tensor's view of the chain the spatial loop stays above every
    temporal loop written below it (no reordering, whatever those loops iterate)."""
    n = len(holders)
    slots: dict[int, int] = {}  # fanout level -> slot (loops share few levels)
    placed = []
    for s in loops:
        slot = slots.get(s.level)
        if slot is None:
            slot = slots[s.level] = next(
                (j for j, h in enumerate(holders) if h.level >= s.level and not h.virtual), n
            )
        placed.append(SpatialLoop(s.component, s.dimension, s.level, s.var, s.trips, slot))
    return tuple(placed)


def check_bounds(info: EinsumInfo, where: Location | None = None) -> None:
    """Refuse rank variables the mapper's 64-bit tile tables cannot hold."""
    for v, n in info.bounds.items():
        if n > MAX_SIZE:
            raise FusemapError(
                f"rank variable '{v}' has {n:,} values; the mapper handles at most "
                "2**62 (fusemap evaluate has no such limit)",
                where or Location(key=info.name),
            )


def fused_positions(template: Template, shared: frozenset[str], top: str) -> list[int]:
    """Places of the template's fused backing nodes (shared tensors backed below the top
    memory ``top``) and of its virtual hosting holder: the loops above them are shared."""
    return [
        p
        for p, h in enumerate(template.holders)
        if (h.virtual and h.tensor != ROOT)
        or (h.backing and h.tensor in shared and h.component != top)
    ]


def templates(
    info: EinsumInfo,
    arch: ArchEvaluator,
    config: MapperConfig,
    backing: dict[str, int] | None = None,
    compute: str | None = None,
    shared: frozenset[str] = frozenset(),
    pinned: frozenset[str] = frozenset(),
) -> list[Template]:
    """Every template of one Einsum (optionally with fixed backing levels / compute unit).

    With fusion, a ``shared`` tensor backed below the top memory is *fused*: only loops
    over rank variables that index it directly may sit above its backing node (they are
    shared with the Einsums it is exchanged with), temporal or spatial.
    ``pinned`` tensors (shared, but never fused) are backed in the top memory.
    """
    check_bounds(info)
    out = []
    # Equal holders, spatial loops and tuples of them are one object each: templates
    # pickle to a fraction (a worker sends 12,000 of GPT-3's Q back).
    seen: dict = {}

    def one(x):
        return seen.setdefault(x, x)

    units = [compute] if compute else compute_units(info, arch)
    for unit in units:
        flat = arch.flat(info.name, unit)
        if any(c.kind == "toll" for c in flat.path):
            raise FusemapError(
                f"Einsum {info.name}: the mapper does not support !Toll components yet "
                f"(on the path to {unit}); write the mapping by hand and use `fusemap evaluate`"
            )
        compute_level = len(flat.path) - 1
        backs = [backing] if backing else _backing_combos(info, flat, config.fusion, pinned)
        spatial = spatial_choices(info, flat, config.spread_bound)
        for b in backs:
            for hs in holder_sets(info, flat, b):
                orders = [_with_root(o, flat) for o in holder_orders(hs, flat)]
                for order in _with_hosting(orders, flat, info, config):
                    fused = (
                        _fused_blocks(order, flat, info, shared, config) if config.fusion else []
                    )
                    blocked = one(
                        frozenset(_dead_gaps(order, flat, info).union(*(gv for _, gv in fused)))
                    )
                    order = one(tuple(one(h) for h in order))
                    for loops in spatial:
                        placed = place_spatial(order, loops)
                        if not _spatial_may_share(placed, fused):
                            continue
                        placed = one(tuple(one(x) for x in placed))
                        out.append(Template(info.name, unit, compute_level, order, placed, blocked))
    return out


def _spatial_may_share(
    placed: tuple[SpatialLoop, ...], fused: list[tuple[int, set[tuple[int, str]]]]
) -> bool:
    """Whether every spatial loop above a fused node (or hosting holder) is over a rank
    variable its gap is open to: one the Einsums exchanging the tensor can share."""
    return all((s.slot - 1, s.var) not in gv for s in placed for p, gv in fused if s.slot <= p)


def _backing_combos(
    info: EinsumInfo, flat: FlatArch, fusion: bool, pinned: frozenset[str]
) -> list[dict[str, int]]:
    per = []
    for t in info.tensors:
        choices = backing_choices(info, flat, t, fusion and t not in pinned)
        if not choices:
            raise FusemapError(
                f"Einsum {info.name}: no memory on the path to {flat.compute} may keep tensor "
                f"{t} (check the keep / may_keep sets)"
            )
        per.append(choices)
    return [dict(zip(info.tensors, combo, strict=True)) for combo in itertools.product(*per)]


def _dead_gaps(
    holders: tuple[Holder, ...], flat: FlatArch, info: EinsumInfo
) -> set[tuple[int, str]]:
    """Gaps right above a backing node of an unbounded memory: loops there change nothing."""
    out = set()
    for j in range(len(holders) - 1):
        here, nxt = holders[j], holders[j + 1]
        if all(
            h.backing and not h.virtual and math.isinf(flat.path[h.level].size) for h in (here, nxt)
        ):
            out |= {(j, v) for v in info.rank_variables}
    return out


def _with_root(order: tuple[Holder, ...], flat: FlatArch) -> tuple[Holder, ...]:
    """``order`` with a virtual :data:`ROOT` holder first when no holder is in the top
    memory (so the loops above its first node have a gap)."""
    if not order or order[0].level == 0 or flat.path[0].kind != "memory":
        return order
    return (Holder(ROOT, flat.path[0].name, 0, True, virtual=True), *order)


def _with_hosting(
    orders: list[tuple[Holder, ...]], flat: FlatArch, info: EinsumInfo, config: MapperConfig
) -> list[tuple[Holder, ...]]:
    """The holder orders, and, for an Einsum that may host a tensor held tiled, each with
    a virtual holder after the top memory's backing nodes, at every place (the loops above
    it are the ones it shares with that tensor's users)."""
    if not config.fusion or not config.host_loops.get(info.name):
        return orders
    top = flat.path[0].name if flat.path[0].kind == "memory" else None
    mark = Holder(HOSTING, top or flat.path[0].name, 0, True, virtual=True)
    out = list(orders)
    for order in orders:
        lead = 0
        while lead < len(order) and order[lead].backing and order[lead].component == top:
            lead += 1
        for at in range(lead, len(order) + 1):
            out.append(order[:at] + (mark,) + order[at:])
    return out


def _fused_blocks(
    holders: tuple[Holder, ...],
    flat: FlatArch,
    info: EinsumInfo,
    shared: frozenset[str],
    config: MapperConfig,
) -> list[tuple[int, set[tuple[int, str]]]]:
    """Per fused backing node: (position, gaps above it closed to rank variables that do
    not index its tensor directly, or that its hosts cannot share). Above a virtual
    hosting holder only the variables the Einsum may share as a host."""
    top = flat.path[top_level(flat)].name
    out = []
    for p, h in enumerate(holders):
        if h.virtual and h.tensor == ROOT:
            continue
        if h.virtual:
            ok = config.host_loops.get(info.name, frozenset())
            bad = [v for v in info.rank_variables if v not in ok]
        elif h.backing and h.tensor in shared and h.component != top:
            bad = [
                v
                for v in info.rank_variables
                if info.relevance(h.tensor, v) != "relevant"
                or (h.tensor in config.held_loops and v not in config.held_loops[h.tensor])
            ]
        else:
            continue
        out.append((p, {(g, v) for g in range(p) for v in bad}))
    return out


def join_memories(workload, arch: ArchEvaluator, config: MapperConfig) -> frozenset[str]:
    """Bounded memories where reservations of different Einsums can be live at once:
    every memory at or above the deepest level below the top memory that may back a
    shared tensor (the top memory may be unable to keep it: ``keep: ~Intermediates``)."""
    if not config.fusion:
        return frozenset()
    out: set[str] = set()
    for info in workload.einsums:
        for unit in compute_units(info, arch):
            flat = arch.flat(info.name, unit)
            top = top_level(flat)
            deepest = -1
            for t in info.tensors:
                if config.may_fuse(t, workload):
                    levels = backing_choices(info, flat, t, True)
                    deepest = max([deepest] + [lv for lv in levels if lv != top])
            for c in flat.path[: deepest + 1]:
                if c.kind == "memory" and not math.isinf(c.size) and not _fits_all(c, workload):
                    out.add(c.name)
    return frozenset(out)


def _fits_all(comp, workload) -> bool:
    """Whether the memory holds every tensor of the workload whole at once (then no
    combination of reservations can overflow it)."""
    total = sum(
        t.size * comp.value_bits(name, t.bits_per_value) for name, t in workload.tensors.items()
    )
    return total <= comp.size * (1 + 1e-9)


def top_level(flat: FlatArch) -> int:
    """Position of the outermost memory on a path (where unfused tensors are backed)."""
    return next(i for i, c in enumerate(flat.path) if c.kind == "memory")


def top_memory(arch: ArchEvaluator, einsum: str) -> str:
    """The outermost memory (where unfused shared tensors are backed)."""
    return next(n for n, c in arch.components(einsum).items() if c.kind == "memory")
