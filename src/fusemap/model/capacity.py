"""Buffer capacity: reservations, their lifetimes in the LoopTree, and usage per memory.

Each (tensor, memory) holder reserves the tile at its reservation point. A backing
holder reserves right under its storage node; a non-backing one is lowered past the
loops that follow while they are relevant to the tensor (it stops above an irrelevant
loop, below a partially relevant one, and at the next storage node, the compute leaf or
a spatial loop of another component).

A persistent reservation holds the tiles of every instance (workload x Einsum
``n_instances``) at once. Lifetimes follow the tree: a reservation above a split is live
for the branches, in order, from the first to the last that use it, and for every branch
that shares with a user a loop below the reservation (the loop repeats the user's work
around that branch, so the tile stays). Usage of a memory is the largest sum of live
reservations over the branches.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from dataclasses import dataclass

from ..spec import mapping as M
from ..spec.errors import InvalidMappingError
from ..units import capacity_exact
from .chains import Chain, ComputeStep, HolderStep, LoopStep, linearize
from .reuse import projection_terms, tile_counter, tile_values
from .rules import lowered_past


@dataclass(frozen=True)
class ReservationInfo:
    """Space held in one memory for one tensor tile."""

    tensor: str
    memory: str
    bits: float
    einsum: str
    depth: int  # loops above the reservation point
    key: tuple[int, str, int]  # (storage node, tensor, mapping node it sits under)
    persistent: bool
    shape: tuple[int, ...] = ()  # the tile's extent along each rank of the tensor


def reservations(chain: Chain) -> list[ReservationInfo]:
    """The reservations of one chain (one Einsum).

    A reservation is placed on the chain as written (lowering stops at any storage
    node). A spatial loop written above its node whose fanout lies below the node's
    memory moves below the node in the tensor's view of the chain: the memory then holds
    the tiles of all the loop's instances at once, so the loop's rank variable spans
    that many tiles."""
    steps = chain.steps
    counter = tile_counter(chain, steps, frozenset())
    written = {id(x): j for j, x in enumerate(steps)}
    out: list[ReservationInfo] = []
    for tensor in chain.einsum.tensors:
        view = linearize(chain, tensor)
        every = chain.holders(tensor)
        holders = [(i, s) for i, s in every if not s.toll]
        entry = bool(every) and every[0][1].toll  # a toll backs it (tensor from outside)
        for k, (i, s) in enumerate(holders):
            r = i + 1
            if k > 0 or entry:
                r = _lowered(chain, steps, i, s)
            sizes = {v: d[0][0] for v, d in counter.dists[r].items()}
            below = view[next(j for j, x in enumerate(view) if x is s) + 1 :]
            for x in below:
                if isinstance(x, LoopStep) and written[id(x)] < i:  # moved below the node
                    dist = counter.dists[written[id(x)]][x.rank_variable]
                    trips = max(math.ceil(size / x.tile_shape) for size, _ in dist)
                    v = x.rank_variable
                    sizes[v] = min(sizes[v] * trips, chain.einsum.bounds[v])
            values = tile_values(chain, tensor, sizes)
            comp = chain.arch.component(s.component)
            bits = values * comp.value_bits(tensor, chain.workload_bits[tensor])
            depth = sum(isinstance(x, LoopStep) for x in steps[:r])
            key = (s.node_id, tensor, chain.node_ids[r - 1])
            persistent = s.persistent or tensor in chain.einsum.persistent and k == 0 and not entry
            if persistent:  # every instance's tile lives for the whole workload
                bits *= chain.instances
            ranks = chain.cache.get(("proj", tensor))  # filled by tile_values above
            if ranks is None:
                ranks = projection_terms(chain.einsum, tensor)
            shape = tuple(1 + sum(c * (sizes.get(v, 1) - 1) for v, c in rank) for rank in ranks)
            out.append(
                ReservationInfo(
                    tensor, s.component, bits, chain.einsum.name, depth, key, persistent, shape
                )
            )
    return out


def _lowered(chain: Chain, steps: list, i: int, holder: HolderStep) -> int:
    """Position (index of the first step below) of a non-backing holder's reservation."""
    kinds = []  # the relevances of the loops right below, down to a node or a fanout
    for s in steps[i + 1 :]:
        if isinstance(s, (HolderStep, ComputeStep)):
            break
        assert isinstance(s, LoopStep)
        if s.spatial and s.component != holder.component:
            break
        kinds.append(chain.einsum.relevance(holder.tensor, s.rank_variable))
    return i + 1 + lowered_past(kinds)


def memory_usage(
    chains: list[Chain], branches: list[list[M.MappingNode]]
) -> tuple[dict[str, float], list[ReservationInfo]]:
    """Peak bits per memory over the branches, and all reservations."""
    live, all_res = live_reservations(chains, branches)
    return peak_usage(live), all_res


def peak_usage(live: dict[int, list[ReservationInfo]]) -> dict[str, float]:
    """Peak bits per memory over the branches, from the live reservations of each."""
    usage: dict[str, float] = {}
    for b in live:
        per: dict[str, float] = {}
        for r in live[b]:
            per[r.memory] = per.get(r.memory, 0.0) + r.bits
        for m, bits in per.items():
            usage[m] = max(usage.get(m, 0.0), bits)
    return usage


def live_reservations(
    chains: list[Chain], branches: list[list[M.MappingNode]]
) -> tuple[dict[int, list[ReservationInfo]], list[ReservationInfo]]:
    """The reservations live during each branch (by index), and all reservations."""
    all_res: list[tuple[int, ReservationInfo]] = []
    for b, chain in enumerate(chains):
        all_res += [(b, r) for r in reservations(chain)]
    users: dict[tuple, list[int]] = {}
    size: dict[tuple, ReservationInfo] = {}
    for b, r in all_res:
        users.setdefault(r.key, []).append(b)
        if r.key not in size or r.bits > size[r.key].bits:
            size[r.key] = r
    through = _branches_through(branches)
    live: dict[int, list[ReservationInfo]] = {b: [] for b in range(len(chains))}
    for key, bs in users.items():
        res = size[key]
        for b in _lifetime(key[2], bs, branches, res.persistent, through):
            live[b].append(res)
    return live, [r for _, r in all_res]


def _branches_through(branches: list[list[M.MappingNode]]) -> dict[int, list[int]]:
    """``id(node)`` -> the branches (in order) whose root-to-leaf path holds the node."""
    out: dict[int, list[int]] = {}
    for b, nodes in enumerate(branches):
        for n in nodes:
            out.setdefault(id(n), []).append(b)
    return out


def _lifetime(
    anchor: int,
    users: list[int],
    branches: list[list[M.MappingNode]],
    persistent: bool,
    through: dict[int, list[int]] | None = None,
) -> list[int]:
    """Branches during which a reservation sitting under mapping node ``anchor`` is live.

    Among the branches that pass through the anchor: those from the first to the last
    user, and every branch that shares a loop below the reservation with a user (that
    loop repeats the user's work around the other branch, so the tile is kept). A
    branch shares some loop below the anchor with a user exactly when it passes through
    the user's first loop below the anchor (paths in a tree share prefixes), so the cost
    is that of the answer, not of the number of branches.
    """
    if persistent:
        return list(range(len(branches)))
    through = through if through is not None else _branches_through(branches)
    sharing = through[anchor]
    live = set(sharing[bisect_left(sharing, min(users)) : bisect_right(sharing, max(users))])
    q = next(i for i, n in enumerate(branches[users[0]]) if id(n) == anchor)
    for u in set(users):
        loop = next(
            (n for n in branches[u][q + 1 :] if isinstance(n, (M.Temporal, M.Spatial))), None
        )
        if loop is not None:
            live.update(through[id(loop)])
    return sorted(live)


def check_capacity(usage: dict[str, float], sizes: dict[str, float]) -> None:
    """Raise when a memory holds more than its size."""
    for memory, bits in usage.items():
        limit = sizes.get(memory, math.inf)
        if bits > limit * (1 + 1e-9):
            raise InvalidMappingError(
                f"{memory} overflows: the mapping needs {capacity_exact(bits)} but its size "
                f"is {capacity_exact(limit)}"
            )
