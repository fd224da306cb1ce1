"""The ``fusemap`` Typer app, the options its commands share, and what every command
does first: load the spec files, refuse bad output targets, record the command line."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Model tensor-algebra accelerators and evaluate / find their fused mappings.",
    pretty_exceptions_enable=False,
)
_state = {"debug": False}

Defines = Annotated[
    list[str] | None,
    typer.Option(
        "-D",
        "--define",
        help="Jinja variable NAME=VALUE (VALUE read as a YAML scalar, or a flat list [a, b, ...]).",
    ),
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
    from ..spec import limits

    limits.reset()  # the defaults, then FUSEMAP_LIMITS, then --limit
    if limit:
        limits.configure(**limits.parse_assignments(limit, "--limit"))


def check_outputs(spec, json_out: Path | None = None, plot: Path | None = None, *more: Path | None):
    """Refuse bad output targets before the work starts; never write over an input."""
    from ..report.io import check_output, check_plot, protect_inputs

    protect_inputs(spec.input_files)
    for target in (json_out, *more):
        if target is not None:
            check_output(target)
    if plot is not None:
        check_plot(plot)


def variables(defines: list[str] | None) -> dict[str, Any]:
    from ..spec.loader import parse_define

    return dict(parse_define(d) for d in defines or [])


def load(files: list[Path], defines: list[str] | None, allow_unused: bool = False):
    from ..spec.spec import load_spec

    return load_spec(
        *[str(f) for f in files], variables=variables(defines), allow_unused=allow_unused
    )


def command_line() -> str:
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


def debugging() -> bool:
    """Whether ``--debug`` was given (tracebacks instead of one-line errors)."""
    return _state["debug"]
