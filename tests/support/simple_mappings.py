"""A plain, valid LoopTree mapping for any arch and Einsum (for tests of arches the mapper
cannot map yet, e.g. the compute-in-memory ones whose peripherals are !Toll nodes).

Top to bottom: one temporal loop per rank variable whose tile is what the array takes at
once, then the arch's components in order (a !Toll node for the tensors a toll keeps, a
!Storage node for those a memory keeps, the component's spatial loops), then tile-1
temporal loops for what is left, then the compute leaf. Each fanout dimension takes the
rank variable with the most instances (the largest divisor of what is left, at most the
fanout) among those its ``reuse`` allows, preferring variables that index none of the
tensors it may reuse (true multicast / reduction).
"""

from __future__ import annotations

from fusemap.spec import mapping as M
from fusemap.spec.arch_eval import ArchEvaluator


def _largest_divisor(n: int, limit: int) -> int:
    return max(d for d in range(1, min(n, limit) + 1) if n % d == 0)


def einsum_branch(arch: ArchEvaluator, einsum: str) -> list[M.MappingNode]:
    """Nodes of one Einsum's branch, down to its !Compute leaf."""
    info = arch.workload.einsum(einsum)
    comps = arch.components(einsum)
    compute = next(c.name for c in arch.arch.computes() if comps[c.name].enabled)
    flat = arch.flat(einsum, compute)
    tensors = set(info.tensors)
    left = {v: info.bounds[v] for v in info.rank_variables}
    plan: list[tuple[str, str, str, int]] = []  # (component, dim, variable, trips)
    for comp in flat.path:
        for dim in comp.spatial:
            best = None
            for v in info.rank_variables:
                if any(info.relevance(t, v) != "irrelevant" for t in dim.reuse & tensors):
                    continue
                trips = _largest_divisor(left[v], dim.fanout)
                multicast = all(info.relevance(t, v) == "irrelevant" for t in dim.may_reuse)
                if trips > 1 and (best is None or (multicast, trips) > best[0]):
                    best = ((multicast, trips), v, trips)
            if best is not None:
                _, v, trips = best
                left[v] //= trips
                plan.append((comp.name, dim.name, v, trips))
    at_once = {v: info.bounds[v] // left[v] for v in info.rank_variables}
    nodes: list[M.MappingNode] = [
        M.Temporal(rank_variable=v, tile_shape=at_once[v])
        for v in info.rank_variables
        if info.bounds[v] > at_once[v]
    ]
    tile = dict(at_once)
    for comp in flat.path:
        kept = sorted(comp.keep & tensors)
        if comp.kind == "toll" and kept:
            nodes.append(M.Toll(tensors=kept, component=comp.name))
        elif comp.kind == "memory" and kept:
            nodes.append(M.Storage(tensors=kept, component=comp.name))
        for name, dim, v, trips in plan:
            if name == comp.name:
                tile[v] //= trips
                nodes.append(
                    M.Spatial(rank_variable=v, tile_shape=tile[v], name=dim, component=name)
                )
    nodes += [M.Temporal(rank_variable=v, tile_shape=1) for v in info.rank_variables if tile[v] > 1]
    nodes.append(M.Compute(einsum=einsum, component=compute))
    return nodes


def simple_mapping(arch: ArchEvaluator, einsums: list[str] | None = None) -> M.Mapping:
    """A mapping of the given Einsums (default: all), one after the other."""
    names = einsums or [e.name for e in arch.workload.einsums]
    branches = [einsum_branch(arch, n) for n in names]
    if len(branches) == 1:
        return M.Mapping(nodes=branches[0])
    return M.Mapping(nodes=[M.Sequential(nodes=[M.Nested(nodes=b) for b in branches])])
