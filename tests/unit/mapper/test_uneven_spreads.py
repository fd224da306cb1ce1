"""Uneven spatial spreads (a rank of 3 over 2 instances as 2 + 1): the rules, by hand,
and the generator against the brute force on cases built to need them."""

from __future__ import annotations

import random

import numpy as np
import pytest

from fusemap.mapper.pmappings import combine
from fusemap.mapper.pmappings.generate import generate_pmappings
from fusemap.mapper.space.config import MapperConfig, config_from_spec
from fusemap.mapper.space.spatial import spatial_choices
from fusemap.mapper.space.tiles import trip_counts
from fusemap.mapper.tiling.uneven import spatial_tiles, spread_tiles, virtual_bound
from fusemap.model.evaluate import evaluate_mapping
from fusemap.spec.spec import load_spec
from tests.support.mapper_bruteforce import assert_optimum, brute_force, count
from tests.support.model_helpers import (
    access,
    arch,
    chain_matmul,
    compute_unit,
    dim,
    einsum,
    memory,
    to_yaml,
    workload,
)

CONFIG = MapperConfig(imperfect=True, imperfect_max_bound=16)  # spreads up to 8


def test_spread_tiles_need_exactly_their_trips():
    # 7 over 3 instances: tiles 3 (3 + 3 + 1) and 4? no: ceil(7 / 4) = 2; tile 3 only.
    assert spread_tiles(7, 7, 3) == [3]
    assert spread_tiles(7, 7, 2) == [4, 5, 6]  # 4 + 3, 5 + 2, 6 + 1
    assert spread_tiles(6, 6, 2) == [3, 4, 5]  # even 3 + 3, and 4 + 2, 5 + 1
    assert spread_tiles(7, 6, 2) == [3]  # below a loop: divides the tile above
    assert spread_tiles(7, 5, 2) == []


def test_trip_counts_are_any_count_only_for_small_ranks():
    assert trip_counts(6, 16) == [1, 2, 3, 4, 5, 6]
    assert trip_counts(6, 0) == [1, 2, 3, 6]
    assert trip_counts(32, 16) == [1, 2, 4, 8, 16, 32]


def test_spread_max_bound_limits_the_uneven_spreads(tmp_path):
    from fusemap.spec.arch_eval import ArchEvaluator
    from fusemap.spec.resolve import resolve_workload

    wl = workload(
        {"m": 3, "n": 4},
        einsum("Z", access("A", ["m"]), access("B", ["m", "n"]), access("Z", ["n"], output=True)),
    )
    fan = [dim("X", 4, may_reuse="Nothing")]
    ar = arch(memory("DRAM"), memory("RF", 64, spatial=fan), compute_unit("MAC"))
    path = tmp_path / "spread.yaml"
    path.write_text(to_yaml({**ar, **wl}))
    spec = load_spec(path)
    resolved = resolve_workload(spec)
    info = resolved.einsum("Z")
    flat = ArchEvaluator(spec, resolved).flat("Z", "MAC")
    assert config_from_spec(spec).spread_bound == 16  # the default: imperfect_max_bound's
    assert MapperConfig(imperfect=False).spread_bound == 0

    def spreads(bound):
        return {
            tuple((s.var, s.trips) for s in loops) for loops in spatial_choices(info, flat, bound)
        }

    # Even: m = 3 over 3; n = 4 over 2 or 4; no product above the fanout of 4.
    assert spreads(0) == {(), (("m", 3),), (("n", 2),), (("n", 4),)}
    # Uneven: m = 3 over 2 too, n = 4 over 3 too, and m over 2 with n over 2.
    assert spreads(3) == spreads(0) | {(("m", 2),), (("m", 2), ("n", 2))}
    assert spreads(4) == spreads(3) | {(("n", 3),)}


def test_virtual_bound_by_hand():
    # m = 3 cut by a temporal loop into tiles 2 and 1, then spread over 2 instances with
    # tile 1: the busiest instance sees one tile per parent tile, 2 iterations.
    assert virtual_bound(3, 2, 1) == 2
    # m = 3 spread directly as 2 + 1: the busiest instance holds 2.
    assert virtual_bound(3, 3, 2) == 2
    # even: 8 over 4 instances leaves 2 each.
    assert virtual_bound(8, 8, 2) == 2
    # 7 cut 4 + 3, then each spread over 2 as 2 + 2 and 2 + 1: 2 + 2 per instance.
    assert virtual_bound(7, 4, 2) == 4
    assert np.array_equal(virtual_bound(np.array([3, 7]), 2, 1), [2, 4])


def test_spatial_tiles_rebuild_a_slot_from_its_tiles_above_and_below():
    class Loop:
        def __init__(self, var, trips):
            self.var, self.trips = var, trips

    loops = [Loop("m", 2), Loop("n", 3), Loop("m", 2)]
    # m: 7 spread 4 + 3 (tile 4), then 2 + 2 (tile 2); n: 6 over 3 (tile 2).
    assert spatial_tiles(loops, ["m", "n"], [7, 6], [2, 2]) == [4, 2, 2]


def _uneven_case(seed: int, tmp_path):
    """A matmul or conv with ranks 3, 5, 6 or 7 on fanouts of 2-4 at one or two levels."""
    rng = random.Random(seed)
    while True:
        size = lambda: rng.choice([1, 3, 5, 6, 7])  # noqa: E731
        if seed % 2:
            b = {"m": size(), "k": rng.choice([1, 2, 3]), "n": size()}
            wl = workload(
                b,
                chain_matmul("Z", "A", "B", "Z", "k", "n"),
            )
        else:
            b = {"p": rng.choice([3, 5, 7]), "r": rng.choice([1, 2, 3])}
            wl = workload(
                b,
                einsum(
                    "Z", access("A", {"X": "p + r"}), access("B", ["r"]), access("Z", ["p"], True)
                ),
            )
        reuse = lambda: rng.choice(["All", "Nothing", "Inputs", "Outputs"])  # noqa: E731
        usage = lambda: rng.choice([0, 0, 1])  # noqa: E731
        inner = [dim("X", rng.choice([2, 3, 4]), may_reuse=reuse(), min_usage=usage())]
        if rng.random() < 0.3:
            inner.append(dim("Y", 2, may_reuse=reuse()))
        outer = [dim("G", 2, may_reuse=reuse())] if rng.random() < 0.4 else None
        tp = lambda: rng.choice(["inf", 1, 2])  # noqa: E731
        ar = arch(
            memory("DRAM", "inf", 50, 50, read_tp=tp(), write_tp=tp()),
            memory("GB", rng.choice([24, 48, 96]), 5, 5, read_tp=tp(), spatial=outer),
            memory(
                "RF",
                rng.choice([8, 16]),
                1,
                1,
                read_tp=tp(),
                spatial=inner,
                tensors={"may_keep": "All"},
            ),
            compute_unit("MAC", 1, throughput=rng.choice([1, 2])),
        )
        path = tmp_path / f"uneven{seed}.yaml"
        path.write_text(to_yaml({**ar, **wl}))
        spec = load_spec(path)
        if count(spec, "Z", stop=6000) <= 6000:
            return spec


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(16))
def test_generator_matches_brute_force_with_uneven_spreads(seed, tmp_path):
    spec = _uneven_case(seed, tmp_path)
    best = brute_force(spec, "Z", limit=6000)
    table = generate_pmappings(spec, "Z", objective="all", config=CONFIG)
    assert_optimum(table, best)


def _nested_case(seed: int, tmp_path):
    """Spreads over one variable at two levels, or of a variable indexing the output
    in part (``Z[p + r]``): the first visits of tiles the instances really get."""
    if seed < 12:
        from tests.unit.mapper.test_uneven_leaf_floor import _leaf_fanout_case

        return _leaf_fanout_case(seed, tmp_path)
    z = access("Z", {"X": "p + r"}, True)
    wl = workload(
        {"p": 2 + seed % 2, "r": 5}, einsum("Z", access("A", ["p"]), access("B", ["r"]), z)
    )
    x = [dim("X", 3, may_reuse="Inputs")] if seed % 2 else None
    ar = arch(
        memory("DRAM", "inf", 50, 50),
        memory(
            "RF",
            "inf",
            2,
            3,
            spatial=[dim("G", 2, may_reuse="Nothing")],
            tensors={"may_keep": "All"},
        ),
        compute_unit("MAC", 1, spatial=x),
    )
    path = tmp_path / f"window{seed}.yaml"
    path.write_text(to_yaml({**ar, **wl}))
    return load_spec(path)


@pytest.mark.slow
@pytest.mark.parametrize(
    "case", [("uneven", s) for s in range(6)] + [("nested", s) for s in range(14)]
)
def test_every_unpruned_row_with_uneven_spreads_is_scored_by_the_model(case, tmp_path, monkeypatch):
    """Every tile shape the search costs (no pruning, none across templates either),
    LoopTree in hand, evaluates to the row's numbers: the per-row counts are the
    model's."""
    kind, seed = case
    spec = (_uneven_case if kind == "uneven" else _nested_case)(seed, tmp_path)
    monkeypatch.setattr(combine, "pareto_mask", lambda groups, cols: np.ones(len(groups), bool))
    table = generate_pmappings(spec, "Z", objective="all", config=CONFIG, prune=False)
    assert len(table) > 1
    rows = (
        range(len(table))
        if len(table) <= 300
        else random.Random(seed).sample(range(len(table)), 300)
    )
    for row in rows:
        r = evaluate_mapping(spec, table.mapping(row), einsums=["Z"], check=False)
        assert r.energy == pytest.approx(float(table.energy[row]), rel=1e-9)
        assert r.latency == pytest.approx(float(table.latency[row]), rel=1e-9)


@pytest.mark.slow
def test_a_rank_cut_evenly_is_spread_evenly_beside_an_uneven_spread(tmp_path):
    """m (3) spreads unevenly over X (2 + 1); n (20, above the bound: its tiles are the
    divisors of 20) spreads over Y only evenly, whole tiles of 10 on 2 instances, never
    11..19 (which needed 2 instances too, and crashed the search: mobilenet_28 on
    tpu_v4i). The optimum is the brute force's."""
    assert spread_tiles(20, 20, 2, uneven=False) == [10]
    assert spread_tiles(20, 20, 3, uneven=False) == []
    wl = workload({"m": 3, "k": 1, "n": 20}, chain_matmul("Z", "A", "B", "Z", "k", "n"))
    fan = [dim("X", 2, may_reuse="All"), dim("Y", 2, may_reuse="All")]
    ar = arch(
        memory("DRAM", "inf", 50, 50),
        memory("RF", 64, 1, 1, spatial=fan, tensors={"may_keep": "All"}),
        compute_unit("MAC", 1),
    )
    path = tmp_path / "evenly.yaml"
    path.write_text(to_yaml({**ar, **wl}))
    spec = load_spec(path)
    best = brute_force(spec, "Z", limit=20000)
    table = generate_pmappings(spec, "Z", objective="all", config=CONFIG)
    assert best.valid > 0
    assert table.energy.min() == pytest.approx(best.energy, rel=1e-9)
    assert table.latency.min() == pytest.approx(best.latency, rel=1e-9)
    assert (table.energy * table.latency).min() == pytest.approx(best.edp, rel=1e-9)
