"""An independent check that a LoopTree respects the data dependencies of its workload.

Written against the assembled mapping (not the join's state), so it can judge what the
mapper returns with and without its dependency rules: two Einsums share exactly the
temporal loops on the common part of their root-to-compute paths.
"""

from __future__ import annotations

from fusemap.spec.mapping import Branching, Compute, Mapping, Split, Temporal
from fusemap.spec.resolve import WorkloadInfo


def loop_paths(mapping: Mapping) -> dict[str, list[Temporal]]:
    """Einsum -> the temporal loop nodes above its compute node, root first."""
    out: dict[str, list[Temporal]] = {}

    def walk(node, above: list[Temporal]) -> None:
        if isinstance(node, Split):
            for branch in node.nodes:
                walk(branch, above)
        elif isinstance(node, Branching):
            chain = list(above)
            for child in node.nodes:
                if isinstance(child, Temporal):
                    chain.append(child)
                elif isinstance(child, Compute):
                    out[child.einsum] = chain
                elif isinstance(child, Branching):
                    walk(child, chain)
        elif isinstance(node, Compute):
            out[node.einsum] = list(above)

    walk(mapping, [])
    return out


def shared_loops(paths: dict[str, list[Temporal]], a: str, b: str) -> list[Temporal]:
    """The loop nodes both Einsums run under (the same node objects)."""
    out = []
    for x, y in zip(paths[a], paths[b], strict=False):
        if x is not y:
            break
        out.append(x)
    return out


def broken_dependencies(mapping: Mapping, wl: WorkloadInfo, order: list[str]) -> list[str]:
    """Every read of an unfinished value: a reduction's reader sharing a loop over the
    reduced variable, or a recurrence's early reader not sharing a tile-1 loop over the
    stepped variable with the writer."""
    paths = loop_paths(mapping)
    where = {n: i for i, n in enumerate(order)}
    out = []
    for b in wl.einsums:
        for t in b.outputs:
            for c in wl.tensors[t].readers:
                if c == b.name:
                    continue
                if where[c] > where[b.name]:
                    for loop in shared_loops(paths, b.name, c):
                        if loop.rank_variable in b.reduced_variables:
                            out.append(f"{c} reads {t} partial over {loop.rank_variable}")
                    continue
                stepped = [r for r, x in b.projections[t].items() if x.const and x.variables]
                for rank in stepped:
                    var = wl.einsum(c).projections[t][rank].variables[0]
                    if wl.einsum(c).bounds[var] <= 1:
                        continue
                    loops = shared_loops(paths, b.name, c)
                    if not any(x.rank_variable == var and x.tile_shape == 1 for x in loops):
                        out.append(f"{c} reads {t}[{var}] before {b.name} wrote it")
    return out
