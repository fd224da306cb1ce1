"""Issue 18, Found 7: LoopTree drawings without graphviz, plots with full titles, readable
units and a log option, the other plots, and the Pareto front as a table with units whose
``-o`` says what it saved."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fusemap.cli import app
from fusemap.examples import example_path
from fusemap.model.evaluate import evaluate_mapping
from fusemap.report import plots
from fusemap.report.render import render
from fusemap.spec.spec import load_spec
from tests.support.paths import SHARED, shared_path

ARCH, WORKLOAD = example_path("arch.yaml"), example_path("three_matmuls.yaml")
FILES = [ARCH, WORKLOAD, example_path("fused_mapping.yaml")]


def test_svg_draws_one_box_per_merged_storage_node(tmp_path):
    from fusemap.report.looptree import annotate

    spec = load_spec(*FILES)
    svg = render(spec.mapping, tmp_path / "t.svg", annotate(spec, spec.mapping)).read_text()
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    assert svg.count(">[DRAM]<") == 1  # T0, W0, W1, W2, T3 in one box
    assert "for m ×64" in svg and "16/16 used" in svg
    png = render(spec.mapping, tmp_path / "t.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"


def test_gpt3_drawing_is_compact():
    from fusemap.report.drawing import layout
    from fusemap.report.looptree import annotate, display_tree

    case = SHARED / "reference/model-mapper-shapes/ffm_gpt3_tok1024"
    shared_path(case)
    workload = (case / (case / "workload.path").read_text().strip()).resolve()
    params = json.loads((case / "params.json").read_text())
    spec = load_spec(case / "arch.yaml", workload, case / "mapping.yaml", variables=params)
    lay = layout(display_tree(spec.mapping, annotate(spec, spec.mapping)))
    assert lay.width < 3000 and lay.height < 1500  # main: 3491 x 2853 px


class _Captured:
    figure = None


@pytest.fixture
def captured(monkeypatch):
    """Keep the figure a plot function would save (to look at its title and axes)."""

    def keep(fig, out):
        fig.canvas.draw()
        _Captured.figure = fig
        return Path(out)

    monkeypatch.setattr(plots, "save_figure", keep)
    return _Captured


def test_energy_plot_has_a_whole_title_readable_units_and_no_offset(captured, tmp_path):
    result = evaluate_mapping(load_spec(*FILES))
    plots.energy_breakdown(result, tmp_path / "e.png")
    fig = captured.figure
    ax = fig.axes[0]
    renderer = fig.canvas.get_renderer()
    title = ax.title.get_window_extent(renderer)
    box = fig.bbox
    assert title.x0 >= box.x0 and title.x1 <= box.x1  # not cut off
    assert "total 6.308 µJ" in ax.get_title()
    assert ax.get_ylabel() == "energy (µJ)"
    assert ax.yaxis.get_offset_text().get_text() == ""  # no "1e-6" offset
    plots.energy_breakdown(result, tmp_path / "e.png", log=True)
    assert captured.figure.axes[0].get_yscale() == "log"


@pytest.mark.slow
def test_every_plot_is_written(tmp_path):
    result = evaluate_mapping(load_spec(*FILES))
    written = plots.write_plots(result, tmp_path, log=True)
    names = {p.name for p in written}
    assert names == {"energy.png", "latency.png", "area.png", "tensors.png", "levels.png"}
    for p in written:
        assert p.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow
def test_pareto_front_prints_with_units_and_o_saves_every_point(tmp_path):
    out = tmp_path / "front.yaml"
    result = CliRunner().invoke(
        app,
        ["map", ARCH, WORKLOAD, "--objective", "pareto", "-q", "-o", str(out), "--json",
         str(tmp_path / "front.json"), "--plots", str(tmp_path / "plots")],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    text = result.output
    assert "Energy-latency Pareto front" in text
    rows = [line for line in text.splitlines() if re.match(r"│\s+\d+ │", line)]
    assert len(rows) >= 2
    assert all("µJ" in r and "µs" in r for r in rows)
    assert not re.search(r"energy \d\.\d+e-0\d", text)  # main: "energy 3.90693e-06"
    data = json.loads((tmp_path / "front.json").read_text())
    files = [p["mapping_file"] for p in data["pareto"]]
    assert len(files) == len(rows) and all(Path(f).exists() for f in files)
    assert f"wrote {out} (point 1, the lowest energy)" in text
    assert "Pareto point 2 of" in Path(files[1]).read_text()
    assert (tmp_path / "plots" / "pareto.png").exists()
    # each saved point scores to its row of the front
    spec = load_spec(ARCH, WORKLOAD, files[1])
    assert evaluate_mapping(spec).energy == pytest.approx(data["pareto"][1]["energy"], rel=1e-9)
