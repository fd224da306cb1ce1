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
import random
from dataclasses import replace

import numpy as np
import pytest

from fusemap.mapper.ffm import map_workload
from fusemap.mapper.join.assemble import assemble
from fusemap.mapper.pmappings.generate import generate_pmappings
from fusemap.mapper.space.templates import config_from_spec
from fusemap.model.evaluate import evaluate_mapping
from fusemap.spec.arch_eval import ArchEvaluator
from fusemap.spec.errors import InvalidMappingError
from fusemap.spec.resolve import resolve_workload
from fusemap.spec.spec import load_spec
from model_helpers import (
    arch,
    chain_matmul,
    compute_unit,
    memory,
    to_yaml,
    workload,
)


def _workload(rng: random.Random, shape: str) -> dict:
    if shape == "fanout":  # T1 feeds two Einsums
        b = {v: rng.choice([2, 2, 3]) for v in ("m", "n0", "n1", "n2", "n3")}
        es = [
            chain_matmul("E0", "T0", "W0", "T1", "n0", "n1"),
            chain_matmul("E1", "T1", "W1", "T2", "n1", "n2"),
            chain_matmul("E2", "T1", "W2", "T3", "n1", "n3"),
        ]
        return workload(b, *es)
    n = int(shape)
    small = [2] if n == 4 else [2, 2, 3]  # four Einsums: keep the brute force tractable
    b = {"m": rng.choice([2, 4])} | {f"n{i}": rng.choice(small) for i in range(n + 1)}
    es = [
        chain_matmul(f"E{i}", f"T{i}", f"W{i}", f"T{i + 1}", f"n{i}", f"n{i + 1}") for i in range(n)
    ]
    return workload(b, *es)


def _arch(
    rng: random.Random, gb_bits: int, small: bool, fanout: dict | None = None, dram_keeps="All"
) -> dict:
    tp = lambda: rng.choice(["inf", 2, 4])  # noqa: E731
    dram = rng.choice([20, 50, 100])
    nodes = [
        memory(
            "DRAM", "inf", dram, dram, read_tp=tp(), write_tp=tp(),
            tensors={"keep": "~Intermediates", "may_keep": dram_keeps},
        ),
        memory(
            "GB", gb_bits, 2, 2, read_tp=tp(), tensors={"may_keep": "All"},
            spatial=[fanout] if fanout else None,
        ),
    ]  # fmt: skip
    if rng.random() < 0.4 and not small:
        nodes.append(memory("RF", rng.choice([16, 24, 32]), 1, 1, tensors={"keep": "Outputs"}))
    nodes.append(compute_unit("MAC", 1, throughput=rng.choice([1, 2])))
    return arch(*nodes)


SHAPES = ["2", "2", "3", "fanout", "3", "4"]


def _case(seed: int, tmp_path, fanout: bool = False, on_chip: bool = False):
    """A random case; ``fanout``: the buffer is one of 2 instances (a spatial fanout, so
    a fused tensor kept there lies below a spatial loop its users share); ``on_chip``:
    DRAM may not keep intermediates (every one is fused)."""
    rng = random.Random(1000 + seed + (500 if fanout else 0) + (700 if on_chip else 0))
    wl = _workload(rng, SHAPES[seed % len(SHAPES)])
    bounds = {v: int(s.split("<")[-1]) for v, s in wl["workload"]["iteration_space_shape"].items()}
    inter = [k for k in bounds if k.startswith("n")][1:-1]
    whole = sum(bounds["m"] * bounds[v] * 8 for v in inter)  # every intermediate, whole
    gb = max(24, int(whole * rng.choice([0.3, 0.5, 0.8])))
    path = tmp_path / f"ffm{seed}.yaml"
    small = SHAPES[seed % len(SHAPES)] == "4"
    spread = None
    if fanout:
        spread = {"name": "X", "fanout": 2, "may_reuse": rng.choice(["All", "Nothing"])}
        spread |= {"min_usage": 1} if rng.random() < 0.5 else {}
        gb = max(gb // 2, 24)  # each instance holds its own tiles
    arch_nodes = _arch(rng, gb, small, spread, "~Intermediates" if on_chip else "All")
    path.write_text(to_yaml({**arch_nodes, **wl, "mapper": {"imperfect": False}}))
    return load_spec(path)


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


@pytest.mark.parametrize("seed", range(30))
def test_ffm_matches_brute_force(seed, tmp_path):
    _check(_case(seed, tmp_path), seed)


@pytest.mark.parametrize("seed", range(12))
def test_ffm_matches_brute_force_below_a_fanout(seed, tmp_path):
    """The buffer that may keep intermediates is below a spatial fanout: fused
    Einsums share the spatial loops above a fused tensor (spatial fusion)."""
    _check(_case(seed, tmp_path, fanout=True), seed)


@pytest.mark.parametrize("seed", range(16))
def test_ffm_matches_brute_force_intermediates_on_chip(seed, tmp_path):
    """DRAM may not keep intermediates: the buffer is the only memory that may back
    them, and the join must still track it (it did not until 2026-11-25)."""
    _check(_case(seed, tmp_path, on_chip=True), seed)


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
