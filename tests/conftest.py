"""Fixtures shared by the whole suite: every test starts with the default limits and a
fresh expression budget; a deterministic clock for the time limits; a recorded join of
a tiny chain. Paths (the repository, the shared data folder) are in
``tests/support/paths.py``."""

from __future__ import annotations

import os
import time

import pytest

from fusemap.examples import example_path
from fusemap.mapper import ffm
from fusemap.mapper.join.ffm_join import join
from fusemap.spec import limits
from fusemap.spec.spec import load_spec


@pytest.fixture(autouse=True)
def _default_limits():
    saved = os.environ.pop(limits.ENV_VAR, None)
    limits.reset()
    limits.reset_budget()
    yield
    os.environ.pop(limits.ENV_VAR, None)
    if saved is not None:
        os.environ[limits.ENV_VAR] = saved
    limits.reset()


class FakeClock:
    """``time.monotonic`` advancing ``step`` seconds at each read: a time limit becomes a
    number of clock reads (of deadline checks), the same on every machine."""

    def __init__(self, step: float) -> None:
        self.step = step
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        return self.reads * self.step

    @property
    def now(self) -> float:
        """Seconds on this clock so far."""
        return self.reads * self.step


@pytest.fixture
def fake_clock(monkeypatch):
    """``fake_clock(step)`` replaces ``time.monotonic`` (what the limits read) by a
    :class:`FakeClock` for the rest of the test and returns it."""

    def install(step: float) -> FakeClock:
        clock = FakeClock(step)
        monkeypatch.setattr(time, "monotonic", clock)
        return clock

    return install


@pytest.fixture(scope="session")
def renamed_chain_join():
    """(order, tables, workload) of the last join mapping a tiny 4-matmul chain (Pareto
    front): its two middle matmuls are identical, so one table is renamed for the
    other (``renamed_from``)."""
    spec = load_spec(
        example_path("arch.yaml"), example_path("matmul_chain.yaml"),
        variables={"N": 4, "M": 8, "SIZES": [8, 8, 8, 8], "BUFFER_KIB": 0.25},
    )  # fmt: skip
    calls = []

    def recorded(order, tables, wl, *args, **kw):
        calls.append((order, dict(tables), wl))
        return join(order, tables, wl, *args, **kw)

    patch = pytest.MonkeyPatch()
    patch.setattr(ffm, "join", recorded)
    try:
        ffm.map_workload(spec, "pareto")
    finally:
        patch.undo()
    return calls[-1]
