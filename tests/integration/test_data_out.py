"""Issue 18, Found 8: data out. DataFrames (pandas, pyarrow declared), a documented and
versioned JSON with units and the inputs, written mappings that say where they came from,
``map_workload`` exported, located Python exceptions, and output files with the usual
mode. Also Found 9: hints that point at the real cause."""

from __future__ import annotations

import json
import os
import re
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

import fusemap
from fusemap.cli import app
from fusemap.examples import example_path
from fusemap.report.io import write_atomic
from fusemap.spec.errors import InvalidMappingError, SpecError
from tests.support.paths import CORPUS, ROOT, shared_path

FILES = [example_path(n) for n in ("arch.yaml", "three_matmuls.yaml", "fused_mapping.yaml")]


def test_pandas_and_pyarrow_are_declared_dependencies():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {re.split(r"[<>=!\[ ]", d)[0] for d in deps}
    assert {"pandas", "pyarrow"} <= names


@pytest.mark.slow
def test_result_frame_is_long_and_adds_up(tmp_path):
    result = fusemap.evaluate(fusemap.load(*FILES))
    frame = result.to_frame()
    assert list(frame.columns)[:2] == ["einsum", "component"]
    assert {"tensor", "action", "count", "energy"} <= set(frame.columns)
    assert frame.energy.sum() == pytest.approx(result.energy, rel=1e-12)
    # per tensor: one groupby, not a four-level comprehension; hand-checked counts
    reads = frame.query("component == 'DRAM' and tensor == 'W0' and action == 'read'")
    assert reads["count"].sum() == result.count("DRAM", "read", tensor="W0") == 512
    per_component = frame.groupby("component").energy.sum()
    for name, comp in result.components.items():
        assert per_component.get(name, 0.0) == pytest.approx(comp.energy, rel=1e-12)
    frame.to_parquet(tmp_path / "r.parquet")  # pyarrow


@pytest.mark.slow
def test_statistics_and_pareto_frames():
    spec = fusemap.load(example_path("arch.yaml"), example_path("three_matmuls.yaml"))
    outcome = fusemap.map_workload(spec, objective="pareto")
    front = fusemap.to_frame(outcome)
    assert list(front.columns[:3]) == ["point", "energy", "latency"]
    assert len(front) == len(outcome.mappings) and front.energy.is_monotonic_increasing
    stats = fusemap.to_frame(outcome.statistics)
    assert list(stats.columns) == ["section", "name", "metric", "value"]
    pm = stats.query("metric == 'pmappings'").set_index("name")["value"]
    assert pm.to_dict() == outcome.statistics.pmappings


def test_json_is_versioned_with_units_inputs_and_defines(tmp_path):
    out = tmp_path / "r.json"
    result = CliRunner().invoke(app, ["evaluate", *FILES, "-D", "BUFFER_KIB=128", "-q",
                                      "--json", str(out)])  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert data["schema_version"] == 2
    assert data["fusemap_version"] == fusemap.__version__
    assert data["units"]["energy"] == "J" and data["units"]["area"] == "m^2"
    assert data["inputs"]["variables"] == {"BUFFER_KIB": 128}
    assert [Path(f["path"]).name for f in data["inputs"]["files"]] == [
        "arch.yaml", "three_matmuls.yaml", "fused_mapping.yaml"]  # fmt: skip
    assert all(len(f["sha256"]) == 64 for f in data["inputs"]["files"])
    assert "-D BUFFER_KIB=128" in data["command"]


def test_every_json_key_is_documented():
    """docs/json.md names every key `evaluate` and `map` write (at every level)."""
    doc = (ROOT / "docs" / "json.md").read_text()
    spec = fusemap.load(*FILES)
    data = fusemap.evaluate(spec).to_json()
    from fusemap.report.provenance import with_provenance

    data = with_provenance(data, spec, "fusemap evaluate")
    keys = set(data) | set(data["inputs"]) | set(data["units"])
    keys |= set(next(iter(data["einsums"].values())))
    keys |= set(next(iter(data["components"].values())))
    einsum = next(iter(data["einsums"].values()))
    keys |= set(next(iter(einsum["components"].values())))
    for key in ("objective", "order", "fused", "statistics", "passes", "pareto",
                "mapping_file", "pruned_fraction", "notes"):  # fmt: skip
        keys.add(key)
    missing = sorted(k for k in keys if f"`{k}`" not in doc)
    assert not missing, f"docs/json.md does not document {missing}"


@pytest.mark.slow
def test_written_mapping_names_its_inputs_and_defines(tmp_path):
    out = tmp_path / "best.yaml"
    result = CliRunner().invoke(app, ["map", example_path("arch.yaml"),
                                      example_path("three_matmuls.yaml"), "-D", "M=16", "-q",
                                      "-o", str(out)])  # fmt: skip
    assert result.exit_code == 0, result.output
    head = [line for line in out.read_text().splitlines() if line.startswith("#")]
    assert head[0].startswith(f"# Written by fusemap {fusemap.__version__}: fusemap map")
    assert any(line.startswith("# input: ") and "arch.yaml (sha256 " in line for line in head)
    assert "# -D M=16" in head
    spec = fusemap.load(example_path("arch.yaml"), example_path("three_matmuls.yaml"), out, M=16)
    assert spec.mapping is not None  # the header is plain comments


def test_map_workload_is_exported():
    assert "map_workload" in fusemap.__all__ and callable(fusemap.map_workload)


def test_python_exceptions_keep_the_file_and_line():
    spec = fusemap.load(*FILES, BUFFER_KIB=1)
    with pytest.raises(InvalidMappingError) as info:
        fusemap.evaluate(spec)
    assert str(info.value).startswith(f"{FILES[2]}:")  # main: "Buffer overflows: ..."
    assert re.match(r".*fused_mapping\.yaml:\d+: ", str(info.value))


def test_output_files_get_the_umask_mode_and_keep_an_existing_one(tmp_path):
    old = os.umask(0o022)
    try:
        new = write_atomic(tmp_path / "new.json", "{}")
        assert new.stat().st_mode & 0o777 == 0o644  # main: 0600 (mkstemp's)
        kept = tmp_path / "kept.json"
        kept.write_text("old")
        kept.chmod(0o640)
        write_atomic(kept, "{}")
        assert kept.stat().st_mode & 0o777 == 0o640 and kept.read_text() == "{}"
    finally:
        os.umask(old)


# -- Found 9: hints --------------------------------------------------------------------


def test_missing_rename_is_named_not_a_builtin_function():
    shared_path(CORPUS)
    files = [CORPUS / "arches/tpu_v4i.yaml", CORPUS / "workloads/transformers/mamba/mamba.yaml"]
    with pytest.raises(SpecError) as info:
        from fusemap.report.checks import check_spec

        check_spec(fusemap.load(*files))
    message = str(info.value)
    assert "did you mean 'int'" not in message  # main's hint
    assert "unknown name 'input'" in message and "`renames:` entry" in message
    assert "tpu_v4i.yaml:43: LocalBuffer.tensors" in message


def test_error_in_pasted_text_points_at_the_included_file(tmp_path):
    """CiM arches paste _include.yaml with include_text: errors point into it."""
    (tmp_path / "part.yaml").write_text("variables:\n  a: 1\n  b: nope(2)\n")
    (tmp_path / "main.yaml").write_text("# head\n{{ include_text('part.yaml') }}\n")
    spec = fusemap.load(tmp_path / "main.yaml")
    assert spec.locate("variables", "b").prefix().startswith(f"{tmp_path / 'part.yaml'}:3")
    # An error in an expression of the pasted text names the included file and line too.
    (tmp_path / "arch.yaml").write_text("{{ include_text('nodes.yaml') }}\n")
    (tmp_path / "nodes.yaml").write_text(
        "arch:\n  nodes:\n  - !Memory\n    name: M\n    size: 8 *\n"
        "  - !Compute {name: C, actions: [{name: compute, energy: 1}]}\n"
    )
    (tmp_path / "wl.yaml").write_text(
        'workload:\n  einsums: ["Z[m] = A[m]"]\n  rank_sizes: {M: 2}\n  bits_per_value: {All: 8}\n'
    )
    result = CliRunner().invoke(
        app, ["check", str(tmp_path / "arch.yaml"), str(tmp_path / "wl.yaml")]
    )
    message = str(result.exception)
    assert f"{tmp_path / 'nodes.yaml'}:5" in message, message
