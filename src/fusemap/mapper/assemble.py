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

from ..spec import mapping as M
from ..spec.errors import FusemapError
from ..spec.resolve import WorkloadInfo
from .prefix import Compatibility


def assemble(
    order: list[str],
    chains: list[M.Mapping],
    compat: list[dict[str, Compatibility]],
    top: str,
    workload: WorkloadInfo,
) -> M.Mapping:
    """The full mapping of ``chains`` (one pmapping per Einsum, in ``order``)."""
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
        nodes = list(chain.nodes)
        k = 0
        while k < len(nodes) and _is_top(nodes[k], top):
            key = (nodes[k].tensors[0], nodes[k].component)  # type: ignore[attr-defined]
            if key not in seen:
                seen.add(key)
                root.append(nodes[k])
            k += 1
        rests.append(nodes[k:])
    body = _build(list(range(n)), 0, rests, share, fused)
    return M.Mapping(nodes=root + body)


def _is_top(node: M.MappingNode, top: str) -> bool:
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


def _build(members, d, rests, share, fused) -> list[M.MappingNode]:
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
        while i < len(nodes) and _is_fused_at(nodes[i], fused, d):
            t = nodes[i].tensors[0]  # type: ignore[attr-defined]
            if t not in seen:
                seen.add(t)
                common.append(nodes[i])
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
        kept: set[tuple[str, str]] = set()
        for j in run:
            nodes = rests[j]
            stop = _loop_index(nodes, d + 1) - 1
            for node in nodes[starts[j] : stop]:
                key = _copy_key(node)
                if key is not None and key in kept:
                    continue  # a copy an earlier user keeps here too: one node for both
                if key is not None:
                    kept.add(key)
                head.append(node)
        loop = rests[run[0]][_loop_index(rests[run[0]], d + 1) - 1]
        children.append(head + [loop] + _build(run, d + 1, rests, share, fused))
    if len(children) == 1:
        return common + children[0]
    return common + [M.Sequential(nodes=[M.Nested(nodes=c) for c in children])]


def _copy_key(node: M.MappingNode) -> tuple[str, str] | None:
    """(tensor, memory) of a one-tensor storage node (None for anything else)."""
    if isinstance(node, M.Storage) and len(node.tensors) == 1:
        return (node.tensors[0], node.component)
    return None


def _is_fused_at(node: M.MappingNode, fused: dict[str, tuple[int, str]], d: int) -> bool:
    """Whether ``node`` is the backing node of a tensor fused under ``d`` loops (a copy of
    that tensor in another memory right below it is the Einsum's own, not shared)."""
    return (
        isinstance(node, M.Storage)
        and len(node.tensors) == 1
        and fused.get(node.tensors[0]) == (d, node.component)
    )
