"""``fusemap map``: the optimal fused mapping of a whole workload, printed and saved."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..spec.spec import Spec
from .ffm import MapOutcome, map_workload


def map_with_progress(
    spec: Spec, objective: str, orders: str, jobs: int, epsilon: float = 0.0
) -> MapOutcome:
    """:func:`map_workload` with one progress bar per phase (pmappings, join)."""
    from rich.progress import Progress

    with Progress(transient=True) as bar:
        tasks: dict[str, int] = {}

        def step(phase: str, done: int, total: int) -> None:
            if phase not in tasks:
                tasks[phase] = bar.add_task(phase, total=total)
            bar.update(tasks[phase], completed=done, total=total)

        return map_workload(
            spec, objective, orders=orders, jobs=jobs, progress=step, epsilon=epsilon
        )


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
) -> MapOutcome:
    """Map the workload, print the summary (``quiet``: no LoopTree), write the files."""
    from ..report import outputs

    outcome = map_with_progress(spec, objective, orders, jobs, epsilon)
    best = outcome.best
    res = best.result
    notes = outputs.annotations(spec, best.mapping)
    echo(f"Optimal mapping ({objective}), Einsum order: {' -> '.join(best.order)}")
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
                             [f"Optimal mapping ({objective}); score it with fusemap evaluate"])  # fmt: skip
        echo(f"wrote {out}")
    data = outcome_json(outcome)
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
