"""Tables of the rows near each Einsum's least energy (``ffm.SELF_BOUND``): complete up
to their bound, and the mapper's answer with them the same as with complete tables."""

from __future__ import annotations

import random
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

from fusemap.examples import example_path
from fusemap.mapper import caps, ffm
from fusemap.mapper.join.dependencies import FusionRules
from fusemap.mapper.outcome import MapStatistics
from fusemap.mapper.pmappings import tables
from fusemap.mapper.pmappings.generate import generate_pmappings
from fusemap.mapper.pmappings.tables import generate_tables
from fusemap.mapper.space.config import config_from_spec
from fusemap.mapper.space.plan import fusion_plan
from fusemap.mapper.tiling import search, suffix
from fusemap.spec.arch_eval import ArchEvaluator
from fusemap.spec.resolve import resolve_workload
from fusemap.spec.spec import load_spec
from tests.support.ffm_cases import ffm_case
from tests.support.marks import slow_except
from tests.support.model_helpers import (
    access,
    arch,
    compute_unit,
    einsum,
    memory,
    to_yaml,
    workload,
)
from tests.support.oracle_cases import mm
from tests.unit.mapper.test_deferred_hosting import _config
from tests.unit.mapper.test_front_store import PROJECTIONS, _rows

MARGIN = 0.3
"""Wide, so that many rows lie between the least and the bound."""


def _chain(kib: float, n: int = 3):
    sizes = [8, 16, 8, 16][:n]
    return load_spec(
        example_path("arch.yaml"), example_path("matmul_chain.yaml"),
        variables={"N": n, "M": 8, "SIZES": sizes, "BUFFER_KIB": kib},
    )  # fmt: skip


def _tables(spec, self_bound):
    wl = resolve_workload(spec)
    arch = ArchEvaluator(spec, wl)
    plan = fusion_plan(wl, ffm._orders(wl, "given", 720, FusionRules.of(wl)))
    stats = MapStatistics()
    return generate_tables(
        spec, wl, arch, "energy", 1, None, stats, plan, None, True, self_bound=self_bound
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "make", [lambda t: _chain(0.25), lambda t: _chain(0.5, 4), lambda t: ffm_case(3, t)]
)
def test_a_self_bounded_table_holds_every_row_up_to_its_bound(make, tmp_path):
    """Row for row (energy, latency), the complete table's rows up to the bound are the
    self-bounded table's; the bound is at least the least energy times 1 + the margin,
    and the search did leave rows out (else the test would test nothing)."""
    spec = make(tmp_path)
    full = _tables(spec, None)
    cut = _tables(spec, MARGIN)
    left_out = 0
    for name, whole in full.items():
        part = cut[name]
        bound = part.complete_to
        least = float(whole.energy.min())
        assert float(part.energy.min()) == least
        assert bound >= least * (1 + MARGIN) * (1 - 1e-12)
        assert np.isinf(whole.complete_to)

        def rows(t, bound=bound):
            keep = t.energy <= bound
            return np.array(sorted(zip(t.energy[keep], t.latency[keep], strict=True)))

        got, want = rows(part), rows(whole)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-12)
        left_out += len(whole) - len(part)
    assert left_out > 0


@pytest.mark.parametrize(
    ("make", "enough"),
    [
        # every Einsum at its least: the first tables do
        pytest.param(lambda t: _chain(4.0), True, marks=pytest.mark.slow),
        # the leasts do not fit together
        pytest.param(lambda t: ffm_case(0, t), False, marks=pytest.mark.slow),
        pytest.param(lambda t: ffm_case(5, t), None, marks=pytest.mark.slow),
        (lambda t: ffm_case(7, t, on_chip=True), None),
    ],
)
def test_the_answer_does_not_depend_on_the_self_bound(make, enough, tmp_path, monkeypatch):
    spec = make(tmp_path)
    first = ffm.map_workload(spec, "energy")
    if enough is not None:
        assert first.statistics.self_bounded is enough
    if enough is False:  # the tables up to the mapping the first ones gave held it
        assert first.statistics.self_bounds == ["to the upper bound"]
    monkeypatch.setattr(ffm, "SELF_BOUND", None)
    complete = ffm.map_workload(spec, "energy")
    assert complete.statistics.self_bounded is None
    assert first.best.result.energy == pytest.approx(complete.best.result.energy, rel=1e-12)


def _fills_dominate(seed: int, tmp_path, projections: bool):
    """Einsums whose energy is nearly all in filling the register file below the deepest
    fused node (RF writes dear, every other action cheap, outputs bypass the RF): the
    bottom-up fronts carry nearly the whole energy, so a front row cut too low loses
    rows near the bound. ``projections``: X read by three equal projections P, Q and R
    (tables made one after another, sharing fronts), else a chain of three matmuls."""
    rng = random.Random(seed)
    b = {"m": rng.choice([4, 8, 12])} | {f"n{i}": rng.choice([2, 4, 6]) for i in range(4)}
    if projections:
        es = [mm(e, "X", "W" + e, "T" + e, "n0", "n1") for e in PROJECTIONS]
        es.append(einsum("S", access("TP", ["m", "n1"]), access("TQ", ["m", "n1"]),
                         access("S", ["m", "n1"], output=True)))  # fmt: skip
        es.append(einsum("T", access("S", ["m", "n1"]), access("TR", ["m", "n1"]),
                         access("T", ["m", "n1"], output=True)))  # fmt: skip
    else:
        es = [mm(f"E{i}", f"T{i}", f"W{i}", f"T{i + 1}", f"n{i}", f"n{i + 1}") for i in range(3)]
    nodes = [
        memory("DRAM", "inf", 0.05, 0.05, tensors={"keep": "~Intermediates", "may_keep": "All"}),
        memory(
            "GB", rng.choice([256, 512, 1024]), 0.01, 0.01, read_tp=2, tensors={"may_keep": "All"}
        ),  # fmt: skip
        memory("RF", rng.choice([32, 64]), 0.01, 5, tensors={"keep": "Inputs"}),
        compute_unit("MAC", 0, throughput=2),
    ]
    path = tmp_path / f"fills{seed}.yaml"
    path.write_text(to_yaml({**arch(*nodes), **workload(b, *es)}))
    return load_spec(path)


def _rows_up_to(table, bound: float) -> np.ndarray:
    keep = table.energy <= bound
    return np.array(sorted(zip(table.energy[keep], table.latency[keep], strict=True)))


@pytest.mark.slow
@pytest.mark.parametrize("seed", [5, 6, 7])
def test_fronts_cut_at_the_ceiling_keep_every_row_up_to_the_bound(seed, tmp_path):
    """Nearly all the energy lies below the deepest fused node: the bottom-up fronts are
    cut at the loosest ceiling of the templates that meet them, and the table still holds,
    row for row, every row of the complete one up to its bound."""
    spec = _fills_dominate(seed, tmp_path, projections=False)
    config = replace(config_from_spec(spec), fusion=True, hosts=frozenset())
    left_out = 0
    for name in ("E0", "E1", "E2"):
        whole = generate_pmappings(spec, name, objective="energy", config=config)
        part = generate_pmappings(spec, name, objective="energy", config=config,
                                  self_bound=MARGIN)  # fmt: skip
        assert part.complete_to >= float(whole.energy.min()) * (1 + MARGIN) * (1 - 1e-12)
        got, want = _rows_up_to(part, part.complete_to), _rows_up_to(whole, part.complete_to)
        assert got.shape == want.shape, name
        np.testing.assert_allclose(got, want, rtol=1e-12)
        left_out += len(whole) - len(part)
    assert left_out > 0


@pytest.mark.parametrize("seed", slow_except(range(4), fast=[2]))
def test_fronts_kept_for_the_next_table_are_used_only_up_to_where_they_are_complete(seed, tmp_path):
    """Tables of P, Q and R made one after another, each cut near its own least and
    reusing the fronts of the one before (cut at that one's ceiling): each holds every
    row its complete table, made alone, has up to its bound."""
    spec = _fills_dominate(seed, tmp_path, projections=True)
    wl, arch_, config = _config(spec)
    together = tables._generate_kind(
        spec, PROJECTIONS, "energy", config, None, True, wl, arch_, self_bound=MARGIN
    )
    for part in together:
        whole = generate_pmappings(
            spec, part.einsum, objective="energy", config=config, workload=wl, arch=arch_,
            only=tables._unmarked, with_floors=True,
        )  # fmt: skip
        got, want = _rows_up_to(part, part.complete_to), _rows_up_to(whole, part.complete_to)
        assert got.shape == want.shape, part.einsum
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_the_front_ceiling_is_the_loosest_of_the_templates_meeting_fronts():
    """By hand: a template bounded by 1.1 x the least (12 x 1.1 = 13.2), one by its own
    ceiling 20 and 1.3 x the least (15.6), one by its ceiling alone (14): the loosest,
    15.6, with the float margin."""
    a = SimpleNamespace(ceiling=np.inf, bounded_by_least=True, least_slack=0.1)
    b = SimpleNamespace(ceiling=20.0, bounded_by_least=True, least_slack=0.3)
    c = SimpleNamespace(ceiling=14.0, bounded_by_least=False, least_slack=0.0)
    assert search._front_ceiling([a, b, c], 12.0) == pytest.approx(15.6 * (1 + 1e-9), rel=1e-15)
    assert search._front_ceiling([a, c], 12.0) == pytest.approx(14.0 * (1 + 1e-9), rel=1e-15)
    assert search._front_ceiling([a, b], np.inf) == np.inf
    assert search._front_ceiling([c], np.inf) == pytest.approx(14.0 * (1 + 1e-9), rel=1e-15)
    assert search._front_ceiling([], 12.0) == np.inf


@pytest.mark.parametrize("seed", slow_except(range(3), fast=[2]))
def test_a_front_kept_cut_is_built_again_for_a_table_that_needs_more(seed, tmp_path):
    """P's table is made with a low energy ceiling (its fronts cut there) and keeps its
    fronts; Q's, made after it with no ceiling, must build those fronts again, not take
    them cut: its table is the one Q gets alone."""
    spec = _fills_dominate(seed, tmp_path, projections=True)
    wl, arch_, config = _config(spec)

    def table(name, **kw):
        return generate_pmappings(
            spec, name, objective="energy", config=config, workload=wl, arch=arch_,
            only=tables._unmarked, with_floors=True, **kw,
        )  # fmt: skip

    store = suffix.FrontStore()
    cut = float(table("P").energy.min()) * 1.05
    table("P", fronts=store, ceiling=cut)
    assert any(f.complete_to < np.inf for f in store.fronts.values())
    hits = store.hits
    got, want = _rows(table("Q", fronts=store)), _rows(table("Q"))
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert store.hits > hits, "no front was taken from the store: the test tests nothing"


def test_margins_to_an_upper_bound_by_hand():
    """Leasts A 2, B 5, C 1; one order A B C, upper 10: A's row may cost up to
    10 - 5 - 1 = 4 (self bound 4 / 2 - 1 = 1), B's 10 - 3 = 7 (0.4), C's 10 - 7 = 3 (2);
    with the pad. With a second order A B (C elsewhere), A may cost 10 - 5 = 5 there."""
    pad = 1 + caps.MARGIN_PAD
    got = caps.margins_to(10.0, [["A", "B", "C"]], {"A": 2.0, "B": 5.0, "C": 1.0})
    assert got == pytest.approx({"A": 4 * pad / 2 - 1, "B": 7 * pad / 5 - 1, "C": 3 * pad - 1})
    two = caps.margins_to(10.0, [["A", "B", "C"], ["A", "B"]], {"A": 2.0, "B": 5.0, "C": 1.0})
    assert two is not None and two["A"] == pytest.approx(5 * pad / 2 - 1)
    assert caps.margins_to(10.0, [["A", "B"]], {"A": 2.0, "B": 0.0}) is None  # no relative bound
    assert caps.margins_to(10.0, [["A"]], {"A": 2.0, "B": 1.0}) is None  # B in no order


def test_the_cap_of_tables_made_to_an_upper_bound_reaches_it():
    """Tables complete to least x (1 + margins_to(U)) give a self-bounded cap of at least U:
    the join capped there keeps the mapping of energy U found before."""
    leasts = {"A": 2.0, "B": 5.0, "C": 1.0}
    bounds = caps.margins_to(10.0, [["A", "B", "C"]], leasts)
    assert bounds is not None
    fake = {
        n: SimpleNamespace(
            energy=np.array([least]), latency=np.array([1.0]), complete_to=least * (1 + bounds[n])
        )
        for n, least in leasts.items()
    }
    cap = caps.self_bounded_cap([["A", "B", "C"]], fake)
    assert cap is not None and cap * (1 + 1e-9) >= 10.0
