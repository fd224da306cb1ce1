"""Hosting templates tiled only when a capped join may need them (energy objective).

An Einsum that may host a tensor held tiled has each of its templates again with a
virtual hosting holder at every place (`space._with_hosting`): on GPT-3, Q has 15,200
templates instead of 3,200, and they took most of the mapper's time. But a marked
template's pmappings never cost less energy than the template without the mark: drop
the mark from any of its LoopTrees and you get a tree of the unmarked template with the
same tile shapes, hence the same counts and energy (no count depends on loop order), no
larger reservation (a merged gap only lowers the node above it further), the same fanout
use; loops left between two backing nodes of an unbounded memory move below the second
one and change nothing. So the unmarked template's least energy (its *floor*) bounds
the marked one's from below, and a capped join (`docs/ffm.md`, "Capped joins") with cap
``U`` can use a pmapping of Einsum ``e`` only if its energy is at most ``U`` less the
least energies of the other Einsums: a marked template whose floor is above that
allowance has no row the join would keep. `map_workload` first tiles every unmarked
template (the least energies, hence the lower bound, are then exact: marked rows cost
no less), then, before each capped join, the marked templates within its allowance, and
all of them before the unbounded join.

Latency and EDP objectives alike: the LoopTree without the mark has the same counts,
hence the same latency, so the unmarked template's least energy *and* least latency
bound the marked one's from below, and a marked template is tiled when, completed with
the other Einsums' least energy and latency, those floors are within the cap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from ..spec import limits
from ..spec.resolve import WorkloadInfo
from ..spec.spec import Spec
from .distinct import sorted_distinct
from .join.bound import Bound
from .pmappings.generate import generate_pmappings
from .pmappings.table import PmappingTable
from .space.config import MapperConfig
from .space.prefix import HOSTING
from .space.templates import Template, template_key
from .workers import in_worker, run_tasks


def base_key(t: Template) -> tuple:
    """The key of ``t`` without its hosting holder."""
    return unmarked_key(template_key(t))


def unmarked_key(key: tuple) -> tuple:
    """A template key (:func:`template_key`) without its hosting holder."""
    compute, holders, spatial = key
    return (compute, tuple(h for h in holders if not (h[4] and h[0] == HOSTING)), spatial)


@dataclass
class DeferredHosting:
    """The marked templates not tiled yet, per table (first Einsum of its group)."""

    spec: Spec
    wl: WorkloadInfo
    jobs: int
    objective: str = "energy"  # energy | latency | edp (what the caps bound)
    config: MapperConfig | None = None  # set by generate_tables (with the fusion plan)
    groups: dict[str, list[str]] = field(default_factory=dict)
    """Set by generate_tables: table's Einsum -> every Einsum using it (renamed)."""
    pending: dict[str, list[tuple[float, float, int]]] = field(default_factory=dict)
    """Per table: (energy floor, latency floor, place in ``left``) of its marked templates
    not tiled, by energy floor."""
    left: dict[str, list[Template]] = field(default_factory=dict)
    """Per table: the marked templates it left out, in the order they were made."""
    cut: bool = False
    """Tile them only up to each table's allowance (tables near each Einsum's least,
    ``ffm.SELF_BOUND``, or up to a mapping found: no join of theirs has a higher cap; if
    they fall short, they are all made again, wider or complete). Each table's
    :attr:`PmappingTable.complete_to` says so."""

    def add(self, einsum: str, table: PmappingTable) -> None:
        """Record the marked templates ``table`` left out, each with its unmarked
        template's floor."""
        floors, latency = table.floors, table.floors_latency
        todo = [
            (floors.get(base_key(t), -math.inf), latency.get(base_key(t), -math.inf), k)
            for k, t in enumerate(table.skipped)
        ]
        if todo:
            self.pending[einsum] = sorted(todo, key=lambda x: x[0])
            self.left[einsum] = table.skipped

    def extend(self, tables: dict[str, PmappingTable], cap: float, orders: list[list[str]]):
        """Tile, and add to ``tables``, the marked templates a join capped at ``cap``
        may use: all of them when ``cap`` is infinite. Returns the number of templates
        tiled."""
        wanted: dict[str, list[Template]] = {}
        allowed: dict[str, float] = {}
        for base, todo in self.pending.items():
            if self.objective == "energy":
                allow = allowed[base] = self._allowance(base, tables, cap, orders)
                within = [f <= allow for f, _, _ in todo]
            else:
                allowed[base] = math.inf
                within = self._within(base, tables, cap, orders, todo)
            take = [k for (_, _, k), w in zip(todo, within, strict=True) if w]
            if take:  # in the order the templates were made (the table's row order)
                wanted[base] = [self.left[base][k] for k in sorted(take)]
                self.pending[base] = [x for x, w in zip(todo, within, strict=True) if not w]
        if not wanted:
            return 0
        ceilings = {b: allowed[b] if self.cut else math.inf for b in wanted}
        made = self._generate(wanted, ceilings)
        for base, extra in made.items():
            merged = merge_tables(tables[base], extra)
            merged.complete_to = min(merged.complete_to, ceilings[base])
            for name in self.groups[base]:
                tables[name] = (
                    merged if name == base else renamed_table(merged, base, name, self.wl)
                )
        return sum(len(w) for w in wanted.values())

    def _allowance(self, base: str, tables, cap: float, orders) -> float:
        """Most energy a pmapping of ``base`` (or its renamed copies) may cost in a
        mapping of energy at most ``cap``."""
        if not math.isfinite(cap):
            return math.inf
        out = -math.inf
        for order in orders:
            bound = Bound.of("energy", cap, order, tables)
            for j, name in enumerate(order):
                if name in self.groups[base]:
                    out = max(out, bound.energy_allowance(j))
        return out

    def _within(self, base: str, tables, cap: float, orders, todo) -> list[bool]:
        """Latency and EDP: which pending templates of ``base`` may have a row in a
        mapping within ``cap``: their floors, completed with the least energy and latency
        of the other Einsums of some order, within it."""
        if not math.isfinite(cap):
            return [True] * len(todo)
        energy = np.array([f for f, _, _ in todo])
        latency = np.array([lat for _, lat, _ in todo])
        out = np.zeros(len(todo), dtype=bool)
        for order in orders:
            bound = Bound.of(self.objective, cap, order, tables)
            for j, name in enumerate(order):
                if name in self.groups[base]:
                    rest_e, rest_l = bound.rest_around(j)
                    value = bound.objective_of(energy + rest_e, latency + rest_l)
                    out |= value <= cap * (1 + 1e-9)
        return out.tolist()

    def _generate(
        self, wanted: dict[str, list[Template]], ceilings: dict[str, float]
    ) -> dict[str, PmappingTable]:
        names = sorted(wanted)
        assert self.config is not None, "generate_tables sets the config"
        objective = "energy" if self.objective == "energy" else "all"
        args = [(self.spec, n, self.config, wanted[n], ceilings[n], objective) for n in names]
        done = run_tasks(self.jobs, _marked_in_worker, args)
        return dict(zip(names, done, strict=True))


def _marked_in_worker(
    spec: Spec,
    einsum: str,
    config: MapperConfig,
    temps: list[Template],
    ceiling: float,
    objective: str,
    lim: limits.Limits | None,
) -> PmappingTable:
    """The pmappings of the templates ``temps`` of energy at most ``ceiling``, searched
    for ``objective`` (in a worker, ``lim`` given: the caller's limits)."""
    with in_worker(lim):
        return generate_pmappings(
            spec, einsum, objective=objective, config=config, given=temps, ceiling=ceiling
        )


def renamed_table(table: PmappingTable, base: str, name: str, wl: WorkloadInfo) -> PmappingTable:
    """``table`` (of ``base``) as the table of ``name``, an Einsum equal up to names."""
    from .pmappings.signature import tensor_renaming, variable_renaming

    a, b = wl.einsum(base), wl.einsum(name)
    return table.renamed(name, tensor_renaming(a, b), variable_renaming(a, b))


def merge_tables(a: PmappingTable, b: PmappingTable) -> PmappingTable:
    """The rows of ``a``, then those of ``b`` (same Einsum, other templates): ``b``'s
    prefixes are interned again in ``a``'s interner."""
    if len(b) == 0:
        return a
    if len(a) == 0:
        return b
    fa, fb = a.fusion, b.fusion
    assert fa is not None and fb is not None
    ids = np.zeros(len(fb.interner.prefixes), dtype=np.int64)
    seqs = [fb.seq] + [r.seq for r in b.results if r.seq is not None]
    used = sorted_distinct(np.concatenate(seqs))  # the prefixes ``b`` still has
    ids[used] = fb.interner.copied_into(used, fa.interner)
    results = [r if r.seq is None else replace(r, seq=ids[r.seq]) for r in b.results]
    memories = sorted(set(fa.buckets) | set(fb.buckets))
    width = {m: max(f.buckets[m].shape[1] for f in (fa, fb) if m in f.buckets) for m in memories}

    def buckets(t: PmappingTable, m: str) -> np.ndarray:
        assert t.fusion is not None
        got = t.fusion.buckets.get(m)
        if got is None:
            return np.zeros((len(t), width[m]))
        assert got.shape[1] == width[m], "tables of one Einsum share the bucket layout"
        return got

    stats = replace(
        a.stats,
        templates=a.stats.templates + b.stats.templates,
        pareto=len(a) + len(b),
        seconds=a.stats.seconds + b.stats.seconds,
        peak_mb=max(a.stats.peak_mb, b.stats.peak_mb),
    )
    cat = np.concatenate
    return replace(
        a,
        results=list(a.results) + results,  # their prefixes are ``a``'s interner's
        template=cat([a.template, b.template + len(a.results)]),
        row=cat([a.row, b.row]),
        energy=cat([a.energy, b.energy]),
        latency=cat([a.latency, b.latency]),
        reservations={
            m: cat([t.reservations.get(m, np.zeros(len(t))) for t in (a, b)])
            for m in sorted(set(a.reservations) | set(b.reservations))
        },
        latency_counts={
            m: cat([t.latency_counts.get(m, np.zeros(len(t))) for t in (a, b)])
            for m in sorted(set(a.latency_counts) | set(b.latency_counts))
        },
        stats=stats,
        fusion=replace(
            fa,
            seq=cat([fa.seq, ids[fb.seq]]),
            buckets={m: cat([buckets(a, m), buckets(b, m)]) for m in memories},
        ),
    )
