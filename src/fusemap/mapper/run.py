"""``fusemap map``: the optimal fused mapping of a whole workload, printed and saved."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..spec.numbers import finite_json
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
) -> MapOutcome:
    """Map the workload, print the summary, write the files."""
    from ..report.io import write_atomic
    from ..report.render import text_tree
    from ..report.tables import print_group, print_warnings, result_tables

    outcome = map_with_progress(spec, objective, orders, jobs, epsilon)
    best = outcome.best
    res = best.result
    echo(f"Optimal mapping ({objective}), Einsum order: {' -> '.join(best.order)}")
    echo(text_tree(best.mapping))
    print_group(result_tables(res))
    print_warnings(res)
    if best.fused:
        for f in best.fused:
            loops = ", ".join(f"{v}:{n}" for v, n in f.loops) or "none (whole tensor)"
            echo(f"fused: {f.tensor} in {f.memory}, shared loops: {loops}")
    else:
        echo("fused: nothing (every shared tensor goes through the top memory)")
    for line in passes_lines(outcome):
        echo(line)
    if objective == "pareto":
        echo(f"energy-latency Pareto front: {len(outcome.mappings)} mapping(s)")
        for m in outcome.mappings:
            echo(f"  energy {m.result.energy:.6g}  latency {m.result.latency:.6g}")
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
    if out:
        header = "# Optimal mapping found by fusemap map; score it with fusemap evaluate\n"
        write_atomic(out, header + best.mapping.to_yaml())
    if json_out:
        write_atomic(json_out, finite_json(outcome_json(outcome), indent=1) + "\n")
    return outcome


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
