"""What a memory keeps (``tensors: {keep, may_keep}``), as sets of the Einsum's tensors.

A rule may name other memories (``keep: ~MainMemory``: what MainMemory does not hold).
Those are known only per mapping template, so the arch evaluator re-evaluates such a
rule with each template's holders (:meth:`ArchEvaluator.allows_holding`)."""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence
from typing import Any

from . import arch as A
from .errors import Location
from .expressions import Scope
from .resolve import EinsumInfo
from .sets import TensorSet, evaluate_set_expression


def kept_sets(
    node: Any, scope: Scope, info: EinsumInfo, location: Location
) -> tuple[TensorSet, TensorSet]:
    """``keep`` and ``may_keep`` of ``node`` for the Einsum (absent ``keep``: nothing;
    absent ``may_keep``: nothing beside a ``keep``, else every tensor)."""
    space: TensorSet = info.sets["All"]
    pol = getattr(node, "tensors", None)
    if pol is None:
        return space - space, space - space
    if isinstance(node, A.Toll):
        # `Above` (tensors held above, known to the mapper) is every tensor here: a
        # toll only charges what crosses it, so `weight & Above` costs as `weight`.
        scope = scope.child({"Above": space})
    keep = (
        evaluate_set_expression(pol.keep, scope, space=space, location=location)
        if pol.keep is not None
        else space - space
    )
    if pol.may_keep is not None:
        may = evaluate_set_expression(pol.may_keep, scope, space=space, location=location)
    else:
        may = space - space if pol.keep is not None else space
    return keep, may


def names_in(value: Any) -> set[str]:
    """The words of a set expression, list of names or ``tensors:`` policy: an
    over-estimate of the names it reads (a word inside a string counts too)."""
    if value is None:
        return set()
    if isinstance(value, list | tuple):
        return set().union(*(names_in(v) for v in value))
    if isinstance(value, A.TensorsPolicy):
        return names_in(value.keep) | names_in(value.may_keep)
    return set(re.findall(r"[A-Za-z_]\w*", str(value)))


def accepts(
    path: Sequence[Any], scope: Scope, info: EinsumInfo, locate: Callable[..., Location],
    held: dict[str, frozenset[str]],
) -> bool:  # fmt: skip
    """Whether every memory on ``path`` whose rule names memories may hold what ``held``
    (memory -> tensors) says, the memory names in its rule read as those sets (the
    tensors each memory holds in the template)."""
    space: TensorSet = info.sets["All"]
    sets = {m: TensorSet(ts, space.items, "tensor", space.facts) for m, ts in held.items()}
    for comp in path:
        if comp.keep_rule is None:
            continue
        keep, may = kept_sets(comp.node, scope.child(sets), info, locate(comp.name, "tensors"))
        if not keep.items <= held.get(comp.name, frozenset()) <= keep.items | may.items:
            return False
    return True


def keep_rule(
    node: Any, memories: Collection[str], tensors: Collection[str], einsum: str
) -> tuple[str, ...] | None:
    """For a memory whose ``keep``/``may_keep`` name other memories, what identifies its
    rule in the signature of Einsums that share tables: its text, and the Einsum's name
    when it names a tensor (then the rule is not the same up to renaming); else None."""
    named = names_in(getattr(node, "tensors", None))
    if not isinstance(node, A.Memory) or not named & set(memories):
        return None
    rule = (repr(node.tensors.keep), repr(node.tensors.may_keep))
    return rule + ((einsum,) if named & set(tensors) else ())
