"""Operator costs of extended Einsums (README, "Operator costs"), checked by hand.

Arch: MainMemory -> GlobalBuffer -> ALU, memories free. The ALU has actions compute
(energy 10, 1 per second), add (energy 3, 1/s), max (energy 1, 2/s) and divide
(energy 7, 1/s), so energy and latency show which actions an Einsum was charged.
"""

from __future__ import annotations

import pytest

from fusemap.model.evaluate import evaluate_mapping
from fusemap.model.operators import point_operators
from fusemap.spec.errors import FusemapError
from fusemap.spec.resolve import resolve_workload
from tests.support.model_helpers import (
    Tag,
    access,
    action,
    arch,
    compute,
    container,
    dim,
    einsum,
    load,
    loops,
    mapping,
    matmul,
    memory,
    run,
    spatial,
    storage,
    workload,
)

MM, GB, ALU = "MainMemory", "GlobalBuffer", "ALU"
ACTIONS = {"compute": (10, 1), "add": (3, 1), "max": (1, 2), "divide": (7, 1)}


def alu(operators: dict | None = None, fanout: int | None = None, actions=ACTIONS) -> dict:
    nodes = [memory(MM, "inf", 0, 0), memory(GB, "inf", 0, 0)]
    if fanout:
        nodes.append(container("PE", dim("X", fanout)))
    acts = [action(n, e, tp) for n, (e, tp) in actions.items()]
    nodes.append(Tag("Compute", name=ALU, leak_power=0, area=0, actions=acts, operators=operators))
    return arch(*nodes)


def elementwise(op: str, reduce: str = "add", M: int = 2, K: int = 3) -> dict:
    """``Z[m, k] = op(A[m, k], B[m, k])`` (M*K points, nothing reduced)."""
    return workload(
        {"m": M, "k": K},
        einsum(
            "Z",
            access("A", ["m", "k"]),
            access("B", ["m", "k"]),
            access("Z", ["m", "k"], output=True),
            map_operator=op,
            reduce_operator=reduce,
        ),
    )


def row_reduce(op: str, reduce: str, M: int = 2, K: int = 3) -> dict:
    """``Z[m] = reduce_k op(A[m, k])`` (M*K points, k reduced)."""
    return workload(
        {"m": M, "k": K},
        einsum(
            "Z",
            access("A", ["m", "k"]),
            access("Z", ["m"], output=True),
            map_operator=op,
            reduce_operator=reduce,
        ),
    )


def plain_mapping(*tensors: str, fanout: int | None = None) -> dict:
    inner = [spatial("m", 1)] if fanout else [*loops("m")]
    return mapping(
        storage(MM, *tensors), storage(GB, *tensors), *inner, *loops("k"), compute("Z", ALU)
    )


def counts(result) -> dict[str, float]:
    use = result.einsums["Z"].components[ALU]
    return {a: r.count for a, r in use.actions.items() if r.count}


def test_plain_matmul_is_one_compute_per_point_even_with_more_actions(tmp_path):
    mp = mapping(
        storage(MM, "A", "B", "Z"),
        storage(GB, "A", "B", "Z"),
        *loops("m", "k", "n"),
        compute("Z", ALU),
    )
    r = run(tmp_path, alu(), matmul(2, 3, 4), mp)
    assert counts(r) == {"compute": 24}  # multiply + add reduce = one MAC = one compute
    assert r.energy_of(component=ALU) == 24 * 10
    assert r.einsums["Z"].components[ALU].latency == 24


@pytest.mark.parametrize(
    ("op", "expected"),
    [
        ("add", {"add": 6}),  # an action of that name
        ("max", {"max": 6}),
        ("divide", {"divide": 6}),
        ("subtract", {"compute": 6}),  # no such action: one compute
        ("multiply", {"compute": 6}),
        ("copy", {"compute": 6}),  # one compute, as any Einsum that is not a copy Einsum
    ],
)
def test_elementwise_map_operator_charges_its_action(tmp_path, op, expected):
    r = run(tmp_path, alu(), elementwise(op), plain_mapping("A", "B", "Z"))
    assert counts(r) == expected  # reduce 'add' is not charged: nothing is reduced
    e, tp = ACTIONS[next(iter(expected))] if expected else (0, float("inf"))
    assert r.energy_of(component=ALU) == 6 * e
    assert r.einsums["Z"].components[ALU].latency == 6 / tp


@pytest.mark.parametrize(
    ("op", "reduce", "expected"),
    [
        ("copy", "max", {"max": 6}),  # a running max (LM of cascade 5)
        ("copy", "add", {"add": 6}),  # a sum (SLD)
        ("copy", "none", {"compute": 6}),  # a lone tensor re-read costs one compute
        ("max", "add", {"max": 6, "add": 6}),
        ("multiply", "add", {"compute": 6}),  # the fused MAC
        ("multiply", "max", {"compute": 6, "max": 6}),
    ],
)
def test_reduce_operator_is_charged_per_point(tmp_path, op, reduce, expected):
    r = run(tmp_path, alu(), row_reduce(op, reduce), plain_mapping("A", "Z"))
    assert counts(r) == expected
    energy = sum(n * ACTIONS[a][0] for a, n in expected.items())
    latency = sum(n / ACTIONS[a][1] for a, n in expected.items())
    assert r.energy_of(component=ALU) == energy
    assert r.einsums["Z"].components[ALU].latency == latency


def test_operator_composition_exp_as_six_macs_and_an_add(tmp_path):
    ops = {"exp_difference": {"compute": 6, "add": 1}}
    r = run(tmp_path, alu(ops), elementwise("exp_difference"), plain_mapping("A", "B", "Z"))
    assert counts(r) == {"compute": 36, "add": 6}
    assert r.energy_of(component=ALU) == 36 * 10 + 6 * 3
    assert r.einsums["Z"].components[ALU].latency == 6 * 7  # 7 cycles per point


def test_operators_refer_to_operators_and_override_actions(tmp_path):
    ops = {
        "exp": {"compute": 5, "multiply": 1},  # multiply is itself an operator below
        "multiply": "compute",
        "exp_difference": {"exp": 1, "subtract": 1},
        "subtract": "add",
        "max": {"add": 2},  # overrides the action called max
    }
    r = run(tmp_path, alu(ops), elementwise("exp_difference"), plain_mapping("A", "B", "Z"))
    assert counts(r) == {"compute": 36, "add": 6}
    r = run(tmp_path, alu(ops), row_reduce("copy", "max"), plain_mapping("A", "Z"))
    assert counts(r) == {"add": 12}


def test_spatial_fanout_divides_operator_latency(tmp_path):
    ops = {"exp_difference": {"compute": 6, "add": 1}}
    r = run(
        tmp_path,
        alu(ops, fanout=2),
        elementwise("exp_difference"),
        plain_mapping("A", "B", "Z", fanout=2),
    )
    assert counts(r) == {"compute": 36, "add": 6}  # totals over the 2 instances
    assert r.einsums["Z"].components[ALU].latency == 3 * 7  # each instance does 3 points


def test_copy_einsum_costs_no_compute(tmp_path):
    wl = workload(
        {"m": 2, "k": 3},
        einsum(
            "Z",
            access("A", ["m", "k"]),
            access("Z", ["m", "k"], output=True),
            is_copy_operation=True,
        ),
    )
    r = run(tmp_path, alu(), wl, plain_mapping("A", "Z"))
    assert counts(r) == {}


def test_a_unit_may_declare_copies_free(tmp_path):
    # operators: {copy: {}} -> the 6 points of Z[m, k] = A[m, k] cost nothing; a copy
    # absorbed by a reduce still costs the reduce (6 points of Z[m] = A[m, k] :: max).
    r = run(tmp_path, alu({"copy": {}}), row_reduce("copy", "none"), plain_mapping("A", "Z"))
    assert counts(r) == {}
    r = run(tmp_path, alu({"copy": {}}), row_reduce("copy", "max"), plain_mapping("A", "Z"))
    assert counts(r) == {"max": 6}


def test_custom_operator_must_be_declared(tmp_path):
    spec = load(tmp_path, alu(), elementwise("sigmoid"), plain_mapping("A", "B", "Z"))
    with pytest.raises(FusemapError, match="custom operator 'sigmoid'"):
        evaluate_mapping(spec)
    r = run(
        tmp_path,
        alu({"sigmoid": {"compute": 4}}),
        elementwise("sigmoid"),
        plain_mapping("A", "B", "Z"),
    )
    assert counts(r) == {"compute": 24}


def test_operator_cycle_and_unknown_parts_are_errors(tmp_path):
    spec = load(
        tmp_path,
        alu({"a": "b", "b": "a", "exp_difference": "a"}),
        elementwise("exp_difference"),
        plain_mapping("A", "B", "Z"),
    )
    with pytest.raises(FusemapError, match="cycle"):
        evaluate_mapping(spec)
    with pytest.raises(FusemapError, match="neither an action"):
        load(
            tmp_path,
            alu({"exp_difference": {"nope": 1}}),
            elementwise("add"),
            plain_mapping("A", "B", "Z"),
        )


def test_operator_counts_may_be_expressions(tmp_path):
    a = alu({"exp_difference": {"compute": "taylor_terms + 1"}})
    a["arch"]["variables"] = {"taylor_terms": 5}
    r = run(tmp_path, a, elementwise("exp_difference"), plain_mapping("A", "B", "Z"))
    assert counts(r) == {"compute": 36}


def test_point_operators(tmp_path):
    spec = load(tmp_path, alu(), row_reduce("multiply", "add"), plain_mapping("A", "Z"))
    assert point_operators(resolve_workload(spec).einsums[0]) == ["multiply_add"]
    spec = load(tmp_path, alu(), elementwise("multiply", "max"), plain_mapping("A", "B", "Z"))
    assert point_operators(resolve_workload(spec).einsums[0]) == ["multiply"]
