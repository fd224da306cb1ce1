"""The mapper prices extended-Einsum operators as the model does (the model's rules are
in ``tests/unit/model/test_operators.py``)."""

from __future__ import annotations

import pytest

from fusemap.mapper.one_einsum import best_pmapping
from tests.support.model_helpers import load
from tests.unit.model.test_operators import alu, counts, elementwise, plain_mapping


@pytest.mark.parametrize("objective", ["energy", "latency"])
def test_mapper_scores_operator_costs_like_the_model(tmp_path, objective):
    ops = {"exp_difference": {"compute": 6, "add": 1}}
    spec = load(tmp_path, alu(ops), elementwise("exp_difference"), plain_mapping("A", "B", "Z"))
    table, _, result = best_pmapping(spec, "Z", objective)
    row = table.best(objective)
    assert counts(result) == {"compute": 36, "add": 6}
    assert table.energy[row] == pytest.approx(result.energy, rel=1e-9)
    assert table.latency[row] == pytest.approx(result.latency, rel=1e-9)
