"""Run a sweep: load every point's spec here, skip the points already in the results
folder, send the rest to Dask workers, and write each record as its point finishes."""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..report.io import protect_inputs
from ..spec import limits
from ..spec.errors import FusemapError
from .plan import SweepPlan, load_sweep
from .points import Point, prepare_points
from .progress import SweepProgress
from .record import ERROR, LOST, OK, PointRecord
from .store import ResultStore
from .task import PointTask, error_record, run_point

if TYPE_CHECKING:
    from .cluster import LocalStart

Echo = Callable[[str], None]


@dataclass
class SweepOutcome:
    """Every point's record (in sweep order) and what this run did."""

    plan: SweepPlan
    records: list[PointRecord]
    folder: Path
    computed: int
    """Points run (or found unloadable) by this run."""
    reused: int
    """Points read from the results folder (finished by an earlier run)."""
    seconds: float

    def count(self, status: str) -> int:
        return sum(r.status == status for r in self.records)

    def frame(self) -> Any:
        """The records as a pandas DataFrame (:func:`fusemap.sweeps.frame.sweep_frame`)."""
        from .frame import sweep_frame

        return sweep_frame(self.plan, self.records)


def default_folder(sweep_file: str | Path) -> Path:
    """``<sweep file name without .yaml>-results`` in the current folder."""
    name = Path(sweep_file).name
    for suffix in (".yaml", ".yml"):
        name = name.removesuffix(suffix)
    return Path(f"{name}-results")


def run_sweep(
    sweep_file: str | Path,
    out: str | Path | None = None,
    *,
    scheduler: str | None = None,
    workers: int | None = None,
    client: Any = None,
    retry_failed: bool = False,
    progress: bool = False,
    echo: Echo | None = None,
) -> SweepOutcome:
    """Run the sweep of ``sweep_file``, results in ``out`` (default: :func:`default_folder`).

    ``client``: a Dask client to use as it is; else ``scheduler`` (or
    ``DASK_SCHEDULER_ADDRESS``) names an existing cluster, else a local cluster of
    ``workers`` processes starts. ``retry_failed`` runs the recorded failures again."""
    start = time.perf_counter()
    if workers is not None and workers < 1:
        raise FusemapError(f"--workers must be at least 1 (got {workers})")
    say: Echo = echo or (lambda line: None)
    plan = load_sweep(sweep_file)
    store = ResultStore(out if out is not None else default_folder(sweep_file), plan)
    store.check()
    with _local_cluster_starting(client, scheduler, workers, len(plan.points())) as starting:
        bar = SweepProgress(progress)
        with bar.phase("loading specs", len(plan.points())) as step:
            points = prepare_points(plan, step)
        protect_inputs([plan.path, *(f for p in points if p.spec for f in p.spec.input_files)])
        records: dict[int, PointRecord] = {}
        todo = _reuse(points, store, records, retry_failed)
        reused = len(records)
        for p in todo:
            if p.error is not None:  # unloadable: no worker needed
                records[p.index] = _record(
                    store, error_record(p, plan.objective, plan.mode, p.error)
                )
        todo = [p for p in todo if p.error is None]
        if reused:
            say(f"{reused} of {len(points)} points finished earlier (in {store.points}); "
                f"{len(todo)} to run")  # fmt: skip
        if todo:
            with (
                _client(client, scheduler, workers, len(todo), say, starting) as dask,
                bar.points(len(points), records.values()) as tick,
            ):
                for record in _run(dask, plan, todo):
                    if record.status != LOST:
                        _record(store, record)
                    records[record.index] = record
                    tick(record)
        ordered = [records[i] for i in sorted(records)]
        return SweepOutcome(plan, ordered, store.folder, len(points) - reused, reused,
                            time.perf_counter() - start)  # fmt: skip


@contextmanager
def _local_cluster_starting(
    client: Any, scheduler: str | None, workers: int | None, points: int
) -> Iterator[LocalStart | None]:
    """A local cluster starting now, while the points load, closed at the end whether
    used or not (every point finished before, or a failure); None when the sweep uses a
    given client or an existing cluster."""
    from .cluster import LocalStart, local_workers, scheduler_address

    if client is not None or scheduler_address(scheduler) or points == 0:
        yield None
        return
    starting = LocalStart(local_workers(workers, points))
    try:
        yield starting
    finally:
        starting.close()


def _reuse(
    points: list[Point], store: ResultStore, records: dict[int, PointRecord], retry: bool
) -> list[Point]:
    """Fill ``records`` with the finished points; return the others."""
    finished = store.finished()
    todo = []
    for p in points:
        found = store.read(p) if p.key in finished else None
        if found is not None and (found.status == OK or not retry):
            records[p.index] = found
        else:
            todo.append(p)
    return todo


def _record(store: ResultStore, record: PointRecord) -> PointRecord:
    store.write(record)
    return record


@contextmanager
def _client(
    client: Any,
    scheduler: str | None,
    workers: int | None,
    tasks: int,
    say: Echo,
    starting: LocalStart | None,
) -> Iterator[Any]:
    if client is not None:
        yield client
        return
    from .cluster import dask_client

    with dask_client(scheduler, workers, tasks, say, starting) as made:
        yield made


def _run(client: Any, plan: SweepPlan, todo: list[Point]) -> Iterator[PointRecord]:
    """Submit the points, a few more than the workers' threads at a time (so the
    scheduler holds few specs, and workers that join later get work); yield each
    record as its point finishes. A point lost to the cluster (its worker died, ...)
    yields a LOST record; Ctrl-C cancels the rest."""
    from dask.distributed import as_completed

    now = limits.current()
    waiting = iter(todo)
    futures: dict[Any, Point] = {}
    running = as_completed()

    def submit_more() -> None:
        room = 2 * sum(client.nthreads().values()) + 2 - len(futures)
        for p in itertools.islice(waiting, max(room, 0)):
            task = PointTask(p, plan.objective, plan.orders, plan.mode == "evaluate", now)
            key = f"fusemap-point-{p.index + 1}-{uuid.uuid4().hex}"
            future = client.submit(run_point, task, key=key, pure=False)
            futures[future] = p
            running.add(future)

    try:
        submit_more()
        for future in running:
            p = futures.pop(future)
            if future.status == "finished":
                record = future.result()
            else:
                exc = future.exception() if future.status == "error" else None
                why = f"{type(exc).__name__}: {exc}" if exc else future.status
                record = PointRecord(p.key, p.index, p.values, LOST, plan.objective, plan.mode,
                                     error=f"lost to the cluster ({why}); a rerun tries again")  # fmt: skip
            future.release()
            submit_more()
            yield record
    finally:
        if futures:  # interrupted: do not leave work behind on a shared cluster
            client.cancel(list(futures))


__all__ = ["ERROR", "LOST", "OK", "SweepOutcome", "default_folder", "run_sweep"]
