"""The workload's data flow: each tensor has one writer, and no Einsum depends on itself.

An Einsum depends on the writer of every tensor it reads, except for reads that a
recurrence carries from one step to the next: a recurrence ``RD[m1+1] = SLD[m1] +
SPD[m1]`` writes RD one step ahead, so a reader of ``RD[m1]`` (SPD, or RD itself) reads
the previous step's value, which was written before it (``docs/ffm.md``). Every other
read must come after the write, so a cycle of such reads (``Y = X*W; X = Y*V``, or an
Einsum reading what it writes) has no order in which to run, and is an error naming the
cycle.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .errors import Location, SpecError


def check_data_flow(
    einsums: Sequence[Any],
    iterated: Mapping[str, set[str]],
    locate: Callable[[int], Location],
) -> None:
    """Refuse a tensor with two writers, and a cycle of dependencies between Einsums.

    ``einsums`` are resolved Einsums (``name``, ``index``, ``inputs``, ``outputs``,
    ``projections``); ``iterated`` maps a recurrence's output tensor to the ranks it
    steps; ``locate(index)`` says where an Einsum was written."""
    writer: dict[str, Any] = {}
    for e in einsums:
        for t in dict.fromkeys(e.outputs):
            first = writer.setdefault(t, e)
            if first is not e:
                raise SpecError(
                    f"tensor {t} is written by two Einsums, {first.name} and {e.name}: "
                    "each tensor must have one writer (give the second output another name)",
                    locate(e.index),
                )
    after: dict[str, list[tuple[str, str]]] = {e.name: [] for e in einsums}
    for e in einsums:
        for t in dict.fromkeys(e.inputs):
            w = writer.get(t)
            if w is None or _carried(w, e, t, iterated.get(t, set())):
                continue
            if w is e:
                raise SpecError(
                    f"Einsum {e.name} reads its own output {t} at the coordinates it writes "
                    "(only a recurrence may read its output, one step behind: `iterative:`)",
                    locate(e.index),
                )
            after[w.name].append((e.name, t))
    cycle = _find_cycle([e.name for e in einsums], after)
    if cycle:
        names, tensors = cycle
        steps = "; ".join(f"{a} writes {t}, read by {b}" for a, t, b in _steps(names, tensors))
        index = next(e.index for e in einsums if e.name == names[0])
        raise SpecError(
            f"the Einsums depend on each other in a cycle ({' -> '.join(names)}): {steps}",
            locate(index),
        )


def _carried(w: Any, r: Any, tensor: str, ranks: set[str]) -> bool:
    """Whether reader ``r`` reads ``tensor`` at a step before the one writer ``w`` writes
    (``T[v]`` or earlier, where ``w`` writes ``T[v + 1]``): a value of an earlier step."""
    for rank in ranks:
        wrote, read = w.projections[tensor].get(rank), r.projections[tensor].get(rank)
        if wrote is None or read is None or len(read.variables) != 1:
            continue
        if read.coefficient(read.variables[0]) == 1 and read.const < wrote.const:
            return True
    return False


def _find_cycle(
    names: list[str], after: Mapping[str, list[tuple[str, str]]]
) -> tuple[list[str], list[str]] | None:
    """A cycle of the graph (Einsums, then the tensor of each edge), or None; linear."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for root in names:
        if root in state:
            continue
        path: list[str] = [root]
        via: list[str] = []
        stack = [iter(after[root])]
        state[root] = 1
        while stack:
            step = next(stack[-1], None)
            if step is None:
                stack.pop()
                state[path.pop()] = 2
                if via:
                    via.pop()
                continue
            nxt, tensor = step
            if state.get(nxt) == 1:
                start = path.index(nxt)
                return [*path[start:], nxt], [*via[start:], tensor]
            if nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                via.append(tensor)
                stack.append(iter(after[nxt]))
    return None


def _steps(names: list[str], tensors: list[str]) -> list[tuple[str, str, str]]:
    return [(names[i], tensors[i], names[i + 1]) for i in range(len(tensors))]
