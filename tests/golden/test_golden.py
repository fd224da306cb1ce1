"""The golden numbers (tests/golden/numbers.json) are what the code computes, to a
relative 1e-9: the project's own examples evaluated on their mappings, the single-Einsum
mapper's least energy, latency and EDP of a matmul, and (slow: the whole-workload mapper
takes seconds even on tiny cases) FFM's on a two-matmul chain, from one Pareto run and
from each objective on its own. A change of a number is a change of the model or of the
mapper: regenerate (``python tests/golden/regenerate.py``) only when it is intended."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.golden.cases import BY_NAME, CASES, OBJECTIVES, evaluated, mapped, mapped_alone

STORED = json.loads((Path(__file__).with_name("numbers.json")).read_text())["cases"]


def assert_numbers(got: dict[str, float], want: dict[str, float]) -> None:
    assert sorted(got) == sorted(want)
    wrong = {
        k: (got[k], want[k]) for k in want if got[k] != pytest.approx(want[k], rel=1e-9, abs=0)
    }
    assert not wrong, f"computed, stored: {wrong}"


def test_every_case_has_its_numbers():
    assert sorted(STORED) == sorted(BY_NAME)
    assert all(STORED[name] for name in STORED)


def test_a_changed_number_fails():
    want = STORED[CASES[0].name]
    key = next(iter(want))
    changed = {**want, key: want[key] * (1 + 1e-8)}
    with pytest.raises(AssertionError, match=key):
        assert_numbers(want, changed)


@pytest.mark.parametrize("name", [c.name for c in CASES if c.kind == "evaluate"])
def test_evaluated_numbers(name):
    assert_numbers(evaluated(BY_NAME[name]), STORED[name])


@pytest.mark.parametrize("name", [c.name for c in CASES if c.kind == "map einsum"])
def test_numbers_of_an_einsum_mapped_alone(name):
    assert_numbers(mapped_alone(BY_NAME[name]), STORED[name])


@pytest.mark.slow
@pytest.mark.parametrize("name", [c.name for c in CASES if c.kind == "map"])
def test_mapped_numbers_from_the_pareto_front(name):
    assert_numbers(mapped(BY_NAME[name]), STORED[name])


@pytest.mark.slow
@pytest.mark.parametrize("objective", OBJECTIVES)
@pytest.mark.parametrize("name", [c.name for c in CASES if c.kind == "map"])
def test_mapped_numbers_of_each_objective(name, objective):
    got = mapped(BY_NAME[name], objective)[objective]
    assert got == pytest.approx(STORED[name][objective], rel=1e-9, abs=0)
