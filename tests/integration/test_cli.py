"""The check / render / demo commands on the built-in example."""

from __future__ import annotations

import json
import shutil

import pytest
from typer.testing import CliRunner

from fusemap.cli import app
from fusemap.examples import example_path
from fusemap.model.evaluate import evaluate_mapping
from fusemap.report.render import text_tree, to_dot
from fusemap.spec.spec import load_spec

FILES = [example_path(n) for n in ("arch.yaml", "three_matmuls.yaml", "fused_mapping.yaml")]


def run(*args: str):
    return CliRunner().invoke(app, list(args))


def test_check_prints_workload_arch_and_looptree() -> None:
    result = run("check", *FILES)
    assert result.exit_code == 0, result.output
    out = result.output
    for text in ("T1", "T2", "T3", "W0", "DRAM", "Buffer", "PEArray", "MAC", "X×16"):
        assert text in out
    assert "m=64" in out and "n0=64" in out  # bounds of the rank variables
    assert "for m ×64 (tile 1)" in out and "compute T3 on MAC" in out
    assert "OK" in out


def test_check_with_variables_changes_bounds() -> None:
    result = run("check", *FILES[:2], "-D", "M=5")
    assert result.exit_code == 0, result.output
    assert "m=5" in result.output


def test_text_tree_shows_branches() -> None:
    spec = load_spec(*FILES)
    tree = text_tree(spec.mapping)
    lines = tree.splitlines()
    assert lines[0].startswith("[DRAM] T0, W0, W1, W2, T3")
    assert sum(line.lstrip("│ ").startswith(("├─ ", "└─ ")) for line in lines) == 3
    assert "├─ T1" in tree and "└─ T3" in tree  # each branch named by its Einsums
    assert lines[-1].strip() == "compute T3 on MAC"


def test_dot_has_one_node_per_looptree_node() -> None:
    spec = load_spec(*FILES)
    dot = to_dot(spec.mapping)
    nodes = sum(1 for _ in spec.mapping.walk()) - 1 - 3  # minus root and the 3 !Nested
    assert dot.count("label=") == nodes
    assert "cylinder" in dot and "oval" in dot


@pytest.mark.parametrize("suffix", [".dot", ".txt"])
def test_render_writes_dot_and_text(tmp_path, suffix) -> None:
    out = tmp_path / f"tree{suffix}"
    result = run("render", *FILES, "-o", str(out))
    assert result.exit_code == 0, result.output
    assert out.exists() and out.stat().st_size > 0


@pytest.mark.slow
def test_render_svg_and_png_without_graphviz(tmp_path, monkeypatch) -> None:
    """Found 7: without graphviz, `render -o lt.svg` wrote lt.dot; now fusemap lays the
    tree out itself (SVG written directly, PNG through matplotlib)."""
    monkeypatch.setattr(shutil, "which", lambda name: None)
    for suffix, magic in ((".svg", b"<svg"), (".png", b"\x89PNG")):
        out = tmp_path / f"tree{suffix}"
        result = run("render", *FILES, "-o", str(out))
        assert result.exit_code == 0, result.output
        assert out.read_bytes().startswith(magic)
        assert not out.with_suffix(".dot").exists()
    assert "compute T1 on MAC" in (tmp_path / "tree.svg").read_text()
    result = run("render", *FILES, "-o", str(tmp_path / "tree.svg"), "--graphviz")
    assert "graphviz" in str(result.exception)  # a user error: one line, status 2


@pytest.mark.slow
def test_demo_maps_prints_and_draws(tmp_path) -> None:
    result = run("demo", "-o", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert "Total energy" in result.output and "Per component" in result.output
    assert "fused: " in result.output and "pmappings per Einsum" in result.output
    png = tmp_path / "demo_energy.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert any(p.name.startswith("demo_looptree") for p in tmp_path.iterdir())
    # The mapping it writes scores, with the model, to the energy it reports.
    reported = json.loads((tmp_path / "demo_result.json").read_text())
    files = [example_path("arch.yaml"), example_path("transformer_layer.yaml")]
    spec = load_spec(*files, tmp_path / "demo_mapping.yaml")
    assert evaluate_mapping(spec).energy == pytest.approx(reported["energy"], rel=1e-9)
    assert reported["fused"], "the demo layer should fuse some intermediate"
