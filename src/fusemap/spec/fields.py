"""Sibling fields of one spec object, evaluated together (§1.1: siblings in any order).

:func:`evaluate_fields` sorts the fields by the sibling names each one uses;
:class:`LazyFields` evaluates each on first lookup, for fields that reach a sibling
through a function (the compute-in-memory ``get_array_fanout_*(spec)``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from .errors import ExpressionError, Location
from .expressions import Scope, evaluate, parse_expression, to_number
from .values import QuotedStr


def _is_expression(value: Any) -> bool:
    return isinstance(value, str) and not isinstance(value, QuotedStr) and to_number(value) is None


def evaluate_fields(
    raw: Mapping[str, Any],
    scope: Scope,
    *,
    locate: Callable[[str], Location] | None = None,
    self_is_outer: bool = False,
) -> dict[str, Any]:
    """Evaluate sibling fields in dependency order; siblings shadow ``scope``.

    With ``self_is_outer``, a field that names itself (``voltage: voltage``, as component
    model attributes pass variables on) reads ``scope``'s value instead of being a cycle.
    """

    def where(field: str) -> Location:
        return locate(field) if locate is not None else Location(key=field)

    deps: dict[str, list[str]] = {field: [] for field in raw}
    for field, value in raw.items():
        if _is_expression(value):
            try:
                names = parse_expression(value).names
            except ExpressionError as exc:
                raise exc.located(where(field)) from None
            deps[field] = [f for f in raw if f in names and not (self_is_outer and f == field)]

    order: list[str] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for root in raw:
        if root in state:
            continue
        path, stack = [root], [iter(deps[root])]
        state[root] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                stack.pop()
                state[path[-1]] = 2
                order.append(path.pop())
            elif state.get(nxt) == 1:
                cycle = " -> ".join([*path[path.index(nxt) :], nxt])
                raise ExpressionError(f"cycle between fields: {cycle}", where(nxt))
            elif nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(deps[nxt]))

    values: dict[str, Any] = {}
    inner = scope.child(values)
    for field in order:
        values[field] = evaluate(raw[field], inner, location=where(field))
    return {field: values[field] for field in raw}


class LazyFields(Mapping):
    """Sibling fields evaluated on first lookup, as a scope layer.

    Unlike :func:`evaluate_fields`, a field may depend on a sibling it does not name,
    through a function that reads the layer back (``get_array_fanout_total(spec)`` reads
    fanouts written with ``arch.variables``); cycles are still errors.
    """

    def __init__(
        self,
        raw: Mapping[str, Any],
        scope: Scope,
        *,
        locate: Callable[[str], Location] | None = None,
    ):
        self._raw, self._locate = raw, locate
        self._scope = scope.child(self)
        self._values: dict[str, Any] = {}
        self._busy: list[str] = []

    def __getitem__(self, key: str) -> Any:
        if key in self._values:
            return self._values[key]
        if key not in self._raw:
            raise KeyError(key)
        where = self._locate(key) if self._locate is not None else Location(key=key)
        if key in self._busy:
            cycle = " -> ".join([*self._busy[self._busy.index(key) :], key])
            raise ExpressionError(f"cycle between fields: {cycle}", where)
        self._busy.append(key)
        try:
            self._values[key] = evaluate(self._raw[key], self._scope, location=where)
        finally:
            self._busy.pop()
        return self._values[key]

    def __contains__(self, key: object) -> bool:
        return key in self._raw

    def __iter__(self) -> Iterator[str]:
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)

    def evaluate_all(self) -> dict[str, Any]:
        """Every field's value (in written order)."""
        return {key: self[key] for key in self._raw}
