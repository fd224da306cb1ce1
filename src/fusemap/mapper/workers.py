"""What the mapper's worker processes (joblib) need besides their work."""

from __future__ import annotations

import contextlib
import ctypes
import gc
import warnings
from collections.abc import Iterator


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
