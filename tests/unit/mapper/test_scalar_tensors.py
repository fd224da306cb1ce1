"""Tensors of no rank (scalars, e.g. a dot product's result, FuseMax's cascade 1) and
Einsums of no rank variable: the mapper sizes a scalar as one value per tile shape, and
maps workloads that exchange them.

The mapper once sized a scalar as one value for all tile shapes and stopped with an
internal error on any workload with a scalar output (``fusemap map`` on
``examples/attention/cascade1.yaml``), and on an Einsum of no rank variable. The LoopTree oracle checks the optima on the
same shape (``tests/oracles/test_looptree_oracle.py``, ``scalar`` cases)."""

from __future__ import annotations

import numpy as np
import pytest

from fusemap.mapper.ffm import map_workload
from fusemap.mapper.tiling.terms import box_array
from fusemap.model.evaluate import evaluate_mapping
from tests.support.oracle_cases import case_spec


def test_a_scalar_is_one_value_per_row():
    sizes = {"k": np.array([1, 2, 4]), "n": np.array([3, 3, 3])}
    assert box_array([], sizes).tolist() == [1.0, 1.0, 1.0]
    assert box_array([[("k", 1)]], sizes).tolist() == [1.0, 2.0, 4.0]  # a vector, by hand


@pytest.mark.parametrize("shape", ["scalar", "sum_all", "scalar_chain"])
@pytest.mark.parametrize("objective", ["energy", "edp"])
def test_a_workload_exchanging_a_scalar_maps(shape, objective, tmp_path):
    spec, _ = case_spec(0, tmp_path, shape)
    got = map_workload(spec, objective).best
    again = evaluate_mapping(spec, got.mapping)
    assert again.energy == pytest.approx(got.result.energy, rel=1e-9)
    assert again.latency == pytest.approx(got.result.latency, rel=1e-9)
