"""The evaluated architecture: actions with their costs, fanouts, components, flat paths.

Plain data produced by :mod:`fusemap.spec.arch_eval` and read by the model and the mapper.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from . import arch as A
from .errors import Location, SpecError
from .expressions import Scope


@dataclass
class ActionCost:
    """One action with its energy and throughput (scales applied)."""

    name: str
    energy: float | None
    throughput: float
    bits_per_action: float
    values_per_action: Mapping[str, float]
    missing: str | None = None
    location: Location | None = field(default=None, repr=False, compare=False)
    model: str | None = None
    """The component model that priced this action (None: the spec gave its values)."""

    def energy_per_action(self, component: str) -> float:
        """Energy, or a clear error when the spec does not give it."""
        if self.energy is None:
            raise SpecError(f"component {component}: {self.missing}", self.location)
        return self.energy


@dataclass
class SpatialInfo:
    """One fanout dimension, evaluated."""

    name: str
    fanout: int
    may_reuse: frozenset[str]
    reuse: frozenset[str]
    usage_scale: float
    power_gateable: bool
    min_usage: float
    loop_bounds: list[A.LoopBound]


@dataclass
class ComponentInfo:
    """A component evaluated for one Einsum."""

    name: str
    kind: str  # memory | toll | compute | container
    node: Any = field(repr=False)
    spatial: list[SpatialInfo]
    size: float = math.inf
    enabled: bool = True
    actions: dict[str, ActionCost] = field(default_factory=dict)
    area: float = 0.0
    leak_power: float = 0.0
    actions_scale: float = 1.0
    n_parallel_instances: float = 1.0
    keep: frozenset[str] = frozenset()
    may_keep: frozenset[str] = frozenset()
    keep_rule: tuple[str, ...] | None = None
    """Set when ``keep``/``may_keep`` name other memories (``keep: ~MainMemory``): what
    they hold is known per mapping template only, so ``keep`` is empty and ``may_keep``
    every tensor here (bounds of every case), and the mapper checks each template's
    holders with :meth:`ArchEvaluator.allows_holding`. The rule's text (and, when it
    names a tensor, the Einsum), for the signature of Einsums that share tables."""
    bits_per_value: Mapping[str, float] = field(default_factory=dict)
    skip_initial_output_write: bool = True
    direction: Mapping[str, str] = field(default_factory=dict)
    fields: Mapping[str, Any] = field(default_factory=dict, repr=False)
    latency_scope: Scope | None = field(default=None, repr=False)
    location: Location | None = field(default=None, repr=False)
    latency_location: Location | None = field(default=None, repr=False)
    models: dict[str, str] = field(default_factory=dict)
    """Which component model gave ``area`` and ``leak_power`` (absent: the spec did)."""
    operators: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    """Compute units: operator -> {action or operator: count per use} (evaluated)."""

    def values_per_action(self, action: str, tensor: str, workload_bits: float) -> float:
        """Values moved by one ``action`` of ``tensor`` (precedence as in §2)."""
        act = self.actions[action]
        if tensor in act.values_per_action:
            return act.values_per_action[tensor]
        bits = self.bits_per_value.get(tensor, workload_bits)
        return act.bits_per_action / bits if bits else math.inf  # 0-bit values: no actions

    def value_bits(self, tensor: str, workload_bits: float) -> float:
        """Bits per value of ``tensor`` stored here."""
        return self.bits_per_value.get(tensor, workload_bits)


@dataclass
class FlatArch:
    """The path from the root to one compute unit, evaluated for one Einsum."""

    einsum: str
    compute: str
    path: list[ComponentInfo]

    def __iter__(self) -> Iterator[ComponentInfo]:
        return iter(self.path)

    def component(self, name: str) -> ComponentInfo:
        """The component called ``name`` on this path."""
        for c in self.path:
            if c.name == name:
                return c
        raise KeyError(name)

    def index(self, name: str) -> int:
        """Depth of ``name`` on the path (0 = root)."""
        for i, c in enumerate(self.path):
            if c.name == name:
                return i
        raise KeyError(name)
