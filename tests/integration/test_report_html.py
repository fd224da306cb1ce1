"""Issue 18, deliverable 2: `fusemap report` writes ONE self-contained HTML page, checked
in headless Chromium (Debian package `chromium`; `.ci/run` installs it): the page renders,
its script runs without a console message or error, and it shows what it should.

Without Chromium the browser tests are skipped with the reason; the content checks that
need no browser still run."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fusemap.cli import app
from fusemap.examples import example_path
from tests.support.paths import REFERENCE, shared_path

GPT3 = REFERENCE / "model-mapper-shapes/ffm_gpt3_tok1024"
BROWSER = next(
    (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None
)
needs_browser = pytest.mark.skipif(
    BROWSER is None,
    reason="headless Chromium is not installed (Debian: apt-get install chromium; "
    ".ci/run installs it)",
)


def browse(page: Path, tmp_path: Path, *extra: str, fragment: str = "") -> tuple[str, str]:
    """Open ``page`` in headless Chromium: (the DOM after scripts ran, console lines)."""
    argv = [
        str(BROWSER), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
        "--no-first-run", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", f"--user-data-dir={tmp_path / 'chromium-profile'}",
        "--enable-logging=stderr", "--v=0", *extra, "--dump-dom",
        page.resolve().as_uri() + fragment,
    ]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]
    return proc.stdout, "\n".join(console)


def _gpt3_report(tmp_path: Path) -> Path:
    shared_path(GPT3)
    workload = (GPT3 / (GPT3 / "workload.path").read_text().strip()).resolve()
    params = json.loads((GPT3 / "params.json").read_text())
    defines = [x for k, v in params.items() for x in ("-D", f"{k}={v}")]
    out = tmp_path / "gpt3.html"
    args = ["report", str(GPT3 / "arch.yaml"), str(workload), str(GPT3 / "mapping.yaml"),
            *defines, "-o", str(out)]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return out


EINSUMS = ["I", "V", "K", "Q", "QK", "QK_softmax", "AV", "Z", "FFA", "FFB"]
FUSED = ["I", "V", "K", "Q", "AV", "Z", "FFA", "QK", "QK_softmax"]


def test_gpt3_report_is_one_small_self_contained_file(tmp_path):
    page = _gpt3_report(tmp_path)
    html = page.read_text()
    assert page.stat().st_size < 2_000_000
    assert not re.search(r"<(link|img|iframe)\b|\bsrc=", html)  # nothing loaded from outside
    assert "default-src 'none'" in html  # and the browser is told so
    for section in ("looptree", "fused", "einsums", "components", "tensors", "charts",
                    "occupancy"):  # fmt: skip
        assert f'<section id="{section}">' in html


@needs_browser
def test_gpt3_report_renders_in_chromium_without_errors(tmp_path):
    page = _gpt3_report(tmp_path)
    dom, console = browse(page, tmp_path)
    assert console == "", console  # no console message, no uncaught error
    assert 'data-ready="1"' in dom and not re.search(r"<html[^>]*data-errors", dom)
    fused = dom[dom.index('<section id="fused">') : dom.index('<section id="einsums">')]
    for tensor in FUSED:
        assert f'data-v="{tensor}">{tensor}</td>' in fused
    assert "h:4" in fused  # QK and QK_softmax live under the loop over h (tile 4)
    einsums = dom[dom.index('<section id="einsums">') : dom.index('<section id="components">')]
    for name in EINSUMS:
        assert f'data-v="{name}">{name}</td>' in einsums
    tree = dom[dom.index('<section id="looptree">') : dom.index('<section id="fused">')]
    assert tree.count("<details") > 20  # collapsible
    assert "for d ×32 (tile 128)" in tree  # iteration counts
    assert "1×1024×128 (256 KiB)" in tree  # tile shapes
    assert "holds 80 MiB = 62.5% of 128 MiB" in tree  # occupancy per node
    occupancy = dom[dom.index('<section id="occupancy">') :]
    assert "GlobalBuffer: peak" in occupancy and "size 128 MiB" in occupancy


@pytest.mark.slow
@needs_browser
def test_report_screenshot_and_sorting_script(tmp_path):
    """The page draws (a screenshot is a real PNG); its tables sort on a click."""
    page = _gpt3_report(tmp_path)
    shot = tmp_path / "shot.png"
    browse(page, tmp_path, "--window-size=1200,900", f"--screenshot={shot}")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
    probe = tmp_path / "probe.html"
    html = page.read_text().replace(
        "</body>",
        "<script>document.querySelector('#einsums th:nth-child(2)').click();"
        "document.body.setAttribute('data-first',"
        "document.querySelector('#einsums tbody tr td').textContent);</script></body>",
    )
    probe.write_text(html)
    dom, console = browse(probe, tmp_path)
    assert console == ""
    assert 'data-first="FFB"' in dom  # sorted by energy, largest first


@pytest.mark.slow
@needs_browser
def test_pareto_report_links_every_point_to_its_mapping(tmp_path):
    out = tmp_path / "front.html"
    args = ["map", example_path("arch.yaml"), example_path("three_matmuls.yaml"),
            "--objective", "pareto", "-q", "--report", str(out)]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    html = out.read_text()
    points = re.findall(r'<a href="#point-(\d+)" class="point"', html)
    assert len(points) >= 2 * 2  # every point, on the linear and the log plot
    for k in set(points):
        assert f'id="point-{k}"' in html
    dom, console = browse(out, tmp_path, fragment="#point-2")
    assert console == ""
    assert re.search(r'class="point-detail selected" id="point-2"', dom)
    assert re.search(r'class="point selected" data-point="2"', dom)
