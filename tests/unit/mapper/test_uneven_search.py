"""Shortcuts of the search of templates with uneven spreads: each leaves the tables as
they are (row for row, or up to where a self-bounded table is complete), each saves
work, and the optimum of ranks cut evenly beside ranks cut unevenly is the brute
force's.

* ``UnevenCounts.canonical``: the tiles around a spatial loop over a rank cut evenly are
  written as (trips, 1), so rows that differ only there share a pruning group;
* ``Spreads.spreadable``: a gap's loop leaving a tile its spatial loops cannot
  spread is dropped when chosen, not after the gap;
* ``Spreads.reaching``: below the deepest fused node, likewise a tile from which
  no tile the spatial loops further down can spread is reachable;
* ``uneven_suffix``: the search below the deepest fused node has each start's ceiling.
"""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from fusemap.mapper.pmappings.generate import generate_pmappings
from fusemap.mapper.space.config import config_from_spec
from fusemap.mapper.tiling import rank_tiles, uneven_suffix
from fusemap.mapper.tiling.rank_tiles import tiles_reaching
from fusemap.mapper.tiling.spreads import Spreads
from fusemap.mapper.tiling.uneven import UnevenCounts
from fusemap.model.evaluate import evaluate_mapping
from fusemap.spec.resolve import resolve_workload
from fusemap.spec.spec import load_spec
from tests.support.mapper_bruteforce import assert_optimum, brute_force, count
from tests.support.model_helpers import (
    arch,
    chain_matmul,
    compute_unit,
    dim,
    memory,
    to_yaml,
    workload,
)
from tests.unit.mapper.test_rest_bound import _fingerprint

BOUND = 4
"""``imperfect_max_bound`` of the cases: ranks of 3 spread unevenly, of 6 and 8 evenly."""


def _chain(seed: int, tmp_path, deep: bool = False):
    """Two matmuls in a chain on two levels: m of 3 (spread unevenly) beside n of 6
    (evenly). ``deep``: one fanout on the register files, one on the MACs below them."""
    rng = random.Random(seed)
    b = {"m": 3, "k": rng.choice([1, 2]), "n": 6, "q": rng.choice([1, 2])}
    return _chain_of(b, rng, tmp_path / f"chain{seed}.yaml", deep)


def _chain_of(bounds: dict, rng: random.Random, path, deep: bool = False):
    """Two matmuls in a chain with ``bounds`` on :func:`_arch`, written to ``path``."""
    wl = workload(
        bounds,
        chain_matmul("A", "I", "W", "T", "k", "n"),
        chain_matmul("B", "T", "V", "O", "n", "q"),
    )
    path.write_text(to_yaml({**_arch(rng, deep), **wl, "mapper": {"imperfect_max_bound": BOUND}}))
    return load_spec(path)


def _arch(rng: random.Random, deep: bool = False) -> dict:
    """DRAM, then a register file on a fanout of 2-4 instances and 2 (``deep``: the 2
    are MACs below each register file)."""
    reuse = lambda: rng.choice(["All", "Nothing", "Inputs", "Outputs"])  # noqa: E731
    fanout = [
        dim("X", rng.choice([2, 3, 4]), may_reuse=reuse(), min_usage=rng.choice([0, 1])),
        dim("Y", 2, may_reuse=reuse()),
    ]
    macs = [fanout.pop()] if deep else None
    return arch(
        memory("DRAM", "inf", 50, 50, tensors={"may_keep": "All"}),
        memory("RF", rng.choice([12, 24]), 1, 1, spatial=fanout, tensors={"may_keep": "All"}),
        compute_unit("MAC", 1, throughput=rng.choice([1, 2]), spatial=macs),
    )


def _tables(spec, self_bound=None) -> dict:
    config = replace(config_from_spec(spec), fusion=True, hosts=frozenset())
    return {
        e.name: generate_pmappings(
            spec, e.name, objective="energy", config=config, self_bound=self_bound
        )
        for e in resolve_workload(spec).einsums
    }


def _evaluated(tables: dict) -> int:
    return sum(t.stats.tile_shapes_evaluated for t in tables.values())


SHORTCUTS = {
    "canonical": (UnevenCounts, "canonical", lambda self, slot, state: state),
    "spreadable": (Spreads, "spreadable", lambda self, j, k: None),
    "reaching": (Spreads, "reaching", lambda self, j, k: None),
}


@pytest.mark.slow
@pytest.mark.parametrize("shortcut", sorted(SHORTCUTS))
def test_each_shortcut_leaves_the_tables_and_saves_work(shortcut, tmp_path, monkeypatch):
    """Complete tables row for row with the shortcut and without it, over three chains;
    without it more partial tile shapes are costed."""
    deep = shortcut == "reaching"  # spatial loops two gaps below others
    specs = [_chain(seed, tmp_path, deep) for seed in (1, 4, 5)]
    got = [_tables(spec) for spec in specs]
    owner, name, plain = SHORTCUTS[shortcut]
    monkeypatch.setattr(owner, name, plain)
    want = [_tables(spec) for spec in specs]
    for g, w in zip(got, want, strict=True):
        for n in w:
            assert _fingerprint(g[n]) == _fingerprint(w[n]), n
    assert sum(map(_evaluated, got)) < sum(map(_evaluated, want))


@pytest.mark.slow
def test_the_suffix_ceiling_leaves_every_row_a_self_bounded_table_promises(tmp_path, monkeypatch):
    """Tables cut near their least: every row up to where they are complete, as in the
    complete table and as without the ceiling below the deepest fused node; the ceiling
    saves work."""
    specs = [_chain(seed, tmp_path) for seed in (1, 4, 5)]
    cut = [_tables(spec, self_bound=0.3) for spec in specs]
    full = [_tables(spec) for spec in specs]
    real = uneven_suffix.stages_below_fused_node
    monkeypatch.setattr(
        uneven_suffix,
        "stages_below_fused_node",
        lambda tiler, prev, cache, ceiling=0: real(tiler, prev, cache),
    )
    loose = [_tables(spec, self_bound=0.3) for spec in specs]
    for c, f, lo in zip(cut, full, loose, strict=True):
        for n in f:
            up_to = c[n].complete_to
            assert up_to < float("inf")
            rows = [r for r in _fingerprint(c[n]) if r[0] <= up_to]
            assert rows == [r for r in _fingerprint(f[n]) if r[0] <= up_to], n
            assert rows == [r for r in _fingerprint(lo[n]) if r[0] <= up_to], n
    assert sum(map(_evaluated, cut)) < sum(map(_evaluated, loose))


def _single(seed: int, tmp_path):
    """One matmul, ranks of 3 or 6 (or 1, 2), with at most 5,000 mappings."""
    rng = random.Random(100 + seed)
    while True:
        b = {"m": rng.choice([3, 6]), "k": rng.choice([1, 2, 3]), "n": rng.choice([3, 6])}
        wl = workload(b, chain_matmul("Z", "A", "B", "Z", "k", "n"))
        path = tmp_path / f"single{seed}.yaml"
        path.write_text(to_yaml({**_arch(rng), **wl, "mapper": {"imperfect_max_bound": BOUND}}))
        spec = load_spec(path)
        if count(spec, "Z", imperfect_max=BOUND, stop=5000) <= 5000:
            return spec


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(8))
def test_ranks_cut_evenly_beside_uneven_spreads_reach_the_brute_force(seed, tmp_path):
    """The optimum (energy, latency, EDP) is the brute force's, and every row the search
    keeps evaluates to its numbers."""
    spec = _single(seed, tmp_path)
    best = brute_force(spec, "Z", imperfect_max=BOUND, limit=5000)
    config = config_from_spec(spec)
    table = generate_pmappings(spec, "Z", objective="all", config=config)
    assert_optimum(table, best)
    for row in range(len(table)):
        r = evaluate_mapping(spec, table.mapping(row), einsums=["Z"], check=False)
        assert r.energy == pytest.approx(float(table.energy[row]), rel=1e-9)
        assert r.latency == pytest.approx(float(table.latency[row]), rel=1e-9)


def test_tiles_reaching_a_spreadable_one_by_hand():
    """From a tile, loops leave divisors (a rank cut evenly) or the tiles
    ``next_sizes`` lists (unevenly: 4 leaves 2 or 1, 3 and 5 only 1)."""
    assert tiles_reaching(12, False, (4,)).tolist() == [4, 12]  # 6 leaves no 4
    assert tiles_reaching(12, False, (6,)).tolist() == [6, 12]
    assert tiles_reaching(8, False, (2,)).tolist() == [2, 4, 8]  # 8 -> 4 -> 2 too
    assert tiles_reaching(6, True, (2, 6)).tolist() == [2, 4, 6]
    assert tiles_reaching(6, True, (4,)).tolist() == [4, 6]


def _small_ranks(seed: int, tmp_path):
    """Two matmuls in a chain whose ranks are 1 or 2, spread on fanouts of 2-4."""
    rng = random.Random(200 + seed)
    b = {v: rng.choice([1, 2]) for v in "mknq"} | {"m": 2}
    return _chain_of(b, rng, tmp_path / f"small{seed}.yaml")


def test_ranks_of_one_or_two_are_searched_evenly_with_the_same_tables(tmp_path, monkeypatch):
    """Every size of a rank of 1 or 2 divides it: the even search (no per-row state)
    gives the tables the uneven one gives, row for row, costing fewer tile shapes."""
    specs = [_small_ranks(seed, tmp_path) for seed in range(2)]
    got = [_tables(spec) for spec in specs]
    monkeypatch.setattr(rank_tiles, "UNEVEN_FROM", 0)  # the uneven search, as before
    want = [_tables(spec) for spec in specs]
    for g, w in zip(got, want, strict=True):
        for n in w:
            assert _fingerprint(g[n]) == _fingerprint(w[n]), n
    assert sum(map(_evaluated, got)) < sum(map(_evaluated, want))
