"""Tables of the rows near each Einsum's least energy (``ffm.SELF_BOUND``): complete up
to their bound, and the mapper's answer with them the same as with complete tables."""

from __future__ import annotations

import numpy as np
import pytest

from fusemap.examples import example_path
from fusemap.mapper import ffm
from fusemap.mapper.dependencies import FusionRules
from fusemap.mapper.plan import fusion_plan
from fusemap.mapper.tables import generate_tables
from fusemap.spec.arch_eval import ArchEvaluator
from fusemap.spec.resolve import resolve_workload
from fusemap.spec.spec import load_spec
from test_ffm_bruteforce import _case

MARGIN = 0.3
"""Wide, so that many rows lie between the least and the bound."""


def _chain(kib: float, n: int = 3):
    sizes = [8, 16, 8, 16][:n]
    return load_spec(
        example_path("arch.yaml"), example_path("matmul_chain.yaml"),
        variables={"N": n, "M": 8, "SIZES": sizes, "BUFFER_KIB": kib},
    )  # fmt: skip


def _tables(spec, self_bound):
    wl = resolve_workload(spec)
    arch = ArchEvaluator(spec, wl)
    plan = fusion_plan(wl, ffm._orders(wl, "given", 720, FusionRules.of(wl)))
    stats = ffm.MapStatistics()
    return generate_tables(
        spec, wl, arch, "energy", 1, None, stats, plan, None, True, self_bound=self_bound
    )


@pytest.mark.parametrize(
    "make", [lambda t: _chain(0.25), lambda t: _chain(0.5, 4), lambda t: _case(3, t)]
)
def test_a_self_bounded_table_holds_every_row_up_to_its_bound(make, tmp_path):
    """Row for row (energy, latency), the complete table's rows up to the bound are the
    self-bounded table's; the bound is at least the least energy times 1 + the margin,
    and the search did leave rows out (else the test would test nothing)."""
    spec = make(tmp_path)
    full = _tables(spec, None)
    cut = _tables(spec, MARGIN)
    left_out = 0
    for name, whole in full.items():
        part = cut[name]
        bound = part.complete_to
        least = float(whole.energy.min())
        assert float(part.energy.min()) == least
        assert bound >= least * (1 + MARGIN) * (1 - 1e-12)
        assert np.isinf(whole.complete_to)

        def rows(t, bound=bound):
            keep = t.energy <= bound
            return np.array(sorted(zip(t.energy[keep], t.latency[keep], strict=True)))

        got, want = rows(part), rows(whole)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-12)
        left_out += len(whole) - len(part)
    assert left_out > 0


@pytest.mark.parametrize(
    ("make", "enough"),
    [
        (lambda t: _chain(4.0), True),  # every Einsum at its least: the first tables do
        (lambda t: _case(0, t), False),  # the leasts do not fit together
        (lambda t: _case(5, t), None),
        (lambda t: _case(7, t, on_chip=True), None),
    ],
)
def test_the_answer_does_not_depend_on_the_self_bound(make, enough, tmp_path, monkeypatch):
    spec = make(tmp_path)
    first = ffm.map_workload(spec, "energy")
    if enough is not None:
        assert first.statistics.self_bounded is enough
    monkeypatch.setattr(ffm, "SELF_BOUND", None)
    complete = ffm.map_workload(spec, "energy")
    assert complete.statistics.self_bounded is None
    assert first.best.result.energy == pytest.approx(complete.best.result.energy, rel=1e-12)
