"""The mapper's worker processes: tasks spread over them and this process, and what a
task in a worker needs besides its work."""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import functools
import gc
import threading
from collections.abc import Callable, Iterator
from typing import Any

from ..spec import limits


def give_back_memory() -> None:
    """Return a finished task's freed memory to the system (glibc keeps it otherwise):
    a worker that ran GPT-3's V, K and Q tables would hold on to gigabytes."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to do
        ctypes.CDLL("libc.so.6").malloc_trim(0)


@contextlib.contextmanager
def in_worker(lim: limits.Limits | None) -> Iterator[None]:
    """A task in a worker process: the caller's limits (``--limit``), a fresh expression
    budget, and the freed memory given back at the end. None: run in the caller's
    process (nothing to set up)."""
    if lim is None:
        yield
        return
    limits.configure(**dataclasses.asdict(lim))
    limits.reset_budget()
    try:
        yield
    finally:
        give_back_memory()


def run_tasks(jobs: int, task: Callable[..., Any], args: list[tuple]) -> list:
    """``task(*a, lim)`` for every ``a`` of ``args`` (:func:`spread`: in this process
    and up to ``jobs - 1`` workers), results in order; ``lim``, the task's last
    parameter, is the caller's limits in a worker, None here (see :func:`in_worker`)."""
    return spread(
        jobs,
        len(args),
        lambda i: (task, (*args[i], limits.current())),
        lambda i: task(*args[i], None),
    )


def spread(
    jobs: int,
    count: int,
    remote: Callable[[int], tuple[Callable[..., Any], tuple]],
    local: Callable[[int], Any],
    done: Callable[[int, Any], None] | None = None,
) -> list:
    """Tasks ``0 .. count - 1``, taken in that order (give the largest first) by this
    process (``local(i)``) and by up to ``jobs - 1`` worker processes (``remote(i)``:
    the function and arguments to send), results in order; ``done(i, result)`` as each
    ends (one at a time).

    This process works too: it has everything imported and the inputs built, where a
    new worker spends seconds starting (GPT-3: 2.3 s), and its results need no pickling.
    If tasks fail, the error of the first of them is raised (every task before it was
    taken, so which one does not depend on timing), once the tasks under way end.
    """
    if min(jobs, count) > 1 and not _default_backend():  # e.g. a Dask cluster's
        return _on_backend(jobs, count, remote, done)
    results: list[Any] = [None] * count
    errors: dict[int, Exception] = {}
    lock = threading.Lock()
    taken = [0]
    stopped = [False]

    def take() -> int | None:
        with lock:
            if errors or stopped[0] or taken[0] == count:
                return None
            taken[0] += 1
            return taken[0] - 1

    def finish(i: int, run: Callable[[], Any]) -> None:
        try:
            result = run()
        except Exception as e:  # raised again below, the first task's first
            with lock:
                errors[i] = e
            return
        with lock:
            results[i] = result
            if done is not None:
                done(i, result)

    def run_remote(executor, i: int) -> Any:
        fn, args = remote(i)
        return executor.submit(fn, *args).result()

    def feed(executor) -> None:
        while (i := take()) is not None:
            finish(i, functools.partial(run_remote, executor, i))

    first = take()  # the largest, here: the workers start seconds late
    helpers = min(jobs, count) - 1
    executor = _executor(jobs - 1) if helpers > 0 else None
    feeders = [threading.Thread(target=feed, args=(executor,), daemon=True) for _ in range(helpers)]
    for f in feeders:
        f.start()
    try:
        i = first
        while i is not None:
            finish(i, functools.partial(local, i))
            i = take()
    except BaseException:  # interrupted: stop the workers now, not when their tasks end
        stopped[0] = True
        if executor is not None:
            executor.shutdown(wait=False, kill_workers=True)
        raise
    for f in feeders:
        f.join()
    if errors:
        raise errors[min(errors)]
    return results


def _default_backend() -> bool:
    """Whether joblib's backend is its default (local processes), not one the caller
    chose (``fusemap map --scheduler``: a Dask cluster's, ``sweeps.cluster``)."""
    from joblib._parallel_backends import LokyBackend
    from joblib.parallel import get_active_backend

    return isinstance(get_active_backend()[0], LokyBackend)


def _on_backend(
    jobs: int,
    count: int,
    remote: Callable[[int], tuple[Callable[..., Any], tuple]],
    done: Callable[[int, Any], None] | None,
) -> list:
    """Every task on joblib's active backend (results in order)."""
    from joblib import Parallel, delayed

    tasks = (delayed(fn)(*args) for fn, args in map(remote, range(count)))
    out = []
    for i, result in enumerate(
        Parallel(n_jobs=min(jobs, count), batch_size=1, return_as="generator")(tasks)
    ):
        out.append(result)
        if done is not None:
            done(i, result)
    return out


def _executor(workers: int):
    """The worker processes, kept between calls (each has imported the mapper once)."""
    from joblib.externals.loky import get_reusable_executor

    return get_reusable_executor(max_workers=workers, timeout=WORKER_IDLE_SECONDS)


WORKER_IDLE_SECONDS = 300
"""A worker left idle this long stops (joblib's default)."""
