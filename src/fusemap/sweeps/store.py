"""The results of a sweep as a Parquet dataset: ``RESULTS/points/<key>.parquet``, one
file (one row) per finished point, written atomically by the client as each point
finishes. A killed sweep loses nothing finished; a rerun reads what is there and runs
the rest. Every file of one sweep has the same schema, so
``pandas.read_parquet("RESULTS/points")`` reads them all.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ..report.io import check_output, write_atomic
from ..spec.errors import FusemapError
from .plan import SweepPlan
from .points import Point
from .record import MapperFigures, PointRecord

POINTS = "points"
_INT64 = 2**63

_MAPPER_INTS = ("pmappings", "templates", "distinct_einsums", "orders", "joined", "kept")
_RESULT_FIELDS = [
    pa.field("status", pa.string()),
    pa.field("error", pa.string()),
    pa.field("objective", pa.string()),
    pa.field("mode", pa.string()),
    pa.field("energy", pa.float64()),
    pa.field("latency", pa.float64()),
    pa.field("edp", pa.float64()),
    pa.field("area", pa.float64()),
    pa.field("energy_unit", pa.string()),
    pa.field("latency_unit", pa.string()),
    pa.field("component_energy", pa.map_(pa.string(), pa.float64())),
    pa.field("fused", pa.list_(pa.string())),
    *(pa.field(name, pa.int64()) for name in _MAPPER_INTS),
    pa.field("pruned_fraction", pa.float64()),
    pa.field("statistics", pa.string()),
    pa.field("notes", pa.list_(pa.string())),
    pa.field("wall_seconds", pa.float64()),
    pa.field("mapper_seconds", pa.float64()),
    pa.field("peak_mb", pa.float64()),
    pa.field("fusemap_version", pa.string()),
]


def variable_type(values: tuple[Any, ...]) -> pa.DataType:
    """One column type for all values of a variable: bool, int64, float64, else string
    (strings as written, other values as JSON)."""
    if all(isinstance(v, bool) for v in values):
        return pa.bool_()
    if all(
        isinstance(v, int) and not isinstance(v, bool) and -_INT64 <= v < _INT64 for v in values
    ):
        return pa.int64()
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        return pa.float64()
    return pa.string()


def _cell(value: Any, kind: pa.DataType) -> Any:
    if kind == pa.float64():
        return float(value)
    if kind == pa.string() and not isinstance(value, str):
        return json.dumps(value)
    return str(value) if kind == pa.string() else value


class ResultStore:
    """The results folder of one sweep plan."""

    def __init__(self, folder: str | Path, plan: SweepPlan) -> None:
        self.folder = Path(folder)
        self.points = self.folder / POINTS
        self.plan = plan
        self.types = {v.name: variable_type(v.values) for v in plan.swept}
        fields = [pa.field("key", pa.string()), pa.field("point", pa.int64())]
        fields += [pa.field(name, kind) for name, kind in self.types.items()]
        meta = {"fusemap.variables": json.dumps(list(self.types)), "fusemap.sweep": plan.path}
        self.schema = pa.schema(fields + _RESULT_FIELDS, metadata=meta)

    def check(self) -> None:
        """Refuse before the work starts a folder that cannot hold the results."""
        for path in (self.folder, self.points):
            if path.exists() and not path.is_dir():
                raise FusemapError(f"results folder {str(path)!r} is not a folder")
        check_output(self.path("0" * 32), "results file")

    def path(self, key: str) -> Path:
        return self.points / f"{key}.parquet"

    def finished(self) -> set[str]:
        """Keys of every point file in the folder (of this sweep or of earlier ones)."""
        try:
            names = os.listdir(self.points)
        except FileNotFoundError:
            return set()
        return {n.removesuffix(".parquet") for n in names if n.endswith(".parquet")}

    def read(self, point: Point) -> PointRecord | None:
        """The record of ``point`` if a readable file holds it."""
        try:
            row = pq.read_table(self.path(point.key)).to_pylist()[0]
            return _record(row, point)
        except (OSError, IndexError, KeyError, TypeError, ValueError, pa.ArrowException):
            return None  # absent, or not a file this version reads: run the point again

    def write(self, record: PointRecord) -> Path:
        """Write ``record`` as its own Parquet file, atomically."""
        table = pa.Table.from_pylist([self.row(record)], schema=self.schema)
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink)
        return write_atomic(self.path(record.key), sink.getvalue().to_pybytes())

    def row(self, r: PointRecord) -> dict[str, Any]:
        """The record as one row of the schema."""
        row: dict[str, Any] = {"key": r.key, "point": r.index + 1}
        row.update({n: _cell(r.values[n], kind) for n, kind in self.types.items()})
        m = r.mapper
        row.update(
            status=r.status, error=r.error, objective=r.objective, mode=r.mode,
            energy=r.energy, latency=r.latency, edp=r.edp, area=r.area,
            energy_unit=r.energy_unit, latency_unit=r.latency_unit,
            component_energy=list(r.component_energy.items()), fused=list(r.fused),
            pruned_fraction=m.pruned_fraction if m else None,
            statistics=m.statistics if m else None, notes=list(r.notes),
            wall_seconds=r.wall_seconds, mapper_seconds=m.seconds if m else None,
            peak_mb=m.peak_mb if m else None, fusemap_version=r.fusemap_version,
        )  # fmt: skip
        row.update({name: getattr(m, name) if m else None for name in _MAPPER_INTS})
        return row


def _record(row: dict[str, Any], point: Point) -> PointRecord:
    mapper = None
    if row.get("statistics") is not None:
        mapper = MapperFigures(
            **{name: int(row[name]) for name in _MAPPER_INTS},
            pruned_fraction=row["pruned_fraction"], statistics=row["statistics"],
            seconds=row["mapper_seconds"] or 0.0, peak_mb=row["peak_mb"] or 0.0,
        )  # fmt: skip
    return PointRecord(
        point.key, point.index, point.values, row["status"], row["objective"], row["mode"],
        error=row["error"], energy=row["energy"], latency=row["latency"], area=row["area"],
        energy_unit=row["energy_unit"], latency_unit=row["latency_unit"],
        component_energy=dict(row["component_energy"] or []), fused=tuple(row["fused"] or ()),
        mapper=mapper, notes=tuple(row["notes"] or ()), wall_seconds=row["wall_seconds"] or 0.0,
        fusemap_version=row["fusemap_version"],
    )  # fmt: skip
