"""``fusemap sweep``: a design-space sweep on a Dask cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .app import Scheduler


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
    from ..sweeps.run import run_sweep  # the rest after: the cluster starts sooner

    outcome = run_sweep(
        sweep_file, out, scheduler=scheduler, workers=workers, retry_failed=retry_failed,
        progress=True, echo=typer.echo,
    )  # fmt: skip
    from ..report.tables import print_group
    from ..sweeps.summary import sweep_summary

    print_group(sweep_summary(outcome))
    typer.echo(f"results: {outcome.folder / 'points'} (Parquet: pandas.read_parquet)")
    if plots:
        from ..sweeps.plots import write_sweep_plots  # matplotlib: only when drawing

        written = write_sweep_plots(outcome, outcome.folder / "plots")
        if written:
            typer.echo("wrote " + " and ".join(str(p) for p in written))
    if outcome.count("lost"):
        raise typer.Exit(1)
