"""Run a cascade of (extended) Einsums on concrete numpy arrays.

The interpreter exists so a user can check that a rewritten cascade still computes the
same function (cascade 5 against plain softmax attention, say). It favours clarity over
speed: every Einsum is evaluated densely over its iteration space, so keep sizes small.

Semantics (EDGE, attention-cascades.md §0): the map operator combines the operands at
each point of the iteration space; points that land on the same output value are
combined by the reduce operator. ``multiply`` touches only points where no operand is
zero (so 0 * inf = 0) and ``divide`` only points where its left operand is non-zero
(0 / 0 = 0); the other operators are plain arithmetic. Einsums that use an iterative
rank variable run in one loop over it, each coordinate in program order, so a
recurrence reads the values written at the previous coordinate.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..spec.affine import Affine, parse_affine
from ..spec.errors import FusemapError, SpecError
from ..spec.expressions import Scope, evaluate
from ..spec.resolve import EinsumInfo, WorkloadInfo, resolve_workload
from ..spec.spec import Spec, load_spec
from ..spec.workload import Einsum
from .passes import variable_ranks

MAX_POINTS = 20_000_000
"""Largest iteration space (per Einsum execution) the interpreter accepts."""


def interpret(
    workload: Spec | str | Path,
    arrays: Mapping[str, Any],
    variables: Mapping[str, Any] | None = None,
) -> dict[str, np.ndarray]:
    """Every tensor of the cascade, computed from the input ``arrays`` (fp64).

    ``workload`` is a loaded spec or a YAML file (rendered with ``variables``); each input
    array has the tensor's ranks in declaration order and the resolved shape.
    """
    spec = workload if isinstance(workload, Spec) else load_spec(workload, variables=variables)
    spec.require("workload")
    info = resolve_workload(spec)
    assert spec.workload is not None
    try:
        return _Run(spec, info).run(arrays)
    except SpecError as err:
        raise err.located(spec.locate("workload")) from None


class _Run:
    def __init__(self, spec: Spec, info: WorkloadInfo):
        assert spec.workload is not None
        self.wl = spec.workload
        self.info = info
        self.consts = {
            **{k: v for k, v in info.variables.items() if isinstance(v, (int, float))},
            **info.rank_sizes,
        }
        self.scope = Scope(dict(info.variables))
        self.values: dict[str, np.ndarray] = {}
        self.written: dict[str, np.ndarray] = {}  # Einsum -> output points it reduced into

    def run(self, arrays: Mapping[str, Any]) -> dict[str, np.ndarray]:
        self._inputs(arrays)
        self._iterated()
        for loop, group in self._segments():
            if loop is None:
                for e, ei in group:
                    self._execute(e, ei, {})
                continue
            rank_of = [{v for v, r in variable_ranks(e).items() if r == loop} for e, _ in group]
            steps = max(
                ei.bounds[next(iter(vs))] for (_, ei), vs in zip(group, rank_of, strict=True)
            )
            for c in range(steps):
                for (e, ei), vs in zip(group, rank_of, strict=True):
                    var = next(iter(vs))
                    if c < ei.bounds[var]:
                        self._execute(e, ei, {var: c})
        return self.values

    def _inputs(self, arrays: Mapping[str, Any]) -> None:
        written = {t for e in self.wl.einsums for t in e.outputs}
        for name, tensor in self.info.tensors.items():
            if name in written:
                continue
            if name not in arrays:
                raise SpecError(f"interpret: no array given for input tensor {name}")
            value = np.array(arrays[name], dtype=np.float64)
            if value.shape != tensor.shape:
                raise SpecError(
                    f"interpret: {name} has shape {value.shape}, expected {tensor.shape} "
                    f"(ranks {', '.join(tensor.ranks)})"
                )
            self.values[name] = value

    def _iterated(self) -> None:
        """Recurrence outputs start as NaN, with their initial value at coordinate 0."""
        for e in self.wl.einsums:
            if not e.iterative:
                continue
            out = e.outputs[0]
            tensor = self.info.tensors[out]
            array = self.values.setdefault(out, np.full(tensor.shape, np.nan))
            for var, rank in e.iterated_ranks().items():
                initial = evaluate(e.iterative[var], self.scope)
                if isinstance(initial, bool) or not isinstance(initial, (int, float)):
                    raise SpecError(f"{e.name}.iterative.{var}: initial value must be a number")
                index: list[slice | int] = [slice(None)] * len(tensor.ranks)
                index[tensor.ranks.index(rank)] = 0
                array[tuple(index)] = initial

    def _segments(self) -> list[tuple[str | None, list[tuple[Einsum, EinsumInfo]]]]:
        """Runs of consecutive Einsums that iterate the same iterative rank."""
        iterative = self.wl.iterative_ranks()
        out: list[tuple[str | None, list[tuple[Einsum, EinsumInfo]]]] = []
        for e, ei in zip(self.wl.einsums, self.info.einsums, strict=True):
            loops = sorted({r for r in variable_ranks(e).values() if r in iterative})
            if len(loops) > 1:
                raise SpecError(f"interpret: Einsum {e.name} iterates several iterative ranks")
            loop = loops[0] if loops else None
            if out and loop is not None and out[-1][0] == loop:
                out[-1][1].append((e, ei))
            else:
                out.append((loop, [(e, ei)]))
        return out

    def _execute(self, e: Einsum, ei: EinsumInfo, fixed: Mapping[str, int]) -> None:
        names = list(ei.bounds)
        axes = [
            np.arange(fixed[v], fixed[v] + 1) if v in fixed else np.arange(ei.bounds[v])
            for v in names
        ]
        points = math.prod(len(a) for a in axes)
        if points > MAX_POINTS:
            raise SpecError(
                f"interpret: Einsum {e.name} has {points:,} points; use smaller sizes "
                f"(at most {MAX_POINTS:,})"
            )
        grids = dict(zip(names, np.meshgrid(*axes, indexing="ij"), strict=True))
        shape = tuple(len(a) for a in axes)
        operands = []
        for op in e.operand_list():
            projection = {r: self._affine(x, e) for r, x in op.ranks().items()}
            operands.append(self._gather(e, op.name, projection, grids, shape))
        mapped = _map(e, operands, shape)
        out = e.outputs[0]
        index = self._index(e, out, ei.projections[out], grids, shape)
        reduced = set(names) - {v for x in ei.projections[out].values() for v in x.variables}
        self._scatter(e, out, index, mapped, bool(reduced))

    def _affine(self, text: str, e: Einsum) -> Affine:
        try:
            return parse_affine(text, self.consts)
        except FusemapError as err:
            raise SpecError(f"Einsum {e.name}: {err.message}") from None

    def _index(self, e: Einsum, tensor: str, projection, grids, shape) -> tuple[np.ndarray, ...]:
        info = self.info.tensors[tensor]
        index = []
        for rank, size in zip(info.ranks, info.shape, strict=True):
            if rank not in projection:
                raise SpecError(
                    f"interpret: Einsum {e.name} does not index {tensor} on rank {rank}"
                )
            expr = projection[rank]
            coord = np.full(shape, expr.const, dtype=np.int64)
            for var, coef in expr.coeffs:
                if var not in grids:
                    raise SpecError(f"interpret: Einsum {e.name} has no rank variable '{var}'")
                coord = coord + coef * grids[var]
            if coord.size and (coord.min() < 0 or coord.max() >= size):
                raise SpecError(
                    f"interpret: Einsum {e.name} indexes {tensor}[{rank}: {expr}] at "
                    f"{int(coord.min())}..{int(coord.max())}, outside 0..{size - 1}"
                )
            index.append(coord)
        return tuple(index)

    def _gather(self, e: Einsum, tensor: str, projection, grids, shape) -> np.ndarray:
        if tensor not in self.values:
            raise SpecError(f"interpret: Einsum {e.name} reads {tensor} before it is written")
        found = self.values[tensor][self._index(e, tensor, projection, grids, shape)]
        return np.broadcast_to(found, shape)  # a tensor without ranks reads as a scalar

    def _scatter(self, e: Einsum, out: str, index, mapped: np.ndarray, reduces: bool) -> None:
        tensor = self.info.tensors[out]
        array = self.values.setdefault(out, np.full(tensor.shape, np.nan))
        if not reduces:
            array[index] = mapped
            return
        if e.reduce_operator == "none":
            raise SpecError(
                f"interpret: Einsum {e.name} reduces rank variables but its reduce_operator is none"
            )
        ufunc = np.add if e.reduce_operator == "add" else np.maximum
        identity = 0.0 if e.reduce_operator == "add" else -np.inf
        # Work on flat views so scalar outputs (Y[] = A[k] * B[k]) need no special case.
        flat = np.ravel_multi_index(index, tensor.shape) if index else np.zeros(mapped.shape, int)
        flat, values, view = flat.ravel(), np.ravel(mapped), array.reshape(-1)
        partial = np.full(view.shape, identity)
        ufunc.at(partial, flat, values)
        touched = np.zeros(view.shape, dtype=bool)
        touched[flat] = True
        before = self.written.setdefault(e.name, np.zeros(view.shape, dtype=bool))
        again, first = touched & before, touched & ~before
        view[again] = ufunc(view[again], partial[again])
        view[first] = partial[first]
        before |= touched


def _map(e: Einsum, operands: Sequence[np.ndarray], shape: tuple[int, ...]) -> np.ndarray:
    op, n = e.map_operator, len(operands)
    arity = {"copy": (1, 1), "subtract": (2, 2), "divide": (2, 2), "exp_difference": (1, 2)}
    lo, hi = arity.get(op, (1, math.inf))
    if not lo <= n <= hi:
        raise SpecError(f"interpret: Einsum {e.name}: map operator {op} cannot take {n} operand(s)")
    fn = _OPERATORS.get(op)
    if fn is None:
        raise SpecError(f"interpret: Einsum {e.name}: unknown map operator '{op}'")
    with np.errstate(all="ignore"):
        return np.broadcast_to(fn(list(operands)), shape)


def _multiply(xs: list[np.ndarray]) -> np.ndarray:
    product = math.prod(xs[1:], start=xs[0])
    return np.where(np.logical_or.reduce([x == 0 for x in xs]), 0.0, product)


_OPERATORS: dict[str, Callable[[list[np.ndarray]], np.ndarray]] = {
    "copy": lambda xs: xs[0],
    "multiply": _multiply,
    "add": lambda xs: sum(xs[1:], start=xs[0]),
    "subtract": lambda xs: xs[0] - xs[1],
    "max": lambda xs: np.maximum.reduce(xs),
    "divide": lambda xs: np.where(xs[0] == 0, 0.0, xs[0] / xs[1]),
    "exp_difference": lambda xs: np.exp(xs[0] - xs[1]) if len(xs) == 2 else np.exp(xs[0]),
}
