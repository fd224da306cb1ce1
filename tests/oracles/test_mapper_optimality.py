"""The pmapping generator finds the optimum of the mapspace: checked by brute force.

Each case is a random small Einsum (matmul, matvec, conv with ``p + r``; sizes include
primes) on a random 2- or 3-level arch with small capacities and a spatial fanout. The
brute-force enumerator (tests/mapper_bruteforce.py) scores every mapping with the model;
the generator must reach the same best energy, latency and EDP. Every row of the table
must also be a real mapping that the model scores to the row's numbers.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fusemap.mapper.pmappings.generate import generate_pmappings
from fusemap.mapper.space.config import MapperConfig
from fusemap.model.evaluate import evaluate_mapping
from fusemap.spec.spec import load_spec
from tests.support.mapper_bruteforce import brute_force, count
from tests.support.marks import slow_except
from tests.support.model_helpers import (
    access,
    arch,
    chain_matmul,
    compute_unit,
    container,
    dim,
    einsum,
    memory,
    to_yaml,
    workload,
)

SIZES = [1, 2, 3, 4, 5]  # 2, 3 and 5 are primes: only imperfect tiles split them


def _workload(rng: random.Random, kind: str) -> tuple[dict, str]:
    if kind == "matmul":
        b = {v: rng.choice([1, 2, 2, 3, 3, 4, 5]) for v in "mkn"}
        wl = workload(
            b,
            chain_matmul("Z", "A", "B", "Z", "k", "n"),
        )
    elif kind == "matvec":
        b = {"k": rng.choice(SIZES[1:] + [6, 7]), "n": rng.choice(SIZES[1:] + [6, 7])}
        wl = workload(
            b,
            einsum("Z", access("A", ["k"]), access("B", ["k", "n"]), access("Z", ["n"], True)),
        )
    else:
        b = {"p": rng.choice([2, 3, 4, 5, 7]), "r": rng.choice([1, 2, 3])}
        wl = workload(
            b,
            einsum("Z", access("A", {"X": "p + r"}), access("B", ["r"]), access("Z", ["p"], True)),
        )
    return wl, kind


def _arch(rng: random.Random, rules: bool = False) -> dict:
    """DRAM, a buffer and maybe an RF under a fanout; ``rules``: three levels, the RF's
    keep rule names the buffer (it must hold what the buffer does not)."""
    e = [rng.choice([20, 50, 100]), rng.choice([2, 5, 10]), rng.choice([1, 2])]
    tp = lambda: rng.choice(["inf", 1, 2, 4])  # noqa: E731
    nodes = [
        memory("DRAM", "inf", e[0], e[0], read_tp=tp(), write_tp=tp()),
    ]
    levels = 3 if rules else rng.choice([2, 3])
    gb_size = rng.choice([16, 24, 40, 64, 128])
    fan = dim("X", rng.choice([2, 3, 4]), may_reuse=rng.choice(["All", "Nothing"]))
    if levels == 2:
        nodes.append(memory("GB", gb_size, e[1], e[1], read_tp=tp(), write_tp=tp()))
        nodes.append(container("PE", fan))
    else:
        nodes.append(
            memory("GB", gb_size * 2, e[1], e[1], read_tp=tp(), tensors={"may_keep": "All"})
        )
        nodes.append(
            memory(
                "RF",
                rng.choice([8, 16, 24]),
                e[2],
                e[2],
                spatial=[fan],
                tensors=rng.choice(RF_RULES)
                if rules
                else {"keep": rng.choice(["Outputs", "Inputs"])},
            )
        )
    nodes.append(compute_unit("MAC", rng.choice([1, 3]), throughput=rng.choice([1, 2])))
    return arch(*nodes)


KINDS = ("matmul", "matvec", "conv")
RF_RULES = ({"keep": "~GB"}, {"keep": "~GB", "may_keep": "All"}, {"keep": "Outputs - GB"})


def _case(seed: int, tmp_path, limit: int | None = 4000, rules: bool = False):
    rng = random.Random(seed + (5000 if rules else 0))
    while True:
        wl, kind = _workload(rng, KINDS[seed % 3])
        ar = _arch(rng, rules)
        path = tmp_path / f"case{seed}.yaml"
        path.write_text(to_yaml({**ar, **wl}))
        spec = load_spec(path)
        if limit is None or count(spec, "Z", stop=limit) <= limit:
            return spec, kind


CONFIG = MapperConfig(imperfect=True, imperfect_max_bound=16)


@pytest.mark.parametrize("seed", slow_except(range(32), fast=[2]))
def test_generator_matches_brute_force(seed, tmp_path):
    spec, kind = _case(seed, tmp_path)
    best = brute_force(spec, "Z")
    table = generate_pmappings(spec, "Z", objective="all", config=CONFIG)
    if best.valid == 0:
        assert len(table) == 0
        return
    assert len(table) > 0
    energy, latency = table.energy, table.latency
    assert energy.min() == pytest.approx(best.energy, rel=1e-9), kind
    assert latency.min() == pytest.approx(best.latency, rel=1e-9), kind
    assert (energy * latency).min() == pytest.approx(best.edp, rel=1e-9), kind


@pytest.mark.parametrize("seed", slow_except(range(12), fast=[6]))
def test_generator_matches_brute_force_with_keep_rules_naming_memories(seed, tmp_path):
    """The RF's keep rule reads what the buffer holds in each mapping (``keep: ~GB``)."""
    spec, kind = _case(seed, tmp_path, rules=True)
    best = brute_force(spec, "Z")
    table = generate_pmappings(spec, "Z", objective="all", config=CONFIG)
    assert best.valid > 0
    assert table.energy.min() == pytest.approx(best.energy, rel=1e-9), kind
    assert table.latency.min() == pytest.approx(best.latency, rel=1e-9), kind
    assert (table.energy * table.latency).min() == pytest.approx(best.edp, rel=1e-9), kind


@pytest.mark.parametrize("seed", slow_except(range(8), fast=[2, 4]))
def test_energy_objective_finds_the_same_optimum(seed, tmp_path):
    """Pruning on energy alone (the fast mode) loses nothing for the energy optimum."""
    spec, _ = _case(seed, tmp_path)
    full = generate_pmappings(spec, "Z", objective="all", config=CONFIG)
    fast = generate_pmappings(spec, "Z", objective="energy", config=CONFIG)
    assert len(full) == 0 or fast.energy.min() == pytest.approx(full.energy.min(), rel=1e-12)


@pytest.mark.slow
@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), pick=st.integers(0, 10**6))
def test_every_row_is_scored_the_same_by_the_model(seed, pick, tmp_path_factory):
    """Model agreement: any row, turned into a LoopTree, evaluates to its numbers."""
    spec, _ = _case(seed, tmp_path_factory.mktemp("rows"), limit=None)
    table = generate_pmappings(spec, "Z", objective="all", config=CONFIG)
    if len(table) == 0:
        return
    row = pick % len(table)
    result = evaluate_mapping(spec, table.mapping(row), einsums=["Z"])
    assert result.energy == pytest.approx(float(table.energy[row]), rel=1e-9)
    assert result.latency == pytest.approx(float(table.latency[row]), rel=1e-9)
    assert np.isfinite(table.energy).all()


def test_identical_einsums_share_one_table(tmp_path):
    """Einsums equal up to tensor names have one signature; the renamed table is right."""
    from fusemap.mapper.pmappings.signature import einsum_signature, tensor_renaming
    from fusemap.spec.arch_eval import ArchEvaluator
    from fusemap.spec.resolve import resolve_workload

    two = workload(
        {"m": 3, "k": 4, "n": 2},
        einsum(
            "Y", access("A", ["m", "k"]), access("B", ["k", "n"]), access("Y", ["m", "n"], True)
        ),
        einsum(
            "Z", access("C", ["m", "k"]), access("D", ["k", "n"]), access("Z", ["m", "n"], True)
        ),
    )
    ar = arch(memory("DRAM", "inf", 50, 50), memory("GB", 64, 2, 2), compute_unit("MAC"))
    path = tmp_path / "two.yaml"
    path.write_text(to_yaml({**ar, **two}))
    spec = load_spec(path)
    wl = resolve_workload(spec)
    ae = ArchEvaluator(spec, wl)
    y, z = wl.einsum("Y"), wl.einsum("Z")
    assert einsum_signature(y, wl, ae) == einsum_signature(z, wl, ae)
    table = generate_pmappings(spec, "Y", objective="all", config=CONFIG)
    moved = table.renamed("Z", tensor_renaming(y, z))
    direct = generate_pmappings(spec, "Z", objective="all", config=CONFIG)
    assert sorted(moved.energy) == pytest.approx(sorted(direct.energy), rel=1e-12)
    for row in range(len(moved)):
        result = evaluate_mapping(spec, moved.mapping(row), einsums=["Z"])
        assert result.energy == pytest.approx(float(moved.energy[row]), rel=1e-9)
