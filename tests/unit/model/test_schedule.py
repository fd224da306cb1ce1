"""Latency of overlap regions (``!Pipeline {overlap: true}``, README "Pipelined latency").

Arch: MainMemory (read and write ``mm_tp`` values per second) -> GlobalBuffer (free) ->
two compute units, U1 (1 op/s, in a Fork) and U2 (2 ops/s). Workload over m (M = 4):
E1 ``Y[m] = A[m]`` on U1, E2 ``Z[m] = Y[m]`` on U2, E3 ``W[m] = Z[m]`` on U1 or U2.
A and W live in MainMemory, Y and Z in the GlobalBuffer. So, per Einsum:
E1: U1 4 s, MainMemory 4/mm_tp s; E2: U2 2 s; E3: 4 s on U1 (2 s on U2), MainMemory
4/mm_tp s.
"""

from __future__ import annotations

import pytest

from fusemap.spec.mapping import Mapping
from tests.support.model_helpers import (
    Tag,
    access,
    arch,
    compute,
    compute_unit,
    einsum,
    load,
    loops,
    mapping,
    memory,
    run,
    sequential,
    storage,
    workload,
)

MM, GB = "MainMemory", "GlobalBuffer"


def two_units(mm_tp: float | str = 1) -> dict:
    return arch(
        memory(MM, "inf", 0, 0, read_tp=mm_tp, write_tp=mm_tp),
        memory(GB, "inf", 0, 0),
        Tag("Fork", nodes=[compute_unit("U1", 1, 1)]),
        compute_unit("U2", 1, 2),
    )


def chain3() -> dict:
    return workload(
        {"m": 4},
        einsum("E1", access("A", ["m"]), access("Y", ["m"], True)),
        einsum("E2", access("Y", ["m"]), access("Z", ["m"], True)),
        einsum("E3", access("Z", ["m"]), access("W", ["m"], True)),
    )


def branch(name: str, unit: str) -> list:
    return [*loops("m"), compute(name, unit)]


def pipeline(*branches: list, overlap: bool = True) -> Tag:
    nodes = [Tag("Nested", nodes=b) if isinstance(b, list) else b for b in branches]
    return Tag("Pipeline", nodes=nodes, overlap=overlap or None)


def top(split: Tag) -> dict:
    return mapping(storage(MM, "A", "W"), storage(GB, "Y", "Z"), split)


def test_default_sums_per_einsum_even_for_pipelines(tmp_path):
    for split in (
        sequential(branch("E1", "U1"), branch("E2", "U2"), branch("E3", "U1")),
        pipeline(branch("E1", "U1"), branch("E2", "U2"), branch("E3", "U1"), overlap=False),
    ):
        r = run(tmp_path, two_units(0.5), chain3(), top(split))
        assert [r.einsums[e].latency for e in ("E1", "E2", "E3")] == [8, 2, 8]
        assert r.latency == 8 + 2 + 8


@pytest.mark.parametrize(("mm_tp", "expected"), [(1, 8), (0.5, 16), ("inf", 8)])
def test_flat_overlap_region_is_max_of_busiest_unit_and_memory(tmp_path, mm_tp, expected):
    split = pipeline(branch("E1", "U1"), branch("E2", "U2"), branch("E3", "U1"))
    r = run(tmp_path, two_units(mm_tp), chain3(), top(split))
    # U1 runs E1 and E3 (4 + 4 s); MainMemory moves A and W (8 / mm_tp s).
    assert r.latency == expected


@pytest.mark.parametrize(("mm_tp", "expected"), [("inf", 6), (1, 8)])
def test_nested_sequential_in_a_region_sums_its_branches(tmp_path, mm_tp, expected):
    split = pipeline(sequential(branch("E1", "U1"), branch("E2", "U2")), branch("E3", "U2"))
    r = run(tmp_path, two_units(mm_tp), chain3(), top(split))
    # schedule = max(E1 + E2, E3) = max(4 + 2, 2) = 6; busiest unit 4; memory 8 / mm_tp.
    assert r.latency == expected


def test_pipeline_inside_a_region_is_at_least_its_busiest_unit(tmp_path):
    inner = pipeline(branch("E1", "U1"), branch("E3", "U1"), overlap=False)
    split = pipeline(sequential([inner], branch("E2", "U2")))
    wl = chain3()
    r = run(tmp_path, two_units("inf"), wl, top(split))
    # The inner pipeline's branches share U1: max(4, 4) would be 4, but U1 is busy 8.
    assert r.latency == 8 + 2


def test_region_inside_a_sequential_adds_to_the_rest(tmp_path):
    split = sequential([pipeline(branch("E1", "U1"), branch("E2", "U2"))], branch("E3", "U2"))
    r = run(tmp_path, two_units(1), chain3(), top(split))
    # Region: max(E1 4, E2 2, U1 4, MainMemory 4) = 4; then E3 alone: max(U2 2, MM 4) = 4.
    assert r.latency == 4 + 4


def test_overlap_flag_round_trips(tmp_path):
    split = pipeline(branch("E1", "U1"), branch("E2", "U2"), branch("E3", "U1"))
    spec = load(tmp_path, two_units(), chain3(), top(split))
    text = spec.mapping.to_yaml()
    assert "overlap: true" in text
    (tmp_path / "again.yaml").write_text(text)
    from fusemap.spec.spec import load_spec

    again = load_spec(tmp_path / "again.yaml")
    assert isinstance(again.mapping, Mapping) and again.mapping == spec.mapping
