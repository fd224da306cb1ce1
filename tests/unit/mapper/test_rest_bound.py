"""The least energy the nodes below a search stage still add (``mapper.rest_bound``):
the trends of the count bases by hand and over random projections, and tables made
with the bound equal, row for row, to those made without it."""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fusemap.mapper.pmappings import generate as pmappings
from fusemap.mapper.pmappings.generate import generate_pmappings
from fusemap.mapper.space.config import config_from_spec
from fusemap.mapper.space.tiles import candidate_sizes
from fusemap.mapper.tiling import rest_bound, search
from fusemap.mapper.tiling import tiler as tiler_module
from fusemap.mapper.tiling.front_floor import FrontFloor
from fusemap.mapper.tiling.fronts import Front
from fusemap.mapper.tiling.rest_bound import Trend, basis_trend
from fusemap.mapper.tiling.terms import fill_basis, first_basis
from fusemap.mapper.tiling.tiler import TemplateTiler
from fusemap.spec.resolve import resolve_workload
from fusemap.spec.spec import load_spec
from tests.support.ffm_cases import ffm_case
from tests.support.marks import slow_except
from tests.support.model_helpers import conv1d, matmul, three_level, to_yaml, two_level
from tests.unit.mapper.test_self_bound import MARGIN, _fills_dominate


def _spec(tmp_path, wl: dict, arch: dict | None = None, name: str = "s.yaml"):
    path = tmp_path / name
    path.write_text(to_yaml({**(arch or two_level()), **wl}))
    return load_spec(path)


def _cands(info, imperfect: bool = False) -> dict[str, np.ndarray]:
    return {
        v: np.array(candidate_sizes(info.bounds[v], imperfect), dtype=np.int64)
        for v in info.rank_variables
    }


def test_the_bases_of_a_matmul_by_hand(tmp_path):
    """A[m, k] with M=4, K=6, N=8: fill = 4 * 6 * ceil(8 / n's tile), 24 with whole
    tiles, 96 with n's tile 2 (it never falls as tiles shrink, and rises); first = 24
    whatever the tiles (both)."""
    info = resolve_workload(_spec(tmp_path, matmul(M=4, K=6, N=8))).einsum("Z")
    whole = {"m": np.array([4]), "k": np.array([6]), "n": np.array([8])}
    assert fill_basis(info, "A", whole)[0] == 24
    assert fill_basis(info, "A", whole | {"n": np.array([2])})[0] == 96
    assert first_basis(info, "A", whole | {"n": np.array([2]), "m": np.array([1])})[0] == 24
    cands = _cands(info)
    assert basis_trend(info, "A", "fill", cands) == Trend(never_falls=True, never_rises=False)
    assert basis_trend(info, "A", "first", cands) == Trend(never_falls=True, never_rises=True)
    assert basis_trend(info, "Z", "fill", cands) == Trend(never_falls=True, never_rises=False)


def test_a_strided_window_with_holes_fetches_less_in_smaller_tiles(tmp_path):
    """I[2p + r] with P=4, R=1: a dense box counts the holes between the windows, so
    the fill is 7 with p's tile 4 (1 + 2 * 3), 6 with tiles of 2 (2 x 3) and 4 with
    tiles of 1: it falls as tiles shrink, and no bound may count on it."""
    info = resolve_workload(_spec(tmp_path, conv1d(P=4, R=1, stride=2))).einsum("O")
    fills = [fill_basis(info, "I", {"p": np.array([s]), "r": np.array([1])})[0] for s in (4, 2, 1)]
    assert fills == [7, 6, 4]
    trend = basis_trend(info, "I", "fill", _cands(info))
    assert trend == Trend(never_falls=False, never_rises=True)


def test_a_sliding_window_fetches_its_halo_again(tmp_path):
    """I[p + r] with P=8, R=3: whole tiles fill 10 values, tiles of p 1 and r 1 fill
    8 * 3 = 24: it never falls as tiles shrink."""
    info = resolve_workload(_spec(tmp_path, conv1d(P=8, R=3))).einsum("O")
    one = {"p": np.array([1]), "r": np.array([1])}
    assert fill_basis(info, "I", {"p": np.array([8]), "r": np.array([3])})[0] == 10
    assert fill_basis(info, "I", one)[0] == 24
    assert basis_trend(info, "I", "fill", _cands(info)).never_falls


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(
    p=st.integers(1, 12),
    r=st.integers(1, 4),
    stride=st.integers(1, 3),
    imperfect=st.booleans(),
    tensor=st.sampled_from(["I", "W", "O"]),
    basis=st.sampled_from(["fill", "first"]),
)
def test_a_trend_holds_between_every_two_nested_tile_shapes(
    tmp_path_factory, p, r, stride, imperfect, tensor, basis
):
    """Whatever :func:`basis_trend` claims holds on the whole grid of tile shapes (not
    only along the slices it checks): for every shape ``s`` and every ``t <= s``."""
    tmp = tmp_path_factory.mktemp("trend")
    info = resolve_workload(_spec(tmp, conv1d(P=p, R=r, stride=stride))).einsum("O")
    cands = _cands(info, imperfect)
    trend = basis_trend(info, tensor, basis, cands)
    grid = list(itertools.product(cands["p"], cands["r"]))
    sizes = {"p": np.array([g[0] for g in grid]), "r": np.array([g[1] for g in grid])}
    f = fill_basis if basis == "fill" else first_basis
    values = np.broadcast_to(f(info, tensor, sizes), (len(grid),))
    for (a, s), (b, t) in itertools.product(enumerate(grid), repeat=2):
        if t[0] <= s[0] and t[1] <= s[1]:
            if trend.never_falls:
                assert values[b] >= values[a], (s, t)
            if trend.never_rises:
                assert values[b] <= values[a], (s, t)


def _tilers(spec, name: str, monkeypatch) -> list:
    """The tilers of ``name``'s table (caught on their way to the search)."""
    got: list = []
    real = pmappings.tile_held_variants_last

    def catch(tilers, *args, **kwargs):
        got.extend(tilers)
        return real(tilers, *args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(pmappings, "tile_held_variants_last", catch)
        config = replace(config_from_spec(spec), fusion=True)
        generate_pmappings(spec, name, objective="energy", config=config)
    return got


def _node_energy_grid(tiler, node) -> tuple[np.ndarray, np.ndarray]:
    """(every candidate tile shape, the node's energy there)."""
    grid = np.array(list(itertools.product(*tiler.tiles.cands)), dtype=np.int64)
    crit = np.zeros((len(grid), len(tiler.layout)))
    tiler.costs.add_node(node, {v: grid[:, k] for k, v in enumerate(tiler.tiles.vars)}, crit)
    return grid, crit[:, 0]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("wl", "holes"),
    [(conv1d(P=4, R=1, stride=2), True), (conv1d(P=6, R=3), False), (matmul(4, 6, 3), False)],
)
def test_a_bounded_node_never_costs_less_in_smaller_tiles(wl, holes, tmp_path, monkeypatch):
    """Every storage node the bound counts, of every template, costs at least as much at
    every smaller tile shape, on the whole grid; with a strided window with holes, some
    nodes are left out, and they are right to be: one of them costs less in a smaller
    tile shape."""
    spec = _spec(tmp_path, wl, three_level(sizes=(8, 4)))
    seen: set[int] = set()
    left_out_falls = False
    for tiler in _tilers(spec, "Z" if "Z" in str(wl) else "O", monkeypatch):
        for node in tiler.costs.nodes:
            if node.position == len(tiler.t.holders) or id(node) in seen:
                continue
            seen.add(id(node))
            grid, energy = _node_energy_grid(tiler, node)
            nested = (grid[None, :, :] <= grid[:, None, :]).all(axis=2)  # [s, t]: t <= s
            falls = (energy[None, :] < energy[:, None] * (1 - 1e-12)) & nested
            if rest_bound._node_terms(tiler, node):
                assert not falls.any()
            else:
                left_out_falls |= bool(falls.any())
    assert seen
    assert left_out_falls == holes


def _fingerprint(table) -> list[tuple]:
    """A table's rows (energy, latency, fused prefix, reservations), in order."""
    prefixes = table.fusion.interner.prefixes if table.fusion is not None else None
    cols = [table.energy.tolist(), table.latency.tolist()]
    if prefixes is not None:
        cols.append([repr(prefixes[i]) for i in table.fusion.seq.tolist()])
    cols += [table.reservations[m].tolist() for m in sorted(table.reservations)]
    return sorted(zip(*cols, strict=True))


def _strided_chain(tmp_path):
    """Two strided convolutions in a row on three levels with small buffers: some nodes
    get no bound (their fill falls as tiles shrink), the others do."""
    from tests.support.model_helpers import access, einsum, workload

    wl = workload(
        {"p": 4, "r": 2, "q": 2, "s": 2},
        einsum(
            "A", access("I", {"X": "2*p + r"}), access("W", ["r"]), access("T", ["p"], output=True)
        ),  # fmt: skip
        einsum(
            "B", access("T", {"P": "2*q + s"}), access("V", ["s"]), access("O", ["q"], output=True)
        ),  # fmt: skip
    )
    return _spec(tmp_path, wl, two_level(gb_size=8), "strided.yaml")


CASES = {
    **{f"random {seed}": (lambda t, seed=seed: ffm_case(seed, t), None) for seed in (2, 4, 5)},
    "fills below the fused node": (lambda t: _fills_dominate(5, t, False), ("E0", "E1")),
    "strided": (_strided_chain, ("A", "B")),
}


def _tables(spec, names, self_bound, hosts=None, ceiling: float | None = None):
    """Tables complete (``self_bound`` None), near their least, or (``ceiling``, a
    multiple of each Einsum's least) cut at a ceiling over the whole fused space, as
    the full space's check makes them."""
    config = replace(config_from_spec(spec), fusion=True, hosts=hosts)
    names = names or [e.name for e in resolve_workload(spec).einsums]
    if ceiling is None:
        return {
            n: generate_pmappings(spec, n, objective="energy", config=config, self_bound=self_bound)
            for n in names
        }
    full = replace(config, fused_loops_once=False)
    least = {n: float(generate_pmappings(spec, n, config=config).energy.min()) for n in names}
    return {n: generate_pmappings(spec, n, config=full, ceiling=ceiling * least[n]) for n in names}


def _no_bounds(monkeypatch) -> None:
    """No node below a stage counted (each node's least taken as 0), nor any front's
    floor above the fused node."""
    monkeypatch.setattr(rest_bound, "bounded_terms", lambda tiler: [])
    monkeypatch.setattr(search._SharedSearch, "_below_floor", lambda self, i, j: (1 << 30, None))


BOUNDS = {"complete": (None, None), "near the least": (MARGIN, None), "ceiling": (None, 1.3)}


@pytest.mark.parametrize("case", slow_except(sorted(CASES), fast=["strided"]))
@pytest.mark.parametrize("bound", sorted(BOUNDS))
def test_tables_are_those_made_without_the_bound(case, bound, tmp_path, monkeypatch):
    """Row for row, with the nodes below counted and without: complete tables whose
    templates that fuse nothing run alone (the best of those bounds the rest), tables
    cut near their least, and tables cut at a ceiling over the whole fused space (the
    full space's check)."""
    make, names = CASES[case]
    spec = make(tmp_path)
    self_bound, ceiling = BOUNDS[bound]
    hosts = frozenset() if bound == "complete" else None
    got = _tables(spec, names, self_bound, hosts, ceiling)
    _no_bounds(monkeypatch)
    want = _tables(spec, names, self_bound, hosts, ceiling)
    for n in want:
        assert _fingerprint(got[n]) == _fingerprint(want[n]), n


def test_the_bound_cuts(tmp_path, monkeypatch):
    """Where the nodes below the fused node hold most of the energy, the bound leaves far
    fewer partial tile shapes to cost (else the tests above would test nothing)."""
    spec = _fills_dominate(5, tmp_path, False)
    got = _tables(spec, ("E0",), MARGIN)["E0"]
    monkeypatch.setattr(rest_bound, "bounded_terms", lambda tiler: [])
    plain = _tables(spec, ("E0",), MARGIN)["E0"]
    assert got.stats.tile_shapes_evaluated < 0.7 * plain.stats.tile_shapes_evaluated


@pytest.mark.slow
def test_a_bound_overstated_by_a_tenth_loses_rows(tmp_path, monkeypatch):
    """The equality tests can fail: the bound overstated by 10% loses rows."""
    spec = ffm_case(5, tmp_path)
    plain = _tables(spec, None, MARGIN)
    real = rest_bound._node_terms
    monkeypatch.setattr(
        rest_bound, "_node_terms",
        lambda tiler, node: [(k, f * 1.1) for k, f in real(tiler, node)],
    )  # fmt: skip
    over = _tables(spec, None, MARGIN)
    assert any(_fingerprint(over[n]) != _fingerprint(plain[n]) for n in plain)


def _bounded_after_interning(monkeypatch) -> None:
    """The search as it was: rows the bound drops had their prefixes interned first (the
    bound applied to the finished, pruned stage)."""
    real = TemplateTiler.stage

    def stage(self, j, prev, ceiling=np.inf, within=None):
        st = real(self, j, prev, ceiling)
        return st if within is None else st.take(within(st.sizes, st.crit[:, 0]))

    monkeypatch.setattr(TemplateTiler, "stage", stage)


def _full_space_tables(spec, names, monkeypatch, late: bool) -> tuple[dict, int]:
    """The tables over the whole fused space, and how many rows had a gap's loops
    interned into their prefixes."""
    extended = [0]
    real = tiler_module.gap_tokens

    def counted(*args, **kwargs):
        extended[0] += len(args[5])  # the rows' prefixes
        return real(*args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(tiler_module, "gap_tokens", counted)
        if late:
            _bounded_after_interning(m)
        config = replace(config_from_spec(spec), fusion=True, fused_loops_once=False)
        names = names or [e.name for e in resolve_workload(spec).einsums]
        tables = {
            n: generate_pmappings(spec, n, objective="energy", config=config, self_bound=MARGIN)
            for n in names
        }
    return tables, extended[0]


@pytest.mark.parametrize("case", slow_except(sorted(CASES), fast=["fills below the fused node"]))
def test_rows_the_bound_drops_are_never_interned(case, tmp_path, monkeypatch):
    """Bounded before their prefixes are extended (and before the stage's prune), the
    rows kept are the same, row for row, over the whole fused space (several fused
    loops per rank variable), and fewer rows' prefixes are extended: the bound cuts in
    the fused prefix of every case (5 to 25% fewer here; in the check of GPT-3 at batch
    64, which interned 40 million prefixes, it dropped 9 rows in 10 at some stages)."""
    make, names = CASES[case]
    spec = make(tmp_path)
    early, interned = _full_space_tables(spec, names, monkeypatch, late=False)
    late, interned_late = _full_space_tables(spec, names, monkeypatch, late=True)
    for n in late:
        assert _fingerprint(early[n]) == _fingerprint(late[n]), n
    assert interned < interned_late


def test_a_front_floor_by_hand():
    """Tile shape codes of radix (2, 3) (a size's index is the size here): front rows at
    (0, 1) 3 J, (1, 0) 2 J, (1, 2) 1 J. A tile shape's floor is the least over the
    shapes no larger in either variable; nothing is reachable from (0, 0)."""
    front = Front(
        state=np.array([1, 3, 5]), crit=np.array([[3.0], [2.0], [1.0]]),
        mids=np.zeros(3, dtype=np.int64), child=np.zeros(3, dtype=np.int64),
    )  # fmt: skip

    def encode(sizes):
        return np.where(sizes[:, 0] >= 0, sizes[:, 0] * 3 + sizes[:, 1], -1)

    floor = FrontFloor.of(front, np.array([2, 3]), encode)
    assert floor.overall == 1.0
    shapes = np.array([[1, 2], [1, 1], [0, 2], [0, 1], [1, 0], [0, 0], [-1, 0]])
    got = floor.above_overall(shapes)
    assert got.tolist() == [0.0, 1.0, 2.0, 2.0, 1.0, np.inf, 0.0]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(1, 4), min_size=1, max_size=4).flatmap(
        lambda radix: st.tuples(
            st.just(radix),
            st.lists(
                st.tuples(
                    st.integers(0, int(np.prod(radix)) - 1),
                    st.sampled_from([0.5, 1.0, 2.0, 3.0, 1e30]),
                ),
                max_size=12,
            ),
        )
    )
)
def test_a_front_floor_is_the_least_over_shapes_no_larger(case):
    """Against every code's least read from the rows one by one: a row counts where its
    index in each variable is no larger (codes of mixed radix, last variable fastest)."""
    radix, rows = case
    front = Front(
        state=np.array([c for c, _ in rows], dtype=np.int64),
        crit=np.array([[e] for _, e in rows]).reshape(-1, 1),
        mids=np.zeros(len(rows), dtype=np.int64), child=np.zeros(len(rows), dtype=np.int64),
    )  # fmt: skip
    floor = FrontFloor.of(front, np.array(radix), lambda sizes: sizes)
    if not rows:
        assert floor.least is None and floor.overall == np.inf
        return
    codes = list(itertools.product(*(range(r) for r in radix)))  # in code order
    want = [
        min((e for c, e in rows if _no_larger(codes[c], code)), default=np.inf) for code in codes
    ]
    assert floor.least.tolist() == want


def _no_larger(shape: tuple, than: tuple) -> bool:
    return all(a <= b for a, b in zip(shape, than, strict=True))


def test_a_floor_of_the_shape_itself_loses_rows(tmp_path, monkeypatch):
    """The equality tests can fail: a floor taking only the front rows of the row's own
    tile shape (not of every smaller one the nodes between may leave) loses rows."""
    spec = ffm_case(2, tmp_path)
    plain = _tables(spec, None, None, None, 1.3)

    def own_shape_only(front, radix, encode):
        grid = np.full(int(np.prod(radix)), np.inf)
        np.minimum.at(grid, front.state, front.crit[:, 0])
        return FrontFloor(float(front.crit[:, 0].min(initial=np.inf)), grid, encode)

    monkeypatch.setattr(FrontFloor, "of", own_shape_only)
    wrong = _tables(spec, None, None, None, 1.3)
    assert any(_fingerprint(wrong[n]) != _fingerprint(plain[n]) for n in plain)
