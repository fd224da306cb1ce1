"""Several fused loops per rank variable, searched only where they can beat the optimum.

The default search (``mapper: {fused_loops_once: true}``) splits each rank variable at
most once above fused nodes. Splitting it again can pay (``docs/ffm.md``, "Several
fused loops per rank variable"), and searching every such split for every template is
far too slow (GPT-3 at 2048 tokens ran out of memory). This module makes the answer
exact anyway, by a bound (energy objective; latency and EDP below):

* only a template with a loop gap above its deepest fused node and another gap above
  that (two gaps in its fused prefix, ``depth >= 2``) has splits the default search
  leaves out; in a prefix with one gap every variable has at most one loop anyway;
* each such template is searched once more with prefixes forgotten
  (``MapperConfig.relaxed_prefixes``): rows of every prefix are compared together and
  reservations by their total, so the search keeps only what the template's least
  energy over its *whole* fused space needs. No other Einsum's tile is counted, which
  only lowers that least energy: it is a lower bound (its *floor*);
* with ``best`` the energy of the mapping found in the default space, and ``LB_e`` the
  least energy of Einsum ``e`` over the whole space (its table's least, or a floor
  below it), a mapping of energy below ``best`` uses for Einsum ``e`` a pmapping of
  energy at most ``best - sum(LB of the others)`` (energies add up along the order).
  A template whose floor is above that allowance has no such pmapping;
* a hosting template (``deferred_hosting.marked``) costs no less than its template
  without the mark (``deferred_hosting``), so its floor is that template's.

The templates within their allowance are searched over the whole fused space, their
rows within the allowance are added (a table of many rows: only those that may join,
:mod:`fusemap.mapper.joinable`), and the capped join runs again. On GPT-3 every
floor is at or above its Einsum's least energy, so nothing is searched again.

Latency, EDP and Pareto-front objectives: the same with both floors, least energy and
least latency (the twins then run without the energy branch and bound, so the floors
are exact), and a :class:`RowCut` in place of the allowance (for a front: a row may add
a point only if, completed with the other Einsums' least, no point of the front found
dominates it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..spec import limits
from ..spec.arch_eval import ArchEvaluator
from ..spec.resolve import WorkloadInfo
from ..spec.spec import Spec
from .check_rows import GAIN, FirstSearch, Joinable, JoinableRows, KeysFound, RowCut
from .deferred_hosting import base_key, merge_tables, renamed_table
from .joinable import CostBound, joinable
from .pmappings.generate import generate_pmappings
from .pmappings.table import PmappingTable, empty_table
from .space.config import MapperConfig
from .space.prefix import marked
from .space.templates import Template, fused_positions, template_key, templates, top_level
from .tiling.fronts import FrontStore
from .workers import in_worker, run_tasks

SEMI_JOIN_ROWS = 20_000
"""Rows (before their loop orders) past which an Einsum's check rows are searched again,
only those that may join (:mod:`fusemap.mapper.joinable`): GPT-3 at 512 tokens on the
edge accelerator finds 450,000 for its softmax (17,540 may join), each then a row per
loop order, past ``limits.loop_orders``. Below it the first search's table is kept (a
second search would cost more than the orders)."""


@dataclass
class FullSpaceCheck:
    """What the check of the whole fused space did."""

    templates_bounded: int = 0  # templates whose floor was worked out
    templates_searched: int = 0  # of those (and hosting ones), searched again in full
    rows_added: int = 0
    semi_joined: int = 0  # tables searched again, only rows that may join
    templates_searched_again: int = 0  # their templates with a row that may join
    keys_dropped: int = 0  # order-free keys (prefixes without order) they left out
    incomplete: bool = False
    """Some table's allowance passes what it holds (:attr:`PmappingTable.complete_to`):
    nothing was searched; the caller makes the tables complete and checks again."""

    def as_dict(self) -> dict[str, float]:
        """Plain numbers, for JSON."""
        return dict(self.__dict__)


def _prefix_gaps(t: Template, shared: frozenset[str], arch: ArchEvaluator, einsum: str) -> int:
    """Loop gaps above the template's deepest fused node (its place; each gap holds at
    most one loop per rank variable)."""
    flat = arch.flat(einsum, t.compute)
    top = flat.path[top_level(flat)].name
    return max(fused_positions(t, shared, top), default=-1)


def check_full_space(
    spec: Spec,
    wl: WorkloadInfo,
    config: MapperConfig,
    groups: dict[str, list[str]],
    tables: dict[str, PmappingTable],
    orders: list[list[str]],
    best: float | tuple[tuple[float, float], ...],
    jobs: int,
    objective: str = "energy",
) -> FullSpaceCheck:
    """Add to ``tables`` every pmapping with several fused loops per rank variable that
    may be part of a mapping of objective below ``best`` (``pareto``: the front's
    (energy, latency) points, and a mapping no point dominates; ``groups``: table's
    Einsum -> Einsums sharing it, renamed)."""
    check = FullSpaceCheck()
    if objective == "energy":
        assert isinstance(best, float)
        cuts, excluded, wanted, least = _energy_cuts(
            spec, jobs, config, tables, groups, orders, best, check
        )
        if check.incomplete:
            return check
    else:
        cuts, excluded, wanted, least = _objective_cuts(
            objective, config, tables, groups, best, check
        )
    full = replace(config, fused_loops_once=False)
    args = {b: (spec, b, full, cuts[b], excluded[b], _sharing(tables[b])) for b in wanted}
    first = run_tasks(jobs, _search_in_worker, [(*args[b], None) for b in wanted])
    made = {b: table for b, (table, _, _) in zip(wanted, first, strict=True)}
    again = [b for b in wanted if made[b] is None]
    if again:  # too many rows to give their loop orders: first those that may join
        per_template = {b: keys for b, (_, _, keys) in zip(wanted, first, strict=True)}
        found = {b: keys.least() for b, keys in per_template.items()}
        bound = CostBound(least, lambda b, energy, latency: cuts[b].keeps_one(energy, latency))
        extra = joinable(wl, groups, tables, found, bound)
        allowed = {
            b: Joinable(extra[b], per_template[b].templates_kept(extra[b], cuts[b])) for b in again
        }
        check.semi_joined = len(again)
        check.keys_dropped = sum(len(found[b]) - len(extra[b]) for b in again)
        redo = run_tasks(jobs, _search_in_worker, [(*args[b], allowed[b]) for b in again])
        made.update({b: table for b, (table, _, _) in zip(again, redo, strict=True)})
        check.templates_searched_again = sum(searched for _, searched, _ in redo)
    for b, (_, searched, _) in zip(wanted, first, strict=True):
        table = made[b]
        assert table is not None
        check.templates_searched += searched
        check.rows_added += len(table)
        if len(table):
            merged = merge_tables(tables[b], table)
            for name in groups[b]:
                tables[name] = merged if name == b else renamed_table(merged, b, name, wl)
    return check


def _energy_cuts(spec, jobs, config, tables, groups, orders, best, check):
    """Energy objective: per table, its cut (allowance), the templates whose floor is
    above it, and the tables with a template within it; per Einsum, the least energy
    (and no latency) its allowance counts it at."""
    bases = sorted(groups)
    least_once = {b: float(tables[b].energy.min()) for b in bases}
    floors, allowance = _floors(spec, jobs, config, tables, least_once, groups, orders, best, check)
    # Floors above a self-bounded table's bound are not exact, nor are its rows complete.
    check.incomplete = any(allowance[b] > tables[b].complete_to for b in bases)
    known = {b: {**tables[b].floors, **floors[b]} for b in bases}
    wanted = [b for b in bases if _may_gain(b, floors[b], tables[b], allowance[b], config)]
    cuts = {b: RowCut("energy", allowance[b]) for b in bases}  # the others already in
    excluded = {b: {k for k, f in known[b].items() if f > allowance[b]} for b in bases}
    least = {n: (e, 0.0) for n, e in _least(floors, least_once, groups).items()}
    return cuts, excluded, wanted, least


def _objective_cuts(objective, config, tables, groups, best, check):
    """Latency and EDP objectives: per table, its cut, the templates whose floors (least
    energy and latency over the whole fused space, exact: the twins ran without a
    ceiling) are outside it, and the tables with a template inside it; per Einsum, the
    least energy and latency its cut counts it at. A hosting template costs no less
    than its unmarked template."""
    bases = sorted(groups)
    floors = {
        b: {k: (f, tables[b].full_floors_latency[k]) for k, f in tables[b].full_floors.items()}
        for b in bases
    }
    low_e, low_l = {}, {}
    for b in bases:
        check.templates_bounded += len(floors[b])
        e = min([float(tables[b].energy.min()), *(f[0] for f in floors[b].values())])
        lat = min([float(tables[b].latency.min()), *(f[1] for f in floors[b].values())])
        for name in groups[b]:
            low_e[name], low_l[name] = e, lat
    total_e, total_l = sum(low_e.values()), sum(low_l.values())
    cuts, excluded, wanted = {}, {}, []
    for b in bases:
        n = groups[b][0]
        rest = (total_e - low_e[n], total_l - low_l[n])
        if isinstance(best, tuple):
            cuts[b] = RowCut(objective, math.inf, *rest, front=best, own_latency=low_l[n])
        else:
            cuts[b] = RowCut(objective, best * (1 - GAIN), *rest, own_latency=low_l[n])
        excluded[b] = {k for k, (e, lat) in floors[b].items() if not cuts[b].keeps(e, lat)}
        if len(excluded[b]) < len(floors[b]) or config.host_loops.get(b):
            wanted.append(b)
    return cuts, excluded, wanted, {n: (low_e[n], low_l[n]) for n in low_e}


def _floors(spec, jobs, config, tables, least_once, groups, orders, best, check):
    """Per table, per template with two prefix gaps or more: a lower bound of its
    energy over the whole fused space, exact where it is at most the allowance; and per
    table, its allowance.

    Branch and bound: the tables come with each template's least energy if at most the
    Einsum's least energy in the default space (above it a template only matters if
    other Einsums can go below theirs); a template with no row under its ceiling gets
    a floor just above it. While some Einsum's allowance is above the ceiling its
    templates were cut at, they run again with the allowance as the ceiling."""
    bases = sorted(groups)
    ceiling = {b: tables[b].full_ceiling for b in bases}
    floors: dict[str, dict[tuple, float]] = {b: {} for b in bases}
    got = {b: tables[b].full_floors for b in bases}
    while True:
        for b, found in got.items():
            check.templates_bounded += len(found)
            above = math.nextafter(ceiling[b], math.inf)  # cut: no row at or under it
            floors[b].update({k: f if math.isfinite(f) else above for k, f in found.items()})
        least = _least(floors, least_once, groups)
        allowance = {b: _allowance(groups[b], least, orders, best) for b in bases}
        todo = {}
        for b in bases:
            cut = [k for k, f in floors[b].items() if f > ceiling[b]]
            if cut and allowance[b] > ceiling[b]:
                ceiling[b] = allowance[b]
                todo[b] = cut
        if not todo:
            return floors, allowance
        names = sorted(todo)
        args = [(spec, b, config, ceiling[b], todo[b]) for b in names]
        got = dict(zip(names, run_tasks(jobs, _floors_in_worker, args), strict=True))


def _may_gain(b, floors, table, allowance: float, config: MapperConfig) -> bool:
    """Whether some template of ``b`` with two prefix gaps or more may have a row within
    ``allowance``: a relaxed floor within it, or (an Einsum that may host) a hosting
    template's floor: its unmarked template's, unknown if the table has no floors."""
    if any(f <= allowance for f in floors.values()):
        return True
    if not config.host_loops.get(b):
        return False
    return not table.floors or any(f <= allowance for f in table.floors.values())


def _least(floors, least_once, groups) -> dict[str, float]:
    """Per Einsum, a lower bound of its least energy over the whole fused space."""
    out = {}
    for b, got in floors.items():
        low = min([least_once[b], *got.values()])
        for name in groups[b]:
            out[name] = low
    return out


def _allowance(names: list[str], least: dict[str, float], orders, best: float) -> float:
    """Most energy a pmapping of one of ``names`` may cost in a mapping of energy below
    ``best`` (the other Einsums at their least)."""
    out = -math.inf
    for order in orders:
        total = sum(least[n] for n in order)
        for n in order:
            if n in names:
                out = max(out, best * (1 - GAIN) - (total - least[n]))
    return out


def _deep(spec: Spec, einsum: str, config: MapperConfig, wl=None, arch=None):
    """The Einsum's templates, and which have two gaps or more in their fused prefix."""
    from ..spec.resolve import resolve_workload

    wl = wl or resolve_workload(spec)
    arch = arch or ArchEvaluator(spec, wl)
    info = wl.einsum(einsum)
    shared, pinned = config.sharing(info, wl)
    temps = templates(info, arch, config, shared=shared, pinned=pinned)
    deep = [_prefix_gaps(t, shared, arch, einsum) >= 2 for t in temps]
    return temps, deep


def relaxed_floors(
    spec: Spec,
    einsum: str,
    config: MapperConfig,
    ceiling: float,
    keys: list[tuple] | None = None,
    wl: WorkloadInfo | None = None,
    arch: ArchEvaluator | None = None,
    store: FrontStore | None = None,
) -> dict[tuple, float]:
    """Per unmarked template with two prefix gaps or more (those of ``keys`` only, if
    given): its least energy over the whole fused space if at most ``ceiling``, else
    +inf. ``store``: the fronts of this Einsum's default search (the nodes below the
    deepest fused node are searched alike)."""
    relaxed = replace(config, fused_loops_once=False, relaxed_prefixes=True)
    temps, deep = _deep(spec, einsum, relaxed, wl, arch)
    wanted = None if keys is None else set(keys)
    chosen = [
        t
        for t, d in zip(temps, deep, strict=True)
        if d and not marked(t) and (wanted is None or template_key(t) in wanted)
    ]
    if not chosen:
        return {}
    table = generate_pmappings(
        spec, einsum, objective="energy", config=relaxed, workload=wl, arch=arch, given=chosen,
        ceiling=ceiling, fronts=store,
    )  # fmt: skip
    return {template_key(t): table.full_floors.get(template_key(t), math.inf) for t in chosen}


def _floors_in_worker(
    spec: Spec,
    einsum: str,
    config: MapperConfig,
    ceiling: float,
    keys: list[tuple] | None,
    lim: limits.Limits | None,
) -> dict[tuple, float]:
    """:func:`relaxed_floors` in a worker (the caller's limits)."""
    with in_worker(lim):
        return relaxed_floors(spec, einsum, config, ceiling, keys)


def _sharing(table: PmappingTable) -> tuple[frozenset[str], dict[str, str]]:
    """The table's shared tensors and the memory backing each when unfused."""
    assert table.fusion is not None, "the check runs with fusion only"
    return table.fusion.shared, table.fusion.top


def _chosen(spec: Spec, einsum: str, full: MapperConfig, excluded: set[tuple]) -> list[Template]:
    """The templates with two prefix gaps or more not ``excluded`` by their floor (a
    hosting template: by its unmarked template's)."""
    temps, deep = _deep(spec, einsum, full)
    chosen = []
    for t, d in zip(temps, deep, strict=True):
        key = base_key(t) if marked(t) else template_key(t)
        if d and key not in excluded:
            chosen.append(t)
    return chosen


def _searched(spec, einsum, full, chosen, cut: RowCut, useful) -> PmappingTable:
    """The table of the ``chosen`` templates' rows ``useful`` keeps, over the whole
    fused space."""
    objective = "energy" if cut.objective == "energy" else "all"
    return generate_pmappings(
        spec, einsum, objective=objective, config=full, given=chosen,
        ceiling=cut.energy_ceiling(), useful=useful,
    )  # fmt: skip


def _search_in_worker(
    spec: Spec,
    einsum: str,
    full: MapperConfig,
    cut: RowCut,
    excluded: set[tuple],
    sharing: tuple[frozenset[str], dict[str, str]],
    allowed: Joinable | None,
    lim: limits.Limits | None,
) -> tuple[PmappingTable | None, int, KeysFound]:
    """The pmappings ``cut`` keeps of the templates with two prefix gaps or more not
    ``excluded`` by their floor, over the whole fused space; how many templates that
    was; and (first search, ``allowed`` None) the rows' order-free keys per template.
    The table is None when the first search found too many rows (:class:`FirstSearch`);
    searched again, only the templates and the rows ``allowed`` names."""
    with in_worker(lim):
        chosen = _chosen(spec, einsum, full, excluded)
        if allowed is not None:
            chosen = [t for t in chosen if template_key(t) in allowed.templates]
        if not chosen:
            return empty_table(einsum), len(chosen), KeysFound()
        if allowed is not None:
            useful = JoinableRows(cut, sharing, allowed.extra)
            return _searched(spec, einsum, full, chosen, cut, useful), len(chosen), KeysFound()
        first = FirstSearch(cut, sharing, SEMI_JOIN_ROWS)
        table = _searched(spec, einsum, full, chosen, cut, first)
        return (None if first.tripped else table), len(chosen), first.found
