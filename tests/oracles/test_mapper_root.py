"""An Einsum whose every tensor is fused can still share loops with its neighbours.

Loops sit in the gap below a holder; an Einsum with no top-memory node (an elementwise
Einsum between two fused tensors, like GPT-3's QK_softmax) had no gap above its first
fused node, so it could share no loop and its neighbours' intermediates went to DRAM.
The mapper's optimum here is checked against the independent LoopTree oracle."""

from __future__ import annotations

import pytest

from fusemap.mapper.ffm import map_workload
from fusemap.spec.spec import load_spec
from tests.support.looptree_oracle import LoopTreeOracle
from tests.support.model_helpers import (
    access,
    arch,
    compute_unit,
    einsum,
    memory,
    to_yaml,
    workload,
)


def _spec(tmp_path, gb_bits: int):
    wl = workload(
        {"m": 4, "k": 2, "n": 2, "p": 2},
        einsum("E0", access("X", ["m", "k"]), access("W0", ["k", "n"]),
               access("A", ["m", "n"], output=True)),
        einsum("E1", access("A", ["m", "n"]), access("B", ["m", "n"], output=True),
               is_copy_operation=False),
        einsum("E2", access("B", ["m", "n"]), access("W2", ["n", "p"]),
               access("C", ["m", "p"], output=True)),
    )  # fmt: skip
    ar = arch(
        memory("DRAM", "inf", 100, 100, tensors={"keep": "~Intermediates", "may_keep": "All"}),
        memory("GB", gb_bits, 1, 1, tensors={"may_keep": "All"}),
        compute_unit("MAC", 1),
    )
    path = tmp_path / "root.yaml"
    path.write_text(to_yaml({**ar, **wl}))
    return load_spec(path)


def test_all_fused_einsum_shares_a_loop(tmp_path):
    # GB holds a row of A and of B (and the weights), not the whole of A and B.
    out = map_workload(_spec(tmp_path, 8 * 8), "energy")
    fused = {f.tensor: f for f in out.best.fused}
    assert "A" in fused and "B" in fused, out.best.fused
    assert fused["A"].loops and fused["A"].loops == fused["B"].loops


@pytest.mark.oracle
@pytest.mark.parametrize("gb_bits", [8 * 8, 8 * 12])
def test_all_fused_einsum_equals_oracle(tmp_path, gb_bits):
    spec = _spec(tmp_path, gb_bits)
    best = LoopTreeOracle(spec).solve()
    for objective in ("energy", "latency", "edp"):
        r = map_workload(spec, objective).best.result
        got = {"energy": r.energy, "latency": r.latency, "edp": r.energy * r.latency}[objective]
        assert got == pytest.approx(best[objective].value, rel=1e-9), objective
