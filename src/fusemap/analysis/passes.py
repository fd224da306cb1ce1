"""Pass analysis of a cascade over one rank (attention-cascades.md §2).

A *pass* over rank R is one traversal of an R-fiber. An Einsum whose output keeps no
component of R, but which iterates a standard component of R, is a full reduction: its
output is ready only after the whole fiber was seen, so every consumer starts a new
stage. The number of distinct stages among the Einsums that sweep all of R is the
number of passes any mapping must make; tensors touched in several stages must keep
their whole R-fiber live (or spill it). This bounds what fusion on R can achieve.

R may be split through affine projections: ``K[e, M: m1*M0 + m0]`` makes the
components of M the ranks of m1 and m0, i.e. {M1, M0}. Ranks stepped by a recurrence
(``RM[m1+1, p]``) are iterative: iterating them is no barrier.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..spec.errors import SpecError
from ..spec.resolve import WorkloadInfo, resolve_workload
from ..spec.spec import Spec, load_spec
from ..spec.workload import Einsum

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class LiveTensor:
    """A tensor whose R-fiber is touched in several stages, so it stays live between them."""

    tensor: str
    stages: tuple[int, ...]
    """The stages that read or write it."""
    fiber_elements: int
    """Values of one fiber over the components of R it has (M for QK, M1 for LM)."""
    fiber_bytes: float | None
    """The same in bytes (None when the width is unknown)."""
    fibers: int
    """How many such fibers the tensor has (one per p, b, h, ...)."""


@dataclass(frozen=True)
class PassAnalysis:
    """Stages, passes and live tensors of a cascade over one rank."""

    rank: str
    components: tuple[str, ...]
    """The ranks R stands for (``("M1", "M0")`` when M is split, else ``(R,)``)."""
    iterative: tuple[str, ...]
    """Components of R stepped by a recurrence (no barrier)."""
    passes: int
    stages: dict[str, int]
    """Einsum -> stage, in program order."""
    barriers: tuple[str, ...]
    """Einsums that fully reduce R: their consumers start a new stage."""
    sweeping: tuple[str, ...]
    """Einsums whose iteration space covers every component of R (they count passes)."""
    live: dict[str, LiveTensor] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """``{"passes": n, "stages": {einsum: k}, "live": {tensor: fiber elements}}``."""
        return {
            "passes": self.passes,
            "stages": dict(self.stages),
            "live": {t: v.fiber_elements for t, v in self.live.items()},
        }


def variable_ranks(e: Einsum) -> dict[str, str]:
    """Rank of each rank variable of ``e``: where it indexes a rank alone (``m1`` -> M1).

    A bare ``v`` wins, then an expression of ``v`` alone (``m1 + 1``); a variable that
    only appears inside composite projections is named after itself (``m`` -> M).
    """
    projections = [a.ranks() for a in [*e.tensor_accesses, *e.operands]]
    out: dict[str, str] = {}
    for var in e.rank_variables:
        alone = [r for p in projections for r, x in p.items() if _variables(x) == [var]]
        bare = [r for p in projections for r, x in p.items() if str(x).strip() == var]
        out[var] = (bare or alone or [var.upper()])[0]
    return out


def _variables(expr: Any) -> list[str]:
    return [v for v in dict.fromkeys(_IDENT.findall(str(expr))) if v[:1].islower()]


class _Facts:
    """Per-Einsum facts the analysis of every rank uses, computed once (the mapper's
    report analyzes every rank: recomputing them made it cubic in the Einsums)."""

    def __init__(self, einsums: Sequence[Einsum], info: WorkloadInfo) -> None:
        self.ranks = {id(e): variable_ranks(e) for e in einsums}
        self.accesses = {
            id(e): [a.ranks() for a in [*e.tensor_accesses, *e.operands]] for e in einsums
        }
        self.reads = {id(e): _reads(e) for e in einsums}
        self.ordered = _ordered(einsums, info, self)


def rank_components(
    einsums: Sequence[Einsum], rank: str, facts: _Facts | None = None
) -> tuple[str, ...]:
    """The ranks that ``rank`` splits into through affine projections (else itself)."""
    found: list[str] = []
    seen_rank = False
    for e in einsums:
        ranks = facts.ranks[id(e)] if facts else variable_ranks(e)
        accesses = (
            facts.accesses[id(e)]
            if facts
            else [a.ranks() for a in [*e.tensor_accesses, *e.operands]]
        )
        for access in accesses:
            expr = access.get(rank)
            if expr is None:
                continue
            seen_rank = True
            for var in _variables(expr):
                if ranks[var] not in found:
                    found.append(ranks[var])
        if rank in ranks.values():
            seen_rank = True
    if not seen_rank:
        known = sorted({r for e in einsums for a in e.tensor_accesses for r in a.ranks()})
        raise SpecError(
            f"--rank {rank}: not a rank of the workload (its ranks: {', '.join(known)})"
        )
    return tuple(found) or (rank,)


def analyze_passes(
    workload: Spec | str | Path,
    rank: str = "M",
    variables: Mapping[str, Any] | None = None,
) -> PassAnalysis:
    """Stages, passes over ``rank`` and live tensors of a cascade (a spec or a YAML file)."""
    spec = workload if isinstance(workload, Spec) else load_spec(workload, variables=variables)
    spec.require("workload")
    info = resolve_workload(spec)
    assert spec.workload is not None
    try:
        return analyze(spec.workload.einsums, info, rank, spec.workload.iterative_ranks())
    except SpecError as err:
        raise err.located(spec.locate("workload")) from None


def analyze(
    einsums: Sequence[Einsum],
    info: WorkloadInfo,
    rank: str,
    iterative_ranks: set[str],
    facts: _Facts | None = None,
) -> PassAnalysis:
    """The §2 algorithm on parsed Einsums and their resolved shapes."""
    facts = facts or _Facts(einsums, info)
    comps = set(rank_components(einsums, rank, facts))
    iterative = comps & iterative_ranks
    ready: dict[str, int] = {}  # tensors not written yet (inputs, recurrences) are ready at 1
    stages: dict[str, int] = {}
    barriers: list[str] = []
    sweeping: list[str] = []
    for e in einsums:
        outputs = e.outputs
        reads = [t for t in facts.reads[id(e)] if t not in outputs]
        stage = max([1, *(ready.get(t, 1) for t in reads)])
        iterated = set(facts.ranks[id(e)].values())
        std = (iterated & comps) - iterative
        out_ranks = {r for t in outputs for r in info.tensors[t].ranks}
        barrier = bool(std) and not (out_ranks & comps)
        for t in outputs:
            ready[t] = stage + 1 if barrier else stage
        stages[e.name] = stage
        if barrier:
            barriers.append(e.name)
        if comps <= iterated:
            sweeping.append(e.name)
    _defer_copies(einsums, stages, facts)
    passes = len({stages[n] for n in sweeping})
    live = _live(einsums, info, stages, comps, facts)
    return PassAnalysis(
        rank,
        tuple(c for c in facts.ordered if c in comps),
        tuple(sorted(iterative)),
        passes,
        stages,
        tuple(barriers),
        tuple(sweeping),
        live,
    )


def _reads(e: Einsum) -> list[str]:
    return list(dict.fromkeys([*e.inputs, *(o.name for o in e.operands)]))


def _is_layout_copy(e: Einsum) -> bool:
    """A copy that only re-indexes (BK = K split into M1 x M0): no work of its own."""
    if not (e.is_copy_operation or e.map_operator == "copy"):
        return False
    out = set(_variables_of(e, e.outputs))
    return set(e.rank_variables) <= out


def _variables_of(e: Einsum, tensors: Sequence[str]) -> list[str]:
    return [v for t in tensors for x in e.access(t).ranks().values() for v in _variables(x)]


def _defer_copies(einsums: Sequence[Einsum], stages: dict[str, int], facts: _Facts) -> None:
    """A layout copy runs in the stage of its first consumer (it is made where it is read).

    Otherwise copying V early (BV in pass 1) would make V look live across passes.
    """
    for i in range(len(einsums) - 1, -1, -1):
        e = einsums[i]
        if not _is_layout_copy(e):
            continue
        made = set(e.outputs)
        consumers = [stages[c.name] for c in einsums[i + 1 :] if made & set(facts.reads[id(c)])]
        if consumers:
            stages[e.name] = max(stages[e.name], min(consumers))


def _live(
    einsums: Sequence[Einsum],
    info: WorkloadInfo,
    stages: dict[str, int],
    comps: set[str],
    facts: _Facts,
) -> dict[str, LiveTensor]:
    touched: dict[str, set[int]] = {}
    for e in einsums:
        for t in [*facts.reads[id(e)], *e.outputs]:
            touched.setdefault(t, set()).add(stages[e.name])
    live: dict[str, LiveTensor] = {}
    for t, seen in touched.items():
        tensor = info.tensors[t]
        dims = [n for r, n in zip(tensor.ranks, tensor.shape, strict=True) if r in comps]
        if not dims or len(seen) < 2:
            continue
        elements = math.prod(dims)
        fibers = tensor.size // elements
        width = tensor.bits_per_value
        bytes_ = elements * width / 8 if width else None
        live[t] = LiveTensor(t, tuple(sorted(seen)), elements, bytes_, fibers)
    return live


def _ordered(einsums: Sequence[Einsum], info: WorkloadInfo, facts: _Facts) -> list[str]:
    """All ranks in order of first appearance (for a stable component order)."""
    out: dict[str, None] = {}
    for e in einsums:
        for t in e.tensors:
            for r in info.tensors[t].ranks:
                out.setdefault(r, None)
        for r in facts.ranks[id(e)].values():
            out.setdefault(r, None)
    return list(out)


def pass_bounds(spec: Spec, info: WorkloadInfo | None = None) -> dict[str, PassAnalysis]:
    """The pass analysis of every rank where it says something, for the mapper's report.

    Ranks are the workload's own (a split rank stands for its parts, which are not listed
    apart). A rank is listed when any mapping needs more than one pass over it with some
    fiber live between passes (a cost no mapping avoids), or when a part of it is
    stepped by a recurrence (a 1-pass cascade such as FlashAttention's). A rank name
    reused for an unrelated sweep (a layer's output width feeding the next layer) makes
    passes without live fibers: not listed, so plain workloads usually list nothing.
    """
    spec.require("workload")
    assert spec.workload is not None
    info = info or resolve_workload(spec)
    einsums = spec.workload.einsums
    iterative = spec.workload.iterative_ranks()
    facts = _Facts(einsums, info)
    have = {r for t in info.tensors.values() for r in t.ranks}
    parts = {r: rank_components(einsums, r, facts) for r in facts.ordered if r in have}
    split = {c for r, comps in parts.items() for c in comps if comps != (r,)}
    out: dict[str, PassAnalysis] = {}
    for r, comps in parts.items():
        if r in split:
            continue
        found = analyze(einsums, info, r, iterative, facts)
        if (found.passes > 1 and found.live) or set(comps) & iterative:
            out[r] = found
    return out
