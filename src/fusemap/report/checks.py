"""``fusemap check``: validate a spec, show what fusemap understood, and say OK only when
the spec can also be priced (every action has an energy, every component an area)."""

from __future__ import annotations

from ..spec.arch_eval import ArchEvaluator, ComponentInfo
from ..spec.errors import FusemapError, Location, SpecError
from ..spec.resolve import resolve_workload
from ..spec.spec import Spec
from .tables import check_summary, print_group


def unpriced(evaluator: ArchEvaluator, einsums: list[str]) -> list[tuple[str, Location | None]]:
    """What fusemap cannot price: (message, where it was written), each named once."""
    out: dict[str, Location | None] = {}
    for name in einsums:
        for comp in evaluator.components(name).values():
            for action in comp.actions.values():
                if action.energy is None and action.missing:
                    out.setdefault(f"component {comp.name}: {action.missing}", action.location)
    return list(out.items())


def check_spec(spec: Spec) -> str:
    """Print the summary; return the closing line, or raise when the spec is unusable.

    With a mapping, the mapping is evaluated (capacity, fanouts, costs included)."""
    spec.require("arch", "workload")
    wl = resolve_workload(spec)
    evaluator = ArchEvaluator(spec, wl)
    names = [e.name for e in wl.einsums]
    for e in names:  # evaluate every expression of the arch for every Einsum
        evaluator.components(e)
    first: dict[str, ComponentInfo] = evaluator.components(names[0]) if names else {}
    notes = None
    if spec.mapping is not None:
        from ..model.chains import branch_chains, branch_compute, build_chain
        from ..spec.mapping_check import check_mapping, node_locations
        from .looptree import annotate

        check_mapping(spec, wl)
        where = node_locations(spec)
        for name, nodes in branch_chains(spec.mapping).items():
            flat = evaluator.flat(name, branch_compute(nodes).component)
            try:
                build_chain(nodes, wl.einsum(name), wl, flat, where)
            except FusemapError as err:  # the model does not know where nodes were written
                raise err.located(where[id(nodes[-1])]) from None
        notes = annotate(spec, spec.mapping, wl, evaluator)
    print_group(check_summary(spec, wl, first, notes))
    missing = unpriced(evaluator, names)
    if missing:
        message, at = missing[0]
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise SpecError(f"the spec is valid but cannot be priced: {message}{more}", at)
    if spec.mapping is not None:
        from ..model.evaluate import evaluate_mapping

        evaluate_mapping(spec, workload=wl, arch=evaluator)
        return "OK: the spec is valid and its mapping evaluates."
    return "OK: the spec is valid and can be priced."
