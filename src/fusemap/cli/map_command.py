"""``fusemap map``: the optimal fused mapping of a whole workload, printed and saved."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from ..mapper.ffm import map_workload
from ..mapper.one_einsum import best_pmapping
from ..mapper.outcome import MapOutcome
from ..spec.errors import FusemapError
from ..spec.spec import Spec
from .app import (
    AllowUnused,
    Defines,
    Log,
    Plots,
    Quiet,
    Report,
    Scheduler,
    SpecFile,
    check_outputs,
    command_line,
    load,
)

Jobs = Annotated[
    int,
    typer.Option(
        "--jobs",
        "-j",
        envvar="FUSEMAP_JOBS",
        help="Worker processes for pmapping generation (the answer does not depend on it).",
    ),
]
Orders = Annotated[
    str, typer.Option("--orders", help="given | all (every dependency-respecting order)")
]
Epsilon = Annotated[
    float,
    typer.Option(
        "--epsilon",
        help="Run an epsilon-pruned (dirty) join first and bound the exact join with "
        "its answer (FFM 6.3); 0: exact join only. The answer is the same either way.",
    ),
]
Mapper = Annotated[
    str,
    typer.Option(
        "--mapper",
        help="ffm (optimal), or a baseline on the same pmappings: random (Timeloop-"
        "style), sa (SET-style annealing), ga (TileFlow-style genetic algorithm).",
    ),
]
Budget = Annotated[
    int, typer.Option("--budget", help="Baselines: evaluations (joins of one pmapping each).")
]
Seed = Annotated[int, typer.Option("--seed", help="Baselines: the random seed.")]


def map_with_progress(
    spec: Spec, objective: str, orders: str, jobs: int, epsilon: float = 0.0
) -> MapOutcome:
    """:func:`map_workload` with one progress bar per phase (pmappings, join)."""
    from rich.progress import Progress, TaskID

    with Progress(transient=True) as bar:
        tasks: dict[str, TaskID] = {}

        def step(phase: str, done: int, total: int) -> None:
            if phase not in tasks:
                tasks[phase] = bar.add_task(phase, total=total)
            bar.update(tasks[phase], completed=done, total=total)

        return map_workload(
            spec, objective, orders=orders, jobs=jobs, progress=step, epsilon=epsilon
        )


@dataclass(frozen=True)
class Baseline:
    """A baseline mapper instead of FFM (``fusemap map --mapper``)."""

    strategy: str  # random | sa | ga
    budget: int  # evaluations
    seed: int

    def run(self, spec: Spec, objective: str, jobs: int) -> tuple[MapOutcome, dict]:
        """Its answer, and what it did (for the JSON's ``mapper``)."""
        from ..mapper.baselines import map_with_baseline

        run = map_with_baseline(
            spec, self.strategy, objective, budget=self.budget, seed=self.seed, jobs=jobs
        )
        info = {
            "name": self.strategy, "budget": self.budget, "seed": self.seed,
            "evaluations": run.evaluations, "valid": run.trace.valid,
            "best_after": run.trace.history, "join_seconds": run.join_seconds,
        }  # fmt: skip
        return run.answer(), info


def map_whole(
    spec: Spec,
    objective: str,
    *,
    orders: str,
    jobs: int,
    out: Path | None,
    json_out: Path | None,
    echo: Callable[[str], None],
    epsilon: float = 0.0,
    quiet: bool = False,
    report: Path | None = None,
    plots: Path | None = None,
    log: bool = False,
    command: str = "fusemap map",
    baseline: Baseline | None = None,
) -> MapOutcome:
    """Map the workload (with FFM, or a ``baseline``), print the summary (``quiet``: no
    LoopTree), write the files."""
    from ..report import outputs  # noqa: I001

    mapper: dict | None = None
    if baseline is None:
        outcome = map_with_progress(spec, objective, orders, jobs, epsilon)
        title = f"Optimal mapping ({objective})"
    else:
        outcome, mapper = baseline.run(spec, objective, jobs)
        title = f"Best mapping the {baseline.strategy} baseline found ({objective})"
    best = outcome.best
    res = best.result
    notes = outputs.drawing_notes(spec, best.mapping)
    echo(f"{title}, Einsum order: {' -> '.join(best.order)}")
    outputs.show_result(res, best.mapping, notes, tree=not quiet, echo=echo)
    if best.fused:
        for f in best.fused:
            loops = f.loops_text()
            echo(f"fused: {f.tensor} in {f.memory}, shared loops: {loops}")
    else:
        echo("fused: nothing (every shared tensor goes through the top memory)")
    for line in passes_lines(outcome):
        echo(line)
    for line in outcome.notes:
        echo(f"note: {line}")
    files: list[str] = []
    if out and objective == "pareto":
        files = outputs.save_front(out, outcome.mappings, spec, command)
    if objective == "pareto":
        outputs.show_front(outcome.mappings, files or None)
    st = outcome.statistics
    echo(
        "pmappings per Einsum: "
        + ", ".join(f"{k} {v}" for k, v in st.pmappings.items())
        + f" ({st.distinct_einsums} distinct Einsums generated)"
    )
    d = st.as_dict()
    echo(
        f"join: {st.orders} order(s), groups per step {st.groups}, combinations "
        f"{sum(st.joined):,}, pruned {100 * d['pruned_fraction']:.1f}%"
    )
    echo("time: " + ", ".join(f"{k} {v:.2f} s" for k, v in st.seconds.items()))
    if out and files:
        echo(f"wrote {out} (point 1, the lowest energy) and every point of the front: "
             f"{files[0]} ... {files[-1]} (numbered as in the table)")  # fmt: skip
    elif out:
        outputs.save_mapping(out, best.mapping, spec, command,
                             [f"{title}; score it with fusemap evaluate"])  # fmt: skip
        echo(f"wrote {out}")
    data = outcome_json(outcome)
    if mapper is not None:
        data["mapper"] = mapper
    if files:
        for point, path in zip(data["pareto"], files, strict=True):
            point["mapping_file"] = path
    outputs.write_result_files(
        res, best.mapping, spec, command, json_out=json_out, json_data=data, plots=plots,
        log=log, report=report, fused=best.fused, front=outcome.mappings if objective == "pareto" else (),
        statistics={**_flat_statistics(d), **({"notes": outcome.notes} if outcome.notes else {})},
        notes=notes, echo=echo,
    )  # fmt: skip
    return outcome


def _best_with_progress(spec: Spec, einsum: str, objective: str):
    """:func:`best_pmapping` with a progress bar over the templates."""
    from rich.progress import Progress

    with Progress(transient=True) as bar:
        task = bar.add_task(f"pmappings of {einsum}", total=None)

        def step(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        return best_pmapping(spec, einsum, objective, progress=step)


def map_einsum(
    spec: Spec,
    einsum: str,
    objective: str,
    *,
    out: Path | None,
    json_out: Path | None,
    echo: Callable[[str], None],
    quiet: bool = False,
    report: Path | None = None,
    plots: Path | None = None,
    log: bool = False,
    command: str = "fusemap map --einsum",
) -> None:
    """Map one Einsum, print the best pmapping and the statistics, write the files."""
    from ..report import outputs

    table, mapping, result = _best_with_progress(spec, einsum, objective)
    notes = outputs.drawing_notes(spec, mapping)
    echo(f"Best pmapping of {einsum} ({objective}):")
    outputs.show_result(result, mapping, notes, tree=not quiet, echo=echo)
    for line in table.notes:
        echo(f"note: {line}")
    st = table.stats
    echo(
        f"templates {st.templates}, partial tile shapes evaluated {st.tile_shapes_evaluated:,}, "
        f"within capacity {st.tile_shapes_valid:,}, Pareto-optimal {st.pareto}, "
        f"{st.seconds:.2f} s"
    )
    if out:
        line = f"Best pmapping of {einsum}; score it with: fusemap evaluate ... --einsum {einsum}"
        outputs.save_mapping(out, mapping, spec, command, [line])
        echo(f"wrote {out}")
    data = result.to_json()
    data["objective"] = objective
    data["einsum"] = einsum
    data["statistics"] = st.as_dict()
    data["notes"] = table.notes
    outputs.write_result_files(
        result, mapping, spec, command, json_out=json_out, json_data=data, plots=plots,
        log=log, report=report, statistics=st.as_dict(), notes=notes, echo=echo,
    )  # fmt: skip


def _flat_statistics(d: dict) -> dict:
    """The statistics as short printable entries (for the report)."""
    return {k: v for k, v in d.items() if v not in (None, [], {})}


def passes_lines(outcome: MapOutcome) -> list[str]:
    """One line per rank of the pass analysis: the bound beside the mapper's result."""
    out = []
    for rank, a in outcome.passes.items():
        parts = "" if a.components == (rank,) else f" ({' x '.join(a.components)})"
        line = f"passes over {rank}{parts}: {a.passes} (lower bound for any mapping)"
        if a.live:
            live = ", ".join(
                f"{t} ({v.fiber_elements} values per fiber, {v.fibers} fibers)"
                for t, v in a.live.items()
            )
            line += f"; live across passes: {live}"
        else:
            line += "; nothing live across passes"
        out.append(line)
    return out


def outcome_json(outcome: MapOutcome) -> dict:
    """The result shape of ``fusemap evaluate`` plus ``fused``, ``order``, ``statistics``,
    ``passes`` (per rank, as ``fusemap passes --json`` writes it) and, for ``pareto``,
    the whole front."""
    best = outcome.best
    data = best.result.to_json()
    data["objective"] = outcome.objective
    data["order"] = best.order
    data["fused"] = [f.as_dict() for f in best.fused]
    data["statistics"] = outcome.statistics.as_dict()
    data["passes"] = {rank: a.to_json() for rank, a in outcome.passes.items()}
    data["notes"] = outcome.notes
    if outcome.objective == "pareto":
        data["pareto"] = [
            {
                "energy": m.result.energy,
                "latency": m.result.latency,
                "fused": [f.as_dict() for f in m.fused],
            }
            for m in outcome.mappings
        ]
    return data


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
    jobs: Jobs = 1,
    orders: Orders = "given",
    epsilon: Epsilon = 0.0,
    mapper: Mapper = "ffm",
    budget: Budget = 1000,
    seed: Seed = 0,
    scheduler: Scheduler = None,
) -> None:
    """Find the optimal fused mapping of the workload (FFM). With --einsum: the best
    pmapping of one Einsum alone. With --scheduler, the pmappings are generated on the
    Dask cluster's workers (the result is the same). With --mapper random|sa|ga, a
    baseline's best mapping in --budget evaluations."""
    spec = load([arch, workload, *(extra or [])], define, allow_unused)
    spec.require("arch", "workload")
    check_outputs(spec, json_out, None, out)
    if jobs < 1:
        raise FusemapError(f"--jobs must be at least 1 (got {jobs})")
    if not epsilon >= 0:
        raise FusemapError(f"--epsilon must be at least 0 (got {epsilon})")
    choice = _baseline(mapper, budget, seed, objective, orders, einsum)
    if einsum is not None:
        _map_one_einsum(
            spec, einsum, objective, scheduler, out=out, json_out=json_out, quiet=quiet,
            report=report, plots=plots, log=log,
        )  # fmt: skip
        return
    _map_on_workers(
        spec, objective, orders, jobs, epsilon, scheduler, out=out, json_out=json_out,
        quiet=quiet, report=report, plots=plots, log=log, baseline=choice,
    )  # fmt: skip


def _baseline(
    mapper: str, budget: int, seed: int, objective: str, orders: str, einsum: str | None
) -> Baseline | None:
    """The baseline ``--mapper`` asks for (None: FFM), its options checked."""
    from ..mapper.baselines import check_options

    if mapper == "ffm":
        return None
    check_options(mapper, budget)
    if objective == "pareto" or einsum is not None or orders != "given":
        raise FusemapError(
            "a baseline maps the whole workload in its given order for one objective "
            "(energy, latency or edp): drop --einsum, --orders all and pareto"
        )
    return Baseline(mapper, budget, seed)


def _map_one_einsum(
    spec: Spec,
    einsum: str,
    objective: str,
    scheduler: str | None,
    *,
    out: Path | None,
    json_out: Path | None,
    quiet: bool,
    report: Path | None,
    plots: Path | None,
    log: bool,
) -> None:
    """``fusemap map --einsum``: one Einsum alone, in this process, for one objective."""
    if objective == "pareto":
        raise FusemapError("--objective pareto needs the whole workload (drop --einsum)")
    if scheduler:
        raise FusemapError("--scheduler maps the whole workload on a cluster (drop --einsum)")
    map_einsum(
        spec, einsum, objective, out=out, json_out=json_out, echo=typer.echo, quiet=quiet,
        report=report, plots=plots, log=log, command=command_line(),
    )  # fmt: skip


def _map_on_workers(
    spec: Spec,
    objective: str,
    orders: str,
    jobs: int,
    epsilon: float,
    scheduler: str | None,
    *,
    out: Path | None,
    json_out: Path | None,
    quiet: bool,
    report: Path | None,
    plots: Path | None,
    log: bool,
    baseline: Baseline | None = None,
) -> None:
    """``fusemap map`` of the whole workload, its pmappings generated by ``jobs`` local
    processes or, with a ``scheduler``, by the Dask cluster's worker threads."""
    from contextlib import AbstractContextManager, nullcontext

    cluster: AbstractContextManager[int] = nullcontext(jobs)
    if scheduler:
        from ..sweeps.cluster import joblib_on_cluster

        cluster = joblib_on_cluster(scheduler)
    with cluster as workers:
        map_whole(
            spec, objective, orders=orders, jobs=workers, out=out, json_out=json_out,
            echo=typer.echo, epsilon=epsilon, quiet=quiet, report=report, plots=plots, log=log,
            command=command_line(), baseline=baseline,
        )  # fmt: skip
