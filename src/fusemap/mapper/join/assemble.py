"""One LoopTree from the joined pmappings of every Einsum.

Einsums ``j`` and ``j+1`` share their first ``b_j`` loops (the loops above the deepest
fused tensor they exchange). The tree is built interval by interval: the Einsums sharing
loops ``1..d`` get one node for each of those loops; under loop ``d`` come the fused
backing nodes whose tiles live at that depth (one node for all their users), then a
``!Sequential`` split into the runs of Einsums that share loop ``d+1`` (which go on the
same way) and the single Einsums that do not (the rest of their own chain). The top
memory's backing nodes sit at the root. Every Einsum's root-to-leaf chain is exactly its
pmapping, other Einsums' nodes aside, so the model counts it the same: the join never
pairs a pmapping keeping its own copy of a tensor above a loop it shares with another
user of that tensor (that copy would be on the other user's path too; see join.py),
unless both keep the same copy there (a shared copy, ``copies.py``): the run's gap
then holds it once, where the first of them puts it.
"""

from __future__ import annotations

from typing import TypeGuard

from ...spec import mapping as M
from ...spec.errors import FusemapError
from ...spec.resolve import WorkloadInfo
from ..space.prefix import Compatibility


def assemble(
    order: list[str],
    chains: list[M.Mapping],
    compat: list[dict[str, Compatibility]],
    top: str,
    workload: WorkloadInfo,
    levels: dict[str, int],
) -> M.Mapping:
    """The full mapping of ``chains`` (one pmapping per Einsum, in ``order``); ``levels``:
    each memory's place in an order that has every path's memories top-down."""
    users = {t: [i for i, e in enumerate(order) if t in workload.einsum(e).tensors]
             for t in workload.tensors}  # fmt: skip
    n = len(order)
    share = [0] * max(n - 1, 0)
    fused: dict[str, tuple[int, str]] = {}  # tensor -> (loops above its backing node, memory)
    for c in compat:
        for t, x in c.items():
            if x.backing != top:
                fused[t] = (x.depth, x.backing)
    for j in range(n - 1):
        share[j] = max(
            (d for t, (d, _) in fused.items() if users[t][0] <= j < users[t][-1]), default=0
        )
    root: list[M.MappingNode] = []
    rests: list[list[M.MappingNode]] = []
    seen: set[tuple[str, str]] = set()
    for chain in chains:
        nodes: list[M.MappingNode] = list(chain.nodes)
        k = 0
        while k < len(nodes):
            node = nodes[k]
            if not _is_top(node, top):
                break
            key = (node.tensors[0], node.component)
            if key not in seen:
                seen.add(key)
                root.append(node)
            k += 1
        rests.append(nodes[k:])
    body = _build(list(range(n)), 0, rests, share, fused, levels)
    return M.Mapping(nodes=root + body)


def _is_top(node: M.MappingNode, top: str) -> TypeGuard[M.Storage]:
    return isinstance(node, M.Storage) and node.component == top


def _loop_index(nodes: list[M.MappingNode], d: int) -> int:
    """Position just after the ``d``-th loop, temporal or spatial (0: the start)."""
    if d == 0:
        return 0
    seen = 0
    for i, node in enumerate(nodes):
        if isinstance(node, (M.Temporal, M.Spatial)):
            seen += 1
            if seen == d:
                return i + 1
    raise FusemapError(f"internal: a pmapping has fewer than {d} loops where it shares {d}")


def _build(
    members: list[int],
    d: int,
    rests: list[list[M.MappingNode]],
    share: list[int],
    fused: dict[str, tuple[int, str]],
    levels: dict[str, int],
) -> list[M.MappingNode]:
    """Nodes under loop ``d`` for Einsums ``members`` (which share loops 1..d)."""
    if len(members) == 1:
        j = members[0]
        return rests[j][_loop_index(rests[j], d) :]
    common: list[M.MappingNode] = []
    seen: set[str] = set()
    starts: dict[int, int] = {}
    for j in members:
        nodes = rests[j]
        i = _loop_index(nodes, d)
        while i < len(nodes):
            node = nodes[i]
            if not _is_fused_at(node, fused, d):
                break
            t = node.tensors[0]
            if t not in seen:
                seen.add(t)
                common.append(node)
            i += 1
        starts[j] = i
    runs: list[list[int]] = [[members[0]]]
    for j in members[1:]:
        if share[j - 1] >= d + 1:
            runs[-1].append(j)
        else:
            runs.append([j])
    children = []
    for run in runs:
        if len(run) == 1:
            j = run[0]
            children.append(rests[j][starts[j] :])
            continue
        head: list[M.MappingNode] = []
        for j in run:
            stop = _loop_index(rests[j], d + 1) - 1
            _merge_gap(head, rests[j][starts[j] : stop], levels)
        loop = rests[run[0]][_loop_index(rests[run[0]], d + 1) - 1]
        children.append(head + [loop] + _build(run, d + 1, rests, share, fused, levels))
    if len(children) == 1:
        return common + children[0]
    return common + [M.Sequential(nodes=[M.Nested(nodes=c) for c in children])]


def _merge_gap(
    head: list[M.MappingNode], nodes: list[M.MappingNode], levels: dict[str, int]
) -> None:
    """Add one user's gap ``nodes`` to a run's ``head`` (the shared path's nodes there),
    keeping the order of each user's nodes: memory by memory, top-down (every pmapping
    has its memories so), and in each memory, a copy an earlier user keeps there too is
    one node for both (a shared copy, ``copies.py``); the user's nodes before it go
    right before that node, so its chain sees them above the copy as in its pmapping,
    and its others after all. The other users do not see them (no chain of theirs holds
    those tensors). The join keeps its shared copies of a memory in the head's order
    (``exposure._places``)."""
    per: dict[str, list[M.MappingNode]] = {}
    for node in head:
        per.setdefault(_memory(node), []).append(node)
    mine: dict[str, list[M.MappingNode]] = {}
    for node in nodes:
        mine.setdefault(_memory(node), []).append(node)
    for memory, own in mine.items():
        _merge_memory(per.setdefault(memory, []), own)
    head[:] = [n for m in sorted(per, key=levels.__getitem__) for n in per[m]]


def _memory(node: M.MappingNode) -> str:
    """The component of a node of a gap (between two loops a pmapping has storage nodes
    only)."""
    assert isinstance(node, (M.Storage, M.Toll)), node
    return node.component


def _merge_memory(head: list[M.MappingNode], nodes: list[M.MappingNode]) -> None:
    """:func:`_merge_gap` within one memory."""
    pending: list[M.MappingNode] = []
    last = -1
    for node in nodes:
        key = _copy_key(node)
        at = -1 if key is None else next((i for i, n in enumerate(head) if _copy_key(n) == key), -1)
        if key is None or at < 0:
            pending.append(node)
            continue
        if at < last:
            raise FusemapError(f"internal: shared copies of {key[0]} in another order")
        head[at:at] = pending
        last, pending = at + len(pending), []
    head.extend(pending)


def _copy_key(node: M.MappingNode) -> tuple[str, str] | None:
    """(tensor, memory) of a one-tensor storage node (None for anything else)."""
    if isinstance(node, M.Storage) and len(node.tensors) == 1:
        return (node.tensors[0], node.component)
    return None


def _is_fused_at(
    node: M.MappingNode, fused: dict[str, tuple[int, str]], d: int
) -> TypeGuard[M.Storage]:
    """Whether ``node`` is the backing node of a tensor fused under ``d`` loops (a copy of
    that tensor in another memory right below it is the Einsum's own, not shared)."""
    return (
        isinstance(node, M.Storage)
        and len(node.tensors) == 1
        and fused.get(node.tensors[0]) == (d, node.component)
    )
