"""The ``fusemap`` command line: check, render, evaluate, map, passes, demo.

Every user error prints one line (``file:line: key: message``) and exits with status 2;
``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from .spec.errors import FusemapError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Model tensor-algebra accelerators and evaluate / find their fused mappings.",
    pretty_exceptions_enable=False,
)
_state = {"debug": False}

Defines = Annotated[
    list[str] | None,
    typer.Option("-D", "--define", help="Jinja variable NAME=VALUE (VALUE read as YAML)."),
]
SpecFile = Annotated[Path, typer.Argument(help="YAML file", show_default=False)]


@app.callback()
def _main(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks on errors.")] = False,
    limit: Annotated[
        list[str] | None,
        typer.Option(
            "--limit",
            help="Raise a limit on the work a spec may cause, NAME=VALUE (repeatable), "
            "e.g. --limit render_seconds=300 (README, Safety).",
        ),
    ] = None,
) -> None:
    _state["debug"] = debug
    from .spec import limits

    limits.reset()  # the defaults, then FUSEMAP_LIMITS, then --limit
    if limit:
        limits.configure(**limits.parse_assignments(limit, "--limit"))


def _outputs(spec, json_out: Path | None = None, plot: Path | None = None, *more: Path | None):
    """Refuse bad output targets before the work starts; never write over an input."""
    from .report.io import check_output, check_plot, protect_inputs

    protect_inputs(spec.input_files)
    for target in (json_out, *more):
        if target is not None:
            check_output(target)
    if plot is not None:
        check_plot(plot)


def _variables(defines: list[str] | None) -> dict[str, Any]:
    from .spec.loader import parse_define

    return dict(parse_define(d) for d in defines or [])


def _load(files: list[Path], defines: list[str] | None):
    from .spec.spec import load_spec

    return load_spec(*[str(f) for f in files], variables=_variables(defines))


@app.command()
def check(
    arch: SpecFile,
    workload: SpecFile,
    mapping: Annotated[Path | None, typer.Argument(help="LoopTree mapping (optional)")] = None,
    define: Defines = None,
) -> None:
    """Validate a spec and print a summary: Einsums, tensors, arch tree, LoopTree."""
    from .report.tables import check_summary, print_group
    from .spec.arch_eval import ArchEvaluator
    from .spec.resolve import resolve_workload

    spec = _load([arch, workload] + ([mapping] if mapping else []), define)
    spec.require("arch", "workload")
    _outputs(spec)
    wl = resolve_workload(spec)
    evaluator = ArchEvaluator(spec, wl)
    for e in wl.einsums:  # evaluate every expression of the arch for every Einsum
        evaluator.components(e.name)
    if spec.mapping is not None:
        from .model.chains import branch_chains, build_chain
        from .spec.mapping_check import check_mapping, node_locations

        check_mapping(spec, wl)
        where = node_locations(spec)
        for name, nodes in branch_chains(spec.mapping).items():
            flat = evaluator.flat(name, nodes[-1].component)  # type: ignore[attr-defined]
            try:
                build_chain(nodes, wl.einsum(name), wl, flat, where)
            except FusemapError as err:  # the model does not know where nodes were written
                raise err.located(where[id(nodes[-1])]) from None
    print_group(check_summary(spec, wl))
    typer.echo("OK: the spec is valid.")


@app.command()
def render(
    arch: SpecFile,
    workload: SpecFile,
    mapping: SpecFile,
    out: Annotated[Path, typer.Option("-o", "--out", help="Output .svg/.png/.pdf/.dot/.txt")],
    define: Defines = None,
) -> None:
    """Draw the LoopTree of a mapping (graphviz; text when `dot` is missing)."""
    from .report.render import render as draw
    from .report.render import text_tree

    spec = _load([arch, workload, mapping], define)
    spec.require("mapping")
    _outputs(spec, out, None, out.with_suffix(".dot"))
    path, drawn = draw(spec.mapping, out)  # type: ignore[arg-type]
    if not drawn:
        typer.echo(text_tree(spec.mapping))  # type: ignore[arg-type]
        typer.echo(f"graphviz 'dot' not found: wrote the DOT source to {path}", err=True)
    else:
        typer.echo(f"wrote {path}")


@app.command()
def evaluate(
    arch: SpecFile,
    workload: SpecFile,
    mapping: SpecFile,
    define: Defines = None,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Write the result as JSON.")
    ] = None,
    plot: Annotated[
        Path | None, typer.Option("--plot", help="Energy breakdown plot (.png).")
    ] = None,
    quiet: Annotated[bool, typer.Option("-q", "--quiet", help="No table.")] = False,
    einsum: Annotated[
        list[str] | None,
        typer.Option("--einsum", help="Score only this Einsum (repeatable), e.g. a pmapping."),
    ] = None,
) -> None:
    """Evaluate a mapping: energy, latency, buffer usage and area."""
    from .model.evaluate import evaluate_mapping
    from .report.io import write_atomic
    from .report.tables import print_group, print_warnings, result_tables
    from .spec.mapping_check import check_mapping
    from .spec.resolve import resolve_workload

    spec = _load([arch, workload, mapping], define)
    spec.require("arch", "workload", "mapping")
    _outputs(spec, json_out, plot)
    wl = resolve_workload(spec)
    check_mapping(spec, wl, einsum or None)
    try:
        result = evaluate_mapping(spec, workload=wl, einsums=einsum or None)
    except FusemapError as err:  # the model does not know where nodes were written
        raise err.located(spec.locate("mapping")) from None
    if not quiet:
        print_group(result_tables(result))
    print_warnings(result)
    if json_out:
        write_atomic(json_out, result.dumps() + "\n")
    if plot:
        from .report.plots import energy_breakdown

        energy_breakdown(result, plot)


@app.command(name="map")
def map_(
    arch: SpecFile,
    workload: SpecFile,
    extra: Annotated[
        list[Path] | None,
        typer.Argument(help="More YAML files (e.g. `mapper:` knobs)", show_default=False),
    ] = None,
    define: Defines = None,
    einsum: Annotated[
        str | None, typer.Option("--einsum", help="Map this Einsum alone (fusion off).")
    ] = None,
    objective: Annotated[
        str, typer.Option("--objective", help="energy | latency | edp | pareto")
    ] = "energy",
    out: Annotated[
        Path | None, typer.Option("-o", "--out", help="Write the best mapping (YAML).")
    ] = None,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Write result and statistics as JSON.")
    ] = None,
    jobs: Annotated[
        int, typer.Option("--jobs", "-j", help="Worker processes for pmapping generation.")
    ] = 1,
    orders: Annotated[
        str, typer.Option("--orders", help="given | all (every dependency-respecting order)")
    ] = "given",
    epsilon: Annotated[
        float,
        typer.Option(
            "--epsilon",
            help="Run an epsilon-pruned (dirty) join first and bound the exact join with "
            "its answer (FFM 6.3); 0: exact join only. The answer is the same either way.",
        ),
    ] = 0.0,
) -> None:
    """Find the optimal fused mapping of the workload (FFM). With --einsum: the best
    pmapping of one Einsum alone."""
    spec = _load([arch, workload, *(extra or [])], define)
    spec.require("arch", "workload")
    _outputs(spec, json_out, None, out)
    if jobs < 1:
        raise FusemapError(f"--jobs must be at least 1 (got {jobs})")
    if not epsilon >= 0:
        raise FusemapError(f"--epsilon must be at least 0 (got {epsilon})")
    if einsum is not None:
        from .mapper.single import map_einsum

        if objective == "pareto":
            raise FusemapError("--objective pareto needs the whole workload (drop --einsum)")
        map_einsum(spec, einsum, objective, out=out, json_out=json_out, echo=typer.echo)
        return
    from .mapper.run import map_whole

    map_whole(
        spec, objective, orders=orders, jobs=jobs, out=out, json_out=json_out, echo=typer.echo,
        epsilon=epsilon,
    )  # fmt: skip


@app.command()
def passes(
    workload: SpecFile,
    rank: Annotated[
        str, typer.Option("--rank", help="Rank to count passes over, e.g. M (or K).")
    ] = "M",
    define: Defines = None,
    json_out: Annotated[
        Path | None,
        typer.Option("--json", help='Write {"passes", "stages", "live"} as JSON.'),
    ] = None,
) -> None:
    """Count the passes a cascade makes over a rank, whatever the mapping: the stage of
    every Einsum and the tensors whose whole fiber must stay live across stages."""
    from .analysis.passes import analyze_passes
    from .report.io import write_atomic
    from .report.tables import pass_tables, print_group
    from .spec.numbers import finite_json

    spec = _load([workload], define)
    _outputs(spec, json_out)
    result = analyze_passes(spec, rank)
    print_group(pass_tables(result))
    if json_out:
        write_atomic(json_out, finite_json(result.to_json(), indent=2) + "\n")


@app.command()
def demo(
    out: Annotated[Path, typer.Option("-o", "--out", help="Folder for the outputs.")] = Path("out"),
) -> None:
    """Run the built-in example: map a transformer layer (fusion included), print the
    optimal mapping, draw its LoopTree and energy breakdown."""
    from .examples import example_path
    from .mapper.run import map_whole
    from .report.plots import energy_breakdown
    from .report.render import render as draw
    from .spec.spec import load_spec

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
    ).best
    plot = energy_breakdown(best.result, out / "demo_energy.png")
    tree, _ = draw(best.mapping, out / "demo_looptree.svg")
    typer.echo(f"wrote {mapping_file}, {plot} and {tree}")


def main() -> None:
    """Entry point: run the app, turning user errors into one line and exit status 2."""
    from .report.io import exit_on_signals

    exit_on_signals()
    try:
        app(standalone_mode=False)
    except FusemapError as err:
        if _state["debug"]:
            raise
        # One line, whatever the message quotes (a multi-line expression, YAML text).
        typer.echo("error: " + " ".join(str(err).splitlines()), err=True)
        sys.exit(2)
    except (typer.Exit, SystemExit) as ex:
        sys.exit(getattr(ex, "exit_code", getattr(ex, "code", 0)))
    except typer.Abort:
        sys.exit(130)
    except Exception as err:
        if isinstance(err, _usage_error_type()):  # bad command-line usage
            err.show()  # type: ignore[attr-defined]
            sys.exit(2)
        if _state["debug"]:
            raise
        text = " ".join(f"{type(err).__name__}: {err}".splitlines())
        typer.echo(
            f"error: internal error, please report it: {text} (--debug shows the traceback)",
            err=True,
        )
        sys.exit(1)


def _usage_error_type() -> type[Exception]:
    """The exception class of command-line usage errors (recent typer vendors click)."""
    try:
        from typer._click.exceptions import ClickException
    except ImportError:  # older typer: the click package
        from click.exceptions import ClickException  # type: ignore[no-redef]
    return ClickException


if __name__ == "__main__":
    main()
