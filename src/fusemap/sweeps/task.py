"""One point's work, as a Dask worker runs it: map (or evaluate) the point's spec and
return its :class:`PointRecord`. Everything it needs travels in the task."""

from __future__ import annotations

import dataclasses
import threading
import time
from dataclasses import dataclass

from ..mapper.ffm import map_workload
from ..mapper.outcome import MapOutcome
from ..model.evaluate import evaluate_mapping
from ..model.result import Result
from ..spec import limits
from ..spec.errors import FusemapError
from ..spec.mapping_check import check_mapping
from ..spec.numbers import finite_json
from ..spec.resolve import resolve_workload
from .points import Point
from .record import ERROR, OK, MapperFigures, PointRecord

_ONE_AT_A_TIME = threading.Lock()
"""Limits and the expression budget are per process: a worker with several threads runs
one point at a time (start workers with ``--nthreads 1`` and more processes)."""


@dataclass(frozen=True)
class PointTask:
    """A point and what to compute there, with the caller's limits (``--limit``)."""

    point: Point
    objective: str
    orders: str
    evaluate: bool
    limits: limits.Limits


def run_point(task: PointTask) -> PointRecord:
    """Map (or evaluate) the point. A user error, or an internal one, becomes an error
    record: the same inputs would fail the same way again."""
    with _ONE_AT_A_TIME:
        limits.configure(**dataclasses.asdict(task.limits))
        limits.reset_budget()
        start = time.perf_counter()
        try:
            if task.evaluate:
                record = _evaluated(task)
            else:
                record = _mapped(task)
        except FusemapError as err:
            record = error_record(task.point, task.objective, _mode(task), str(err))
        except Exception as err:  # a bug: recorded, and the sweep goes on
            text = f"internal error, please report it: {type(err).__name__}: {err}"
            record = error_record(task.point, task.objective, _mode(task), text)
        return dataclasses.replace(record, wall_seconds=time.perf_counter() - start)


def error_record(point: Point, objective: str, mode: str, message: str) -> PointRecord:
    """The record of a point that failed with ``message`` (one line)."""
    return PointRecord(
        point.key, point.index, point.values, ERROR, objective, mode,
        error=" ".join(message.splitlines()),
    )  # fmt: skip


def _mode(task: PointTask) -> str:
    return "evaluate" if task.evaluate else "map"


def _evaluated(task: PointTask) -> PointRecord:
    spec = task.point.spec
    assert spec is not None
    spec.require("arch", "workload", "mapping")
    wl = resolve_workload(spec)
    check_mapping(spec, wl)
    result = evaluate_mapping(spec, workload=wl)
    return _record(task, result, (), None, tuple(result.warnings))


def _mapped(task: PointTask) -> PointRecord:
    spec = task.point.spec
    assert spec is not None
    spec.require("arch", "workload")
    outcome = map_workload(spec, task.objective, orders=task.orders)
    best = outcome.best
    fused = tuple(f"{f.tensor}@{f.memory}" for f in best.fused)
    notes = tuple(outcome.notes) + tuple(best.result.warnings)
    return _record(task, best.result, fused, _figures(outcome), notes)


def _record(
    task: PointTask,
    result: Result,
    fused: tuple[str, ...],
    mapper: MapperFigures | None,
    notes: tuple[str, ...],
) -> PointRecord:
    p = task.point
    units = result.units
    return PointRecord(
        p.key, p.index, p.values, OK, task.objective, _mode(task),
        energy=result.energy, latency=result.latency, area=result.area,
        energy_unit=units["energy"], latency_unit=units["latency"],
        component_energy={n: c.energy for n, c in result.components.items()},
        fused=fused, mapper=mapper, notes=notes,
    )  # fmt: skip


def _figures(outcome: MapOutcome) -> MapperFigures:
    st = outcome.statistics
    data = st.as_dict()
    timings = {"seconds", "peak_mb", "pmapping_seconds"}
    return MapperFigures(
        pmappings=sum(st.pmappings.values()),
        templates=sum(st.templates.values()),
        distinct_einsums=st.distinct_einsums,
        orders=st.orders,
        joined=sum(st.joined),
        kept=sum(st.kept),
        pruned_fraction=float(data["pruned_fraction"]),
        statistics=finite_json({k: v for k, v in data.items() if k not in timings}, indent=None),
        seconds=float(st.seconds.get("total", 0.0)),
        peak_mb=float(st.peak_mb),
    )
