"""The sweep for people, on the terminal: counts, the best points, the failures."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.text import Text

from ..report.tables import Quantities, table
from ..units import area, number, si
from .record import ERROR, LOST, OK, PointRecord
from .run import SweepOutcome

OBJECTIVES = ("energy", "latency", "edp")
SHOWN_POINTS = 20
SHOWN_ERRORS = 10


def show_value(value: Any) -> str:
    """A variable's value as a table shows it (numbers with separators)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return number(value)
    return str(value)


def point_label(record: PointRecord) -> str:
    """``BUFFER_KIB=64, S=128``."""
    return ", ".join(f"{k}={show_value(v)}" for k, v in record.values.items())


def quantities(record: PointRecord) -> Quantities:
    """Formats for the record's numbers (plain numbers for unitless specs)."""
    unitless = {"energy"} if record.energy_unit == "1" else set()
    if record.latency_unit == "1":
        unitless.add("latency")
    return Quantities(unitless=frozenset(unitless))


def edp_text(record: PointRecord) -> str:
    q = quantities(record)
    if record.edp is None:
        return "-"
    return number(record.edp) if q.unitless else si(record.edp, "J·s")


def best(records: list[PointRecord], objective: str) -> PointRecord | None:
    """The finished point with the lowest ``objective`` (ties: the first in sweep order)."""
    ok = [r for r in records if r.status == OK and r.objective_value(objective) is not None]
    return min(ok, key=lambda r: (r.objective_value(objective), r.index), default=None)


def sweep_summary(outcome: SweepOutcome) -> Group:
    """Counts, a table of the best points (by the sweep's objective), the best point per
    objective, and the errors."""
    plan, records = outcome.plan, outcome.records
    n_ok, n_err, n_lost = (outcome.count(s) for s in (OK, ERROR, LOST))
    head = (
        f"{len(records)} points: {n_ok} ok, {n_err} failed"
        + (f", {n_lost} lost to the cluster (a rerun tries them again)" if n_lost else "")
        + f"; {outcome.computed} run now, {outcome.reused} finished earlier; "
        + f"{outcome.seconds:.1f} s"
    )
    parts: list[Any] = [Text(head)]
    ok = sorted((r for r in records if r.status == OK),
                key=lambda r: (r.objective_value(), r.index))  # fmt: skip
    if ok:
        columns = ["#", *plan.names, "energy", "latency", "EDP", "area", "fused", "seconds"]
        rows = []
        for r in ok[:SHOWN_POINTS]:
            q = quantities(r)
            rows.append([str(r.index + 1), *(show_value(r.values[n]) for n in plan.names),
                         q.energy(r.energy), q.latency(r.latency), edp_text(r), area(r.area),
                         ", ".join(r.fused) or "-", f"{r.wall_seconds:.2f}"])  # fmt: skip
        more = f" ({len(ok) - SHOWN_POINTS} more in the results)" if len(ok) > SHOWN_POINTS else ""
        title = f"Points by {plan.objective}, best first{more}"
        right = ["#", *plan.names, "energy", "latency", "EDP", "area", "seconds"]
        parts.append(table(title, columns, rows, right))
        for objective in OBJECTIVES:
            b = best(records, objective)
            if b is not None:
                q = quantities(b)
                value = {"energy": q.energy(b.energy), "latency": q.latency(b.latency)}.get(
                    objective, edp_text(b)
                )
                parts.append(
                    Text(f"best {objective}: {value} at point {b.index + 1} ({point_label(b)})")
                )
    failed = [r for r in records if r.status != OK]
    for r in failed[:SHOWN_ERRORS]:
        parts.append(Text(f"point {r.index + 1} ({point_label(r)}) failed: {r.error}"))
    if len(failed) > SHOWN_ERRORS:
        parts.append(Text(f"... and {len(failed) - SHOWN_ERRORS} more failures (column 'error')"))
    return Group(*parts)
