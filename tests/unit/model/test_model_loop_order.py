"""Property: loops of a run that no storage node separates may be written in any order.

Within such a run only the order of loops over the same rank variable means anything
(the tiles they cut), so any other permutation of the run leaves every action count,
energy and latency unchanged, whatever spatial loops it holds and wherever their fanouts
lie.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from fusemap.model.evaluate import evaluate_mapping
from fusemap.spec import mapping as M
from fusemap.spec.arch_eval import ArchEvaluator
from fusemap.spec.errors import FusemapError
from fusemap.spec.resolve import resolve_workload
from fusemap.spec.spec import load_spec
from tests.support.marks import examples
from tests.support.model_helpers import (
    arch,
    compute_unit,
    container,
    dim,
    matmul,
    memory,
    to_yaml,
)

MM, GB, LB = "MainMemory", "GlobalBuffer", "LocalBuffer"
BOUNDS = {"m": 4, "k": 6, "n": 4}
TENSORS = ("A", "B", "Z")
FANOUTS = {(LB, "Z"): 2, ("PE", "X"): 3}


@pytest.fixture(scope="module")
def setting(tmp_path_factory):
    folder = tmp_path_factory.mktemp("loop_order")
    a = arch(
        memory(MM),
        memory(GB, "inf", 0.5, 0.5),
        memory(LB, "inf", 0.25, 0.25, spatial=[dim("Z", 2, may_reuse="Nothing")]),
        container("PE", dim("X", 3)),
        compute_unit(),
    )
    paths = []
    for name, data in (
        ("arch", a),
        ("workload", matmul(**{v.upper(): b for v, b in BOUNDS.items()})),
    ):
        path = folder / f"{name}.yaml"
        path.write_text(to_yaml(data))
        paths.append(str(path))
    spec = load_spec(*paths)
    workload = resolve_workload(spec)
    return spec, workload, ArchEvaluator(spec, workload)


@st.composite
def loop_nodes(draw) -> list[M.MappingNode]:
    """Loops cutting every rank variable down to 1, some of them spatial, interleaved."""
    per_var = []
    free = dict(FANOUTS)
    for v, bound in BOUNDS.items():
        tiles, size = [], bound
        while size > 1:
            tile = draw(st.integers(1, size - 1))
            tiles.append(tile)
            size = tile
        loops: list[M.MappingNode] = []
        size = bound
        for tile in tiles:
            trips = math.ceil(size / tile)
            spots = [d for d, n in free.items() if n >= trips]
            if spots and draw(st.integers(0, 2)) == 0:
                comp, name = draw(st.sampled_from(spots))
                free[(comp, name)] = 1  # one spatial loop per dimension
                loops.append(M.Spatial(rank_variable=v, tile_shape=tile, name=name, component=comp))
            else:
                loops.append(M.Temporal(rank_variable=v, tile_shape=tile))
            size = tile
        per_var.append(loops)
    order = draw(st.permutations([i for i, loops in enumerate(per_var) for _ in loops]))
    cursor = [0] * len(per_var)
    out = []
    for i in order:  # interleave, each variable's loops staying in order
        out.append(per_var[i][cursor[i]])
        cursor[i] += 1
    return out


@st.composite
def mappings(draw) -> M.Mapping:
    """MainMemory backs everything; GlobalBuffer then LocalBuffer copies land anywhere."""
    body: list = list(draw(loop_nodes()))
    for memory_name in (GB, LB):
        lowest = max(
            (i for i, n in enumerate(body) if isinstance(n, M.Storage) and n.component == GB),
            default=-1,
        )
        for tensor in draw(st.lists(st.sampled_from(TENSORS), unique=True)):
            at = draw(st.integers(lowest + 1 if memory_name == LB else 0, len(body)))
            body.insert(at, M.Storage(tensors=[tensor], component=memory_name))
    top = M.Storage(tensors=list(TENSORS), component=MM)
    return M.Mapping(nodes=[top, *body, M.Compute(einsum="Z", component="MAC")])


def shuffled_runs(mapping: M.Mapping, keys: list[float]) -> M.Mapping:
    """Each run of consecutive loops permuted by ``keys``, same-variable loops in order."""
    nodes = list(mapping.nodes)
    out: list = []
    run: list = []
    used = iter(keys)

    def flush() -> None:
        order = sorted(range(len(run)), key=lambda j: next(used))
        slots: dict[str, list[int]] = {}
        for j in order:
            slots.setdefault(run[j].rank_variable, []).append(j)
        firsts = {v: iter(sorted(js)) for v, js in slots.items()}
        out.extend(run[next(firsts[run[j].rank_variable])] for j in order)
        run.clear()

    for node in nodes:
        if isinstance(node, M.Temporal | M.Spatial):
            run.append(node)
        else:
            flush()
            out.append(node)
    return M.Mapping(nodes=out)


def counts(result) -> dict:
    out = {("energy",): result.energy, ("latency",): result.latency}
    for e in result.einsums.values():
        for c in e.components.values():
            out[(c.name, "latency")] = c.latency
            for t, acts in c.tensors.items():
                for a, r in acts.items():
                    out[(c.name, t, a)] = r.count
            for a, r in c.actions.items():
                out[(c.name, a)] = r.count
    return out


@pytest.mark.parametrize("examples", examples(150, few=15))
def test_reordering_loops_inside_a_run_changes_no_count(setting, examples):
    @settings(deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=examples)
    @given(mappings(), st.lists(st.floats(0, 1), min_size=40, max_size=40))
    def check(mapping, keys):
        spec, workload, arch_eval = setting
        try:
            before = evaluate_mapping(spec, mapping, workload=workload, arch=arch_eval)
        except FusemapError:
            assume(False)
            return
        after = evaluate_mapping(
            spec, shuffled_runs(mapping, keys), workload=workload, arch=arch_eval
        )
        want, got = counts(before), counts(after)
        assert want.keys() == got.keys()
        for key, value in want.items():
            assert got[key] == pytest.approx(value, rel=1e-12), key

    check()
