"""The ``fusemap`` command line: check, render, evaluate, map, sweep, report, diff, passes,
demo.

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
AllowUnused = Annotated[
    bool,
    typer.Option(
        "--allow-unused", help="Accept -D variables that no spec file uses (else an error)."
    ),
]
SpecFile = Annotated[Path, typer.Argument(help="YAML file", show_default=False)]
Quiet = Annotated[bool, typer.Option("-q", "--quiet", help="Leave out the LoopTree.")]
Report = Annotated[
    Path | None, typer.Option("--report", help="Write a self-contained HTML report.")
]
Plots = Annotated[
    Path | None,
    typer.Option("--plots", help="Write every plot (energy, latency, area, ...) in this folder."),
]
Log = Annotated[bool, typer.Option("--log", help="Log scale on the plots.")]
Scheduler = Annotated[
    str | None,
    typer.Option(
        "--scheduler",
        envvar="DASK_SCHEDULER_ADDRESS",
        help="Address of a running Dask scheduler (e.g. tcp://host:8786).",
        show_default=False,
    ),
]


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


def _load(files: list[Path], defines: list[str] | None, allow_unused: bool = False):
    from .spec.spec import load_spec

    return load_spec(
        *[str(f) for f in files], variables=_variables(defines), allow_unused=allow_unused
    )


def _command() -> str:
    """The command line (recorded in written results), rebuilt from the parsed command:
    its name, then every argument and option that differs from its default."""
    import shlex

    try:
        from typer._click.globals import get_current_context
    except ImportError:  # older typer: the click package
        from click import get_current_context  # type: ignore[no-redef]

    ctx = get_current_context()
    parts = ["fusemap", ctx.info_name or ""]
    for param in ctx.command.params:
        value = ctx.params.get(param.name or "")
        if value is None or value is False or value == [] or value == param.default:
            continue
        values = value if isinstance(value, list | tuple) else [value]
        if param.param_type_name == "argument":
            parts += [str(v) for v in values]
        elif value is True:
            parts.append(param.opts[0])
        else:
            for v in values:
                parts += [param.opts[0], str(v)]
    return shlex.join(parts)


@app.command()
def check(
    arch: SpecFile,
    workload: SpecFile,
    mapping: Annotated[Path | None, typer.Argument(help="LoopTree mapping (optional)")] = None,
    define: Defines = None,
    allow_unused: AllowUnused = False,
) -> None:
    """Validate a spec and print a summary: Einsums, tensors, arch tree (evaluated sizes),
    LoopTree. Fails (status 2) when the spec cannot be priced."""
    from .report.checks import check_spec

    spec = _load([arch, workload] + ([mapping] if mapping else []), define, allow_unused)
    _outputs(spec)
    typer.echo(check_spec(spec))


@app.command()
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
    from .report.outputs import annotations
    from .report.render import render as draw

    spec = _load([arch, workload, mapping], define, allow_unused)
    spec.require("mapping")
    _outputs(spec, out)
    path = draw(spec.mapping, out, annotations(spec, spec.mapping), graphviz=graphviz)  # type: ignore[arg-type]
    typer.echo(f"wrote {path}")


@app.command()
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
    from .model.evaluate import evaluate_mapping
    from .report import outputs
    from .spec.mapping_check import check_mapping
    from .spec.resolve import resolve_workload

    spec = _load([arch, workload, mapping], define, allow_unused)
    spec.require("arch", "workload", "mapping")
    _outputs(spec, json_out, plot)
    wl = resolve_workload(spec)
    check_mapping(spec, wl, einsum or None)
    result = evaluate_mapping(spec, workload=wl, einsums=einsum or None)
    notes = outputs.annotations(spec, spec.mapping, wl) if tree and not quiet else None
    outputs.show_result(result, spec.mapping, notes, tree=tree and not quiet, tables=not quiet,
                        echo=typer.echo)  # fmt: skip
    outputs.write_result_files(
        result, spec.mapping, spec, _command(), json_out=json_out, plot=plot, plots=plots,
        log=log, report=report, echo=typer.echo,
    )  # fmt: skip


@app.command(name="map")
def map_(
    arch: SpecFile,
    workload: SpecFile,
    extra: Annotated[
        list[Path] | None,
        typer.Argument(help="More YAML files (e.g. `mapper:` knobs)", show_default=False),
    ] = None,
    define: Defines = None,
    allow_unused: AllowUnused = False,
    einsum: Annotated[
        str | None, typer.Option("--einsum", help="Map this Einsum alone (fusion off).")
    ] = None,
    objective: Annotated[
        str, typer.Option("--objective", help="energy | latency | edp | pareto")
    ] = "energy",
    out: Annotated[
        Path | None,
        typer.Option(
            "-o",
            "--out",
            help="Write the best mapping (YAML); with pareto, OUT is point 1 and "
            "OUT-k.yaml point k of the front.",
        ),
    ] = None,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Write result and statistics as JSON.")
    ] = None,
    quiet: Quiet = False,
    report: Report = None,
    plots: Plots = None,
    log: Log = False,
    jobs: Annotated[
        int,
        typer.Option(
            "--jobs",
            "-j",
            envvar="FUSEMAP_JOBS",
            help="Worker processes for pmapping generation (the answer does not depend on it).",
        ),
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
    scheduler: Scheduler = None,
) -> None:
    """Find the optimal fused mapping of the workload (FFM). With --einsum: the best
    pmapping of one Einsum alone. With --scheduler, the pmappings are generated on the
    Dask cluster's workers (the result is the same)."""
    spec = _load([arch, workload, *(extra or [])], define, allow_unused)
    spec.require("arch", "workload")
    _outputs(spec, json_out, None, out)
    if jobs < 1:
        raise FusemapError(f"--jobs must be at least 1 (got {jobs})")
    if not epsilon >= 0:
        raise FusemapError(f"--epsilon must be at least 0 (got {epsilon})")
    if einsum is not None:
        from .mapper.one_einsum import map_einsum

        if objective == "pareto":
            raise FusemapError("--objective pareto needs the whole workload (drop --einsum)")
        if scheduler:
            raise FusemapError("--scheduler maps the whole workload on a cluster (drop --einsum)")
        map_einsum(
            spec, einsum, objective, out=out, json_out=json_out, echo=typer.echo, quiet=quiet,
            report=report, plots=plots, log=log, command=_command(),
        )  # fmt: skip
        return
    from contextlib import nullcontext

    from .mapper.run import map_whole

    cluster = nullcontext(jobs)
    if scheduler:
        from .sweeps.cluster import joblib_on_cluster

        cluster = joblib_on_cluster(scheduler)  # type: ignore[assignment]
    with cluster as workers:
        map_whole(
            spec, objective, orders=orders, jobs=workers, out=out, json_out=json_out,
            echo=typer.echo, epsilon=epsilon, quiet=quiet, report=report, plots=plots, log=log,
            command=_command(),
        )  # fmt: skip


@app.command()
def sweep(
    sweep_file: Annotated[Path, typer.Argument(help="The sweep file (YAML)", show_default=False)],
    out: Annotated[
        Path | None,
        typer.Option(
            "-o",
            "--out",
            help="Results folder (default: <sweep file name>-results).",
            show_default=False,
        ),
    ] = None,
    scheduler: Scheduler = None,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers",
            help="Local cluster: worker processes (default: one per core); with "
            "--scheduler: wait for this many workers.",
            show_default=False,
        ),
    ] = None,
    retry_failed: Annotated[
        bool, typer.Option("--retry-failed", help="Run the points that failed before again.")
    ] = False,
    plots: Annotated[
        bool, typer.Option("--plots/--no-plots", help="Write the plots (RESULTS/plots/).")
    ] = True,
) -> None:
    """Map (or evaluate) every point of a design-space sweep on a Dask cluster; one
    Parquet file per finished point in RESULTS/points/, a summary and plots. A rerun
    runs only the points not finished yet."""
    from .sweeps.run import run_sweep  # the rest after: the cluster starts sooner

    outcome = run_sweep(
        sweep_file, out, scheduler=scheduler, workers=workers, retry_failed=retry_failed,
        progress=True, echo=typer.echo,
    )  # fmt: skip
    from .report.tables import print_group
    from .sweeps.summary import sweep_summary

    print_group(sweep_summary(outcome))
    typer.echo(f"results: {outcome.folder / 'points'} (Parquet: pandas.read_parquet)")
    if plots:
        from .sweeps.plots import write_sweep_plots  # matplotlib: only when drawing

        written = write_sweep_plots(outcome, outcome.folder / "plots")
        if written:
            typer.echo("wrote " + " and ".join(str(p) for p in written))
    if outcome.count("lost"):
        raise typer.Exit(1)


@app.command()
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
    from .report import outputs

    spec = _load([arch, workload, *(extra or [])], define, allow_unused)
    spec.require("arch", "workload")
    if spec.mapping is None:
        from .mapper.run import map_whole

        map_whole(
            spec, objective, orders="given", jobs=jobs, out=None, json_out=None,
            echo=typer.echo, quiet=True, report=out, command=_command(),
        )  # fmt: skip
        return
    from .model.evaluate import evaluate_mapping

    result = evaluate_mapping(spec)
    outputs.show_result(result, spec.mapping, tree=False, tables=False)
    outputs.write_result_files(result, spec.mapping, spec, _command(), report=out, echo=typer.echo)


@app.command()
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

    from .report.diff import diff_paths, diff_tables
    from .report.io import write_atomic
    from .report.tables import print_group

    found = diff_paths(a, b, list(spec_files or []), _variables(define), allow_unused)
    print_group(diff_tables(found, everything))
    if json_out:
        rows = [
            {"scope": c.scope, "name": c.name, "quantity": c.metric, "a": c.old, "b": c.new,
             "change": c.delta, "relative": c.relative}
            for c in found.changes
        ]  # fmt: skip
        from .spec.numbers import finite_json

        text = finite_json({"a": str(a), "b": str(b), "rows": rows}, indent=1)
        write_atomic(json_out, text + "\n")


@app.command()
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
    from .analysis.passes import analyze_passes
    from .report.io import write_atomic
    from .report.tables import pass_tables, print_group
    from .spec.numbers import finite_json

    spec = _load([workload], define, allow_unused)
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
    optimal mapping, draw its LoopTree and plots, write the HTML report."""
    from .examples import example_path
    from .mapper.run import map_whole
    from .report.outputs import annotations
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
        report=out / "demo_report.html",
        command="fusemap demo",
    ).best
    plot = energy_breakdown(best.result, out / "demo_energy.png")
    tree = draw(best.mapping, out / "demo_looptree.svg", annotations(spec, best.mapping))
    typer.echo(f"wrote {plot} and {tree}; open {out / 'demo_report.html'} in a browser")


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
