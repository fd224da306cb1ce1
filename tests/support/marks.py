"""Which parametrized cases run in the fast set (``make test``) and which only with the
slow ones (``make test-slow``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

slow = pytest.mark.slow
ParameterSet = type(pytest.param(0))


def _key(value: Any) -> Any:
    if isinstance(value, ParameterSet):
        return value.values[0] if len(value.values) == 1 else tuple(value.values)
    return value


def slow_except(values: Iterable[Any], fast: Iterable[Any]) -> list[Any]:
    """``values`` for ``parametrize``, each marked slow but those in ``fast``: the cheap
    cases that keep the check in the fast set. A tuple is the values of several
    arguments; a ``pytest.param`` keeps its marks and id."""
    fast = list(fast)
    out, keys = [], []
    for value in values:
        keys.append(key := _key(value))
        if key in fast:
            out.append(value)
        elif isinstance(value, ParameterSet):
            out.append(pytest.param(*value.values, marks=[*value.marks, slow], id=value.id))
        elif isinstance(value, tuple):
            out.append(pytest.param(*value, marks=slow))
        else:
            out.append(pytest.param(value, marks=slow))
    missing = [f for f in fast if f not in keys]
    assert not missing, f"fast cases that are not among the values: {missing}"
    return out


def examples(full: int, few: int) -> list[Any]:
    """Values of a property test's ``examples`` argument: ``few`` in the fast set, its
    own count ``full`` with the slow tests."""
    return [
        pytest.param(few, id=f"{few} examples"),
        pytest.param(full, id=f"{full} examples", marks=slow),
    ]
