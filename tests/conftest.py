"""Fixtures shared by the whole suite: every test starts with the default limits and a
fresh expression budget; a deterministic clock for the time limits; a recorded join of
a tiny chain. Paths (the repository, the shared data folder) are in
``tests/support/paths.py``."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from fusemap.examples import example_path
from fusemap.mapper import caps, ffm
from fusemap.mapper.join.ffm_join import join
from fusemap.spec import limits
from fusemap.spec.spec import load_spec
from tests.support.shares import in_share, parse_share
from tests.support.sweep_helpers import ARCH as TINY_ARCH


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
def tiny_arch_file(tmp_path_factory) -> Path:
    """DRAM, a buffer of ``BUF`` (default 4) x 64 bits and a MAC, no fanout
    (``tests/support/sweep_helpers.py``): the mapper maps a small chain on it in a second
    or two, where ``arch.yaml`` (16 MACs in a row) takes ten times longer."""
    path = tmp_path_factory.mktemp("tiny") / "arch.yaml"
    path.write_text(TINY_ARCH)
    return path


RENAMED_CHAINS = {
    "tiny arch": {"N": 4, "M": 8, "SIZES": [8, 8, 8, 8], "BUF": 2},
    "arch.yaml": {"N": 4, "M": 8, "SIZES": [8, 8, 8, 8], "BUFFER_KIB": 0.25},
}
"""The 4-matmul chains of ``renamed_chain_join`` (``matmul_chain.yaml``'s variables)."""


@pytest.fixture(
    scope="session", params=["tiny arch", pytest.param("arch.yaml", marks=pytest.mark.slow)]
)
def renamed_chain_join(request, tiny_arch_file):
    """(order, tables, workload) of the last join mapping a 4-matmul chain (Pareto front)
    of 8 x 8 matrices: its two middle matmuls are identical, so one table is renamed for
    the other (``renamed_from``). On the tiny arch in the fast set, on ``arch.yaml`` (a
    minute) in the slow one."""
    arch = tiny_arch_file if request.param == "tiny arch" else example_path("arch.yaml")
    spec = load_spec(
        arch, example_path("matmul_chain.yaml"), variables=RENAMED_CHAINS[request.param]
    )
    calls = []

    def recorded(order, tables, wl, *args, **kw):
        calls.append((order, dict(tables), wl))
        return join(order, tables, wl, *args, **kw)

    patch = pytest.MonkeyPatch()
    patch.setattr(caps, "join", recorded)
    try:
        ffm.map_workload(spec, "pareto")
    finally:
        patch.undo()
    return calls[-1]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--share",
        default=None,
        metavar="K/N",
        help="run only the tests of share K of N (by recorded duration, else a hash of the "
        "id; CI runs one share of the slow set; the N shares together are the whole set)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With ``--share K/N``, keep the tests of share K (``tests/support/shares.py``)."""
    share = config.getoption("--share")
    if share is None:
        return
    try:
        k, n = parse_share(share)
    except ValueError as err:
        raise pytest.UsageError(f"--share {share}: {err}") from None
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        (kept if in_share(item.nodeid, k, n) else dropped).append(item)
    config.hook.pytest_deselected(items=dropped)
    items[:] = kept
