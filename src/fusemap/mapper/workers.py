"""What the mapper's worker processes (joblib) need besides their work."""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import gc
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from ..spec import limits


def give_back_memory() -> None:
    """Return a finished task's freed memory to the system (glibc keeps it otherwise).

    joblib's workers restart when their resident memory has grown by 300 MB since their
    first task; on GPT-3 a restart cost a worker about 5 s, and the freed arrays of a
    large table were what kept the memory high."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to do
        ctypes.CDLL("libc.so.6").malloc_trim(0)


@contextlib.contextmanager
def quiet_worker_restarts() -> Iterator[None]:
    """No warning when joblib replaces a worker it finds grown (the work goes on and the
    result is the same; nothing for a user to do)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="A worker stopped while some jobs")
        yield


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
    """``task(*a)`` for every ``a`` of ``args``, in up to ``jobs`` worker processes (in
    this process when one would do), results in order."""
    if jobs > 1 and len(args) > 1:
        from joblib import Parallel, delayed

        with quiet_worker_restarts():
            return Parallel(n_jobs=min(jobs, len(args)), batch_size=1)(
                delayed(task)(*a) for a in args
            )
    return [task(*a) for a in args]
