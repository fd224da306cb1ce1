"""Spatial fusion: fused Einsums share the spatial loops above a fused tensor.

The only buffer that may keep the intermediate T1 is one of 4 instances (a spatial
fanout with ``min_usage: 1``), and the top memory may not keep it. So every mapping
fuses T1, and every mapping that fills the fanout puts a spatial loop above T1's
backing node, shared by both Einsums: each instance makes its part of T1 and consumes
it. Before spatial fusion the mapper had no such mapping.
"""

from __future__ import annotations

import pytest

from fusemap.mapper.ffm import map_workload
from fusemap.mapper.space.prefix import SpatialTile
from fusemap.spec import mapping as M
from fusemap.spec.spec import load_spec
from tests.support.model_helpers import (
    arch,
    chain_matmul,
    compute_unit,
    memory,
    to_yaml,
    workload,
)

BOUNDS = {"m": 8, "n0": 4, "n1": 4, "n2": 4}


def _spec(tmp_path):
    nodes = arch(
        memory("DRAM", "inf", 1, 1, tensors={"keep": "~Intermediates", "may_keep": "~Intermediates"}),
        memory(
            "GB", "inf", 0, 0, tensors={"may_keep": "All"},
            spatial=[{"name": "X", "fanout": 4, "min_usage": 1}],
        ),
        compute_unit("MAC", 0, throughput=1),
    )  # fmt: skip
    wl = workload(
        BOUNDS,
        chain_matmul("E0", "T0", "W0", "T1", "n0", "n1"),
        chain_matmul("E1", "T1", "W1", "T2", "n1", "n2"),
    )
    path = tmp_path / "spec.yaml"
    path.write_text(to_yaml({**nodes, **wl}))
    return load_spec(path)


@pytest.mark.parametrize("objective", ["energy", "latency", "edp"])
def test_a_fused_tensor_below_a_fanout(objective, tmp_path):
    out = map_workload(_spec(tmp_path), objective)
    res = out.best.result
    # Hand count. Energy: only DRAM actions cost (1 per value: an action moves 8 bits),
    # each of T0, W0, W1 read once and T2 written once (GB keeps each whole tile a loop
    # above it needs; a tensor the spatial loop does not index is multicast).
    assert res.energy == pytest.approx(8 * 4 + 4 * 4 + 4 * 4 + 8 * 4)
    # Latency: 8*4*4 MACs per Einsum, spread over the 4 instances, one per cycle each.
    assert res.latency == pytest.approx(2 * 8 * 4 * 4 / 4)
    (fused,) = out.best.fused
    assert (fused.tensor, fused.memory) == ("T1", "GB")
    spread = [n for _, n in fused.loops if isinstance(n, SpatialTile)]
    assert spread and all(n.where == "GB.X" for n in spread)
    # The written mapping has the spatial loop above the split, above T1's node.
    nodes = out.best.mapping.nodes
    first = next(i for i, n in enumerate(nodes) if isinstance(n, M.Spatial))
    t1 = next(i for i, n in enumerate(nodes) if isinstance(n, M.Storage) and "T1" in n.tensors)
    split = next(i for i, n in enumerate(nodes) if isinstance(n, M.Sequential))
    assert first < t1 < split
