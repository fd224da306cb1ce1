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
from ..spec.numbers import finite_json
from ..spec.resolve import resolve_workload
from ..spec.spec import Spec
from .pmappings import OBJECTIVES, PmappingTable, generate_pmappings
from .space import check_bounds


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
    table = _with_progress(spec, einsum, objective, wl, arch)
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
) -> None:
    """Map one Einsum, print the best pmapping and the statistics, write the files."""
    from ..report.io import write_atomic
    from ..report.render import text_tree
    from ..report.tables import print_group, print_warnings, result_tables

    table, mapping, result = best_pmapping(spec, einsum, objective)
    echo(f"Best pmapping of {einsum} ({objective}):\n" + text_tree(mapping))
    print_group(result_tables(result))
    print_warnings(result)
    st = table.stats
    echo(
        f"templates {st.templates}, partial tile shapes evaluated {st.tile_shapes_evaluated:,}, "
        f"within capacity {st.tile_shapes_valid:,}, Pareto-optimal {st.pareto}, "
        f"{st.seconds:.2f} s"
    )
    if out:
        header = (
            f"# Best pmapping of {einsum}; score it with: fusemap evaluate ... --einsum {einsum}\n"
        )
        write_atomic(out, header + mapping.to_yaml())
    if json_out:
        data = result.to_json()
        data["objective"] = objective
        data["einsum"] = einsum
        data["statistics"] = st.as_dict()
        write_atomic(json_out, finite_json(data, indent=1) + "\n")
