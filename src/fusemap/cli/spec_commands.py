"""Commands on given mappings and specs: check, render, evaluate, report, diff, passes."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .app import (
    AllowUnused,
    Defines,
    Log,
    Plots,
    Report,
    SpecFile,
    check_outputs,
    command_line,
    load,
    variables,
)


def check(
    arch: SpecFile,
    workload: SpecFile,
    mapping: Annotated[Path | None, typer.Argument(help="LoopTree mapping (optional)")] = None,
    define: Defines = None,
    allow_unused: AllowUnused = False,
) -> None:
    """Validate a spec and print a summary: Einsums, tensors, arch tree (evaluated sizes),
    LoopTree. Fails (status 2) when the spec cannot be priced."""
    from ..report.checks import check_spec

    spec = load([arch, workload] + ([mapping] if mapping else []), define, allow_unused)
    check_outputs(spec)
    typer.echo(check_spec(spec))


def render(
    arch: SpecFile,
    workload: SpecFile,
    mapping: SpecFile,
    out: Annotated[Path, typer.Option("-o", "--out", help="Output .svg/.png/.pdf/.dot/.txt")],
    define: Defines = None,
    allow_unused: AllowUnused = False,
    graphviz: Annotated[
        bool, typer.Option("--graphviz", help="Lay out with graphviz's dot (must be installed).")
    ] = False,
) -> None:
    """Draw the LoopTree of a mapping (fusemap's own layout; no graphviz needed)."""
    from ..report.outputs import drawing_notes
    from ..report.render import render as draw

    spec = load([arch, workload, mapping], define, allow_unused)
    spec.require("mapping")
    check_outputs(spec, out)
    path = draw(spec.mapping, out, drawing_notes(spec, spec.mapping), graphviz=graphviz)
    typer.echo(f"wrote {path}")


def evaluate(
    arch: SpecFile,
    workload: SpecFile,
    mapping: SpecFile,
    define: Defines = None,
    allow_unused: AllowUnused = False,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Write the result as JSON (docs/json.md).")
    ] = None,
    plot: Annotated[
        Path | None, typer.Option("--plot", help="Energy breakdown plot (.png/.svg/.pdf).")
    ] = None,
    plots: Plots = None,
    log: Log = False,
    report: Report = None,
    quiet: Annotated[bool, typer.Option("-q", "--quiet", help="No table.")] = False,
    tree: Annotated[bool, typer.Option("--tree", help="Also print the LoopTree.")] = False,
    einsum: Annotated[
        list[str] | None,
        typer.Option("--einsum", help="Score only this Einsum (repeatable), e.g. a pmapping."),
    ] = None,
) -> None:
    """Evaluate a mapping: energy, latency, buffer usage and area."""
    from ..model.evaluate import evaluate_mapping
    from ..report import outputs
    from ..spec.mapping_check import check_mapping
    from ..spec.resolve import resolve_workload

    spec = load([arch, workload, mapping], define, allow_unused)
    spec.require("arch", "workload", "mapping")
    check_outputs(spec, json_out, plot)
    wl = resolve_workload(spec)
    check_mapping(spec, wl, einsum or None)
    result = evaluate_mapping(spec, workload=wl, einsums=einsum or None)
    notes = outputs.drawing_notes(spec, spec.mapping, wl) if tree and not quiet else None
    outputs.show_result(result, spec.mapping, notes, tree=tree and not quiet, tables=not quiet,
                        echo=typer.echo)  # fmt: skip
    outputs.write_result_files(
        result, spec.mapping, spec, command_line(), json_out=json_out, plot=plot, plots=plots,
        log=log, report=report, echo=typer.echo,
    )  # fmt: skip


def report(
    arch: SpecFile,
    workload: SpecFile,
    extra: Annotated[
        list[Path] | None,
        typer.Argument(help="A mapping (evaluated), or more YAML files (then mapped)"),
    ] = None,
    out: Annotated[Path, typer.Option("-o", "--out", help="The HTML file to write.")] = Path(
        "report.html"
    ),
    define: Defines = None,
    allow_unused: AllowUnused = False,
    objective: Annotated[
        str, typer.Option("--objective", help="Without a mapping: energy | latency | edp | pareto")
    ] = "energy",
    jobs: Annotated[int, typer.Option("--jobs", "-j", help="Worker processes (mapping).")] = 1,
) -> None:
    """One self-contained HTML page of a result: the LoopTree, tables, charts, buffer
    usage over the schedule (and the Pareto front). Evaluates the mapping if one is
    given, else maps the workload."""
    from ..report import outputs

    spec = load([arch, workload, *(extra or [])], define, allow_unused)
    spec.require("arch", "workload")
    if spec.mapping is None:
        from .map_command import map_whole

        map_whole(
            spec, objective, orders="given", jobs=jobs, out=None, json_out=None,
            echo=typer.echo, quiet=True, report=out, command=command_line(),
        )  # fmt: skip
        return
    from ..model.evaluate import evaluate_mapping

    result = evaluate_mapping(spec)
    outputs.show_result(result, spec.mapping, tree=False, tables=False)
    outputs.write_result_files(
        result, spec.mapping, spec, command_line(), report=out, echo=typer.echo
    )


def diff(
    a: Annotated[Path, typer.Argument(help="A mapping (YAML) or a JSON result")],
    b: Annotated[Path, typer.Argument(help="Another mapping or JSON result")],
    spec_files: Annotated[
        list[Path] | None,
        typer.Option(
            "--spec",
            "-s",
            help="Arch and workload files for mappings (default: the inputs named in a "
            "mapping written by fusemap map).",
        ),
    ] = None,
    define: Defines = None,
    allow_unused: AllowUnused = False,
    everything: Annotated[
        bool, typer.Option("--all", help="Show every quantity, not only those that changed.")
    ] = False,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Write every compared quantity as JSON.")
    ] = None,
) -> None:
    """What changed between two mappings (evaluated) or two JSON results: per component,
    Einsum and tensor, and by how much."""

    from ..report.diff import diff_paths, diff_tables
    from ..report.io import write_atomic
    from ..report.tables import print_group

    found = diff_paths(a, b, list(spec_files or []), variables(define), allow_unused)
    print_group(diff_tables(found, everything))
    if json_out:
        rows = [
            {"scope": c.scope, "name": c.name, "quantity": c.metric, "a": c.old, "b": c.new,
             "change": c.delta, "relative": c.relative}
            for c in found.changes
        ]  # fmt: skip
        from ..spec.numbers import finite_json

        text = finite_json({"a": str(a), "b": str(b), "rows": rows}, indent=1)
        write_atomic(json_out, text + "\n")


def passes(
    workload: SpecFile,
    rank: Annotated[
        str, typer.Option("--rank", help="Rank to count passes over, e.g. M (or K).")
    ] = "M",
    define: Defines = None,
    allow_unused: AllowUnused = False,
    json_out: Annotated[
        Path | None,
        typer.Option("--json", help='Write {"passes", "stages", "live"} as JSON.'),
    ] = None,
) -> None:
    """Count the passes a cascade makes over a rank, whatever the mapping: the stage of
    every Einsum and the tensors whose whole fiber must stay live across stages."""
    from ..analysis.passes import analyze_passes
    from ..report.io import write_atomic
    from ..report.tables import pass_tables, print_group
    from ..spec.numbers import finite_json

    spec = load([workload], define, allow_unused)
    check_outputs(spec, json_out)
    result = analyze_passes(spec, rank)
    print_group(pass_tables(result))
    if json_out:
        write_atomic(json_out, finite_json(result.to_json(), indent=2) + "\n")
