"""The dirty join (ε-pruning) and the clean pass it bounds (FFM §6.3).

The clean pass drops partial mappings that cannot beat the dirty join's mapping, so the
answer must not depend on epsilon; the dirty join's own mapping is valid, never better
than the optimum, and the bound does drop rows.
"""

from __future__ import annotations

import numpy as np
import pytest

from fusemap.examples import example_path
from fusemap.mapper import ffm
from fusemap.mapper.ffm import map_workload
from fusemap.mapper.join import Bound
from fusemap.mapper.join_rows import Group
from fusemap.spec.spec import load_spec


def _spec(kib: float, n: int = 3):
    return load_spec(
        example_path("arch.yaml"),
        example_path("matmul_chain.yaml"),
        variables={"N": n, "M": 8, "SIZES": [16, 8, 4], "BUFFER_KIB": kib},
    )


@pytest.fixture
def tables_once(monkeypatch):
    """Every map_workload call of a test reuses the first call's pmapping tables (the
    join is what these tests are about)."""
    made: dict = {}
    real = ffm.generate_tables

    def cached(spec, wl, arch, objective, *args):
        if objective not in made:
            made[objective] = real(spec, wl, arch, objective, *args)
        return made[objective]

    monkeypatch.setattr(ffm, "generate_tables", cached)


@pytest.mark.parametrize("objective", ["energy", "latency", "edp"])
@pytest.mark.parametrize("kib", [0.25, 0.5])
def test_answer_does_not_depend_on_epsilon(objective, kib, tables_once):
    spec = _spec(kib)
    exact = map_workload(spec, objective, epsilon=0.0)
    assert exact.statistics.dirty_bound is None and not exact.statistics.bounded
    value = {
        "energy": lambda r: r.energy,
        "latency": lambda r: r.latency,
        "edp": lambda r: r.energy * r.latency,
    }[objective]
    best = value(exact.best.result)
    for eps in (0.05, 0.5, 3.0):
        out = map_workload(spec, objective, epsilon=eps)
        assert value(out.best.result) == pytest.approx(best, rel=1e-12)
        assert out.statistics.dirty_bound >= best * (1 - 1e-12)
        if eps == 3.0:  # coarse boxes: the dirty join alone misses the optimum
            assert out.statistics.dirty_bound > best * 1.01


def test_clean_pass_drops_rows(tables_once):
    out = map_workload(_spec(0.5, n=4), "energy", epsilon=0.2)
    assert sum(out.statistics.bounded) > 0


def test_bound_keeps_exactly_the_rows_that_can_still_win():
    g = Group(
        np.array([1.0, 5.0, 9.0]),
        np.array([4.0, 2.0, 1.0]),
        np.zeros((3, 1), dtype=np.int64),
        {},
        {},
    )
    rest = np.array([3.0, 0.0])  # after Einsum 0, the next one costs at least 3
    b = Bound("energy", 8.0, rest, np.array([1.0, 0.0]))
    assert list(b.keep(g, 0).energy) == [1.0, 5.0]  # 9 + 3 > 8
    edp = Bound("edp", 24.0, rest, np.array([1.0, 0.0]))
    assert list(edp.keep(g, 0).energy) == [1.0, 5.0, 9.0]  # (4)(5)=20, (8)(3)=24, (12)(2)=24
    edp = Bound("edp", 23.0, rest, np.array([1.0, 0.0]))
    assert list(edp.keep(g, 0).energy) == [1.0]
    assert Bound("latency", 0.5, rest, np.array([1.0, 0.0])).keep(g, 0) is None
