"""The FFM join finds the optimal fused mapping: checked by brute force.

Each case is a random small workload (a chain of 2-4 matmuls, or one tensor feeding two
Einsums) on a random 2- or 3-level arch whose buffer is too small to keep every
intermediate whole. The brute force takes the *unpruned* pmappings of every Einsum
(``generate_pmappings(prune=False)``, several fused loops per rank variable allowed), forms every compatible combination (same backing
memory and loops above it for every shared tensor), sorts them by objective and asks the
model (capacity check on the assembled LoopTree) for the first valid one. FFM
(``map_workload``, pruned tables, join) must reach the same optimum for energy, latency
and EDP, and its mapping, scored by the model, must give the numbers it reports.
"""

from __future__ import annotations

import heapq
import itertools
import math
from dataclasses import replace

import numpy as np
import pytest

from fusemap.mapper.ffm import map_workload
from fusemap.mapper.join.assemble import assemble
from fusemap.mapper.pmappings.generate import generate_pmappings
from fusemap.mapper.space.config import config_from_spec
from fusemap.model.evaluate import evaluate_mapping
from fusemap.spec.arch_eval import ArchEvaluator
from fusemap.spec.errors import InvalidMappingError
from fusemap.spec.resolve import resolve_workload
from tests.support.ffm_cases import ffm_case
from tests.support.marks import slow_except


def _brute_force(spec, objective: str) -> float:
    """Best objective over every valid compatible combination of unpruned pmappings.

    Combinations are visited best-first (a heap over each compatible group product,
    by objective, or for EDP by energy times the least possible latency), and each is
    checked by the model on the assembled LoopTree until no unvisited one can win.
    """
    wl = resolve_workload(spec)
    ar = ArchEvaluator(spec, wl)
    config = replace(config_from_spec(spec), fusion=True, fused_loops_once=False)
    names = [e.name for e in wl.einsums]
    tables = [
        generate_pmappings(spec, n, config=config, workload=wl, arch=ar, prune=False) for n in names
    ]
    top = "DRAM"
    users = {t: [i for i, n in enumerate(names) if t in wl.einsum(n).tensors] for t in wl.tensors}
    groups = []
    for t in tables:
        by: dict[tuple, list[int]] = {}
        for i in range(len(t)):
            by.setdefault(t.fusion.compatibility(i), []).append(i)
        groups.append(by)
    combos = []  # per compatible group combination: per Einsum rows sorted by key
    for combo in itertools.product(*[list(g) for g in groups]):
        seen: dict[str, object] = {}
        ok = True
        for compat in combo:
            for c in compat:
                ok &= seen.setdefault(c.tensor, c) == c
                if c.backing != top:
                    u = users[c.tensor]
                    ok &= u == list(range(u[0], u[-1] + 1))
        if ok:
            combos.append([np.array(g[c]) for g, c in zip(groups, combo, strict=True)])
    key_of = (lambda t: t.latency) if objective == "latency" else (lambda t: t.energy)
    sorted_rows, lmin = [], []
    heap: list = []
    for c, rows in enumerate(combos):
        rows = [r[np.argsort(key_of(tables[k])[r], kind="stable")] for k, r in enumerate(rows)]
        sorted_rows.append(rows)
        lmin.append(sum(float(tables[k].latency[r].min()) for k, r in enumerate(rows)))
        start = (0,) * len(rows)
        heapq.heappush(heap, (_bound(tables, rows, start, objective, lmin[c]), c, start))
    visited = set()
    chains: dict = {}  # (Einsum, row) -> (its LoopTree, its compatibilities): rows repeat
    best = math.inf
    while heap:
        bound, c, idx = heapq.heappop(heap)
        if bound >= best * (1 - 1e-12):
            break
        if (c, idx) in visited:
            continue
        visited.add((c, idx))
        rows = sorted_rows[c]
        picks = [int(r[i]) for r, i in zip(rows, idx, strict=True)]
        for k in range(len(idx)):
            if idx[k] + 1 < len(rows[k]):
                nxt = idx[:k] + (idx[k] + 1,) + idx[k + 1 :]
                heapq.heappush(heap, (_bound(tables, rows, nxt, objective, lmin[c]), c, nxt))
        e = sum(float(tables[k].energy[p]) for k, p in enumerate(picks))
        lat = sum(float(tables[k].latency[p]) for k, p in enumerate(picks))
        value = {"energy": e, "latency": lat, "edp": e * lat}[objective]
        if value >= best or not _valid(spec, wl, ar, names, tables, picks, top, e, lat, chains):
            continue
        best = value
    return best


def _bound(tables, rows, idx, objective, lmin) -> float:
    if objective == "latency":
        return sum(
            float(tables[k].latency[r[i]]) for k, (r, i) in enumerate(zip(rows, idx, strict=True))
        )
    e = sum(float(tables[k].energy[r[i]]) for k, (r, i) in enumerate(zip(rows, idx, strict=True)))
    return e * lmin if objective == "edp" else e


def _valid(spec, wl, ar, names, tables, picks, top, energy, latency, memo: dict) -> bool:
    """Whether the model accepts the assembled LoopTree *and* scores it as the sum of the
    pmappings: otherwise the tree is not this combination (a node of one Einsum's own
    copy of a tensor also sits on another user's path) and its value is not ``energy``."""
    for k, p in enumerate(picks):
        if (k, p) not in memo:
            compat = {c.tensor: c for c in tables[k].fusion.compatibility(p)}
            memo[k, p] = (tables[k].mapping(p), compat)
    chains, compat = zip(*(memo[k, p] for k, p in enumerate(picks)), strict=True)
    try:
        r = evaluate_mapping(
            spec,
            assemble(names, list(chains), list(compat), top, wl, _levels(ar, names)),
            workload=wl,
            arch=ar,
        )
    except InvalidMappingError:
        return False
    return math.isclose(r.energy, energy, rel_tol=1e-9) and math.isclose(
        r.latency, latency, rel_tol=1e-9
    )


@pytest.mark.parametrize("seed", slow_except(range(30), fast=[1]))
def test_ffm_matches_brute_force(seed, tmp_path):
    _check(ffm_case(seed, tmp_path), seed)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(12))
def test_ffm_matches_brute_force_below_a_fanout(seed, tmp_path):
    """The buffer that may keep intermediates is below a spatial fanout: fused
    Einsums share the spatial loops above a fused tensor (spatial fusion)."""
    _check(ffm_case(seed, tmp_path, fanout=True), seed)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(16))
def test_ffm_matches_brute_force_intermediates_on_chip(seed, tmp_path):
    """DRAM may not keep intermediates: the buffer is the only memory that may back
    them, and the join must still track it (it did not until 2026-11-25)."""
    _check(ffm_case(seed, tmp_path, on_chip=True), seed)


def _check(spec, seed: int) -> None:
    for objective in ("energy", "latency", "edp"):
        best = _brute_force(spec, objective)
        # Odd seeds bound the exact join with a dirty (epsilon-pruned) one first.
        out = map_workload(spec, objective, epsilon=0.2 if seed % 2 else 0.0)
        res = out.best.result
        value = {"energy": res.energy, "latency": res.latency, "edp": res.energy * res.latency}
        assert value[objective] == pytest.approx(best, rel=1e-9), objective


def _levels(ar, names) -> dict[str, int]:
    """Each component's place in the architecture (memories top-down on every path)."""
    return {c: i for i, c in enumerate(ar.components(names[0]))}


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(16))
def test_ffm_matches_brute_force_with_every_check_table_semi_joined(seed, tmp_path, monkeypatch):
    """Every table of the full-space check searched again after the semi-join (keys and
    costs, ``mapper/joinable.py``), as GPT-3's large tables are: the same optima."""
    from fusemap.mapper import full_space

    monkeypatch.setattr(full_space, "SEMI_JOIN_ROWS", 0)
    _check(ffm_case(seed, tmp_path), seed)
