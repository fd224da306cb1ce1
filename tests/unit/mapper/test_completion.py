"""The relaxed join (mapper/completion.py): least objectives before and after each step.

Checked against a hand-computed case and against a brute force over every combination
of rows of small random tables whose rows agree on every tensor they share (the only
rule the relaxation keeps; on such tables it is exact, so the brute force must equal
it, not merely bound it). Real tables: every complete mapping the unbounded join finds
costs, from every step on, at least what the relaxation says.
"""

from __future__ import annotations

import copy as copy_module
import itertools
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fusemap.examples import example_path
from fusemap.mapper import caps, ffm
from fusemap.mapper.join import completion
from fusemap.mapper.join.completion import live_key, prefix_compat, relaxed
from fusemap.mapper.join.ffm_join import join
from fusemap.mapper.space.prefix import Compatibility
from fusemap.spec.spec import load_spec


class _Interner:
    def __init__(self, compats):
        self.compats = compats

    def compatibility(self, seq, shared, top):
        return self.compats[seq]


def _table(tensors, rows):
    """A stand-in table: ``rows`` = [(energy, latency, {tensor: backing})]; each row its
    own prefix."""
    compats = [
        tuple(Compatibility(t, where[t], ()) for t in sorted(tensors)) for _, _, where in rows
    ]
    fusion = SimpleNamespace(
        seq=np.arange(len(rows)), shared=frozenset(tensors), top={},
        interner=_Interner(compats),
    )  # fmt: skip
    return SimpleNamespace(
        energy=np.array([r[0] for r in rows], dtype=float),
        latency=np.array([r[1] for r in rows], dtype=float),
        fusion=fusion,
    )


def _workload(uses: dict[str, list[str]]):
    tensors = {t for ts in uses.values() for t in ts}
    return SimpleNamespace(
        einsum=lambda n: SimpleNamespace(tensors=uses[n]), tensors={t: None for t in tensors}
    )


def test_two_einsums_by_hand():
    # E0 writes T, E1 reads it. E0 is cheapest with T in X, E1 with T in Y.
    wl = _workload({"E0": ["T"], "E1": ["T"]})
    tables = {
        "E0": _table(["T"], [(1, 5, {"T": "X"}), (5, 1, {"T": "Y"})]),
        "E1": _table(["T"], [(10, 1, {"T": "X"}), (2, 7, {"T": "Y"})]),
    }
    c = relaxed(["E0", "E1"], tables, wl)
    assert c is not None
    # Energy: min(1 + 10, 5 + 2) = 7, not 1 + 2. Latency: min(5 + 1, 1 + 7) = 6.
    assert list(c.lowest) == [7.0, 6.0]
    # Around each row of E0: the least of E1 with the same T.
    assert c.around[0].tolist() == [[10.0, 1.0], [2.0, 7.0]]
    assert c.around[1].tolist() == [[1.0, 5.0], [5.0, 1.0]]
    y = (Compatibility("T", "Y", ()),)
    assert list(c.rest(1, y)) == [2.0, 7.0]
    assert list(c.rest(2, ())) == [0.0, 0.0]


def test_rows_left_out_give_no_completion():
    wl = _workload({"E0": ["T"], "E1": ["T"]})
    tables = {
        "E0": _table(["T"], [(1, 5, {"T": "X"}), (5, 1, {"T": "Y"})]),
        "E1": _table(["T"], [(10, 1, {"T": "X"}), (2, 7, {"T": "Y"})]),
    }
    # Without E1's row with T in Y, the least is 1 + 10, and E0's row with T in Y has
    # no completion.
    rows = [np.array([True, True]), np.array([True, False])]
    c = relaxed(["E0", "E1"], tables, wl, rows)
    assert c is not None
    assert list(c.lowest) == [11.0, 6.0]
    assert c.around[0][0].tolist() == [10.0, 1.0]
    assert np.isinf(c.around[0][1]).all() and np.isinf(c.around[1][1]).all()


def test_a_state_with_no_completion_has_none():
    wl = _workload({"E0": ["T"], "E1": ["T"]})
    tables = {
        "E0": _table(["T"], [(1, 1, {"T": "X"}), (2, 2, {"T": "Z"})]),
        "E1": _table(["T"], [(3, 3, {"T": "X"})]),
    }
    c = relaxed(["E0", "E1"], tables, wl)
    assert c is not None
    assert np.isinf(c.around[0][1]).all()  # E0's row keeping T in Z: nothing takes it
    assert np.isinf(c.rest(1, (Compatibility("T", "Z", ()),))).all()


def test_too_many_pairs_give_no_bound(monkeypatch):
    wl = _workload({"E0": ["T"], "E1": ["T"]})
    row = [(1, 1, {"T": "X"})]
    monkeypatch.setattr(completion, "EDGE_LIMIT", 0)
    assert relaxed(["E0", "E1"], {"E0": _table(["T"], row), "E1": _table(["T"], row)}, wl) is None


SHAPES = {
    "chain": {"E0": ["A"], "E1": ["A", "B"], "E2": ["B", "C"], "E3": ["C"]},
    "fork": {"E0": ["A"], "E1": ["A", "B"], "E2": ["A", "B"]},
    "skip": {"E0": ["A", "B"], "E1": ["B"], "E2": ["A"]},
}


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(sorted(SHAPES)), st.data())
def test_the_relaxation_equals_the_brute_force(shape, data):
    uses = SHAPES[shape]
    order = list(uses)
    places = st.sampled_from(["X", "Y", "Z"])
    value = st.integers(1, 20)
    tables = {}
    for name in order:
        rows = data.draw(
            st.lists(st.tuples(value, value, st.fixed_dictionaries({t: places for t in uses[name]})),
                     min_size=1, max_size=4)
        )  # fmt: skip
        tables[name] = _table(uses[name], rows)
    c = relaxed(order, tables, _workload(uses))
    assert c is not None
    best = np.full(2, np.inf)
    around = {
        (j, r): np.full(2, np.inf)
        for j, n in enumerate(order)
        for r in range(len(tables[n].energy))
    }
    for combo in itertools.product(*(range(len(tables[n].energy)) for n in order)):
        seen: dict[str, str] = {}
        ok = True
        for n, r in zip(order, combo, strict=True):
            for comp in tables[n].fusion.interner.compats[r]:
                if seen.setdefault(comp.tensor, comp.backing) != comp.backing:
                    ok = False
        if not ok:
            continue
        e = [tables[n].energy[r] for n, r in zip(order, combo, strict=True)]
        lat = [tables[n].latency[r] for n, r in zip(order, combo, strict=True)]
        best = np.minimum(best, [sum(e), sum(lat)])
        for j, r in enumerate(combo):
            rest = np.array([sum(e) - e[j], sum(lat) - lat[j]])
            around[j, r] = np.minimum(around[j, r], rest)
    assert list(c.lowest) == list(best)
    for (j, r), want in around.items():
        assert list(c.around[j][r]) == list(want)


@pytest.mark.slow
@pytest.mark.parametrize("kib", [0.25, 0.5])
def test_every_mapping_costs_at_least_the_relaxed_rest(kib, monkeypatch):
    spec = load_spec(
        example_path("arch.yaml"), example_path("matmul_chain.yaml"),
        variables={"N": 4, "M": 8, "SIZES": [16, 8, 4, 8], "BUFFER_KIB": kib},
    )  # fmt: skip
    calls = []

    def recorded(order, tables, wl, *args, **kw):
        out = join(order, tables, wl, *args, **kw)
        calls.append((order, dict(tables), wl, out))
        return out

    monkeypatch.setattr(caps, "join", recorded)
    ffm.map_workload(spec, "pareto")  # unbounded: every mapping on the front
    checked = 0
    for order, tables, wl, joined in calls:
        c = relaxed(order, tables, wl)
        assert c is not None
        accessors = {t: [i for i, e in enumerate(order) if t in wl.einsum(e).tensors]
                     for t in wl.tensors}  # fmt: skip
        for picks in joined.picks:
            key: tuple = ()
            rows = [(tables[n], int(r)) for n, r in zip(order, picks, strict=True)]
            for j, (table, r) in enumerate(rows):
                rest_e = sum(t.energy[q] for t, q in rows[j:])
                rest_l = sum(t.latency[q] for t, q in rows[j:])
                low = c.rest(j, key)
                assert rest_e >= low[0] * (1 - 1e-12) and rest_l >= low[1] * (1 - 1e-12)
                compat = {x.tensor: x for x in prefix_compat(table, int(table.fusion.seq[r]))}
                key = live_key({x.tensor: x for x in key}, compat, j, accessors)
            assert key == ()
            checked += 1
    assert checked > 1


def test_renamed_tables_give_what_their_own_prefixes_give(renamed_chain_join):
    # Identical matmuls share one table, renamed (``renamed_from``): the relaxation reads
    # the first table's compatibilities and renames them. Without that link it reads
    # every renamed prefix; both must agree.
    order, tables, wl = renamed_chain_join
    assert any("renamed_from" in t.__dict__ for t in tables.values())
    linked = relaxed(order, tables, wl)
    alone = {}
    for name, t in tables.items():
        copy = copy_module.copy(t)
        copy.__dict__.pop("renamed_from", None)
        copy.__dict__.pop("_prefix_codes", None)
        alone[name] = copy
    plain = relaxed(order, alone, wl)
    assert linked is not None and plain is not None
    assert linked.lowest == plain.lowest
    for a, b in zip(linked.around, plain.around, strict=True):
        assert np.array_equal(a, b)
