"""``fusemap map --einsum``: the optimal pmapping of one Einsum, printed and saved."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..model.evaluate import evaluate_mapping
from ..model.result import Result
from ..spec import limits
from ..spec.arch_eval import ArchEvaluator
from ..spec.errors import FusemapError
from ..spec.mapping import Mapping
from ..spec.resolve import resolve_workload
from ..spec.spec import Spec
from .pmappings.generate import OBJECTIVES, PmappingTable, generate_pmappings
from .space.feasibility import check_einsum
from .space.templates import check_bounds, config_from_spec


def best_pmapping(
    spec: Spec, einsum: str, objective: str = "energy"
) -> tuple[PmappingTable, Mapping, Result]:
    """The pmapping table of ``einsum``, its best mapping and that mapping's Result."""
    if objective not in OBJECTIVES:
        raise FusemapError(f"unknown objective '{objective}' (use {', '.join(OBJECTIVES)})")
    limits.reset_budget()  # each mapping run has its own expression budget
    wl = resolve_workload(spec)
    names = [e.name for e in wl.einsums]
    if einsum not in names:
        raise FusemapError(f"unknown Einsum '{einsum}' (the workload has {', '.join(names)})")
    check_bounds(wl.einsum(einsum), spec.locate_einsum(wl.einsum(einsum).index))
    arch = ArchEvaluator(spec, wl)
    bound = config_from_spec(spec).spread_bound
    notes = check_einsum(wl.einsum(einsum), wl, arch, bound)  # before the search: fails fast
    table = _with_progress(spec, einsum, objective, wl, arch)
    table.notes = notes
    if len(table) == 0:
        raise FusemapError(
            f"Einsum {einsum}: no valid mapping (every tile shape overflows a buffer or "
            "breaks a fanout constraint: check sizes, min_usage, reuse and loop_bounds)"
        )
    row = table.best(objective)
    mapping = table.mapping(row)
    result = evaluate_mapping(spec, mapping, workload=wl, arch=arch, einsums=[einsum])
    return table, mapping, result


def _with_progress(spec, einsum, objective, wl, arch) -> PmappingTable:
    from rich.progress import Progress

    with Progress(transient=True) as bar:
        task = bar.add_task(f"pmappings of {einsum}", total=None)

        def step(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        return generate_pmappings(
            spec, einsum, objective=objective, workload=wl, arch=arch, progress=step
        )


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

    table, mapping, result = best_pmapping(spec, einsum, objective)
    notes = outputs.annotations(spec, mapping)
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
