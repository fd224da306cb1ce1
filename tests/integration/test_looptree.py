"""Issue 18, Found 6: the LoopTree of a mapped result is readable. Storage nodes of one
memory are written together (only where the model counts the merged mapping exactly as
the original: checked here on random mappings), loops show their iteration counts and
fanout usage, and ``map -q`` leaves the tree out."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from fusemap.cli import app
from fusemap.examples import example_path
from fusemap.model.evaluate import evaluate_mapping
from fusemap.report.render import text_tree
from fusemap.spec import mapping as M
from fusemap.spec.errors import FusemapError
from fusemap.spec.spec import load_spec
from tests.support.marks import examples
from tests.support.paths import REFERENCE, shared_path

ARCH, WORKLOAD = example_path("arch.yaml"), example_path("three_matmuls.yaml")
SPEC = load_spec(ARCH, WORKLOAD, variables={"M": 8, "N": 4})

TENSORS_OF = {"T1": ["T0", "W0", "T1"], "T2": ["T1", "W1", "T2"], "T3": ["T2", "W2", "T3"]}
VARS_OF = {"T1": ["m", "n0", "n1"], "T2": ["m", "n1", "n2"], "T3": ["m", "n2", "n3"]}

STAIRCASE = """
mapping:
  nodes:
  - !Storage {tensors: [T0], component: DRAM}
  - !Storage {tensors: [W0], component: DRAM}
  - !Storage {tensors: [T1], component: DRAM}
  - !Storage {tensors: [T0], component: Buffer}
  - !Storage {tensors: [W0], component: Buffer}
  - !Storage {tensors: [T1], component: Buffer}
  - !Temporal {rank_variable: m, tile_shape: 3}
  - !Temporal {rank_variable: m, tile_shape: 1}
  - !Temporal {rank_variable: n0, tile_shape: 1}
  - !Temporal {rank_variable: n1, tile_shape: 4}
  - !Spatial {rank_variable: n1, tile_shape: 1, name: X, component: PEArray}
  - !Compute {einsum: T1, component: MAC}
"""


def _staircase(tmp_path) -> object:
    path = tmp_path / "map.yaml"
    path.write_text(STAIRCASE)
    return load_spec(ARCH, WORKLOAD, path, variables={"M": 8, "N": 4})


def test_storage_nodes_of_one_memory_are_written_together(tmp_path):
    spec = _staircase(tmp_path)
    lines = text_tree(spec.mapping).splitlines()
    assert lines[0].startswith("[DRAM] T0, W0, T1")
    assert lines[1].strip().startswith("[Buffer] T0, W0, T1")
    assert len(lines) == 8  # 2 storage + 5 loops + compute (main: 12 nested lines)


def test_loops_show_iteration_counts_and_fanout_usage(tmp_path):
    from fusemap.report.looptree import annotate

    spec = _staircase(tmp_path)
    text = text_tree(spec.mapping, annotate(spec, spec.mapping))
    assert "for m ×3 (tile 3)" in text  # 8 cut by 3: tiles of 3, 3 and 2
    assert "for m ×3 (tile 1)" in text  # a tile of 3 cut by 1
    assert "for n1 ×1 (tile 4)" in text  # N = 4
    assert "spatial-for n1 ×4 on PEArray.X (tile 1, 4/16 used)" in text
    # 8-bit values. DRAM backs T0 (8×4), W0 (4×4) and T1 (8×4): 80 B. In the Buffer T0
    # and W0 are followed by another storage node (whole tensors: 32 B + 16 B); T1, the
    # last, is lowered past m (tile 3, then 1) and stops above n0: a 1×4 tile, 4 B.
    assert "[DRAM] T0, W0, T1  · holds 80 B" in text
    assert "[Buffer] T0, W0, T1  · holds 52 B = <0.1% of 256 KiB" in text


def test_merged_mapping_evaluates_exactly_as_the_original(tmp_path):
    from fusemap.report.looptree import merge_storage

    spec = _staircase(tmp_path)
    merged = merge_storage(spec.mapping)
    assert len(merged.nodes) == len(spec.mapping.nodes) - 4
    original = evaluate_mapping(spec, spec.mapping, einsums=["T1"]).to_json()
    assert evaluate_mapping(spec, merged, einsums=["T1"]).to_json() == original


def test_nodes_separated_by_a_loop_or_of_another_memory_stay_apart():
    from fusemap.report.looptree import merge_storage

    nodes = [
        M.Storage(tensors=["T0"], component="DRAM"),
        M.Storage(tensors=["T0"], component="Buffer"),
        M.Storage(tensors=["W0"], component="DRAM"),
        M.Temporal(rank_variable="m", tile_shape=1),
        M.Storage(tensors=["T1"], component="DRAM"),
        M.Storage(tensors=["T1"], component="DRAM", persistent=True),
    ]
    merged = merge_storage(M.Mapping(nodes=nodes))
    assert merged.nodes == nodes  # nothing here may be merged


# -- the merge keeps every count and usage: random mappings ------------------------------


def _branch(draw, einsum: str) -> list[M.MappingNode]:
    nodes: list[M.MappingNode] = []
    for comp in ("DRAM", "Buffer"):
        tensors = draw(st.permutations(TENSORS_OF[einsum]))
        for t in tensors[: draw(st.integers(0, 3))]:
            nodes.append(M.Storage(tensors=[t], component=comp, persistent=draw(st.booleans())))
        if draw(st.booleans()):
            nodes.append(M.Temporal(rank_variable=draw(st.sampled_from(VARS_OF[einsum])),
                                    tile_shape=draw(st.integers(1, 4))))  # fmt: skip
    for v in VARS_OF[einsum]:
        if draw(st.booleans()):
            nodes.append(M.Spatial(rank_variable=v, tile_shape=1, name="X", component="PEArray"))
        else:
            nodes.append(M.Temporal(rank_variable=v, tile_shape=1))
    return nodes + [M.Compute(einsum=einsum, component="MAC")]


@st.composite
def mappings(draw) -> M.Mapping:
    einsums = draw(st.lists(st.sampled_from(list(TENSORS_OF)), min_size=1, max_size=3, unique=True))
    top = [M.Storage(tensors=[t], component="DRAM") for t in draw(st.permutations(
        ["T0", "W0", "W1", "W2", "T3"]))[: draw(st.integers(0, 5))]]  # fmt: skip
    if len(einsums) == 1:
        return M.Mapping(nodes=top + _branch(draw, einsums[0]))
    branches = [M.Nested(nodes=_branch(draw, e)) for e in einsums]
    return M.Mapping(nodes=[*top, M.Sequential(nodes=branches)])


def _outcome(mapping: M.Mapping, einsums: list[str]):
    try:
        return evaluate_mapping(SPEC, mapping, einsums=einsums).to_json()
    except FusemapError as err:
        return type(err).__name__ + ": " + str(err)


@pytest.mark.parametrize("examples", examples(150, few=15))
def test_merging_storage_never_changes_a_count_or_a_usage(examples):
    @settings(deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=examples)
    @given(mappings())
    def check(mapping):
        from fusemap.report.looptree import merge_storage

        einsums = [b[-1].einsum for b in mapping.branches()]
        merged = merge_storage(mapping)
        assert _outcome(merged, einsums) == _outcome(mapping, einsums)

    check()


def test_gpt3_reference_mapping_merged_gives_the_same_numbers():
    from fusemap.report.looptree import annotate, merge_storage

    case = shared_path(REFERENCE / "model-mapper-shapes/ffm_gpt3_tok1024")
    workload = (case / (case / "workload.path").read_text().strip()).resolve()
    params = json.loads((case / "params.json").read_text())
    spec = load_spec(case / "arch.yaml", workload, case / "mapping.yaml", variables=params)
    merged, original = (
        evaluate_mapping(spec, merge_storage(spec.mapping)).to_json(),
        evaluate_mapping(spec).to_json(),
    )
    assert len(merged.pop("warnings")) == len(original.pop("warnings"))  # (lines known only
    assert merged == original  # for the mapping read from its file)
    text = text_tree(spec.mapping, annotate(spec, spec.mapping))
    assert max(len(line) for line in text.splitlines()) < 120  # main: 231 characters


@pytest.mark.slow
def test_map_prints_a_merged_annotated_tree_and_q_leaves_it_out(tmp_path):
    out = tmp_path / "best.yaml"
    result = CliRunner().invoke(app, ["map", ARCH, WORKLOAD, "-o", str(out)])
    assert result.exit_code == 0, result.output
    text = result.output
    first = text.splitlines()[text.splitlines().index(next(
        line for line in text.splitlines() if line.startswith("[DRAM]")))]  # fmt: skip
    assert first.startswith("[DRAM] T0, W0, W1, W2, T3")
    assert "×" in text and "used)" in text
    # the written mapping has the merged nodes and scores to the printed energy
    written = out.read_text()
    assert "tensors: [T0, W0, W1, W2, T3]" in written
    quiet = CliRunner().invoke(app, ["map", ARCH, WORKLOAD, "-q"])
    assert quiet.exit_code == 0
    assert "compute T1 on MAC" not in quiet.output and "Per Einsum" in quiet.output
