"""Time and size of what a user looks at, on the GPT-3 6.7B prefill mapping on TPU v4i
(../shared/reference/model-mapper-shapes/ffm_gpt3_tok1024): the annotated LoopTree, the
SVG and PNG drawings, the plots and the HTML report.

Figures printed: seconds per step, the report's size (acceptance: under 2 MB), the
drawing's size in pixels and the longest line of the text tree.

usage: python benchmarks/report.py [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from fusemap.model.evaluate import evaluate_mapping
from fusemap.report.drawing import layout
from fusemap.report.html import write_report
from fusemap.report.looptree import annotate, display_tree
from fusemap.report.plots import write_plots
from fusemap.report.render import render, text_tree
from fusemap.spec.spec import load_spec

CASE = Path(__file__).resolve().parents[2] / "shared/reference/model-mapper-shapes/ffm_gpt3_tok1024"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="keep the outputs in this folder")
    args = ap.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="fusemap-report-"))
    workload = (CASE / (CASE / "workload.path").read_text().strip()).resolve()
    params = json.loads((CASE / "params.json").read_text())
    t = time.perf_counter()
    spec = load_spec(CASE / "arch.yaml", workload, CASE / "mapping.yaml", variables=params)
    result = evaluate_mapping(spec)
    steps = {"load + evaluate": time.perf_counter() - t}

    def timed(name, fn):
        t0 = time.perf_counter()
        value = fn()
        steps[name] = time.perf_counter() - t0
        return value

    notes = timed("annotate", lambda: annotate(spec, spec.mapping))
    text = timed("text tree", lambda: text_tree(spec.mapping, notes))
    lay = timed("layout", lambda: layout(display_tree(spec.mapping, notes)))
    timed("svg", lambda: render(spec.mapping, out / "looptree.svg", notes))
    timed("png", lambda: render(spec.mapping, out / "looptree.png", notes))
    timed("plots (5)", lambda: write_plots(result, out / "plots"))
    page = timed(
        "html report", lambda: write_report(out / "report.html", result, spec.mapping, spec)
    )
    for name, seconds in steps.items():
        print(f"{name:>16}: {seconds:.3f} s")
    lines = text.splitlines()
    print(f"text tree: {len(lines)} lines, longest {max(map(len, lines))} characters")
    print(f"drawing: {lay.width:.0f} x {lay.height:.0f} px, {len(lay.boxes)} boxes")
    print(f"report: {page.stat().st_size / 1024:.1f} KiB (limit 2 MB) in {out}")


if __name__ == "__main__":
    main()
