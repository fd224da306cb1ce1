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
from fusemap.mapper.join.bound import Bound
from fusemap.mapper.join.rows import Group
from fusemap.spec.spec import load_spec
from tests.support.marks import slow_except


def _spec(kib: float, n: int = 3):
    return load_spec(
        example_path("arch.yaml"),
        example_path("matmul_chain.yaml"),
        variables={"N": n, "M": 8, "SIZES": [16, 8, 4], "BUFFER_KIB": kib},
    )


OBJECTIVE_VALUE = {
    "energy": lambda r: r.energy,
    "latency": lambda r: r.latency,
    "edp": lambda r: r.energy * r.latency,
}
"""The objective's value of a mapping's result."""


@pytest.fixture
def tables_once(monkeypatch):
    """Every map_workload call of a test reuses the first call's pmapping tables (the
    join is what these tests are about)."""
    made: dict = {}
    real = ffm.generate_tables

    def cached(spec, wl, arch, objective, *args, **kwargs):
        key = (objective, kwargs.get("self_bound"))  # tables near the least are others
        if key not in made:
            made[key] = real(spec, wl, arch, objective, *args, **kwargs)
        return made[key]

    monkeypatch.setattr(ffm, "generate_tables", cached)
    # Every call tiles every template: the cached tables must serve every cap.
    monkeypatch.setattr(ffm, "DEFER_HOSTING", False)


@pytest.mark.slow
@pytest.mark.parametrize("objective", ["energy", "latency", "edp"])
@pytest.mark.parametrize("kib", [0.25, 0.5])
def test_answer_does_not_depend_on_epsilon(objective, kib, tables_once):
    spec = _spec(kib)
    exact = map_workload(spec, objective, epsilon=0.0)
    assert exact.statistics.dirty_bound is None
    value = OBJECTIVE_VALUE[objective]
    best = value(exact.best.result)
    for eps in (0.05, 0.5, 3.0):
        out = map_workload(spec, objective, epsilon=eps)
        assert value(out.best.result) == pytest.approx(best, rel=1e-12)
        assert out.statistics.dirty_bound >= best * (1 - 1e-12)
        if eps == 3.0 and objective == "energy":
            # Coarse boxes: the dirty join alone misses the energy optimum. (For latency
            # and EDP it finds it since T1 may go through DRAM alone, 2026-12-06.)
            assert out.statistics.dirty_bound > best * 1.01


@pytest.mark.slow
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
    # Einsum 0 is joined; Einsum 1 costs at least energy 3 and latency 1.
    least_e, least_l = np.array([1.0, 3.0]), np.array([1.0, 1.0])
    b = Bound("energy", 8.0, least_e, least_l)
    assert list(b.keep(g, 0, ()).energy) == [1.0, 5.0]  # 9 + 3 > 8
    edp = Bound("edp", 24.0, least_e, least_l)
    assert list(edp.keep(g, 0, ()).energy) == [1.0, 5.0, 9.0]  # (4)(5)=20, (8)(3)=24, (12)(2)=24
    edp = Bound("edp", 23.0, least_e, least_l)
    assert list(edp.keep(g, 0, ()).energy) == [1.0]
    assert Bound("latency", 0.5, least_e, least_l).keep(g, 0, ()) is None
    assert Bound("energy", 0.0, least_e, least_l).lowest() == 4.0
    assert Bound("edp", 0.0, least_e, least_l).lowest() == 8.0


def test_bound_allows_the_pmappings_that_fit_beside_the_others_best():
    """Einsum 1's row of energy e can be part of a mapping within 8 only if e + 1 <= 8
    (Einsum 0's least energy is 1); with EDP, (e + 1)(l + 1) <= 24."""

    class Table:
        energy = np.array([3.0, 7.0, 7.5])
        latency = np.array([5.0, 2.0, 1.0])

    least_e, least_l = np.array([1.0, 3.0]), np.array([1.0, 1.0])
    assert list(Bound("energy", 8.0, least_e, least_l).allowed(Table, 1)) == [True, True, False]
    edp = Bound("edp", 24.0, least_e, least_l)  # (4)(6)=24, (8)(3)=24, (8.5)(2)=17
    assert list(edp.allowed(Table, 1)) == [True, True, True]
    edp = Bound("edp", 23.0, least_e, least_l)
    assert list(edp.allowed(Table, 1)) == [False, False, True]


@pytest.mark.slow
@pytest.mark.parametrize("objective", ["energy", "latency", "edp"])
@pytest.mark.parametrize("kib", [0.25, 0.5, 4.0])
def test_capped_joins_give_the_unbounded_optimum(objective, kib, tables_once, monkeypatch):
    """The joins capped just above the lower bound, then higher, then not at all (the
    default) find what the unbounded join alone finds; with a small buffer the first cap
    finds nothing and the next one is tried."""
    spec = _spec(kib)
    capped = map_workload(spec, objective)
    monkeypatch.setattr(ffm, "DEEPENING", ())
    alone = map_workload(spec, objective)
    check = alone.statistics.full_space
    # The unbounded join, then (rows with several fused loops per variable added) the
    # join again at its answer.
    assert alone.statistics.caps[0] is None
    assert len(alone.statistics.caps) == 1 + bool(check and check.rows_added)
    value = OBJECTIVE_VALUE[objective]
    assert value(capped.best.result) == pytest.approx(value(alone.best.result), rel=1e-12)
    caps = capped.statistics.caps
    assert caps[-1] is None or value(capped.best.result) <= caps[-1] * (1 + 1e-9)


@pytest.mark.parametrize("objective", slow_except(["energy", "latency", "edp"], fast=["latency"]))
def test_a_cap_that_finds_nothing_gives_way_to_the_next(objective, tmp_path, monkeypatch):
    """Brute-force case 0: the least energy of every Einsum does not fit together, so
    the first caps find nothing; the answer is the unbounded join's."""
    from tests.support.ffm_cases import ffm_case

    spec = ffm_case(0, tmp_path)
    capped = map_workload(spec, objective)
    assert len(capped.statistics.caps) > 1
    monkeypatch.setattr(ffm, "DEEPENING", ())
    alone = map_workload(spec, objective)
    value = OBJECTIVE_VALUE[objective]
    assert value(capped.best.result) == pytest.approx(value(alone.best.result), rel=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("objective", ["energy", "edp"])
@pytest.mark.parametrize("kib", [0.25, 0.5])
def test_pieces_that_match_no_group_are_not_formed(objective, kib, tables_once, monkeypatch):
    """The join forms pieces only of rows whose compatibility with earlier Einsums some
    group has: the same mappings as forming every piece, and fewer pieces formed when
    many rows are joined."""
    from fusemap.mapper.join import ffm_join as join_module

    spec = _spec(kib)
    real = join_module.table_pieces
    formed = {"matched": 0, "all": 0}

    def counting(label, use_match):
        def pieces(*args):
            # args: j, order, table, workload, arch, accessors, memories, allowed,
            # match, shareable
            out = real(*args) if use_match else real(*args[:8], None, *args[9:])
            formed[label] += len(out)
            return out

        return pieces

    monkeypatch.setattr(join_module, "table_pieces", counting("matched", True))
    matched = map_workload(spec, objective)
    monkeypatch.setattr(join_module, "table_pieces", counting("all", False))
    every = map_workload(spec, objective)
    assert matched.best.result.energy == every.best.result.energy
    assert matched.best.result.latency == every.best.result.latency
    assert matched.best.mapping == every.best.mapping
    if objective == "edp":  # (the energy join is capped: its few rows all match here)
        assert formed["matched"] < formed["all"]
