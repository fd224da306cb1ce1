"""The LoopTree oracle's parts: its node tuples, a path's state, the optimum it returns,
and the small helpers its grammar and scoring share (:mod:`tests.support.looptree_oracle`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from fusemap.spec import mapping as M

# Nodes while enumerating are tuples: ("S", tensor, memory), ("T", rank variable, tile),
# ("P", rank variable, tile, component, dimension) for a spatial loop, ("C", einsum);
# mapping nodes are made only for a tree that is costed or checked.
_S, _T, _P, _C = "S", "T", "P", "C"


@dataclass(frozen=True)
class Optimum:
    """The best value of one objective and a LoopTree reaching it."""

    value: float
    energy: float
    latency: float
    mapping: M.Mapping


class _Path(NamedTuple):
    """What a path from the root has done so far (restricted to the Einsums below)."""

    sizes: tuple[tuple[str, int], ...]  # current tile of every rank variable
    looped: frozenset[str]  # variables with a loop above (later loops divide)
    levels: tuple[tuple[str, int], ...]  # tensor -> deepest memory level on the path
    last_of: tuple[tuple[str, str], ...]  # Einsum -> tensor of its last node on the path
    lowering: tuple[tuple[str, tuple[str, str]], ...]  # Einsum -> its holder being lowered
    used: tuple[tuple[tuple[str, str], float], ...]  # (Einsum, memory) -> bits reserved
    spread: tuple[tuple[tuple[str, str], int], ...] = ()  # (component, dim) -> instances used


def _covers(a, b) -> bool:
    """Whether costed tail ``a`` is as good as ``b`` on energy, latency and usage."""
    return a[0] <= b[0] and a[1] <= b[1] and all(x <= y for x, y in zip(a[2], b[2], strict=True))


def _total(lists, pick, key) -> float:
    return sum(ts[i][key] for ts, i in zip(lists, pick, strict=True))


def _node(n: tuple, unit: str) -> M.MappingNode:
    """A new mapping node (no validation: the oracle's nodes are well-formed)."""
    if n[0] == _S:
        return M.Storage.model_construct(tensors=[n[1]], component=n[2])
    if n[0] == _T:
        return M.Temporal.model_construct(rank_variable=n[1], tile_shape=n[2])
    if n[0] == _P:
        return M.Spatial.model_construct(
            rank_variable=n[1], tile_shape=n[2], component=n[3], name=n[4]
        )
    return M.Compute.model_construct(einsum=n[1], component=unit)


def _assemble(struct, tails: list, unit: str) -> M.Mapping:
    """The skeleton with its holes, left to right, replaced by ``tails``."""
    fill = iter(tails)

    def build(s) -> list:
        if s[0] == "H":
            return [_node(n, unit) for n in next(fill)]
        segment, subs = s
        kids = [M.Nested.model_construct(nodes=build(sub)) for sub in subs]
        return [_node(n, unit) for n in segment] + [M.Sequential.model_construct(nodes=kids)]

    return M.Mapping.model_construct(nodes=build(struct))


def _down(x) -> tuple:
    return (x[1], x[0])


def _tensors(nodes) -> set:
    return {n[1] for n in nodes if n[0] == _S}


def _marked(block, above) -> tuple:
    """(tensor, memory, whether it is a backing node) per storage node of ``block``;
    ``above``: the tensors with a node above it."""
    seen = set(above)
    out = []
    for n in block:
        out.append((n[1], n[2], n[1] not in seen))
        seen.add(n[1])
    return tuple(out)


def _items(d: dict) -> tuple:
    return tuple(sorted(d.items()))
