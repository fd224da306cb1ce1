"""The least energy the compute leaf adds to a row with uneven spreads
(``UnevenCounts.leaf_energy_floor``): by hand, below every row the search costs, and
the search below the deepest fused node that takes it off each start's ceiling keeps
every row a self-bounded table promises, costing fewer tile shapes."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fusemap.mapper.pmappings.generate import generate_pmappings
from fusemap.mapper.space.config import config_from_spec
from fusemap.mapper.tiling import rest_bound, uneven, uneven_suffix
from fusemap.mapper.tiling.tiler import TemplateTiler
from fusemap.mapper.tiling.uneven import UnevenCounts
from fusemap.spec.spec import load_spec
from tests.support import model_helpers as mh
from tests.unit.mapper.test_rest_bound import _fingerprint
from tests.unit.mapper.test_uneven_search import _chain, _evaluated, _tables
from tests.unit.mapper.test_uneven_spreads import _uneven_case


def _leaf_calls(monkeypatch) -> list[tuple]:
    """Record, per call of ``add_leaf``: (the template's spatial loops as (variable,
    trips), its floor, the least energy the leaf added to one of its rows)."""
    calls: list[tuple] = []
    real = UnevenCounts.add_leaf

    def spy(self, state, crit):
        before = crit[:, 0].copy()
        real(self, state, crit)
        if len(crit):
            loops = tuple((s.var, s.trips) for s in self.loops)
            added = float((crit[:, 0] - before).min())
            calls.append((loops, self.leaf_energy_floor(), added))

    monkeypatch.setattr(UnevenCounts, "add_leaf", spy)
    return calls


def _by_hand_case(tmp_path, may_reuse: str):
    """Z[m, n] = A[m, k] B[k, n], m 3, k 3, n 1, every tensor kept in a register file
    (reads 1, writes 3 per value) below an unbounded DRAM, 2 MACs below it (the
    spatial loop between the register file and the leaf)."""
    wl = mh.workload({"m": 3, "k": 3, "n": 1}, mh.chain_matmul("Z", "A", "B", "Z", "k", "n"))
    ar = mh.arch(
        mh.memory("DRAM", "inf", 50, 50),
        mh.memory("RF", "inf", 1, 3, tensors={"keep": "All"}),
        mh.compute_unit("MAC", 1, spatial=[mh.dim("X", 2, may_reuse=may_reuse)]),
    )
    path = tmp_path / f"hand_{may_reuse}.yaml"
    path.write_text(mh.to_yaml({**ar, **wl, "mapper": {"imperfect_max_bound": 4}}))
    return load_spec(path)


@pytest.mark.parametrize(
    ("may_reuse", "loops", "floor"),
    [
        # m spread 2 + 1 over the MACs: B multicast, ceil(3 / 2) * 3 = 6 reads; A 9
        # reads; Z 9 writes and 9 - 3 first visits = 6 reads: 9 + 6 + 6 + 3 * 9 = 48.
        ("All", (("m", 2),), 48.0),
        # k spread 2 + 1, Z reduced: 3 * ceil(3 / 2) = 6 writes, 6 - 3 reads; A and B
        # 9 reads each: 18 + 3 + 3 * 6 = 39.
        ("All", (("k", 2),), 39.0),
        # k spread, no reduction: each MAC starts its own partial sums (3 * 2 first
        # visits of 9 writes); A and B 9 reads each: 18 + 3 + 3 * 9 = 48.
        ("Nothing", (("k", 2),), 48.0),
    ],
)
def test_floor_by_hand(may_reuse, loops, floor, tmp_path, monkeypatch):
    spec = _by_hand_case(tmp_path, may_reuse)
    calls = _leaf_calls(monkeypatch)
    generate_pmappings(spec, "Z", objective="energy", config=config_from_spec(spec), prune=False)
    got = {(c[0], c[1]) for c in calls if c[0] == loops}
    assert got == {(loops, floor)}
    # Tight here: some row adds exactly the floor.
    assert min(c[2] for c in calls if c[0] == loops) == pytest.approx(floor)


def _leaf_fanout_case(seed: int, tmp_path):
    """A matmul with ranks cut evenly and unevenly, MACs on a fanout of 2-4 below a
    register file (loops of several trips multicast at the leaf, searched together),
    maybe a fanout above the register file too, any reuse."""
    rng = random.Random(seed)
    size = lambda: rng.choice([1, 3, 4, 5, 6])  # noqa: E731
    reuse = lambda: rng.choice(["All", "Nothing", "Inputs", "Outputs"])  # noqa: E731
    wl = mh.workload(
        {"m": size(), "k": size(), "n": rng.choice([1, 2, 3])},
        mh.chain_matmul("Z", "A", "B", "Z", "k", "n"),
    )
    outer = [mh.dim("G", 2, may_reuse=reuse())] if rng.random() < 0.4 else None
    ar = mh.arch(
        mh.memory("DRAM", "inf", 50, 50),
        mh.memory(
            "RF",
            "inf",
            rng.choice([1, 2]),
            rng.choice([1, 3]),
            spatial=outer,
            tensors={"may_keep": "All"},
        ),  # fmt: skip
        mh.compute_unit("MAC", 1, spatial=[mh.dim("X", rng.choice([2, 3, 4]), may_reuse=reuse())]),
    )
    path = tmp_path / f"leaf{seed}.yaml"
    path.write_text(mh.to_yaml({**ar, **wl, "mapper": {"imperfect_max_bound": 8}}))
    return load_spec(path)


@pytest.mark.slow
@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 10_000), leaf=st.booleans())
def test_floor_is_below_every_row(seed, leaf, tmp_path_factory):
    """On matmuls and convolutions with ranks cut evenly and unevenly, fanouts above
    the register files or at the leaf, any reuse: no row of any template (unpruned)
    gets less from the leaf."""
    case = _leaf_fanout_case if leaf else _uneven_case
    spec = case(seed, tmp_path_factory.mktemp("floor"))
    with pytest.MonkeyPatch.context() as mp:
        calls = _leaf_calls(mp)
        generate_pmappings(
            spec, "Z", objective="energy", config=config_from_spec(spec), prune=False
        )
    for loops, floor, least in calls:
        assert floor <= least * (1 + 1e-12), (loops, floor, least)


def test_floor_is_positive_and_often_tight(monkeypatch, tmp_path):
    """Over fixed cases with the MACs' fanout below the register file, the floor is
    below every row, above 0 wherever a row adds anything, and equals the least row
    for most templates (a floor of 0 would pass the test above; one taking the
    fewest trips of loops searched together fails here)."""
    calls = _leaf_calls(monkeypatch)
    for seed in range(12):
        spec = _leaf_fanout_case(seed, tmp_path)
        generate_pmappings(
            spec, "Z", objective="energy", config=config_from_spec(spec), prune=False
        )
    assert len(calls) > 1000
    for loops, floor, least in calls:
        assert floor <= least * (1 + 1e-12), (loops, floor, least)
    assert all(floor > 0 for _, floor, least in calls if least > 0)
    tight = sum(floor == pytest.approx(least) for _, floor, least in calls)
    assert tight >= 0.8 * len(calls)


@pytest.mark.slow
def test_the_floor_keeps_every_promised_row_and_saves_work(tmp_path, monkeypatch):
    """Tables cut near their least, with the floor taken off each start's ceiling and
    without: the same rows up to where they are complete; fewer tile shapes costed."""
    _same_promised_rows_with_less_work(
        tmp_path, lambda: monkeypatch.setattr(UnevenCounts, "leaf_energy_floor", lambda self: 0.0)
    )


def _same_promised_rows_with_less_work(tmp_path, without) -> None:
    """Self-bounded tables of three chains, then again after ``without()`` (a bound
    switched off): the same rows up to where both are complete; more tile shapes
    costed without."""
    specs = [_chain(seed, tmp_path) for seed in (1, 4, 5)]
    cut = [_tables(spec, self_bound=0.3) for spec in specs]
    without()
    loose = [_tables(spec, self_bound=0.3) for spec in specs]
    for c, lo in zip(cut, loose, strict=True):
        for n in lo:
            up_to = min(c[n].complete_to, lo[n].complete_to)
            assert up_to < float("inf")
            rows = [r for r in _fingerprint(c[n]) if r[0] <= up_to]
            assert rows == [r for r in _fingerprint(lo[n]) if r[0] <= up_to], n
    assert sum(map(_evaluated, cut)) < sum(map(_evaluated, loose))


def _node_floor_margins(monkeypatch) -> list[float]:
    """Spy on the search once per start, run without ceilings: for every complete row
    and every stage, what the storage nodes below that stage added to it (its energy
    at the end, less the leaf's, less its energy then) less the floor there."""
    margins: list[float] = []
    real = uneven_suffix._search

    def spy(tiler, sizes, state, ceilings):
        out = real(tiler, sizes, state, np.full(len(ceilings), np.inf))
        terms = uneven_suffix.input_fill_terms(tiler)
        last = out[-1]
        leaf = np.zeros_like(last.crit)
        tiler.uneven.add_leaf(last.state, leaf)
        end = last.crit[:, 0] - leaf[:, 0]
        rows = np.arange(len(last.crit))
        for k in range(len(out) - 1, -1, -1):
            if k < len(out) - 1:
                rows = out[k + 1].parents[rows]
            st = out[k]
            floor = uneven_suffix.nodes_floor(tiler, terms, tiler.p_max + k, st.sizes[rows])
            if floor is not None:
                margins.extend((end - st.crit[rows, 0] - floor).tolist())
        return out

    monkeypatch.setattr(uneven_suffix, "_search", spy)
    return margins


def _floor_holds_and_is_tight(margins: list[float], tmp_path) -> None:
    """Tables of six random chains (the spy filling ``margins``): no margin below 0,
    some at 0 (a floor that cannot fail this is 0)."""
    for seed in range(6):
        _tables(_chain(seed, tmp_path, deep=bool(seed % 2)))
    assert len(margins) > 100
    scale = max(abs(m) for m in margins)
    assert min(margins) >= -1e-9 * scale
    assert min(margins) <= 1e-9 * scale


@pytest.mark.slow
def test_the_node_floor_is_below_what_every_row_adds(tmp_path, monkeypatch):
    """On chains with uneven spreads (fanouts above the register files, or also at the
    MACs), every complete row of the search once per start: the storage nodes below
    each stage add at least the floor there, and for some rows exactly it (a floor
    that cannot fail this test is 0)."""
    margins = _node_floor_margins(monkeypatch)
    _floor_holds_and_is_tight(margins, tmp_path)


def _floor_margins_above(monkeypatch) -> list[float]:
    """Spy on the templates finished: for every complete row of a fused template
    searched once per start below its deepest fused node, and every stage above that
    node, what the storage nodes below the stage added to it (its energy at the end,
    less the leaf's, less its energy then) less the floor there (the floor
    ``rest_bound.bounded_terms`` counts, at the tiles leaving the stage)."""
    margins: list[float] = []
    real = TemplateTiler.finish

    def spy(self, stages):
        if uneven_suffix.applies(self) and len(stages) == len(self.t.holders):
            last = stages[-1]
            leaf = np.zeros_like(last.crit)
            self.uneven.add_leaf(last.state, leaf)
            end = last.crit[:, 0] - leaf[:, 0]
            terms = rest_bound.input_fill_terms(self)
            rows = np.arange(len(end))
            for k in range(len(stages) - 2, -1, -1):
                rows = stages[k + 1].parents[rows]
                if k >= self.p_max:  # below the fused node: the test above
                    continue
                floor = uneven_suffix.nodes_floor(self, terms, k, stages[k].sizes[rows])
                if floor is not None:
                    margins.extend((end - stages[k].crit[rows, 0] - floor).tolist())
        return real(self, stages)

    monkeypatch.setattr(TemplateTiler, "finish", spy)
    return margins


@pytest.mark.slow
def test_the_node_floor_above_the_fused_node_is_below_what_every_row_adds(tmp_path, monkeypatch):
    """The floor the stages above the deepest fused node take off (every storage node
    below, the fused node's own included, at the tiles leaving the stage): below what
    every complete row of random chains adds after that stage, and for some rows
    exactly it."""
    margins = _floor_margins_above(monkeypatch)
    _floor_holds_and_is_tight(margins, tmp_path)


@pytest.mark.slow
def test_the_node_floor_keeps_every_promised_row_and_saves_work(tmp_path, monkeypatch):
    """Tables cut near their least, with the storage nodes' floor (inputs' fills, where
    no output is held below) and without it, both where it is used (the search once
    per start, and the stages above the deepest fused node through
    ``rest_bound.bounded_terms``): the same rows up to where they are complete, fewer
    tile shapes costed."""

    def without() -> None:
        monkeypatch.setattr(uneven_suffix, "input_fill_terms", lambda t: [])
        monkeypatch.setattr(rest_bound, "input_fill_terms", lambda t: [])

    _same_promised_rows_with_less_work(tmp_path, without)


@pytest.mark.slow
def test_the_node_floor_above_the_fused_node_keeps_every_promised_row(tmp_path, monkeypatch):
    """The same with the floor left out of the search once per start in both runs: its
    use in the stages above the deepest fused node alone keeps every promised row and
    saves work. (These tables' promised rows keep their distance from the floor: the
    test above, row by row, is what fails on a floor overstated by 1%.)"""
    monkeypatch.setattr(uneven_suffix, "input_fill_terms", lambda t: [])
    _same_promised_rows_with_less_work(
        tmp_path, lambda: monkeypatch.setattr(rest_bound, "input_fill_terms", lambda t: [])
    )


def _output_counts(monkeypatch) -> list[float]:
    """Spy on the uneven counts: per part of a count an output's holder (or the compute
    leaf) adds, the least of that part over the rows."""
    seen: list[float] = []
    context: list[tuple] = []
    real_costs, real_traffic = UnevenCounts._holder_costs, uneven.holder_traffic

    def costs(self, tensor, *args):
        context.append((self, tensor))
        try:
            real_costs(self, tensor, *args)
        finally:
            context.pop()

    def traffic(*args):
        out = real_traffic(*args)
        counts, (counts_of, tensor) = np.asarray(out.values()), context[-1]
        if tensor in counts_of.info.outputs and counts.size:
            seen.append(float(counts.min()))
        return out

    monkeypatch.setattr(UnevenCounts, "_holder_costs", costs)
    monkeypatch.setattr(uneven, "holder_traffic", traffic)
    return seen


def _all_rows(spec) -> None:
    generate_pmappings(spec, "Z", objective="energy", config=config_from_spec(spec), prune=False)


def test_output_counts_are_not_negative(monkeypatch, tmp_path):
    """No count an output's holder adds is negative, so the storage nodes' floor leaves
    outputs' terms out: over fixed cases, seed 0 among them (k over 2 register files,
    then over 3 MACs: its leaf's reads were -5)."""
    seen = _output_counts(monkeypatch)
    for seed in range(12):
        _all_rows(_leaf_fanout_case(seed, tmp_path))
    assert len(seen) > 1000
    assert min(seen) == 0.0


@pytest.mark.slow
@settings(max_examples=16, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 10_000), leaf=st.booleans())
def test_output_counts_are_never_negative(seed, leaf, tmp_path_factory):
    """The same on random matmuls and convolutions, fanouts above the register files
    or at the leaf, any reuse, every row unpruned."""
    with pytest.MonkeyPatch.context() as mp:
        seen = _output_counts(mp)
        case = _leaf_fanout_case if leaf else _uneven_case
        _all_rows(case(seed, tmp_path_factory.mktemp("outputs")))
    assert min(seen, default=0.0) >= 0.0


def test_bounded_terms_follow_the_trips_shared(tmp_path, monkeypatch):
    """The inputs' fill floor of a template with uneven spreads divides the parents'
    reads by the most trips its shared search may take: when those widen, the terms
    ``rest_bound`` kept for the tiler are worked out again, not reused."""
    from tests.unit.mapper.test_rest_bound import _tilers

    changed = 0
    for seed in range(4):
        spec = _chain(seed, tmp_path, deep=bool(seed % 2))
        for tiler in _tilers(spec, "A", monkeypatch):
            u = tiler.uneven
            if u is None or not u.free:
                continue
            before = rest_bound.bounded_terms(tiler)
            wider = tuple(int(tiler.tiles.bounds[tiler.tiles.vars.index(u.loops[i].var)])
                          for i in u.free)  # fmt: skip
            u.share([u.own, wider])
            after = rest_bound.bounded_terms(tiler)
            keys = rest_bound.basis_keys(tiler.info)
            fresh = rest_bound.input_fill_terms(tiler)
            assert after == [(p, keys.index((x, "fill")), f) for p, x, f in fresh]
            changed += after != before
    assert changed > 0
