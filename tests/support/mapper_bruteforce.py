"""A brute-force enumerator of the single-Einsum mapspace, for checking the generator.

Deliberately simple and separate from ``fusemap.mapper``: it lists every template and
every tile shape of the mapspace described in ``docs/mapspace.md`` as plain LoopTrees
and scores each with the model (``evaluate_mapping``). No pruning, no shared stages, no
vectorization: slow, and obviously complete.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import pytest

from fusemap.model.evaluate import evaluate_mapping
from fusemap.spec import mapping as M
from fusemap.spec.arch_eval import ArchEvaluator
from fusemap.spec.errors import InvalidMappingError
from fusemap.spec.resolve import resolve_workload
from fusemap.spec.spec import Spec


@dataclass
class Best:
    """Best objective values over every valid mapping seen."""

    energy: float = math.inf
    latency: float = math.inf
    edp: float = math.inf
    mappings: int = 0
    valid: int = 0


def _holder_lists(info, flat):
    """Per tensor: top memory (backing) plus every allowed choice of lower memories."""
    mems = [i for i, c in enumerate(flat.path) if c.kind == "memory"]
    per = []
    for t in info.tensors:
        must = [(t, mems[0])]
        may = []
        for i in mems[1:]:
            c = flat.path[i]
            if t in c.keep:
                must.append((t, i))
            elif t in c.may_keep:
                may.append((t, i))
        per.append(
            [must + list(x) for k in range(len(may) + 1) for x in itertools.combinations(may, k)]
        )
    for combo in itertools.product(*per):
        yield [h for hs in combo for h in hs]


def _orders(holders, top):
    levels = sorted({lv for _, lv in holders})
    per = []
    for lv in levels:
        group = [h for h in holders if h[1] == lv]
        per.append([tuple(group)] if lv == top else list(itertools.permutations(group)))
    for combo in itertools.product(*per):
        yield [h for g in combo for h in g]


def _spatial(info, flat, spread_max):
    dims = []
    for lv, comp in enumerate(flat.path):
        for d in comp.spatial:
            ok_vars = [
                v
                for v in info.rank_variables
                if info.bounds[v] > 1
                and all(info.relevance(t, v) == "irrelevant" for t in d.reuse & set(info.tensors))
            ]
            need = 1
            if d.min_usage > 0 and not info.is_copy:
                need = math.ceil(d.min_usage * d.fanout - 1e-9)
            options = []
            for trips in itertools.product(*[range(1, info.bounds[v] + 1) for v in ok_vars]):
                if any(
                    info.bounds[v] % n and info.bounds[v] > spread_max
                    for v, n in zip(ok_vars, trips, strict=True)
                ):
                    continue  # uneven spreads only where tiles may be imperfect
                used = math.prod(trips)
                if used <= d.fanout:
                    loops = [
                        (comp.name, d.name, lv, v, n)
                        for v, n in zip(ok_vars, trips, strict=True)
                        if n > 1
                    ]
                    options.append((used, loops))
            # min_usage, or the highest usage reachable when nothing reaches it
            need = min(need, max(u for u, _ in options))
            dims.append([loops for used, loops in options if used >= need])
    for combo in itertools.product(*dims):
        loops = [x for opt in combo for x in opt]
        per_var = {}
        for *_, v, n in loops:
            per_var[v] = per_var.get(v, 1) * n
        if all(info.bounds[v] % n == 0 or info.bounds[v] <= spread_max for v, n in per_var.items()):
            yield loops


def _spreads(size, trips, first, imperfect):
    """Tiles a spatial loop over ``trips`` instances may leave below ``size``: the first
    loop of a variable that may be cut imperfectly takes any size needing ``trips``."""
    if first and imperfect:
        return [s for s in range(1, size + 1) if -(-size // s) == trips]
    return [size // trips] if size % trips == 0 else []


def _chains(bound, gaps, spatial_at, imperfect, last):
    """Per gap, for one variable: (size after the gap's temporal loop, tiles its spatial
    loops leave)."""
    out = []

    def rec(j, size, looped, acc):
        if j == last + 1:
            if size == 1:
                out.append(list(acc))
            return
        choices = [size]
        if j in gaps:
            if not looped and imperfect:
                choices += list(range(1, size))
            else:
                choices += [d for d in range(1, size) if size % d == 0]
        for c in choices:
            for tiles in _spread_all(c, spatial_at.get(j + 1, []), looped or c < size, imperfect):
                after = tiles[-1] if tiles else c
                rec(j + 1, after, looped or after < size, acc + [(c, tiles)])

    rec(0, bound, False, [])
    return out


def _spread_all(size, trips_list, looped, imperfect):
    """Every sequence of tiles a gap's spatial loops over one variable may leave."""
    if not trips_list:
        return [[]]
    out = []
    for s in _spreads(size, trips_list[0], not looped, imperfect):
        out += [[s, *rest] for rest in _spread_all(s, trips_list[1:], True, imperfect)]
    return out


def mappings(spec: Spec, einsum: str, imperfect_max: int = 16, spread_max: int = 1024):
    """Every (mapping, compute unit) of the mapspace, as LoopTrees (``spread_max``: the
    largest rank a spatial loop may spread unevenly, the mapper's ``spread_max_bound``)."""
    wl = resolve_workload(spec)
    ae = ArchEvaluator(spec, wl)
    info = wl.einsum(einsum)
    comps = ae.components(einsum)
    kinds = {"relevant": 0, "partial": 1, "irrelevant": 2}
    for unit in [n for n, c in comps.items() if c.kind == "compute" and c.enabled]:
        flat = ae.flat(einsum, unit)
        top = next(i for i, c in enumerate(flat.path) if c.kind == "memory")
        for holders in _holder_lists(info, flat):
            nodes = ((flat.path[level].name, t) for t, level in holders)
            if not ae.allows_holding(einsum, flat.path, nodes):
                continue  # a keep rule naming memories (`keep: ~DRAM`) is not met
            for order in _orders(holders, top):
                n = len(order)
                for loops in _spatial(info, flat, min(spread_max, imperfect_max)):
                    slot = {}
                    for comp, dname, lv, v, _trips in loops:
                        s = next((j for j, (_, hl) in enumerate(order) if hl >= lv), n)
                        slot[(comp, dname, v)] = s
                    dead = {
                        g for g in range(n - 1) if order[g][1] == top and order[g + 1][1] == top
                    }
                    chains = []
                    for v in info.rank_variables:
                        spatial_at = {}
                        for comp, dname, _lv, var, trips in loops:
                            if var == v:
                                spatial_at.setdefault(slot[(comp, dname, v)], []).append(trips)
                        gaps = {g for g in range(n) if g not in dead}
                        spread = any(x[3] == v for x in loops)
                        imp = info.bounds[v] <= (
                            min(spread_max, imperfect_max) if spread else imperfect_max
                        )
                        chains.append(_chains(info.bounds[v], gaps, spatial_at, imp, n - 1))
                    for combo in itertools.product(*chains):
                        yield _tree(info, order, loops, slot, combo, unit, kinds, flat), wl, ae


def _tree(info, order, loops, slot, combo, unit, kinds, flat):
    variables = list(info.rank_variables)
    size = {v: info.bounds[v] for v in variables}
    nodes = []
    for j, (t, lv) in enumerate(order):
        nodes.append(M.Storage(tensors=[t], component=flat.path[lv].name))
        looped = [v for k, v in enumerate(variables) if combo[k][j][0] < size[v]]
        looped.sort(key=lambda v: (kinds[info.relevance(t, v)], variables.index(v)))
        for v in looped:
            size[v] = combo[variables.index(v)][j][0]
            nodes.append(M.Temporal(rank_variable=v, tile_shape=size[v]))
        used = {v: 0 for v in variables}
        for comp, dname, _, v, _trips in loops:
            if slot[(comp, dname, v)] == j + 1:
                size[v] = combo[variables.index(v)][j][1][used[v]]
                used[v] += 1
                nodes.append(
                    M.Spatial(rank_variable=v, tile_shape=size[v], name=dname, component=comp)
                )
    nodes.append(M.Compute(einsum=info.name, component=unit))
    return M.Mapping(nodes=nodes)


def brute_force(spec: Spec, einsum: str, imperfect_max: int = 16, limit: int = 20000) -> Best:
    """Best energy, latency and EDP over the whole mapspace, each mapping scored alone."""
    best = Best()
    for mapping, wl, ae in mappings(spec, einsum, imperfect_max):
        best.mappings += 1
        if best.mappings > limit:
            raise RuntimeError(f"more than {limit} mappings: pick a smaller case")
        try:
            r = evaluate_mapping(spec, mapping, workload=wl, arch=ae, einsums=[einsum])
        except InvalidMappingError:
            continue
        best.valid += 1
        best.energy = min(best.energy, r.energy)
        best.latency = min(best.latency, r.latency)
        best.edp = min(best.edp, r.energy * r.latency)
    return best


def count(spec: Spec, einsum: str, imperfect_max: int = 16, stop: int = 10**6) -> int:
    """Number of mappings (without scoring them), counting no further than ``stop``."""
    return sum(1 for _ in itertools.islice(mappings(spec, einsum, imperfect_max), stop + 1))


def assert_optimum(table, best: Best) -> None:
    """A table's least energy, latency and EDP are the brute force's (no row when no
    mapping is valid)."""
    if best.valid == 0:
        assert len(table) == 0
        return
    assert table.energy.min() == pytest.approx(best.energy, rel=1e-9)
    assert table.latency.min() == pytest.approx(best.latency, rel=1e-9)
    assert (table.energy * table.latency).min() == pytest.approx(best.edp, rel=1e-9)
