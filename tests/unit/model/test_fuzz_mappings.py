"""Bad input never crashes: random (mostly invalid) mappings give a Result or a FusemapError."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fusemap.examples import example_path
from fusemap.model.evaluate import evaluate_mapping
from fusemap.spec import mapping as M
from fusemap.spec.arch_eval import ArchEvaluator
from fusemap.spec.errors import FusemapError
from fusemap.spec.resolve import resolve_workload
from fusemap.spec.spec import load_spec
from tests.support.marks import examples

SPEC = load_spec(
    example_path("arch.yaml"), example_path("three_matmuls.yaml"), variables={"M": 4, "N": 4}
)
WORKLOAD = resolve_workload(SPEC)
ARCH = ArchEvaluator(SPEC, WORKLOAD)

TENSORS = ["T0", "T1", "T2", "T3", "W0", "W1", "W2", "Nope"]
COMPONENTS = ["DRAM", "Buffer", "PEArray", "MAC", "Nope"]
VARIABLES = ["m", "n0", "n1", "n2", "n3", "zz"]
EINSUMS = ["T1", "T2", "T3", "Nope"]

VARS_OF = {"T1": ["m", "n0", "n1"], "T2": ["m", "n1", "n2"], "T3": ["m", "n2", "n3"]}
TENSORS_OF = {"T1": ["T0", "W0", "T1"], "T2": ["T1", "W1", "T2"], "T3": ["T2", "W2", "T3"]}


def mostly(good: list[str], bad: list[str]) -> st.SearchStrategy[str]:
    """Usually a valid name, sometimes any name (including invalid ones)."""
    return st.one_of(
        st.sampled_from(good), st.sampled_from(good), st.sampled_from(good), st.sampled_from(bad)
    )


def nodes_for(einsum: str) -> st.SearchStrategy:
    storage = st.builds(
        M.Storage,
        tensors=st.lists(mostly(TENSORS_OF[einsum], TENSORS), min_size=1, max_size=3, unique=True),
        component=mostly(["Buffer"], COMPONENTS),
    )
    temporal = st.builds(
        M.Temporal, rank_variable=mostly(VARS_OF[einsum], VARIABLES), tile_shape=st.integers(1, 5)
    )
    spatial = st.builds(
        M.Spatial,
        rank_variable=mostly(VARS_OF[einsum], VARIABLES),
        tile_shape=st.integers(1, 4),
        name=mostly(["X"], ["Y"]),
        component=mostly(["PEArray"], COMPONENTS),
    )
    return st.one_of(storage, temporal, temporal, spatial)


@st.composite
def branch(draw, einsum: str) -> M.Nested:
    """Random nodes, then (usually) the tile-1 loops that make the leaf one operation."""
    nodes = draw(st.lists(nodes_for(einsum), max_size=6))
    if draw(st.integers(0, 4)) < 4:
        nodes += [M.Temporal(rank_variable=v, tile_shape=1) for v in VARS_OF[einsum]]
    name = einsum if draw(st.integers(0, 9)) < 9 else draw(st.sampled_from(EINSUMS))
    component = "MAC" if draw(st.integers(0, 9)) < 9 else draw(st.sampled_from(COMPONENTS))
    return M.Nested(nodes=[*nodes, M.Compute(einsum=name, component=component)])


@st.composite
def mappings(draw) -> M.Mapping:
    top = [M.Storage(tensors=["T0", "W0", "W1", "W2", "T3"], component="DRAM")]
    prefix = draw(
        st.lists(
            st.builds(M.Temporal, rank_variable=st.just("m"), tile_shape=st.integers(1, 4)),
            max_size=2,
        )
    )
    if draw(st.booleans()):
        prefix.append(M.Storage(tensors=["T1", "T2"], component="Buffer"))
    else:
        top.append(M.Storage(tensors=["T1", "T2"], component="DRAM"))
    branches = [draw(branch(e)) for e in ("T1", "T2", "T3")]
    kind = draw(st.sampled_from([M.Sequential, M.Pipeline, M.Split]))
    return M.Mapping(nodes=[*top, *prefix, kind(nodes=branches)])


@pytest.mark.parametrize("examples", examples(300, few=15))
def test_random_mappings_never_crash(examples) -> None:
    @settings(deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=examples)
    @given(mappings())
    def check(mapping: M.Mapping) -> None:
        try:
            result = evaluate_mapping(SPEC, mapping, workload=WORKLOAD, arch=ARCH)
        except FusemapError as err:
            text = str(err)
            assert text and "\n" not in text
            return
        assert result.energy >= 0 and result.latency >= 0
        assert math.isfinite(result.energy)

    check()


def _evaluates(mapping: M.Mapping) -> bool:
    try:
        evaluate_mapping(SPEC, mapping, workload=WORKLOAD, arch=ARCH)
    except FusemapError:
        return False
    return True


def test_the_strategy_reaches_valid_mappings() -> None:
    """The fuzz above is not vacuous: it also produces mappings the model evaluates."""
    from hypothesis import find

    found = find(mappings(), _evaluates, settings=settings(max_examples=2000, deadline=None))
    assert len(found.branches()) == 3
