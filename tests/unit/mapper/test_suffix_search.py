"""The bottom-up search below the deepest fused node finds the same pmappings as the
plain top-down search: for every compatibility, the same least energy and latency.

The two are separate code paths (:mod:`fusemap.mapper.tiling.suffix` against
:meth:`TemplateTiler.stage` all the way down); random small chains, both with shared
tensors tiled once and with the fused prefix free to split a variable.
"""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fusemap.mapper.pmappings.generate import generate_pmappings
from fusemap.mapper.space.config import config_from_spec
from fusemap.mapper.tiling import suffix
from fusemap.spec.spec import load_spec
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


def _spec(seed: int, tmp_path):
    rng = random.Random(seed)
    b = {"m": rng.choice([4, 8, 12])} | {f"n{i}": rng.choice([2, 4, 6]) for i in range(4)}
    es = [
        einsum(
            f"E{i}",
            access(f"T{i}", ["m", f"n{i}"]),
            access(f"W{i}", [f"n{i}", f"n{i + 1}"]),
            access(f"T{i + 1}", ["m", f"n{i + 1}"], output=True),
        )
        for i in range(3)
    ]
    nodes = [
        memory("DRAM", "inf", 50, 50, tensors={"keep": "~Intermediates", "may_keep": "All"}),
        memory("GB", rng.choice([256, 512, 1024]), 2, 2, read_tp=2, tensors={"may_keep": "All"}),
        memory("RF", rng.choice([32, 64]), 1, 1, tensors={"keep": "Outputs"}),
        compute_unit("MAC", 1, throughput=2),
    ]
    path = tmp_path / f"s{seed}.yaml"
    path.write_text(to_yaml({**arch(*nodes), **workload(b, *es)}))
    return load_spec(path)


def _fronts(spec, einsum_name: str, objective: str, once: bool, **knobs) -> dict:
    config = replace(config_from_spec(spec), fusion=True, fused_loops_once=once, **knobs)
    config = config if "hosts" in knobs else replace(config, hosts=frozenset())
    table = generate_pmappings(spec, einsum_name, objective=objective, config=config)
    best: dict = {}
    for i in range(len(table)):
        key = table.fusion.compatibility(i)
        e, lat = float(table.energy[i]), float(table.latency[i])
        old = best.get(key, (e, lat))
        best[key] = (min(old[0], e), min(old[1], lat))
    return best


@pytest.mark.parametrize("seed", slow_except(range(6), fast=[2]))
def test_bottom_up_suffix_matches_top_down(seed, tmp_path, monkeypatch):
    spec = _spec(seed, tmp_path)
    once = seed % 2 == 0
    objective = "energy" if seed % 3 else "all"
    for name in ("E0", "E1", "E2"):
        fast = _fronts(spec, name, objective, once)
        with monkeypatch.context() as m:
            m.setattr(suffix.SuffixSearch, "applies", staticmethod(lambda tiler: False))
            slow = _fronts(spec, name, objective, once)
        assert fast.keys() == slow.keys()
        for key, (e, lat) in slow.items():
            assert fast[key][0] == pytest.approx(e, rel=1e-12), (name, key)
            if objective == "all":
                assert fast[key][1] == pytest.approx(lat, rel=1e-12), (name, key)


def test_fused_templates_use_the_bottom_up_search(tmp_path, monkeypatch):
    """Guard against the test above comparing the top-down search with itself."""
    spec = _spec(0, tmp_path)
    calls = []
    real = suffix.SuffixSearch.meet
    monkeypatch.setattr(
        suffix.SuffixSearch, "meet", lambda self, *a: calls.append(1) or real(self, *a)
    )
    _fronts(spec, "E1", "energy", True)
    assert calls


@pytest.mark.parametrize("seed", slow_except(range(3), fast=[0]))
def test_fronts_are_dropped_after_their_last_template(seed, tmp_path, monkeypatch):
    """Every front is released once no template needs it any more, and keeping them all
    instead gives the same pmappings."""
    spec = _spec(seed, tmp_path)
    caches = []
    real_init = suffix.FrontCache.__init__

    def spy(self, store=None):
        real_init(self, store)
        caches.append(self)

    monkeypatch.setattr(suffix.FrontCache, "__init__", spy)
    evicting = _fronts(spec, "E1", "energy", True)
    assert any(c.axes for c in caches), "the bottom-up search did not run"
    assert all(not c.fronts and not c._uses for c in caches)
    monkeypatch.setattr(suffix.FrontCache, "done", lambda self, i: None)
    first = len(caches)
    assert _fronts(spec, "E1", "energy", True) == evicting
    assert any(c.fronts for c in caches[first:])


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4))
def test_fronts_shared_between_templates_are_the_ones_each_would_build(seed, tmp_path, monkeypatch):
    """Templates share a front when its key (:meth:`SuffixSearch.front_keys`) is equal. With
    every template building its own fronts instead, the pmappings are the same; and the
    sharing really happens (fewer fronts built)."""
    spec = _spec(seed, tmp_path)
    built = []
    real_build = suffix.SuffixSearch._build
    monkeypatch.setattr(
        suffix.SuffixSearch, "_build", lambda self, j: built.append(1) or real_build(self, j)
    )
    objective = "all" if seed % 2 else "energy"
    shared = {n: _fronts(spec, n, objective, seed < 2) for n in ("E0", "E1", "E2")}
    shared_builds = len(built)
    real_keys = suffix.SuffixSearch.front_keys
    monkeypatch.setattr(
        suffix.SuffixSearch,
        "front_keys",
        lambda self: [(id(self.tiler), k) for k in real_keys(self)],
    )
    built.clear()
    alone = {n: _fronts(spec, n, objective, seed < 2) for n in ("E0", "E1", "E2")}
    assert alone == shared
    assert shared_builds < len(built)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6, 12))
def test_branch_and_bound_keeps_the_unfused_optimum(seed, tmp_path, monkeypatch):
    """Templates that fuse nothing are searched with an energy ceiling (the best one
    finished so far); every compatibility keeps the same least energy as without it,
    and the ceiling really drops rows."""
    from fusemap.mapper.tiling.tiler import TemplateTiler

    spec = _spec(seed, tmp_path)
    calls = []
    real_stage = TemplateTiler.stage

    def spy(self, j, prev, ceiling=float("inf"), within=None):
        calls.append(ceiling)
        return real_stage(self, j, prev, ceiling, within)

    for name in ("E0", "E1", "E2"):
        with monkeypatch.context() as m:
            m.setattr(TemplateTiler, "stage", spy)
            fast = _fronts(spec, name, "energy", True)
        with monkeypatch.context() as m:
            m.setattr(TemplateTiler, "__init__", _never_alone(TemplateTiler.__init__))
            slow = _fronts(spec, name, "energy", True)
        assert fast.keys() == slow.keys()
        for key, (e, _) in slow.items():
            assert fast[key][0] == pytest.approx(e, rel=1e-12), (name, key)
    assert any(c != float("inf") for c in calls)


def _never_alone(init):
    def patched(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.alone = False

    return patched


@pytest.mark.parametrize(
    "seed", slow_except([9, 11, 12, 14, 16], fast=[9])
)  # T2 fits GB whole in these
def test_a_host_keeps_the_least_energy_for_every_amount_it_may_hold(seed, tmp_path):
    """E0 runs while T2 (E1 -> E2) may be held whole in GB: its templates that fuse
    nothing are searched once per amount held (none, or T2), each with its own energy
    ceiling. For each amount, the least energy of the rows that fit beside it is the
    least energy the full front (reservations compared, no ceiling) has there."""
    from fusemap.mapper.pmappings.held import held_amounts
    from fusemap.mapper.space.templates import join_memories
    from fusemap.spec.arch_eval import ArchEvaluator
    from fusemap.spec.resolve import resolve_workload

    spec = _spec(seed, tmp_path)
    wl = resolve_workload(spec)
    arch_eval = ArchEvaluator(spec, wl)
    knobs = {"hosts": frozenset({"E0"}), "hosted": {"E0": frozenset({"T2"})}}
    config = replace(config_from_spec(spec), fusion=True, **knobs)
    memories = join_memories(wl, arch_eval, config)
    amounts = held_amounts(wl.einsum("E0"), wl, arch_eval, config, memories)
    assert len(amounts) >= 2 and amounts[0] == {}  # nothing held, or T2 in a memory
    fast = generate_pmappings(spec, "E0", objective="energy", config=config)
    full = replace(config, hosts=None, hosted={})  # every row kept on its reservations
    slow = generate_pmappings(spec, "E0", objective="energy", config=full)
    sizes = {m: arch_eval.components("E0")[m].size for m in memories}

    def least(table, held) -> float | None:
        fits = table.fusion.seq == 0
        for m, bits in table.fusion.buckets.items():
            fits &= bits.sum(axis=1) <= (sizes[m] - held.get(m, 0.0)) * (1 + 1e-9)
        return float(table.energy[fits].min()) if fits.any() else None

    for held in amounts:
        want = least(slow, held)
        assert (
            (least(fast, held) is None)
            if want is None
            else least(fast, held) == (pytest.approx(want, rel=1e-12))
        ), held


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_dense_encoding_equals_the_generic_one(data):
    """The compiled encoder (lookup tables end to end) gives the numpy one's codes,
    -1 for sizes that are no candidate or past a table's end."""
    from types import SimpleNamespace

    from fusemap.mapper.tiling.suffix import SuffixSearch, dense_lookups, encode_dense

    n = data.draw(st.integers(1, 4))
    index_of, radix = [], []
    for _ in range(n):
        bound = data.draw(st.integers(1, 12))
        cands = sorted(data.draw(st.sets(st.integers(1, bound), min_size=1)))
        lookup = np.full(bound + 1, -1, dtype=np.int64)
        lookup[cands] = np.arange(len(cands))
        index_of.append(lookup)
        radix.append(len(cands))
    strides = np.cumprod([1] + radix[::-1][:-1])[::-1].astype(np.int64)
    sizes = np.array(
        data.draw(st.lists(st.lists(st.integers(0, 15), min_size=n, max_size=n), max_size=30)),
        dtype=np.int64,
    ).reshape(-1, n)
    generic = SimpleNamespace(
        tiler=SimpleNamespace(tiles=SimpleNamespace(index_of=index_of)),
        strides=strides,
        lookups=None,
    )
    want = SuffixSearch.encode(generic, sizes)
    table, ends = dense_lookups(index_of)
    assert np.array_equal(encode_dense(sizes, table, ends, strides), want)
