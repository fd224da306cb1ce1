"""A sweep's records as a pandas DataFrame: one row per point, in sweep order."""

from __future__ import annotations

from typing import Any

from .plan import SweepPlan
from .record import PointRecord

MAPPER_COLUMNS = (
    "pmappings", "templates", "distinct_einsums", "orders", "joined", "kept", "pruned_fraction",
)  # fmt: skip


def sweep_frame(plan: SweepPlan, records: list[PointRecord]) -> Any:
    """Columns: ``point``, the swept variables, ``status`` (ok, error, lost), ``error``,
    ``energy``, ``latency``, ``edp``, ``area``, ``energy.<component>`` per component,
    ``fused`` (``T1@Buffer, ...``), the mapper's statistics, ``wall_seconds``, ``notes``,
    then ``objective``, ``mode``, units, ``fusemap_version`` and ``key``."""
    import pandas as pd

    components: dict[str, None] = {}
    for r in records:
        components.update(dict.fromkeys(r.component_energy))
    rows = []
    for r in records:
        m = r.mapper
        row: dict[str, Any] = {"point": r.index + 1, **r.values}
        row.update(status=r.status, error=r.error, energy=r.energy, latency=r.latency,
                   edp=r.edp, area=r.area)  # fmt: skip
        row.update({f"energy.{c}": r.component_energy.get(c) for c in components})
        row["fused"] = ", ".join(r.fused)
        row.update({name: getattr(m, name) if m else None for name in MAPPER_COLUMNS})
        row.update(
            mapper_seconds=m.seconds if m else None, peak_mb=m.peak_mb if m else None,
            statistics=m.statistics if m else None, wall_seconds=r.wall_seconds,
            notes="; ".join(r.notes), objective=r.objective, mode=r.mode,
            energy_unit=r.energy_unit, latency_unit=r.latency_unit,
            fusemap_version=r.fusemap_version, key=r.key,
        )  # fmt: skip
        rows.append(row)
    columns = ["point", *plan.names] if not rows else None
    frame = pd.DataFrame(rows, columns=columns)
    for name in ("energy", "latency", "edp", "area"):
        if name in frame:
            frame[name] = frame[name].astype(float)
    return frame
