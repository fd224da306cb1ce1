"""Several fused loops per rank variable. The default search splits each shared rank
variable once above fused nodes; on this chain of three matmuls the optimum splits ``m``
over two fused loops (T1 under ``m``:32; T2 under ``m``:32, ``m``:16, ``n2``:4), 7% below
the best mapping with one loop per variable (EDP: 7%). With every objective (energy,
latency, EDP, the Pareto front) the mapper bounds every template with two loop gaps
above its deepest fused node over the whole space (``full_space.py``) and searches
those that may beat the answer (add a point to the front), so the default finds it;
``false`` searches the whole space from the start (docs/ffm.md)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from fusemap.examples import example_path
from fusemap.mapper import full_space
from fusemap.mapper.ffm import map_workload
from fusemap.spec.spec import load_spec

CHAIN = {"N": 3, "M": 256, "SIZES": [64, 16, 64, 16], "BUFFER_KIB": 1}
ONCE_ONLY = 6.7100672e-06  # the best mapping with one fused loop per rank variable
OPTIMUM = 6.238208e-06  # measured 2026-11-24; the mapping found is scored by the model


def _map(tmp_path, once: bool, objective: str = "energy", chain=CHAIN, checked=True):
    knob = tmp_path / "mapper.yaml"
    knob.write_text(f"mapper:\n  fused_loops_once: {str(once).lower()}\n")
    spec = load_spec(
        example_path("arch.yaml"), example_path("matmul_chain.yaml"), knob, variables=chain
    )
    return map_workload(spec, objective, check_full_space=checked)


@pytest.mark.slow
def test_several_fused_loops_per_rank_variable_are_found_by_default(tmp_path):
    default = _map(tmp_path, True)
    several = _map(tmp_path, False)
    assert default.best.result.energy == pytest.approx(OPTIMUM, rel=1e-9)
    assert several.best.result.energy == pytest.approx(OPTIMUM, rel=1e-9)
    t2 = next(f for f in default.best.fused if f.tensor == "T2")
    assert [v for v, _ in t2.loops].count("m") == 2
    check = default.statistics.full_space
    assert check is not None and check.templates_searched > 0 and check.rows_added > 0


@pytest.mark.slow
def test_without_the_check_the_answer_is_the_best_with_one_loop_per_variable(tmp_path):
    """``check_full_space=False`` (for experiments whose check does not finish) gives
    the optimum of the default space, says so, and checks nothing."""
    unchecked = _map(tmp_path, True, checked=False)
    assert unchecked.best.result.energy == pytest.approx(ONCE_ONLY, rel=1e-9)
    assert unchecked.statistics.unchecked and unchecked.statistics.full_space is None
    t2 = next(f for f in unchecked.best.fused if f.tensor == "T2")
    assert [v for v, _ in t2.loops].count("m") <= 1
    assert not _map(tmp_path, True).statistics.unchecked


EDP_ONCE_ONLY = 3.229421142e-09  # measured 2026-11-24 (one loop per variable)
EDP_OPTIMUM = 3.002324746e-09  # measured 2026-11-24 (fused_loops_once: false)


@pytest.mark.slow
def test_the_edp_objective_finds_several_fused_loops_per_variable_too(tmp_path):
    default = _map(tmp_path, True, "edp")
    several = _map(tmp_path, False, "edp")
    for out in (default, several):
        r = out.best.result
        assert r.energy * r.latency == pytest.approx(EDP_OPTIMUM, rel=1e-9)
    assert EDP_OPTIMUM < EDP_ONCE_ONLY * (1 - 0.05)
    check = default.statistics.full_space
    assert check is not None and check.templates_searched > 0 and check.rows_added > 0


@pytest.mark.slow
def test_the_latency_objective_is_checked_over_the_whole_space(tmp_path):
    default = _map(tmp_path, True, "latency")
    several = _map(tmp_path, False, "latency")
    assert default.statistics.full_space is not None
    assert default.statistics.full_space.templates_bounded > 0
    assert default.best.result.latency == pytest.approx(several.best.result.latency, rel=1e-9)


@pytest.mark.slow
def test_the_pareto_front_is_checked_over_the_whole_space(tmp_path):
    default = _map(tmp_path, True, "pareto")
    several = _map(tmp_path, False, "pareto")
    check = default.statistics.full_space
    assert check is not None and check.templates_searched > 0 and check.rows_added > 0

    def points(out) -> list[float]:
        return [x for m in out.mappings for x in (m.result.energy, m.result.latency)]

    assert points(default) == pytest.approx(points(several), rel=1e-9)
    # The EDP optimum is on the front, and it splits a variable (see above).
    edp = min(m.result.energy * m.result.latency for m in default.mappings)
    assert edp == pytest.approx(EDP_OPTIMUM, rel=1e-9)


def test_a_row_cut_keeps_rows_no_point_of_the_front_dominates():
    """Hand-computed: a front of (10, 5) and (6, 9); the others' least 1 and 1."""
    from fusemap.mapper.full_space import RowCut

    cut = RowCut("pareto", math.inf, rest_energy=1.0, rest_latency=1.0, front=((10, 5), (6, 9)))
    # (5, 4): nothing dominates it; (7, 9): (6, 9) does; (10.5, 4.5): faster than both;
    # (10.5, 5.5): (10, 5) does.
    rows = cut.keeps([4.0, 6.0, 9.5, 9.5], [3.0, 8.0, 3.5, 4.5])
    assert rows.tolist() == [True, False, True, False]
    assert cut.energy_ceiling() == math.inf  # no point as fast as the others' least alone
    slow = RowCut("pareto", math.inf, rest_energy=1.0, rest_latency=6.0, front=((10, 5), (6, 9)))
    assert slow.energy_ceiling() == pytest.approx(9.0)  # (10, 5) dominates above energy 10
    # Rows of latency at least 4 (own 4, others 1): (10, 5) dominates them above energy 10.
    own = RowCut("pareto", math.inf, 1.0, 1.0, front=((10, 5), (6, 9)), own_latency=4.0)
    assert own.energy_ceiling() == pytest.approx(10 * (1 - 1e-9) - 1.0)


def test_a_row_cut_completes_rows_with_the_others_least():
    """Hand-computed: the others' least energy 2 and latency 3, best found 20."""
    from fusemap.mapper.full_space import RowCut

    edp = RowCut("edp", 20.0, rest_energy=2.0, rest_latency=3.0)
    # (2 + 2) * (2 + 3) = 20: kept; (3 + 2) * (1 + 3) = 20: kept; (3 + 2) * (2 + 3) = 25: cut.
    assert edp.keeps([2.0, 3.0, 3.0], [2.0, 1.0, 2.0]).tolist() == [True, True, False]
    assert edp.energy_ceiling() == pytest.approx(20.0 / 3.0 - 2.0)  # latency at least 3
    lat = RowCut("latency", 20.0, rest_energy=2.0, rest_latency=3.0)
    assert lat.keeps([100.0, 1.0], [17.0, 17.5]).tolist() == [True, False]
    assert lat.energy_ceiling() == math.inf
    # Its own least latency 1: every completion takes at least 4, so E + 2 <= 20 / 4.
    own = RowCut("edp", 20.0, rest_energy=2.0, rest_latency=3.0, own_latency=1.0)
    assert own.energy_ceiling() == pytest.approx(20.0 / 4.0 - 2.0)
    assert own.keeps([3.0, 3.5], [1.0, 1.0]).tolist() == [True, False]
    energy = RowCut("energy", 5.0)  # an allowance: the others already taken off
    assert energy.keeps([5.0, 5.5], [0.0, 0.0]).tolist() == [True, False]
    assert energy.energy_ceiling() == 5.0


@pytest.mark.slow
def test_nothing_is_searched_again_when_no_template_can_beat_the_answer(tmp_path):
    # A roomy buffer: every Einsum reaches its own least energy in the default space.
    roomy = {**CHAIN, "BUFFER_KIB": 64}
    out = _map(tmp_path, True, chain=roomy)
    check = out.statistics.full_space
    assert check is not None and check.templates_bounded > 0
    assert check.templates_searched == 0 and check.rows_added == 0
    assert out.best.result.energy == pytest.approx(
        _map(tmp_path, False, chain=roomy).best.result.energy, rel=1e-9
    )


@pytest.mark.slow
def test_relaxed_floors_are_each_templates_least_energy_over_the_whole_space(tmp_path):
    """The relaxed search (prefixes forgotten) gives, per template, exactly the least
    energy of the template's pmappings searched with several loops per variable."""
    from dataclasses import replace

    from fusemap.mapper.full_space import relaxed_floors
    from fusemap.mapper.pmappings.generate import generate_pmappings
    from fusemap.mapper.space.config import config_from_spec
    from fusemap.mapper.space.templates import template_key

    knob = tmp_path / "mapper.yaml"
    knob.write_text("mapper:\n  fused_loops_once: false\n")
    spec = load_spec(
        example_path("arch.yaml"), example_path("matmul_chain.yaml"), knob, variables=CHAIN
    )
    config = replace(config_from_spec(spec), fusion=True)
    floors = relaxed_floors(spec, "MM1", config, math.inf)
    assert floors
    table = generate_pmappings(spec, "MM1", objective="energy", config=config, prune=False)
    least: dict[tuple, float] = {}
    for i in range(len(table)):
        key = template_key(table.results[int(table.template[i])].template)
        least[key] = min(least.get(key, math.inf), float(table.energy[i]))
    for key, floor in floors.items():
        assert floor == pytest.approx(least.get(key, math.inf), rel=1e-9)


@pytest.mark.slow
def test_rows_searched_again_after_the_semi_join_still_give_the_optimum(tmp_path, monkeypatch):
    """With every check table past the row bound, each is searched again keeping only
    rows that may join (``mapper/joinable.py``): the same optimum, some keys dropped."""
    monkeypatch.setattr(full_space, "SEMI_JOIN_ROWS", 0)
    got = _map(tmp_path, True)
    assert got.best.result.energy == pytest.approx(OPTIMUM, rel=1e-9)
    check = got.statistics.full_space
    assert check is not None and check.semi_joined > 0 and check.rows_added > 0
    assert check.keys_dropped > 0


@pytest.mark.slow
def test_a_second_search_of_only_the_templates_with_a_joinable_key_loses_no_row(
    tmp_path, monkeypatch
):
    """Each table searched again after the semi-join is searched over the templates
    whose first search found a key that may join: the same rows, row for row, as the
    same search over every template the first search saw; and fewer templates."""
    monkeypatch.setattr(full_space, "SEMI_JOIN_ROWS", 0)
    real, calls = full_space._search_in_worker, []

    def spy(*args):
        out = real(*args)
        calls.append((args, out))
        return out

    monkeypatch.setattr(full_space, "_search_in_worker", spy)
    _map(tmp_path, True)
    again = [(args, out) for args, out in calls if args[6] is not None]
    firsts = {args[1]: out for args, out in calls if args[6] is None}
    assert again
    fewer = 0
    for args, (table, searched, _) in again:
        every = frozenset(firsts[args[1]][2].per_template())  # every one with a kept row
        allowed = replace(args[6], templates=every)
        whole, whole_searched, _ = real(*args[:6], allowed, args[7])
        assert _rows(table) == _rows(whole)
        fewer += whole_searched - searched
    assert fewer > 0


def _rows(table) -> list[tuple]:
    """A table's rows as (energy, prefix) pairs, sorted."""
    if table is None or not len(table):
        return []
    prefixes = table.fusion.interner.prefixes
    seqs = [prefixes[s] for s in table.fusion.seq.tolist()]
    return sorted(zip(table.energy.tolist(), seqs, strict=True))
