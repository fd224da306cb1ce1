"""Issue 18, deliverable 5: `fusemap diff A B` says what changed between two mappings (or
two JSON results), per component, Einsum and tensor, and by how much."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import fusemap
from fusemap.cli import app
from fusemap.examples import example_path

ARCH, WORKLOAD = example_path("arch.yaml"), example_path("three_matmuls.yaml")
MAPPING = Path(example_path("fused_mapping.yaml"))


def run(*args: str):
    return CliRunner().invoke(app, list(args))


def _variant(tmp_path: Path) -> Path:
    """The built-in fused mapping with T3's n3 loop tiled by 8 instead of 16."""
    text = MAPPING.read_text()
    i = text.rindex("tile_shape: 16")
    path = tmp_path / "variant.yaml"
    path.write_text(text[:i] + "tile_shape: 8" + text[i + len("tile_shape: 16") :])
    return path


def test_diff_of_two_mappings_names_what_changed_and_by_how_much(tmp_path):
    variant = _variant(tmp_path)
    result = run("diff", str(MAPPING), str(variant), "--spec", ARCH, "--spec", WORKLOAD,
                 "--json", str(tmp_path / "d.json"))  # fmt: skip
    assert result.exit_code == 0, result.output
    out = result.output
    assert "Per component" in out and "Per Einsum" in out
    a = fusemap.evaluate(fusemap.load(ARCH, WORKLOAD, MAPPING))
    b = fusemap.evaluate(fusemap.load(ARCH, WORKLOAD, variant))
    assert a.einsums["T1"].energy == b.einsums["T1"].energy  # only T3 changed
    rows = json.loads((tmp_path / "d.json").read_text())["rows"]
    changed = {(r["scope"], r["name"], r["quantity"]) for r in rows if r["change"]}
    assert ("Einsum", "T3", "latency") in changed and ("Einsum", "T1", "energy") not in changed
    t3 = next(
        r for r in rows if (r["scope"], r["name"], r["quantity"]) == ("Einsum", "T3", "latency")
    )
    assert t3["a"] == a.einsums["T3"].latency and t3["b"] == b.einsums["T3"].latency
    assert t3["relative"] == pytest.approx((t3["b"] - t3["a"]) / t3["a"])
    line = next(x for x in out.splitlines() if x.startswith("│ T3") and "latency" in x)
    assert "%" in line
    assert "LoopTree changes" in out and "-" in out and "(tile 8)" in out


@pytest.mark.slow
def test_diff_reads_the_inputs_a_written_mapping_names(tmp_path):
    energy, latency = tmp_path / "e.yaml", tmp_path / "l.yaml"
    for objective, out in (("energy", energy), ("latency", latency)):
        result = run("map", ARCH, WORKLOAD, "-D", "M=16", "--objective", objective, "-q",
                     "-o", str(out))  # fmt: skip
        assert result.exit_code == 0, result.output
    result = run("diff", str(energy), str(latency))  # no --spec: the headers name them
    assert result.exit_code == 0, result.output
    assert "Totals" in result.output and "latency" in result.output


def test_diff_of_json_results_and_of_nothing_changed(tmp_path):
    for name, mapping in (("a.json", MAPPING), ("b.json", _variant(tmp_path))):
        assert run("evaluate", ARCH, WORKLOAD, str(mapping), "-q", "--json",
                   str(tmp_path / name)).exit_code == 0  # fmt: skip
    result = run("diff", str(tmp_path / "a.json"), str(tmp_path / "b.json"))
    assert result.exit_code == 0 and "Per tensor" in result.output
    same = run("diff", str(tmp_path / "a.json"), str(tmp_path / "a.json"))
    assert "No difference in any number." in same.output


def test_python_diff_frame():
    a = fusemap.evaluate(fusemap.load(ARCH, WORKLOAD, MAPPING))
    b = fusemap.evaluate(fusemap.load(ARCH, WORKLOAD, MAPPING, BUFFER_KIB=128))
    d = fusemap.diff(a, b)
    assert d.changed() == []  # the buffer size changes no count (usage_bits is the same)
    frame = d.to_frame()
    assert {"scope", "name", "metric", "a", "b", "change", "relative"} <= set(frame.columns)
