"""Hosting templates tiled on demand (mapper/deferred_hosting.py).

The rule rests on one claim: every pmapping of a template with a hosting holder costs at
least the least energy, and takes at least the least latency, of the same template
without it (its *floors*). Checked here on every tile shape (no pruning) of random
workloads with a tensor held across an Einsum, against floors from the normal search;
and the optimum with deferral must equal the optimum with every template tiled up front,
for energy, latency and EDP.
"""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest

from fusemap.mapper import ffm
from fusemap.mapper.deferred_hosting import DeferredHosting, base_key, merge_tables
from fusemap.mapper.ffm import _orders, fusion_plan, map_workload
from fusemap.mapper.join.completion import prefix_compat
from fusemap.mapper.join.dependencies import FusionRules
from fusemap.mapper.outcome import MapStatistics
from fusemap.mapper.pmappings.generate import generate_pmappings
from fusemap.mapper.pmappings.tables import generate_tables
from fusemap.mapper.space.config import config_from_spec
from fusemap.mapper.space.prefix import marked
from fusemap.spec.arch_eval import ArchEvaluator
from fusemap.spec.resolve import resolve_workload
from fusemap.spec.spec import load_spec
from tests.support.marks import slow_except
from tests.support.model_helpers import to_yaml
from tests.support.oracle_cases import random_arch, random_workload

SEEDS = range(8)


def _spec(seed: int, tmp_path):
    """A workload where E1 lies between A's writer E0 and its reader E2."""
    rng = random.Random(500 + seed)
    wl, bounds = random_workload(rng, "skip", 3)
    a = bounds["m"] * bounds["n"] * 8
    arch = random_arch(rng, 2 + seed % 2, rng.choice([a, 2 * a, 3 * a]))
    path = tmp_path / f"skip{seed}.yaml"
    path.write_text(to_yaml({**arch, **wl}))
    return load_spec(path)


def _config(spec):
    wl = resolve_workload(spec)
    plan = fusion_plan(wl, _orders(wl, "given", 720, FusionRules.of(wl)))
    config = replace(
        config_from_spec(spec), fusion=True, fusable=plan.fusable, held_loops=plan.held_loops,
        hosts=plan.hosts, hosted=plan.hosted, host_loops=plan.host_loops,
    )  # fmt: skip
    return wl, ArchEvaluator(spec, wl), config


@pytest.mark.parametrize("objective", ["energy", "all"])
@pytest.mark.parametrize("seed", slow_except(SEEDS, fast=[2, 6]))
def test_floors_bound_every_hosting_tile_shape(seed, objective, tmp_path):
    spec = _spec(seed, tmp_path)
    wl, arch, config = _config(spec)
    assert config.host_loops.get("E1"), "E1 must be a host in this shape"
    kw = dict(objective=objective, config=config, workload=wl, arch=arch)
    base = generate_pmappings(spec, "E1", only=lambda i, t: not marked(t), with_floors=True, **kw)
    every = generate_pmappings(spec, "E1", only=lambda i, t: marked(t), prune=False, **kw)
    assert bool(base.floors_latency) == (objective == "all")
    checked = 0
    for k, res in enumerate(every.results):
        rows = np.flatnonzero(every.template == k)
        if len(rows) == 0:
            continue
        key, what = base_key(res.template), res.template.describe()
        assert every.energy[rows].min() >= base.floors[key] * (1 - 1e-12), what
        if objective == "all":
            assert every.latency[rows].min() >= base.floors_latency[key] * (1 - 1e-12), what
        checked += 1
    assert checked > 0


VALUE = {
    "energy": lambda r: r.energy,
    "latency": lambda r: r.latency,
    "edp": lambda r: r.energy * r.latency,
}


@pytest.mark.slow
@pytest.mark.parametrize("objective", ["energy", "latency", "edp"])
@pytest.mark.parametrize("seed", SEEDS)
def test_deferred_hosting_keeps_the_optimum(seed, objective, tmp_path, monkeypatch):
    spec = _spec(seed, tmp_path)
    deferred = map_workload(spec, objective)
    monkeypatch.setattr(ffm, "DEFER_HOSTING", False)
    upfront = map_workload(spec, objective)
    value = VALUE[objective]
    assert value(deferred.best.result) == pytest.approx(value(upfront.best.result), rel=1e-12)
    assert deferred.statistics.hosting_templates  # the deferred path ran
    assert upfront.statistics.hosting_templates == []


def test_merge_keeps_every_row_and_its_prefix(tmp_path):
    spec = _spec(0, tmp_path)
    wl, arch, config = _config(spec)
    kw = dict(objective="energy", config=config, workload=wl, arch=arch)
    a = generate_pmappings(spec, "E1", only=lambda i, t: not marked(t), **kw)
    b = generate_pmappings(spec, "E1", only=lambda i, t: marked(t), **kw)
    m = merge_tables(a, b)
    assert len(m) == len(a) + len(b)
    for t, off in ((a, 0), (b, len(a))):
        for i in range(len(t)):
            assert m.energy[off + i] == t.energy[i]
            assert m.mapping(off + i) == t.mapping(i)
            got = m.fusion.interner.prefixes[int(m.fusion.seq[off + i])]
            assert got == t.fusion.interner.prefixes[int(t.fusion.seq[i])]


def test_a_merged_table_reads_the_compatibilities_asked_of_the_first(tmp_path):
    """The join asks each table's prefixes their compatibility, memoized on the
    interner: the table merged with more rows keeps it (the first table's answers are
    not worked out again), and every answer is the prefix's own."""
    spec = _spec(0, tmp_path)
    wl, arch, config = _config(spec)
    kw = dict(objective="energy", config=config, workload=wl, arch=arch)
    a = generate_pmappings(spec, "E1", only=lambda i, t: not marked(t), **kw)
    b = generate_pmappings(spec, "E1", only=lambda i, t: marked(t), **kw)
    assert len(a) and len(b)
    asked = [prefix_compat(a, int(q)) for q in a.fusion.seq]
    m = merge_tables(a, b)
    assert m.fusion.interner is a.fusion.interner
    f = m.fusion
    memo = f.interner.memo_of(("compat", f.shared, tuple(sorted(f.top.items()))))
    assert set(memo) == {int(q) for q in a.fusion.seq}  # asked of ``a`` only, so far
    assert [prefix_compat(m, int(q)) for q in f.seq[: len(a)]] == asked
    for q in f.seq.tolist():
        assert prefix_compat(m, q) == f.interner.compatibility(q, f.shared, f.top)


@pytest.mark.parametrize("seed", slow_except(SEEDS, fast=[2]))
def test_hosting_templates_cut_at_the_allowance_keep_every_row_within_it(seed, tmp_path):
    """Tables near each Einsum's least tile their hosting templates only up to the
    allowance of the join's cap: up to there, row for row, the tables are those with the
    hosting templates tiled whole, and they say where they stop."""
    spec = _spec(seed, tmp_path)
    wl = resolve_workload(spec)
    arch = ArchEvaluator(spec, wl)
    orders = _orders(wl, "given", 720, FusionRules.of(wl))
    plan = fusion_plan(wl, orders)

    def tables(cut: bool):
        deferred = DeferredHosting(spec, wl, 1, cut=cut)
        made = generate_tables(spec, wl, arch, "energy", 1, None, MapStatistics(), plan, deferred)
        cap = sum(float(t.energy.min()) for t in made.values()) * 1.05
        return made, deferred.extend(made, cap, orders), deferred, cap

    (whole, tiled, _, _), (part, tiled_cut, deferred, cap) = tables(False), tables(True)
    assert tiled == tiled_cut > 0
    for name, table in part.items():
        bound = table.complete_to
        assert np.isfinite(bound) == bool(plan.host_loops.get(name)), name
        if np.isfinite(bound):  # complete up to the allowance, not less
            assert bound == deferred._allowance(name, part, cap, orders)
        assert np.isinf(whole[name].complete_to)

        def rows(t, bound=bound):
            keep = t.energy <= bound
            return np.array(sorted(zip(t.energy[keep], t.latency[keep], strict=True)))

        got, want = rows(table), rows(whole[name])
        assert got.shape == want.shape, name
        np.testing.assert_allclose(got, want, rtol=1e-12)
