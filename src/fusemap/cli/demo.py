"""``fusemap demo``: the built-in example, mapped, printed and drawn."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def demo(
    out: Annotated[Path, typer.Option("-o", "--out", help="Folder for the outputs.")] = Path("out"),
) -> None:
    """Run the built-in example: map a transformer layer (fusion included), print the
    optimal mapping, draw its LoopTree and plots, write the HTML report."""
    from ..examples import example_path
    from ..report.outputs import drawing_notes
    from ..report.plots import energy_breakdown
    from ..report.render import render as draw
    from ..spec.spec import load_spec
    from .map_command import map_whole

    files = [example_path(n) for n in ("arch.yaml", "transformer_layer.yaml")]
    typer.echo("Mapping the built-in transformer layer on the built-in accelerator ...")
    spec = load_spec(*files)
    mapping_file = out / "demo_mapping.yaml"
    best = map_whole(
        spec,
        "energy",
        orders="given",
        jobs=1,
        out=mapping_file,
        json_out=out / "demo_result.json",
        echo=typer.echo,
        report=out / "demo_report.html",
        command="fusemap demo",
    ).best
    plot = energy_breakdown(best.result, out / "demo_energy.png")
    tree = draw(best.mapping, out / "demo_looptree.svg", drawing_notes(spec, best.mapping))
    typer.echo(f"wrote {plot} and {tree}; open {out / 'demo_report.html'} in a browser")
