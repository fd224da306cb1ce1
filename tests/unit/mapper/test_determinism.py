"""Same inputs, same answer, whatever the number of pmapping workers."""

from __future__ import annotations

import pytest

from fusemap.examples import example_path
from fusemap.mapper.ffm import map_workload
from fusemap.spec.spec import load_spec


@pytest.mark.parametrize(
    ("arch", "variables"),
    [
        pytest.param(
            "tiny",
            {"N": 4, "M": 8, "SIZES": [8, 8, 8, 8], "BUF": 2},
            id="tiny arch",
            marks=pytest.mark.slow,  # starting the worker takes seconds
        ),
        pytest.param(
            "arch.yaml",
            {"N": 4, "M": 16, "SIZES": [8, 16, 4, 8, 16]},
            id="arch.yaml",
            marks=pytest.mark.slow,
        ),
    ],
)
def test_workers_do_not_change_the_mapping(arch, variables, tiny_arch_file):
    arch_file = tiny_arch_file if arch == "tiny" else example_path("arch.yaml")
    spec = load_spec(arch_file, example_path("matmul_chain.yaml"), variables=variables)
    one = map_workload(spec, "energy", jobs=1)
    two = map_workload(spec, "energy", jobs=2)
    assert one.statistics.distinct_einsums > 1  # so the two workers really share work
    assert two.best.mapping.to_yaml() == one.best.mapping.to_yaml()
    assert two.best.result.energy == one.best.result.energy
    assert two.best.result.latency == one.best.result.latency
    assert two.statistics.pmappings == one.statistics.pmappings
    # Workers report their own peak memory (a finished-children figure would miss them,
    # leaving the 0 a table starts with); how much is the machine's, not asserted.
    assert two.statistics.peak_mb > 0 and one.statistics.peak_mb > 0
