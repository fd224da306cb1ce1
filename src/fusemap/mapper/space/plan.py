"""What fusion the orders the join tries allow: the fused tensors, the tensors held
across Einsums (whole or tiled) and the Einsums that host them."""

from __future__ import annotations

from dataclasses import dataclass

from ...spec.resolve import WorkloadInfo


@dataclass(frozen=True)
class FusionPlan:
    """What the orders the join tries allow.

    Every shared tensor may be fused. A tensor whose users are never consecutive is
    *held* across the Einsums between them (they host it): whole, or tiled under loops
    those Einsums share too, so only over rank variables that index it directly in every
    user and that every host has (same bound); ``held_loops`` names them."""

    fusable: frozenset[str]
    held_loops: dict[str, frozenset[str]]  # tensor never consecutive -> its loop variables
    hosts: frozenset[str]
    hosted: dict[str, frozenset[str]]  # per host, the tensors that may be held across it
    host_loops: dict[str, frozenset[str]]  # per host, the variables it may share for them


def fusion_plan(wl: WorkloadInfo, order_list: list[list[str]]) -> FusionPlan:
    """The :class:`FusionPlan` of the orders ``order_list``."""
    consecutive: set[str] = set()
    hosted: dict[str, set[str]] = {}
    loops: dict[str, set[str]] = {}
    host_loops: dict[str, set[str]] = {}
    for order in order_list:
        where = {n: i for i, n in enumerate(order)}
        for t in wl.shared:
            users = sorted(where[e.name] for e in wl.einsums if t in e.tensors)
            if users[-1] - users[0] == len(users) - 1:
                consecutive.add(t)
                continue
            used = set(users)
            between = [order[i] for i in range(users[0] + 1, users[-1]) if i not in used]
            infos = [wl.einsum(order[i]) for i in users]
            first = infos[0]
            ok = {
                v
                for v in first.rank_variables
                if all(i.bounds.get(v) == first.bounds[v] for i in infos)
                and all(i.relevance(t, v) == "relevant" for i in infos)
                and all(wl.einsum(e).bounds.get(v) == first.bounds[v] for e in between)
            }
            loops.setdefault(t, set()).update(ok)
            for e in between:
                hosted.setdefault(e, set()).add(t)
                host_loops.setdefault(e, set()).update(ok)
    shared = frozenset(wl.shared)
    held = {e: frozenset(ts) for e, ts in hosted.items()}
    return FusionPlan(
        shared,
        {t: frozenset(vs) for t, vs in loops.items() if t not in consecutive},
        frozenset(held),
        held,
        {e: frozenset(vs) for e, vs in host_loops.items() if vs},
    )
