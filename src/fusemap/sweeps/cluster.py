"""The Dask cluster a sweep (or ``fusemap map --scheduler``) runs on: an existing one at
an address (``--scheduler``, else ``DASK_SCHEDULER_ADDRESS``), or a local one sized to
the machine, one single-threaded worker process per core."""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

from .. import __version__
from ..spec.errors import FusemapError

ENV_SCHEDULER = "DASK_SCHEDULER_ADDRESS"
LOCAL_WORKER_CONFIG = {
    "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None,
    "distributed.worker.profile.enabled": False,
    "distributed.worker.preload": ["fusemap.sweeps.task"],
    "distributed.admin.tick.interval": "1s",
    "distributed.worker.memory.monitor-interval": "1s",
    "distributed.admin.system-monitor.interval": "2s",
}
"""What the local cluster's workers do differently from Dask's defaults, measured on 6
points of the three matmuls (4.5-4.9 s each in a plain loop):

* glibc's own trim threshold, not Dask's ``MALLOC_TRIM_THRESHOLD_=65536``: with it every
  large array freed went back to the system and came back page by page, and each point
  took 5.5-6.4 s in a worker against 4.5-5.1 s in a loop (4.7-5.4 s without it);
* no sampling of the task's stack every 10 ms (Dask's profiler): +41% against the loop
  with it, +25% without it (before the first change);
* the worker imports the mapper as it starts (a preload), while the client still loads
  the points' specs (:class:`LocalStart`), not when the first point arrives;
* its event loop checks its own health every second, not every 20 ms, and its memory
  and system monitors run every 1 and 2 s, not 0.1 and 0.5 s: the threads beside the
  point used 0.34 s of CPU per 19 s of mapping (1.8%, each wake-up also taking the GIL
  from the point), now 0.06 s. A worker still stops on its memory limit, a second later
  at most.

A cluster started by hand can do the same: ``MALLOC_TRIM_THRESHOLD_`` unset and
``DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED=False`` (and the intervals above) in the
workers' environment."""
CONNECT_SECONDS = 20
WAIT_FOR_WORKERS_SECONDS = 600


def machine_cores() -> int:
    """Cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def scheduler_address(scheduler: str | None) -> str | None:
    """``scheduler``, else the environment's ``DASK_SCHEDULER_ADDRESS``, else None (local)."""
    return scheduler or os.environ.get(ENV_SCHEDULER) or None


def connect(address: str) -> Any:
    """A Dask client of the scheduler at ``address``; one clear line if it is not there."""
    from dask.distributed import Client

    try:
        return Client(address, timeout=CONNECT_SECONDS)
    except (OSError, TimeoutError, ValueError) as e:
        raise FusemapError(f"cannot reach the Dask scheduler at {address!r}: {e}") from None


def local_workers(workers: int | None, tasks: int) -> int:
    """Worker processes of a local cluster: ``workers``, else the machine's cores; at
    most ``tasks``."""
    return max(1, min(workers or machine_cores(), tasks))


def _local_cluster(n: int) -> Any:
    import dask
    from dask.distributed import LocalCluster

    with warnings.catch_warnings(), dask.config.set(LOCAL_WORKER_CONFIG):
        # port 8787 taken: the dashboard moves, and says where
        warnings.filterwarnings("ignore", message="Port .* is already in use")
        return LocalCluster(
            n_workers=n, threads_per_worker=1, processes=True, silence_logs=logging.ERROR
        )


class LocalStart:
    """A local cluster of ``n`` workers starting in a background thread, so that its
    workers start (and import the mapper) while the caller loads the points. Its
    creator closes it (:meth:`close`), used or not."""

    def __init__(self, n: int) -> None:
        self.n = n
        pool = ThreadPoolExecutor(1, thread_name_prefix="fusemap-cluster-start")
        self._future: Future = pool.submit(_local_cluster, n)
        pool.shutdown(wait=False)

    def cluster(self) -> Any:
        """The started cluster (waits for it; raises what starting it raised)."""
        return self._future.result()

    def close(self) -> None:
        """Close the cluster (once it has started), unused or not."""
        try:
            cluster = self._future.result()
        except Exception:  # it never started: nothing to close
            return
        cluster.close()


@contextmanager
def dask_client(
    scheduler: str | None,
    workers: int | None,
    tasks: int,
    echo: Callable[[str], None],
    starting: LocalStart | None = None,
) -> Iterator[Any]:
    """A client of the cluster: at ``scheduler`` (``workers``: wait for that many), or a
    local one of ``workers`` processes (default: the machine's cores, at most ``tasks``;
    ``starting``: the one already starting, which its owner closes)."""
    address = scheduler_address(scheduler)
    cluster = None
    if address:
        client = connect(address)
        where = f"the cluster at {address}"
    else:
        from dask.distributed import Client

        if starting is not None:
            client, n = Client(starting.cluster()), starting.n
        else:
            n = local_workers(workers, tasks)
            cluster = _local_cluster(n)
            client = Client(cluster)
        where = f"a local cluster of {n} worker{'s' if n > 1 else ''}"
    try:
        if address and workers:
            echo(f"waiting for {workers} workers ...")
            try:
                client.wait_for_workers(workers, timeout=WAIT_FOR_WORKERS_SECONDS)
            except TimeoutError:
                raise FusemapError(
                    f"fewer than {workers} Dask workers joined {address} in "
                    f"{WAIT_FOR_WORKERS_SECONDS} s"
                ) from None
        check_workers(client, echo)
        echo(f"Dask dashboard: {client.dashboard_link} ({where})")
        yield client
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def check_workers(client: Any, echo: Callable[[str], None]) -> None:
    """Every worker must run this fusemap version (the points' results depend on it)."""
    try:
        versions = client.run(_fusemap_version)
    except Exception as e:  # e.g. fusemap is not installed there
        raise FusemapError(
            f"the Dask workers cannot run fusemap ({type(e).__name__}: {e}); install fusemap "
            f"{__version__} on every worker"
        ) from None
    for worker, version in sorted(versions.items()):
        if version != __version__:
            raise FusemapError(
                f"Dask worker {worker} runs fusemap {version}, this client {__version__}; "
                "install the same version everywhere"
            )
    if not versions:
        echo("note: no Dask worker has joined yet; the points wait for workers")


def _fusemap_version() -> str:
    from fusemap import __version__ as version

    return version


@contextmanager
def joblib_on_cluster(scheduler: str) -> Iterator[int]:
    """Run joblib's parallel work (the mapper's pmapping generation) on the Dask cluster
    at ``scheduler``; yields the number of worker threads (the jobs to ask for)."""
    import joblib

    client = connect(scheduler)
    try:
        check_workers(client, lambda line: None)
        threads = sum(client.nthreads().values())
        if threads == 0:
            raise FusemapError(f"no Dask worker has joined the scheduler at {scheduler!r}")
        with joblib.parallel_config(backend="dask"):
            yield max(2, threads)
    finally:
        client.close()
