"""Tests for set-expression values (TensorSet and set-keyed dicts)."""

from __future__ import annotations

from typing import Any

import pytest

from fusemap.spec.errors import ExpressionError, Location
from fusemap.spec.expressions import Scope, evaluate
from fusemap.spec.sets import (
    TensorFacts,
    TensorSet,
    evaluate_set_expression,
    evaluate_set_keyed_dict,
)
from fusemap.spec.values import QuotedStr

FACTS = {
    "A": TensorFacts(frozenset({"m", "k"}), 8),
    "B": TensorFacts(frozenset({"k", "n"}), 16),
    "Z": TensorFacts(frozenset({"m", "n"}), None),
}
ALL = TensorSet({"A", "B", "Z"}, facts=FACTS)


def tset(*names: str) -> TensorSet:
    return TensorSet(names, ALL.items, "tensor", FACTS)


@pytest.fixture
def scope() -> Scope:
    symbols: dict[str, Any] = {
        "All": ALL,
        "Nothing": tset(),
        "Inputs": tset("A", "B"),
        "Outputs": tset("Z"),
        "weight": tset("B"),
        **{name: tset(name) for name in ALL},
        "m": TensorSet({"m"}, {"m", "n", "k"}, "rank_variable", FACTS),
    }
    return Scope(symbols)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Inputs | Outputs", {"A", "B", "Z"}),
        ("Inputs & B", {"B"}),
        ("All - Inputs", {"Z"}),
        ("Inputs ^ (B | Z)", {"A", "Z"}),
        ("~Inputs", {"Z"}),
        ("~Nothing", {"A", "B", "Z"}),
        ("~All", set()),
        ("Inputs if len(All) > 3 else All", {"A", "B", "Z"}),
        ("weight if weight else Nothing", {"B"}),
        ("A.tensors | Z", {"A", "Z"}),
    ],
)
def test_operators(scope: Scope, text: str, expected: set[str]) -> None:
    result = evaluate(text, scope)
    assert isinstance(result, TensorSet)
    assert result.items == expected
    assert result.space == ALL.items


def test_python_protocols(scope: Scope) -> None:
    inputs = evaluate("Inputs", scope)
    assert len(inputs) == 2 and bool(inputs) and not evaluate("Nothing", scope)
    assert list(evaluate("All", scope)) == ["A", "B", "Z"]
    assert "A" in inputs and tset("A") in inputs and "Z" not in inputs
    assert tset("A", "B") == inputs and hash(tset("A", "B")) == hash(inputs)
    assert tset("A") != tset("B")
    assert repr(inputs) == "{A, B}" and repr(tset()) == "{}"
    assert evaluate("len(All) == 3", scope) is True
    assert evaluate("'A' in Inputs", scope) is True
    assert evaluate("[t for t in Inputs]", scope) == ["A", "B"]
    with pytest.raises(AttributeError):
        inputs.items = frozenset()  # type: ignore[misc]


def test_properties(scope: Scope) -> None:
    rv = evaluate("Inputs.rank_variables", scope)
    assert rv.kind == "rank_variable" and rv.items == {"m", "k", "n"}
    assert evaluate("~A.rank_variables", scope).items == {"n"}
    assert evaluate("A.bits_per_value", scope) == 8
    assert evaluate("weight.bits_per_value if weight else 0", scope) == 16
    assert evaluate("A.name", scope) == "A"
    assert evaluate("Inputs.tensors", scope) == tset("A", "B")
    assert evaluate("(A.rank_variables & m)", scope).items == {"m"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Inputs.bits_per_value", "exactly one tensor, got {A, B}"),
        ("Nothing.name", "exactly one tensor, got {}"),
        ("Z.bits_per_value", "bits_per_value of tensor 'Z' is not known"),
        ("A | m", "cannot combine a set of tensors with a set of rank variables"),
        ("m.bits_per_value", "needs a set of tensors"),
        ("A.size", "has no attribute 'size'"),
        ("A | 3", "unsupported operand types for |: 'TensorSet' and 'int'"),
        ("A.__class__", "'__class__' is not allowed"),
    ],
)
def test_property_errors(scope: Scope, text: str, message: str) -> None:
    with pytest.raises(ExpressionError) as info:
        evaluate(text, scope)
    assert message in str(info.value)


def test_evaluate_set_expression(scope: Scope) -> None:
    result = evaluate_set_expression("Inputs | Z", scope, space=ALL)
    assert result.items == {"A", "B", "Z"} and result.facts is FACTS
    assert evaluate_set_expression(["A", "Z"], scope, space=ALL).items == {"A", "Z"}
    assert evaluate_set_expression("[A, 'B']", scope, space=ALL).items == {"A", "B"}
    assert evaluate_set_expression([], scope, space=ALL).items == frozenset()
    rv_space = TensorSet({"m", "n", "k"}, kind="rank_variable")
    rv = evaluate_set_expression("m", scope, kind="rank_variable", space=rv_space)
    assert rv.items == {"m"} and rv.kind == "rank_variable"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (["A", "Q"], "unknown tensor 'Q'"),
        (["A", "Bb"], "unknown tensor 'Bb' (did you mean 'B'?)"),
        ("3", "expected a set of tensors, got 3"),
        (None, "expected a set of tensors, got None"),
        (QuotedStr("A"), "got 'A' (quoted strings are literals"),
        ("m", "expected a set of tensors, got a set of rank variables {m}"),
        ([1], "expected tensor names, got 1"),
        ("Inputz", "unknown name 'Inputz' (did you mean 'Inputs'?)"),
    ],
)
def test_evaluate_set_expression_errors(scope: Scope, value: Any, message: str) -> None:
    loc = Location("w.yaml", 7, "keep")
    with pytest.raises(ExpressionError) as info:
        evaluate_set_expression(value, scope, space=ALL, location=loc)
    assert message in info.value.message
    assert str(info.value).startswith("w.yaml:7: keep: ")


def test_keyed_dict_other(scope: Scope) -> None:
    result = evaluate_set_keyed_dict({"Inputs": 8, "Other": "2 * 8"}, scope, space=ALL)
    assert result == {"A": 8, "B": 8, "Z": 16}
    assert evaluate_set_keyed_dict({"All": "4"}, scope, space=ALL) == {"A": 4, "B": 4, "Z": 4}
    assert evaluate_set_keyed_dict({"A": 1, "Other": 2}, scope, space=ALL) == {
        "A": 1,
        "B": 2,
        "Z": 2,
    }
    assert evaluate_set_keyed_dict({"A": 1}, scope, space=ALL) == {"A": 1}
    assert evaluate_set_keyed_dict({"Nothing": 1, "Other": 3}, scope, space=ALL)["A"] == 3


def test_keyed_dict_overlap(scope: Scope) -> None:
    with pytest.raises(ExpressionError) as info:
        evaluate_set_keyed_dict(
            {"All": 8, "Inputs": 16},
            scope,
            space=ALL,
            location_of_key=lambda k: Location("w.yaml", 3, f"bits_per_value.{k}"),
        )
    assert info.value.message == "keys 'All' and 'Inputs' overlap on {A, B}"
    assert info.value.location.key == "bits_per_value.Inputs"
    with pytest.raises(ExpressionError, match=r"keys 'A \| Z' and 'Outputs' overlap on \{Z\}"):
        evaluate_set_keyed_dict({"A | Z": 1, "Outputs": 2}, scope, space=ALL)


def test_keyed_dict_errors(scope: Scope) -> None:
    with pytest.raises(ExpressionError, match="unknown name 'Q'"):
        evaluate_set_keyed_dict({"Q": 1}, scope, space=ALL)
    with pytest.raises(ExpressionError, match="division by zero"):
        evaluate_set_keyed_dict({"A": "1/0"}, scope, space=ALL)
    with pytest.raises(ExpressionError, match="expected a set expression as key"):
        evaluate_set_keyed_dict({3: 1}, scope, space=ALL)  # type: ignore[dict-item]
