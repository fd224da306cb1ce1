"""Pruning across templates while the search goes on (``pmappings/ordered.py``,
``PrunedAsFinished``): the tables are those of one prune at the end, row for row and in
order (template, trail, prefix, costs), with the same floors, though rows were dropped
on the way (the search holds fewer)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from fusemap.mapper.pmappings import ordered
from fusemap.mapper.pmappings.generate import generate_pmappings
from fusemap.mapper.space.config import config_from_spec
from fusemap.mapper.space.templates import template_key
from fusemap.mapper.tiling import search
from fusemap.spec.resolve import resolve_workload
from tests.support.ffm_cases import ffm_case

CASES = [(1, False, False), (2, True, False), (3, False, True), (5, True, True)]
"""(seed, fanout, on_chip) of :func:`ffm_case`."""


def _fingerprint(table) -> list:
    """A table's rows in order: template, trail, prefix, energy, latency, reservations;
    then its floors."""
    prefixes = table.fusion.interner.prefixes
    rows = []
    for i in range(len(table)):
        result = table.results[int(table.template[i])]
        row = int(table.row[i])
        trail = [(a.tolist(), b.tolist()) for a, b in result.trail(row)]
        res = [float(table.reservations[m][i]) for m in sorted(table.reservations)]
        prefix = repr(prefixes[int(table.fusion.seq[i])])
        rows.append(
            (template_key(result.template), trail, prefix, float(table.energy[i]),
             float(table.latency[i]), res)
        )  # fmt: skip
    floors = (table.floors, table.floors_latency, table.full_floors, table.complete_to)
    return [rows, repr(floors)]


def _tables(spec, objective: str) -> list:
    config = replace(config_from_spec(spec), fusion=True)
    return [
        _fingerprint(
            generate_pmappings(
                spec,
                e.name,
                objective=objective,
                config=config,
                with_floors=True,
                full_floors=True,
            )  # fmt: skip
        )
        for e in resolve_workload(spec).einsums
    ]


@pytest.mark.parametrize("objective", ["energy", "all"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"seed{c[0]}-fanout{c[1]}-chip{c[2]}")
def test_pruning_as_templates_finish_leaves_the_tables(case, objective, tmp_path, monkeypatch):
    seed, fanout, on_chip = case
    spec = ffm_case(seed, tmp_path, fanout=fanout, on_chip=on_chip)
    want = _tables(spec, objective)  # one prune at the end (cases too small for more)
    dropped = []
    real = ordered.PrunedAsFinished.prune

    def spy(self, tilers, out):
        before = sum(r.rows for r in out if r is not None)
        held = real(self, tilers, out)
        dropped.append(before - sum(r.rows for r in out if r is not None))
        return held

    monkeypatch.setattr(ordered, "PRUNE_FROM_ROWS", 1)  # after every template
    monkeypatch.setattr(ordered.PrunedAsFinished, "prune", spy)
    got = _tables(spec, objective)
    assert got == want
    assert dropped and sum(dropped) > 0  # rows went on the way


@pytest.mark.parametrize("every", [1, None])
@pytest.mark.parametrize("case", CASES[:2], ids=lambda c: f"seed{c[0]}-fanout{c[1]}")
def test_rows_of_use_picked_as_templates_finish_are_those_of_the_whole_table(
    case, every, tmp_path, monkeypatch
):
    """A ``useful`` filter deciding per prefix and on energy (a row dominating a kept
    one is kept), shown each result once as it finishes: the table is the whole table's
    rows it keeps, in order (with the prune as templates finish, ``every`` 1, or not)."""
    seed, fanout, on_chip = case
    spec = ffm_case(seed, tmp_path, fanout=fanout, on_chip=on_chip)
    config = replace(config_from_spec(spec), fusion=True)
    if every is not None:
        monkeypatch.setattr(ordered, "PRUNE_FROM_ROWS", every)
    for e in resolve_workload(spec).einsums:
        whole = generate_pmappings(spec, e.name, objective="all", config=config)
        limit = float(np.median(whole.energy))
        shown = []

        def useful(result, interner, limit=limit, shown=shown):
            assert not getattr(result, "shown", False)  # each result once
            result.shown = True
            shown.append(result.rows)
            return (interner.loop_counts(result.seq) >= 1) & (result.energy <= limit)

        table = generate_pmappings(spec, e.name, objective="all", config=config, useful=useful)
        loops = whole.fusion.interner.loop_counts(whole.fusion.seq)
        wanted = (loops >= 1) & (whole.energy <= limit)
        kept = [r for r, k in zip(_fingerprint(whole)[0], wanted, strict=True) if k]
        assert _fingerprint(table)[0] == kept, e.name
        assert shown
        assert 0 < len(kept) < len(whole)


def test_each_templates_orders_are_worked_out_once(tmp_path, monkeypatch):
    """A prune starts from the orders the last one held: a result it left as it is is
    not ordered again (only those of templates that fuse and hold nothing, never cut,
    are), and the tables stay those of one prune at the end (the test above)."""
    spec = ffm_case(2, tmp_path, fanout=True, on_chip=False)
    fresh: dict[int, int] = {}
    reused = []
    real_of, real = ordered.PrunedAsFinished.ordered_of, ordered.Ordering.ordered
    calls = []

    def spy_of(self, results, tilers):
        calls.append(tilers)
        return real_of(self, results, tilers)

    def spy(self, results, contexts, counter, done=None):
        for t, d in zip(calls[-1], done, strict=True):
            if d is None and not search.alone_with_nothing_held(t):
                fresh[id(t)] = fresh.get(id(t), 0) + 1
            reused.append(d is not None)
        return real(self, results, contexts, counter, done)

    monkeypatch.setattr(ordered, "PRUNE_FROM_ROWS", 1)
    monkeypatch.setattr(ordered.PrunedAsFinished, "ordered_of", spy_of)
    monkeypatch.setattr(ordered.Ordering, "ordered", spy)
    _tables(spec, "all")
    assert fresh and max(fresh.values()) == 1
    assert sum(reused) > len(fresh)
