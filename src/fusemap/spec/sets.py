"""Set-expression values: sets of tensors or rank variables (format-and-model.md §1.2)."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal

from fusemap.spec.errors import ExpressionError, Location, UnknownNameError
from fusemap.spec.expressions import ExprObject, Scope, evaluate
from fusemap.spec.values import QuotedStr

SetKind = Literal["tensor", "rank_variable"]
_NOUN = {"tensor": "tensor", "rank_variable": "rank variable"}
_EMPTY: Mapping[str, TensorFacts] = MappingProxyType({})


@dataclass(frozen=True)
class TensorFacts:
    """What set properties need to know about one tensor."""

    rank_variables: frozenset[str]
    bits_per_value: float | None = None


class TensorSet(ExprObject):
    """An immutable set of tensor (or rank variable) names within a full space."""

    __slots__ = ("items", "space", "kind", "facts")
    items: frozenset[str]
    space: frozenset[str]
    kind: SetKind
    facts: Mapping[str, TensorFacts]

    def __init__(
        self,
        items: Iterable[str] = (),
        space: Iterable[str] | None = None,
        kind: SetKind = "tensor",
        facts: Mapping[str, TensorFacts] | None = None,
    ):
        if isinstance(items, str) or isinstance(space, str):
            raise TypeError("TensorSet takes iterables of names, not a single string")
        items = frozenset(items)
        object.__setattr__(self, "items", items)
        object.__setattr__(self, "space", items | frozenset(space or ()))
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "facts", _EMPTY if facts is None else facts)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("TensorSet is immutable")

    def _combine(self, other: Any, op: Callable[[frozenset[str], frozenset[str]], Any]) -> Any:
        if not isinstance(other, TensorSet):
            return NotImplemented
        if other.kind != self.kind:
            raise ExpressionError(
                f"cannot combine a set of {_NOUN[self.kind]}s with a set of "
                f"{_NOUN[other.kind]}s ({self!r} and {other!r})"
            )
        facts = self.facts
        if other.facts is not facts and other.facts:
            facts = {**self.facts, **other.facts}
        items = op(self.items, other.items)
        return TensorSet(items, self.space | other.space, self.kind, facts)

    def __or__(self, other: Any) -> Any:
        return self._combine(other, frozenset.__or__)

    def __and__(self, other: Any) -> Any:
        return self._combine(other, frozenset.__and__)

    def __sub__(self, other: Any) -> Any:
        return self._combine(other, frozenset.__sub__)

    def __xor__(self, other: Any) -> Any:
        return self._combine(other, frozenset.__xor__)

    def __invert__(self) -> TensorSet:
        return TensorSet(self.space - self.items, self.space, self.kind, self.facts)

    def __len__(self) -> int:
        return len(self.items)

    def __bool__(self) -> bool:
        return bool(self.items)

    def __contains__(self, item: object) -> bool:
        if isinstance(item, TensorSet):
            return item.items <= self.items
        return item in self.items

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self.items))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TensorSet):
            return NotImplemented
        return self.items == other.items

    def __hash__(self) -> int:
        return hash(self.items)

    def __repr__(self) -> str:
        return "{" + ", ".join(sorted(self.items)) + "}"

    def _single(self, prop: str) -> str:
        if len(self.items) != 1:
            raise ExpressionError(
                f".{prop} needs a set of exactly one {_NOUN[self.kind]}, got {self!r}"
            )
        return next(iter(self.items))

    def _facts(self, tensor: str) -> TensorFacts:
        if tensor not in self.facts:
            raise ExpressionError(f"nothing is known about tensor '{tensor}'")
        return self.facts[tensor]

    def expr_getattr(self, name: str) -> Any:
        """Set properties: rank_variables, bits_per_value, tensors, name."""
        if name == "name":
            return self._single("name")
        if name == "tensors":
            return self
        if self.kind != "tensor" and name in ("rank_variables", "bits_per_value"):
            raise ExpressionError(f".{name} needs a set of tensors, got rank variables {self!r}")
        if name == "rank_variables":
            space = [
                rv for t in self.space if t in self.facts for rv in self.facts[t].rank_variables
            ]
            items = [rv for t in self.items for rv in self._facts(t).rank_variables]
            return TensorSet(items, space, "rank_variable", self.facts)
        if name == "bits_per_value":
            tensor = self._single("bits_per_value")
            bits = self._facts(tensor).bits_per_value
            if bits is None:
                raise ExpressionError(f"bits_per_value of tensor '{tensor}' is not known")
            return bits
        raise ExpressionError(f"set {self!r} has no attribute '{name}'")


def _unknown(name: str, space: TensorSet, kind: SetKind) -> ExpressionError:
    close = difflib.get_close_matches(name, sorted(space.items), n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    return ExpressionError(f"unknown {_NOUN[kind]} '{name}'{hint}")


def evaluate_set_expression(
    value: Any,
    scope: Scope,
    *,
    kind: SetKind = "tensor",
    space: TensorSet,
    location: Location | None = None,
) -> TensorSet:
    """Evaluate a set expression (or a list of names) to a TensorSet within ``space``."""
    try:
        result = evaluate(value, scope, location=location)
        noun = _NOUN[kind]
        if isinstance(result, TensorSet):
            if result.kind != kind:
                raise ExpressionError(
                    f"expected a set of {noun}s, got a set of {_NOUN[result.kind]}s {result!r}"
                )
            names: Iterable[Any] = result.items
        elif isinstance(result, list | tuple | set | frozenset):
            names = []
            for member in result:
                if isinstance(member, TensorSet) and member.kind == kind:
                    names.extend(member.items)
                elif isinstance(member, str):
                    names.append(member)
                else:
                    raise ExpressionError(f"expected {noun} names, got {member!r}")
        else:
            hint = (
                " (quoted strings are literals, not expressions)"
                if isinstance(value, QuotedStr)
                else ""
            )
            raise ExpressionError(f"expected a set of {noun}s, got {result!r}{hint}")
        for name in names:
            if name not in space.items:
                raise _unknown(name, space, kind)
        return TensorSet(names, space.items, kind, space.facts)
    except UnknownNameError as exc:
        err = _unknown_in_set(exc, scope, kind)
        raise (err.located(location) if location is not None else err) from None
    except ExpressionError as exc:
        raise (exc.located(location) if location is not None else exc) from None


def _unknown_in_set(exc: UnknownNameError, scope: Scope, kind: SetKind) -> ExpressionError:
    """An unknown name in a set expression: the closest set that exists (never a
    function) and the likely cause, a rename the workload does not define."""
    names = {  # plain layers only: a lazy layer would evaluate components to look
        n
        for layer in scope.layers
        if isinstance(layer, dict)
        for n, v in layer.items()
        if isinstance(v, TensorSet)
    }
    close = difflib.get_close_matches(exc.name, sorted(names), n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    return ExpressionError(
        f"unknown name '{exc.name}'{hint}: no {_NOUN[kind]}, set or rename of that name "
        f"exists here; if the arch expects a rename '{exc.name}', the workload lacks a "
        f"`renames:` entry for it"
    )


def evaluate_set_keyed_dict(
    raw: Mapping[str, Any],
    scope: Scope,
    *,
    space: TensorSet,
    location_of_key: Callable[[str], Location] | None = None,
) -> dict[str, Any]:
    """Evaluate ``{set expression: value}`` to ``{member: value}``; ``Other`` = the rest."""

    def where(key: str) -> Location:
        return location_of_key(key) if location_of_key is not None else Location(key=str(key))

    keyed: list[tuple[str, TensorSet]] = []
    other_key: str | None = None
    for key in raw:
        if not isinstance(key, str):
            raise ExpressionError(f"expected a set expression as key, got {key!r}", where(key))
        if key.strip() == "Other":
            other_key = key
            continue
        members = evaluate_set_expression(
            str(key), scope, kind=space.kind, space=space, location=where(key)
        )
        for earlier, earlier_members in keyed:
            overlap = members & earlier_members
            if overlap:
                raise ExpressionError(
                    f"keys '{earlier}' and '{key}' overlap on {overlap!r}", where(key)
                )
        keyed.append((key, members))
    if other_key is not None:
        covered = frozenset().union(*(m.items for _, m in keyed))
        keyed.append((other_key, TensorSet(space.items - covered, space.items, space.kind)))

    out: dict[str, Any] = {}
    for key, members in keyed:
        value = evaluate(raw[key], scope, location=where(key))
        for member in sorted(members.items):
            out[member] = value
    return out
