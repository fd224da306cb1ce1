"""What one point of a sweep gave: a typed record (one row of the results)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .. import __version__

OK, ERROR, LOST = "ok", "error", "lost"
"""Statuses: a result; an error the point itself caused (recorded: the same inputs
fail the same way); lost to the cluster (a worker died: not recorded, a rerun retries)."""


@dataclass(frozen=True)
class MapperFigures:
    """What the mapper did at one point (``fusemap map``'s statistics, summed over
    Einsums and join steps)."""

    pmappings: int
    templates: int
    distinct_einsums: int
    orders: int
    joined: int
    kept: int
    pruned_fraction: float
    statistics: str
    """Every statistic as JSON (docs/json.md), without the timings."""
    seconds: float
    peak_mb: float


@dataclass(frozen=True)
class PointRecord:
    """One point's outcome: its variables, status, and the result's figures."""

    key: str
    index: int
    values: dict[str, Any]
    status: str
    objective: str
    mode: str
    error: str | None = None
    energy: float | None = None
    latency: float | None = None
    area: float | None = None
    energy_unit: str = "J"
    latency_unit: str = "s"
    component_energy: dict[str, float] = field(default_factory=dict)
    fused: tuple[str, ...] = ()
    """Fused tensors as ``tensor@memory`` (mapped points)."""
    mapper: MapperFigures | None = None
    notes: tuple[str, ...] = ()
    """The mapper's notes and the model's warnings."""
    wall_seconds: float = 0.0
    fusemap_version: str = __version__

    @property
    def edp(self) -> float | None:
        """Energy times latency."""
        if self.energy is None or self.latency is None:
            return None
        return self.energy * self.latency

    @property
    def ok(self) -> bool:
        return self.status == OK

    def objective_value(self, objective: str | None = None) -> float | None:
        """energy, latency or edp (default: the sweep's objective)."""
        name = objective or self.objective
        return self.edp if name == "edp" else getattr(self, name)
