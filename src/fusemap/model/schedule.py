"""Total latency of a mapping from its per-Einsum latencies and its split structure.

Default (the reference tool's rule): the total is the sum over Einsums of each Einsum's
latency (the max over its components), whatever the splits say.

Overlap regions (``!Pipeline {overlap: true}``, a fusemap extension): the Einsums below
run concurrently, as scheduled by the splits, and memory traffic overlaps compute. Each
component is one resource, busy for the sum of its latencies over the region's Einsums.
The *compute schedule* of a node is

* an Einsum: the latency of its compute unit;
* ``!Sequential`` / ``!Split`` (and an un-flagged ``!Pipeline`` inside a region): the sum
  of its branches' schedules (one after the other);
* ``!Pipeline`` inside a region: the max of its branches' schedules, but at least the
  busiest compute unit among them (branches on the same unit do not overlap).

The region lasts ``max(compute schedule, busiest component of the region)``: memories
stream for the whole region. Outside regions latencies add up. All quantities are totals
over the whole workload (loops above a split repeat every branch the same way).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..spec import mapping as M
from .result import EinsumResult


@dataclass
class Span:
    """Latency facts of a mapping subtree."""

    time: float = 0.0
    """Latency of the subtree on its own (sum per Einsum outside overlap regions)."""
    schedule: float = 0.0
    """Compute schedule (see the module docs)."""
    busy: dict[str, float] = field(default_factory=dict)
    """Component -> summed latency over the subtree's Einsums."""
    compute_units: set[str] = field(default_factory=set)
    """The compute units among ``busy``."""

    def add(self, other: Span) -> None:
        """Append ``other`` one after the other (its busy times add to ours)."""
        self.time += other.time
        self.schedule += other.schedule
        for c, t in other.busy.items():
            self.busy[c] = self.busy.get(c, 0.0) + t
        self.compute_units |= other.compute_units

    def busiest_compute(self) -> float:
        """Latency of the most loaded compute unit."""
        return max((self.busy[c] for c in self.compute_units), default=0.0)


def mapping_latency(mapping: M.Mapping, einsums: dict[str, EinsumResult]) -> float:
    """The total latency of ``mapping`` given the latency of each Einsum."""
    return span(mapping.nodes, einsums, False).time


def span(nodes: list, einsums: dict[str, EinsumResult], in_region: bool) -> Span:
    """The :class:`Span` of a chain of mapping nodes (loops and storage pass through)."""
    for node in nodes:
        if isinstance(node, M.Compute):
            return _leaf(einsums.get(node.einsum))
        if isinstance(node, M.Split):
            return _split(node, einsums, in_region)
        if isinstance(node, M.Nested):
            return span(node.nodes, einsums, in_region)
    return Span()


def _children(node: M.Split, einsums: dict[str, EinsumResult], in_region: bool) -> list[Span]:
    return [
        span(c.nodes if isinstance(c, M.Nested) else [c], einsums, in_region) for c in node.nodes
    ]


def _split(node: M.Split, einsums: dict[str, EinsumResult], in_region: bool) -> Span:
    overlap = isinstance(node, M.Pipeline) and node.overlap
    region = in_region or overlap
    parts = _children(node, einsums, region)
    out = Span()
    for p in parts:
        out.add(p)
    if region and isinstance(node, M.Pipeline):
        out.schedule = max([p.schedule for p in parts] + [out.busiest_compute()])
    if overlap and not in_region:
        out.time = max([out.schedule, *out.busy.values()])
    return out


def _leaf(result: EinsumResult | None) -> Span:
    if result is None:  # an Einsum left out of the evaluation
        return Span()
    busy = {c: u.latency for c, u in result.components.items()}
    unit = result.compute_unit
    return Span(result.latency, busy.get(unit, 0.0), busy, {unit} if unit in busy else set())
