"""The join tracks every bounded memory that may back a fused tensor, even when the top
memory may not keep intermediates at all (``may_keep: ~Intermediates``).

Until 2026-11-25 the join took the first memory that may back a shared tensor for the
top memory: with DRAM unable to keep T1 and T2, GB was their only choice and the join
tracked no memory. Here (m=2, n0=2, n1=4, GB of 48 bits) it then paired E0 and E1's
whole copy of T0 (32 bits, live under the loop over n1 that all three Einsums share)
with T1's and T2's tiles (16 bits each): 64 bits, and the model refused the mapping
("GB overflows").
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from fusemap.mapper.ffm import map_workload
from fusemap.mapper.space.config import config_from_spec
from fusemap.mapper.space.templates import join_memories
from fusemap.spec.arch_eval import ArchEvaluator
from fusemap.spec.resolve import resolve_workload
from fusemap.spec.spec import load_spec
from tests.support.model_helpers import (
    access,
    arch,
    chain_matmul,
    compute_unit,
    einsum,
    memory,
    to_yaml,
    usage_bits,
    workload,
)

GB_BITS = 48


def _spec(tmp_path):
    nodes = arch(
        memory("DRAM", "inf", 50, 50,
               tensors={"keep": "~Intermediates", "may_keep": "~Intermediates"}),
        memory("GB", GB_BITS, 2, 2, tensors={"may_keep": "All"}),
        compute_unit("MAC", 1, throughput=1),
    )  # fmt: skip
    wl = workload(
        {"m": 2, "n0": 2, "n1": 4},
        chain_matmul("E0", "T0", "W0", "T1", "n0", "n1"),
        chain_matmul("E1", "T0", "W1", "T2", "n0", "n1"),
        einsum("E2", access("T1", ["m", "n1"]), access("T2", ["m", "n1"]),
               access("T3", ["m", "n1"], output=True)),
    )  # fmt: skip
    path = tmp_path / "spec.yaml"
    path.write_text(to_yaml({**nodes, **wl, "mapper": {"imperfect": False}}))
    return load_spec(path)


def test_a_buffer_that_alone_may_keep_intermediates_is_tracked(tmp_path):
    spec = _spec(tmp_path)
    wl = resolve_workload(spec)
    config = replace(config_from_spec(spec), fusion=True)
    assert join_memories(wl, ArchEvaluator(spec, wl), config) == frozenset({"GB"})


@pytest.mark.parametrize("objective", ["energy", "latency", "edp"])
def test_the_mapping_found_fits(objective, tmp_path):
    out = map_workload(_spec(tmp_path), objective)  # raised "GB overflows" before
    assert usage_bits(out.best.result, "GB") <= GB_BITS
