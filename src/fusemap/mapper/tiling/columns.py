"""The criteria columns a tile-shape search carries per row, named by type.

A row of the search (a partial tile shape) carries what it has spent so far: energy,
what it reserves in each memory, and the counts latency is computed from. Which columns
there are depends only on the architecture path to the compute unit and on the search's
kind (fusion, uneven spreads), so every template of one compute unit has one
:class:`ColumnLayout` and templates can share search stages.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum
from typing import NamedTuple

import numpy as np

from ...spec.arch_eval import ComponentInfo, FlatArch


class Kind(StrEnum):
    """What a column holds (a string: columns sort by kind, then component)."""

    ENERGY = "energy"
    RESERVATION = "reservation"  # bits reserved in a memory (its whole total, or private)
    AT_DEPTH = "at depth"  # private bits reserved above the deepest fused node, per depth
    SHARED = "shared"  # bits of fused backing nodes (the join counts them once)
    LATENCY = "latency"  # per-instance calls / throughput of a component
    CALLS = "calls"  # per-instance calls of one action (a component's own latency rule)
    OPERATIONS = "operations"  # compute operations of the busiest instance (uneven)


class Column(NamedTuple):
    """One criteria column: its kind, the component it is about, and, for per-depth
    reservations the loop depth, for calls the action."""

    kind: Kind
    component: str = ""
    detail: str | int = ""

    @property
    def latency_count(self) -> bool:
        """Whether latency is computed from this column (it is then compared when the
        objective needs latency)."""
        return self.kind in (Kind.LATENCY, Kind.CALLS, Kind.OPERATIONS)

    def __str__(self) -> str:
        parts = [self.kind.value, self.component, str(self.detail)]
        return ":".join(p for p in parts if p)


ENERGY = Column(Kind.ENERGY)
OPERATIONS = Column(Kind.OPERATIONS)


@dataclass(frozen=True)
class ColumnLayout:
    """The columns of the criteria matrix, in order, built once per compute unit and
    search kind (:meth:`build`)."""

    columns: tuple[Column, ...]
    front_width: int
    """Columns before the per-depth reservations: searches below the deepest fused node
    never write those, so they keep only these."""
    index: dict[Column, int] = field(compare=False, repr=False)

    @classmethod
    def build(
        cls, flat: FlatArch, joined: frozenset[str], uneven: bool, depths: int
    ) -> ColumnLayout:
        """Energy; the reservation of every bounded memory; the latency counts of every
        memory and toll action; the operations (``uneven`` spreads); then, for the
        bounded memories the join shares (``joined``, fusion only), their shared column,
        and last their ``depths`` per-depth columns."""
        columns: list[Column] = [ENERGY]
        for c in flat.path:
            if c.kind == "memory" and not math.isinf(c.size):
                columns.append(Column(Kind.RESERVATION, c.name))
        for c in flat.path:
            if c.kind in ("memory", "toll"):
                for a in c.actions:
                    col = latency_column(c, a)
                    if col is not None and col not in columns:
                        columns.append(col)
        if uneven:
            columns.append(OPERATIONS)
        shared = [c.name for c in flat.path if c.name in joined and not math.isinf(c.size)]
        columns += [Column(Kind.SHARED, c) for c in shared]
        front_width = len(columns)
        columns += [Column(Kind.AT_DEPTH, c, d) for c in shared for d in range(depths)]
        return cls(tuple(columns), front_width, {c: i for i, c in enumerate(columns)})

    def __len__(self) -> int:
        return len(self.columns)

    def __contains__(self, column: object) -> bool:
        return column in self.index

    def of(self, column: Column) -> int:
        """The position of ``column`` (a KeyError if the layout has none)."""
        return self.index[column]

    def reservation(self, memory: str) -> int:
        """The column of ``memory``'s reservations."""
        return self.index[Column(Kind.RESERVATION, memory)]

    def shared(self, memory: str) -> int:
        """The column of the fused backing nodes in ``memory``."""
        return self.index[Column(Kind.SHARED, memory)]

    def at_depths(self, memory: str) -> np.ndarray:
        """The per-depth columns of ``memory``, consecutive, shallowest first."""
        cols = [i for i, c in enumerate(self.columns) if c[:2] == (Kind.AT_DEPTH, memory)]
        return np.array(cols, dtype=np.int64)

    def latency_counts(self) -> list[int]:
        """The positions of the columns latency is computed from."""
        return [i for i, c in enumerate(self.columns) if c.latency_count]


def latency_column(comp: ComponentInfo, action: str) -> Column | None:
    """Where per-instance calls of ``action`` count: one column per component when its
    latency is the default sum of calls / throughput (None if its throughput is
    unbounded), else one per action (its own latency expression reads each)."""
    if comp.node.total_latency is None:
        if math.isinf(comp.actions[action].throughput):
            return None
        return Column(Kind.LATENCY, comp.name)
    return Column(Kind.CALLS, comp.name, action)


def latency_weight(comp: ComponentInfo, action: str) -> float:
    """What one call of ``action`` adds to its :func:`latency_column`."""
    if comp.node.total_latency is None:
        return 1.0 / comp.actions[action].throughput
    return 1.0
