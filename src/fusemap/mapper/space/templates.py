"""The single-Einsum mapspace: templates (structure) and the rules for their tile shapes.

A *template* fixes everything but tile shapes: the compute unit, which memory holds each
tensor (one storage node per tensor, sorted by memory level, any order inside a level),
and the spatial loops (which rank variable, how many instances, on which fanout:
:mod:`.spatial`). The tile shapes are then chosen by :mod:`fusemap.mapper.tiling.tiler`
(the sizes it tries: :mod:`.tiles`).

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
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field

from ...spec import limits
from ...spec.arch_eval import ArchEvaluator, FlatArch
from ...spec.errors import FusemapError, Location
from ...spec.resolve import EinsumInfo
from .config import MapperConfig
from .divisors import MAX_SIZE
from .prefix import HOSTING
from .spatial import SpatialLoop, spatial_choices


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


def template_key(t: Template) -> tuple:
    """What identifies a template in every process (no set order, no slot numbers)."""
    holders = tuple((h.tensor, h.component, h.level, h.backing, h.virtual) for h in t.holders)
    spatial = tuple((s.component, s.dimension, s.var, s.trips) for s in t.spatial)
    return (t.compute, holders, spatial)


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


HOLDINGS_TRIED = 100_000
"""Holdings :func:`backing_levels` tries per level before keeping it unproven."""

_BACKABLE: weakref.WeakKeyDictionary[ArchEvaluator, dict[tuple, bool]] = weakref.WeakKeyDictionary()


def backing_levels(info: EinsumInfo, flat: FlatArch, arch: ArchEvaluator, tensor: str) -> list[int]:
    """Levels that back ``tensor`` (fused) in some template: :func:`backing_choices`,
    less those no holding the memories' rules accept (``keep: ~MainMemory``: an
    intermediate MainMemory does not hold is in the buffer, so never backed below it).

    The choices are bounds where a rule names memories; what other Einsums can leave
    beside this one (:func:`join_memories`, ``held_amounts``) is read from these levels,
    and a level no template has would make every search keep that memory's reservation
    as a criterion for nothing (the 2-matmul chain on tpu_v4i: 87,601 EDP rows for
    MM0 instead of 483)."""
    levels = backing_choices(info, flat, tensor, True)
    if not any(c.keep_rule is not None for c in flat.path):
        return levels
    memo = _BACKABLE.setdefault(arch, {})
    out = []
    for level in levels:
        key = (info.name, flat.compute, tensor, level)
        if key not in memo:
            memo[key] = _some_holding_backs(info, flat, arch, tensor, level)
        if memo[key]:
            out.append(level)
    return out


def _some_holding_backs(
    info: EinsumInfo, flat: FlatArch, arch: ArchEvaluator, tensor: str, level: int
) -> bool:
    """Whether some holding with ``tensor`` backed at ``level`` is accepted by the rules
    (past :data:`HOLDINGS_TRIED` holdings tried, yes: keeping a level only costs speed)."""
    backs = [b for b in _backing_combos(info, flat, True, frozenset()) if b[tensor] == level]
    tried = 0
    for hs in itertools.islice(_holdings(info, flat, backs), HOLDINGS_TRIED):
        if _accepted(arch, info, flat, hs):
            return True
        tried += 1
    return tried >= HOLDINGS_TRIED


def _holdings(
    info: EinsumInfo, flat: FlatArch, backs: list[dict[str, int]]
) -> Iterator[list[Holder]]:
    """Every holder set of every backing choice in ``backs``."""
    for b in backs:
        yield from holder_sets(info, flat, b)


def _accepted(arch: ArchEvaluator, info: EinsumInfo, flat: FlatArch, hs: list[Holder]) -> bool:
    """Whether the rules naming memories on the path accept the holders ``hs``."""
    return arch.allows_holding(info.name, flat.path, ((h.component, h.tensor) for h in hs))


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
        ruled = any(c.keep_rule is not None for c in flat.path)
        for hs in _holdings(info, flat, backs):
            if ruled and not _accepted(arch, info, flat, hs):
                continue
            orders = [_with_root(o, flat) for o in holder_orders(hs, flat)]
            for order in _with_hosting(orders, flat, info, config):
                fused = _fused_blocks(order, flat, info, shared, config) if config.fusion else []
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
                    if len(out) > limits.current().templates:
                        raise _too_many(info, arch)
    return out


def _too_many(info: EinsumInfo, arch: ArchEvaluator) -> FusemapError:
    """The refusal of a mapspace too large to tile (the limit ``templates``), at the
    Einsum in the workload file."""
    what = (
        f"more than {limits.current().templates:,} templates (which memory holds each "
        "tensor, their order, the spatial loops); narrow the space with "
        "`tensors: {keep: ..., may_keep: ...}` on the memories"
    )
    return FusemapError(limits.exceeded("templates", what), arch.spec.locate_einsum(info.index))


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
                    levels = backing_levels(info, flat, arch, t)
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
