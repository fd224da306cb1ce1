"""Every test starts with the default limits and a fresh expression budget; fixtures
shared by several test modules."""

from __future__ import annotations

import os

import pytest

from fusemap.examples import example_path
from fusemap.mapper import caps, ffm
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
    patch.setattr(caps, "join", recorded)
    try:
        ffm.map_workload(spec, "pareto")
    finally:
        patch.undo()
    return calls[-1]
