"""The optimal pmapping of one Einsum alone (fusion off): ``fusemap map --einsum``."""

from __future__ import annotations

from collections.abc import Callable

from ..model.evaluate import evaluate_mapping
from ..model.result import Result
from ..spec import limits
from ..spec.arch_eval import ArchEvaluator
from ..spec.errors import FusemapError
from ..spec.mapping import Mapping
from ..spec.resolve import resolve_workload
from ..spec.spec import Spec
from .pmappings.generate import generate_pmappings
from .pmappings.table import OBJECTIVES, PmappingTable
from .space.config import config_from_spec
from .space.feasibility import check_einsum
from .space.templates import check_bounds


def best_pmapping(
    spec: Spec,
    einsum: str,
    objective: str = "energy",
    progress: Callable[[int, int], None] | None = None,
) -> tuple[PmappingTable, Mapping, Result]:
    """The pmapping table of ``einsum``, its best mapping and that mapping's Result
    (``progress(done, total)``: templates tiled so far)."""
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
    table = generate_pmappings(
        spec, einsum, objective=objective, workload=wl, arch=arch, progress=progress
    )
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
