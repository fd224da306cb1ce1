"""Per-tensor access counting along one chain (the counting rules of §2).

Exact tiling. Each rank variable carries a *tile distribution*: how many tiles of each
size the loops above a point have cut its range into. A loop with step ``s`` turns a
tile of size ``T`` into ``T // s`` tiles of size ``s`` plus one of ``T % s``. Counts are
sums over these tiles, so a tile shape that does not divide its rank (imperfect
factorization) is counted exactly, the same way for every tensor, relevant or not.

Spatial loops count like temporal ones for totals. For per-instance counts (latency)
and for multicast / spatial reduction, a spatial loop keeps one tile per parent tile
(``one`` mode): its instances work in parallel, or share one transfer. A shared transfer
is one read (write) at the parent, but each instance of a holder below still writes
(reads) its own copy, and each starts its own partial sums (its first fills are skipped).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..spec.resolve import EinsumInfo
from .chains import Chain, ComputeStep, HolderStep, LoopStep, linearize
from .rules import (
    box_values,
    holder_reads,
    holder_writes,
    parent_reads,
    parent_writes,
    shares_parent_transfer,
    skips_first_reads,
    starts_partial_sums,
)

Dist = tuple[tuple[int, int], ...]
"""((tile size, number of tiles), ...) for one rank variable."""


def split(dist: Dist, step: int, one: bool) -> Dist:
    """The distribution below a loop with ``step`` (``one``: keep one tile per parent)."""
    out: dict[int, int] = {}
    for size, count in dist:
        if one:
            s = min(step, size)
            out[s] = out.get(s, 0) + count
            continue
        q, r = divmod(size, step)
        if q:
            out[step] = out.get(step, 0) + count * q
        if r:
            out[r] = out.get(r, 0) + count
    return tuple(sorted(out.items(), reverse=True))


def n_tiles(dist: Dist) -> int:
    """Number of tiles."""
    return sum(c for _, c in dist)


@dataclass
class TensorTraffic:
    """Values moved for one tensor, per component (``reads``/``writes`` at that component)."""

    tensor: str
    reads: dict[str, float] = field(default_factory=dict)
    writes: dict[str, float] = field(default_factory=dict)

    def add(self, kind: str, component: str, value: float) -> None:
        book = self.reads if kind == "read" else self.writes
        book[component] = book.get(component, 0.0) + value


class TileCounter:
    """Tile distributions along a linearized chain, for a chosen set of ``one``-mode loops."""

    def __init__(self, chain: Chain, steps: list, one_mode: frozenset[int]):
        self.bounds = chain.einsum.bounds
        self.dists: list[dict[str, Dist]] = []
        current: dict[str, Dist] = {v: ((b, 1),) for v, b in self.bounds.items()}
        for s in steps:
            self.dists.append(current)
            if isinstance(s, LoopStep):
                current = dict(current)
                current[s.rank_variable] = split(
                    current[s.rank_variable], s.tile_shape, s.spatial and s.node_id in one_mode
                )
        self.dists.append(current)


def tile_counter(chain: Chain, steps: list, one_mode: frozenset[int]) -> TileCounter:
    """A (cached) :class:`TileCounter`: tensors often see the same linearized chain."""
    key = (tuple(id(s) for s in steps), one_mode)
    found = chain.cache.get(key)
    if found is None:
        found = chain.cache[key] = TileCounter(chain, steps, one_mode)
    return found


def projection_terms(info: EinsumInfo, tensor: str) -> list[list[tuple[str, int]]]:
    """Per rank of ``tensor``: (rank variable, |coefficient|) of its projection."""
    return [[(v, abs(c)) for v, c in e.coeffs] for e in info.projections[tensor].values()]


def tile_values(chain: Chain, tensor: str, sizes: dict[str, int]) -> float:
    """Dense box occupancy of ``tensor`` when each rank variable spans ``sizes[v]``.

    Each rank spans ``1 + sum(|c| * (size - 1))`` (halos counted, no overlap reuse).
    """
    key = ("proj", tensor)
    ranks = chain.cache.get(key)
    if ranks is None:
        ranks = chain.cache[key] = projection_terms(chain.einsum, tensor)
    return box_values(ranks, sizes)


def tensor_variables(chain: Chain, tensor: str) -> list[str]:
    """Rank variables that index ``tensor`` (relevant or partially relevant)."""
    key = ("vars", tensor)
    found = chain.cache.get(key)
    if found is None:
        found = []
        for expr in chain.einsum.projections[tensor].values():
            found += [v for v in expr.variables if v not in found]
        chain.cache[key] = found
    return found


def fill_count(chain: Chain, tensor: str, dists: dict[str, Dist]) -> float:
    """Values delivered into all tiles at a point: sum over tiles of the tile's size."""
    used = tensor_variables(chain, tensor)
    if all(len(dists[v]) == 1 for v in used):  # perfectly factorized: one tile size
        total = tile_values(chain, tensor, {v: dists[v][0][0] for v in used})
        for v in used:
            total *= dists[v][0][1]
    else:
        total = 0.0
        for combo in itertools.product(*(dists[v] for v in used)):
            sizes = {v: size for v, (size, _) in zip(used, combo, strict=True)}
            total += math.prod(c for _, c in combo) * tile_values(chain, tensor, sizes)
    for v, d in dists.items():
        if v not in used:
            total *= n_tiles(d)
    return total


def count_tensor(
    chain: Chain,
    tensor: str,
    may_reuse: dict[tuple[str, str], frozenset[str]],
    one_mode: frozenset[int] = frozenset(),
    skip_output: dict[str, bool] | None = None,
    directions: dict[str, str] | None = None,
) -> TensorTraffic:
    """Reads and writes of ``tensor`` at every component of the chain, in values.

    ``one_mode``: spatial loops counted per instance. ``may_reuse``: (component, dim) ->
    tensors that may be multicast / reduced. ``skip_output``: component ->
    skip_initial_output_write. ``directions``: toll component -> direction for the tensor.

    Skipped first reads of an output: a holder (or the compute leaf) whose own flag is
    set does not fetch the initial value of an output tile; its parent sends it anyway
    when the parent's flag is off (the parent serves initial values to its children).
    Every instance of a spatial loop that does not index the output starts its own
    partial sums, so its first fills are skipped too; without a reduction network
    (``may_reuse``) their partial sums all land in the parent as writes.
    """
    steps = linearize(chain, tensor)
    skip_output = skip_output or {}
    directions = directions or {}
    holders = [
        (i, s)
        for i, s in enumerate(steps)
        if isinstance(s, (HolderStep, ComputeStep)) and not (isinstance(s, HolderStep) and s.toll)
    ]
    # Tolls above every holder back the tensor: it enters and leaves the arch through
    # them (a CiM macro's row drivers and ADCs), so the top holder fills through them.
    top = holders[0][0] if holders else len(steps)
    entry = [s for s in steps[:top] if isinstance(s, HolderStep) and s.toll]
    flows = _holder_flows(chain, steps, holders, tensor, may_reuse, one_mode, skip_output, entry)
    fills, backs, skips, own_skips, ratios = flows
    traffic = TensorTraffic(tensor)
    for toll in entry:  # what the top holder fetches from, and sends out of, the arch
        _charge_toll(traffic, toll, directions, fills[0] - skips[0], backs[0])
    for k, (i, s) in enumerate(holders):
        if isinstance(s, ComputeStep):
            break
        child = k + 1
        own = ratios[k]  # this holder's own fills / write-backs, all instances
        # What this holder sends down: the child's fills, less the initial values it
        # skips, unless this holder serves initial values (its own flag is off).
        sent = parent_reads(fills[child], skips[child], skip_output.get(s.component, True))
        traffic.add(
            "write",
            s.component,
            holder_writes(fills[k], skips[k], own, own_skips[k]) + parent_writes(backs[child]),
        )
        traffic.add("read", s.component, holder_reads(backs[k], own) + sent)
        # Tolls between this holder and its child charge what crosses them.
        for j in range(i + 1, holders[child][0]):
            step = steps[j]
            if isinstance(step, HolderStep) and step.toll:
                _charge_toll(traffic, step, directions, sent, backs[child])
    return traffic


def _holder_flows(
    chain: Chain,
    steps: list,
    holders: list,
    tensor: str,
    may_reuse: dict[tuple[str, str], frozenset[str]],
    one_mode: frozenset[int],
    skip_output: dict[str, bool],
    entry: list,
) -> tuple[list[float], list[float], list[float], list[float], list[float]]:
    """Parent-directed traffic of each holder (and the compute leaf): the values it
    receives (fills), writes back, and skips of its first reads, per transfer and of
    all its instances; and its ratio. Under a multicast / reduction loop the parent
    sends (receives) one copy, but every instance of the holder still writes (reads)
    its own: the ratio holds that factor."""
    info = chain.einsum
    is_output = tensor in info.outputs
    copy_output = info.is_copy and is_output
    counter = tile_counter(chain, steps, one_mode)
    multicasts = [
        _multicast_loops(steps, i, holders, k, tensor, info, may_reuse)
        for k, (i, _) in enumerate(holders)
    ]
    fills: list[float] = []
    backs: list[float] = []
    skips: list[float] = []
    own_skips: list[float] = []
    ratios: list[float] = []
    for k, (i, s) in enumerate(holders):
        backing = k == 0 and isinstance(s, HolderStep) and not entry
        own = fill_count(chain, tensor, counter.dists[i])
        multicast = multicasts[k]
        if multicast and not backing:
            dists = tile_counter(chain, steps, one_mode | multicast).dists[i]
            amount = fill_count(chain, tensor, dists)
        else:
            amount = own
        ratios.append(own / amount if amount else 1.0)
        # First visits: per shared transfer (the parent's), and of all its instances.
        first = own_first = 0.0
        if is_output:
            first = first_visits(chain, steps, i, tensor, one_mode | multicast)
            own_first = first_visits(chain, steps, i, tensor, one_mode) if multicast else first
        if isinstance(s, ComputeStep):
            fills.append(0.0 if copy_output else amount)
            backs.append(amount if is_output else 0.0)
            skip = skips_first_reads(is_output, skip_output.get(s.component, True), copy_output)
            skips.append(first if skip else 0.0)
            own_skips.append(own_first if skip else 0.0)
            continue
        if backing:
            fills.append(0.0)
            backs.append(0.0)
            skips.append(0.0)
            own_skips.append(0.0)
            continue
        fills.append(amount)
        backs.append(amount if is_output else 0.0)
        skip = skips_first_reads(is_output, skip_output.get(s.component, True))
        skips.append(first if skip else 0.0)
        own_skips.append(own_first if skip else 0.0)
    return fills, backs, skips, own_skips, ratios


def _charge_toll(
    traffic: TensorTraffic, toll: HolderStep, directions: dict[str, str], down: float, up: float
) -> None:
    """A toll reads every value that crosses it in its direction(s)."""
    d = directions.get(toll.component, "up_and_down")
    crossing = 0.0
    if d in ("down", "up_and_down"):
        crossing += down
    if d in ("up", "up_and_down"):
        crossing += up
    traffic.add("read", toll.component, crossing)


def first_visits(chain: Chain, steps: list, i: int, tensor: str, one: frozenset[int]) -> float:
    """Output values at ``steps[i]`` whose first visit skips its read: the values
    sent into the tiles of the distinct output tiles (only relevant loops multiply),
    for each instance of the spatial loops above that do not index ``tensor`` fully
    (each starts its own partial sums), each instance with the tile it really gets.
    Loops in ``one`` (per-instance counts, or a multicast the holder shares) keep one
    tile per parent tile, and so do temporal loops over variables the tensor does not
    index fully: an instance that an earlier iteration used starts nothing new, and
    the first iteration (the largest tile) uses every instance a later one does. So
    these are the fills of some of the real tiles: never more than the fills."""
    key = ("first", tuple(id(x) for x in steps[:i]), tensor, one)
    found = chain.cache.get(key)
    if found is not None:
        return found
    info = chain.einsum
    dists: dict[str, Dist] = {v: ((b, 1),) for v, b in info.bounds.items()}
    for s in steps[:i]:
        if isinstance(s, LoopStep):
            v = s.rank_variable
            spread = s.spatial and s.node_id not in one
            starts = starts_partial_sums(info.relevance(tensor, v))
            dists[v] = split(
                dists[v], s.tile_shape, not spread if starts else s.spatial and not spread
            )
    total = fill_count(chain, tensor, dists)  # the values sent into those tiles
    chain.cache[key] = total
    return total


def _multicast_loops(
    steps: list,
    i: int,
    holders: list,
    k: int,
    tensor: str,
    info,
    may_reuse: dict[tuple[str, str], frozenset[str]],
) -> frozenset[int]:
    """Spatial loops whose instances share this holder's parent traffic (multicast/reduce).

    A spatial loop qualifies when it is irrelevant to the tensor, the tensor is in its
    dimension's ``may_reuse``, and this holder is the first holder below the loop.
    """
    above = holders[k - 1][0] if k > 0 else -1
    out = set()
    for j in range(above + 1, i):
        s = steps[j]
        if (
            isinstance(s, LoopStep)
            and s.spatial
            and shares_parent_transfer(
                info.relevance(tensor, s.rank_variable),
                tensor,
                may_reuse.get((s.component or "", s.dimension or ""), frozenset()),
            )
        ):
            out.add(s.node_id)
    return frozenset(out)


def operations(chain: Chain, one_mode: Iterable[int] = ()) -> float:
    """Compute operations (per instance when spatial loops are in ``one_mode``)."""
    if chain.einsum.is_copy:
        return 0.0
    counter = tile_counter(chain, chain.steps, frozenset(one_mode))
    return math.prod(n_tiles(d) for d in counter.dists[-1].values())


def fanout_usage(chain: Chain) -> dict[tuple[str, str], int]:
    """Instances used per (component, dimension): product of its spatial loops' trip counts."""
    counter = tile_counter(chain, chain.steps, frozenset())
    used: dict[tuple[str, str], int] = {}
    for i, s in enumerate(chain.steps):
        if isinstance(s, LoopStep) and s.spatial:
            trips = max(
                math.ceil(size / s.tile_shape) for size, _ in counter.dists[i][s.rank_variable]
            )
            key = (s.component or "", s.dimension or "")
            used[key] = used.get(key, 1) * trips
    return used
