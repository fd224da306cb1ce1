"""Architecture spec: memories, compute units, tolls, containers and forks, top to bottom."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, Union

from pydantic import Discriminator, Field, Tag, field_validator, model_validator

from .base import Expr, PathValueError, SpecModel, node_tag, register


class Action(SpecModel):
    """An action of a component with its energy and throughput."""

    name: str
    """Action name (read, write, compute, ...)."""
    energy: Expr | None = None
    """Energy per action in joules (missing: from the component class)."""
    energy_scale: Expr = 1
    """Multiplies this action's energy."""
    throughput: Expr | None = None
    """Actions per second (missing: from the component class)."""
    throughput_scale: Expr = 1
    """Multiplies this action's throughput."""
    latency: Expr | None = None
    """Deprecated: seconds per action; read as throughput = 1 / latency."""
    bits_per_action: Expr | None = None
    """Bits moved by one action (default: the component's, else 1)."""
    values_per_action: Expr | dict[str, Expr] | None = None
    """Values per action, per tensor set (overrides bits_per_action)."""
    extra_attributes_for_component_model: dict[str, Any] = Field(default_factory=dict)
    """Arguments of this action's component model query (evaluated per Einsum)."""


class LoopBound(SpecModel):
    """A constraint on the spatial loops of one fanout dimension (mapper only)."""

    expression: Expr
    """Rank-variable set expression."""
    operator: str
    """Comparison: ==, <=, >=, <, >, product==, ..."""
    value: Expr
    """Right-hand side."""


class SpatialDim(SpecModel):
    """One spatial fanout dimension of a node."""

    name: str
    """Dimension name (referenced by !Spatial mapping nodes)."""
    fanout: Expr
    """Number of instances along this dimension."""
    may_reuse: Expr | None = None
    """Tensors that may be multicast / reduced across it (default: reuse, else All)."""
    reuse: Expr | None = None
    """Tensors that must be reused across it (mapper constraint; default Nothing)."""
    loop_bounds: list[LoopBound] = Field(default_factory=list)
    """Constraints on the loops mapped to this dimension (mapper only)."""
    min_usage: Expr = 0
    """Minimum fraction of the fanout a mapping must use (mapper only)."""
    usage_scale: Expr = 1
    """Scales the recorded usage."""
    power_gateable: Expr = False
    """Unused instances along this dimension draw no leak power."""


class TensorsPolicy(SpecModel):
    """Which tensors a memory or toll keeps."""

    keep: Expr | None = None
    """Tensors it must keep (set expression)."""
    may_keep: Expr | None = None
    """Tensors the mapper may choose to keep (default: All if keep unset, else Nothing)."""
    back: Expr | None = None
    """Tensors it must back (be the top-most holder of)."""
    tile_shape: list[Any] = Field(default_factory=list)
    """Comparisons constraining tile shapes (mapper only)."""
    no_refetch_from_above: Expr | None = None
    """Tensors never refetched from above (mapper only)."""
    no_resend_to_below: Expr | None = None
    """Tensors never resent to below (mapper only)."""
    tensor_order_options: list[Any] = Field(default_factory=list)
    """Allowed storage orders (mapper only)."""
    force_memory_hierarchy_order: Expr | None = None
    """Force the hierarchy order (mapper only)."""


class Component(SpecModel):
    """Fields common to every component with actions."""

    name: str
    """Unique component name."""
    component_class: str | None = None
    """Component model that prices what the spec leaves out (``Dummy``: zero cost, inf throughput)."""
    component_model: Any = None
    """Plug-in model object (not supported: fusemap runs no plug-in code)."""
    actions: list[Action] = Field(default_factory=list)
    """The component's actions."""
    enabled: Expr = True
    """Whether the component can be used for an Einsum (evaluated per Einsum)."""
    area: Expr | None = None
    """Area per instance (m^2)."""
    area_scale: Expr = 1
    """Multiplies area."""
    leak_power: Expr | None = None
    """Leak power per instance (W)."""
    leak_power_scale: Expr = 1
    """Multiplies leak power."""
    energy_scale: Expr = 1
    """Multiplies every action's energy."""
    actions_scale: Expr = 1
    """Multiplies action counts (and latency)."""
    throughput_scale: Expr = 1
    """Multiplies every action's throughput."""
    n_parallel_instances: Expr = 1
    """Identical copies working in parallel (throughput, area and leak scale with it)."""
    total_latency: Expr | None = None
    """Latency expression; default ``sum(a.n_calls / a.throughput for a in actions)``."""
    extra_attributes_for_component_model: dict[str, Any] = Field(default_factory=dict)
    """Attributes of this component's model query (evaluated per Einsum; win over the arch's)."""
    spatial: list[SpatialDim] = Field(default_factory=list)
    """Spatial fanout below this node."""
    total_area: Any = None
    """Output-only in the reference tool; ignored on input."""
    total_leak_power: Any = None
    """Output-only in the reference tool; ignored on input."""
    component_modeling_log: Any = None
    """Output-only in the reference tool; ignored on input."""

    default_actions: ClassVar[tuple[str, ...]] = ()

    @model_validator(mode="after")
    def _defaults(self) -> Component:
        have = {a.name for a in self.actions}
        for name in self.default_actions:
            if name not in have:
                self.actions.append(Action(name=name))
        return self

    def action(self, name: str) -> Action:
        """The action called ``name``."""
        for a in self.actions:
            if a.name == name:
                return a
        raise KeyError(name)


class TensorHolder(Component):
    """A component that tensors pass through (memories and tolls)."""

    tensors: TensorsPolicy = Field(default_factory=TensorsPolicy)
    """Keep / may_keep policy."""
    bits_per_value: dict[str, Expr] = Field(default_factory=dict)
    """Set expression -> bits per value at this level (overrides the workload)."""
    bits_per_action: Expr | None = None
    """Bits per action for all actions (default 1: actions count bits)."""
    values_per_action: Expr | dict[str, Expr] | None = None
    """Values per action per tensor set."""

    @field_validator("bits_per_value", mode="before")
    @classmethod
    def _bpv(cls, value: Any) -> Any:
        return {"All": value} if isinstance(value, (int, float, str)) else value


@register
class Memory(TensorHolder):
    """Storage holding tensor tiles."""

    type: Literal["Memory"] = "Memory"
    size: Expr
    """Capacity per instance in bits (``inf`` for unbounded)."""
    skip_initial_output_write: bool = True
    """The first read of each output element is skipped (it is known to be zero)."""
    default_actions: ClassVar[tuple[str, ...]] = ("read", "write")


@register
class Toll(TensorHolder):
    """A pass-through charge (no storage): each crossing value costs a read."""

    type: Literal["Toll"] = "Toll"
    direction: Expr | dict[str, Expr]
    """up | down | up_and_down, or {set_expr: direction}."""
    default_actions: ClassVar[tuple[str, ...]] = ("read",)


@register
class Compute(Component):
    """A compute unit: one action per operation."""

    type: Literal["Compute"] = "Compute"
    skip_initial_output_write: bool = True
    """The first read of each output element is skipped."""
    operators: dict[str, str | dict[str, Expr]] = Field(default_factory=dict)
    """Operator -> {action or operator: count} (or one action name); default: same-named action, else compute."""
    default_actions: ClassVar[tuple[str, ...]] = ("compute",)

    @model_validator(mode="after")
    def _operator_names(self) -> Compute:
        known = {a.name for a in self.actions} | set(self.operators) | set(self.default_actions)
        for op, parts in self.operators.items():
            for part in [parts] if isinstance(parts, str) else parts:
                if part not in known:
                    raise PathValueError(
                        f"operator '{op}' of {self.name} uses '{part}', which is neither an "
                        f"action ({', '.join(a.name for a in self.actions)}) nor an operator",
                        ("operators", op),
                    )
        return self


@register
class Container(SpecModel):
    """A grouping node that only carries a spatial fanout."""

    type: Literal["Container"] = "Container"
    name: str
    """Unique name."""
    spatial: list[SpatialDim] = Field(default_factory=list)
    """Spatial fanout below this node."""
    area: Expr = 0
    """Area per instance."""
    leak_power: Expr = 0
    """Leak power per instance."""


@register
class Fork(SpecModel):
    """A side branch: its nodes form an alternative path to the compute units inside."""

    type: Literal["Fork"] = "Fork"
    name: str | None = None
    """Optional name."""
    nodes: list[ArchNode] = Field(default_factory=list)
    """Nodes of the branch, top to bottom."""
    forked_power_gateable: Expr = False
    """The forked path can be power gated."""
    non_forked_power_gateable: Expr = False
    """The path not taken can be power gated."""


ArchNode = Annotated[
    Union[
        Annotated[Memory, Tag("Memory")],
        Annotated[Toll, Tag("Toll")],
        Annotated[Compute, Tag("Compute")],
        Annotated[Container, Tag("Container")],
        Annotated[Fork, Tag("Fork")],
    ],
    Discriminator(node_tag),
]
"""Any node of the architecture tree (a YAML tag picks the kind)."""

Leaf = Memory | Toll | Compute | Container


class Arch(SpecModel):
    """The architecture: a list of nodes from the top (e.g. DRAM) to the compute units."""

    variables: dict[str, Any] = Field(default_factory=dict)
    """Variables evaluated per Einsum, usable in arch expressions."""
    extra_attributes_for_all_component_models: dict[str, Any] = Field(default_factory=dict)
    """Attributes of every component model query (evaluated per Einsum and component)."""
    nodes: list[ArchNode] = Field(default_factory=list)
    """Nodes, top to bottom."""

    @model_validator(mode="after")
    def _unique_names(self) -> Arch:
        seen: set[str] = set()

        def walk(nodes: list, path: tuple) -> None:
            for i, n in enumerate(nodes):
                if isinstance(n, Fork):
                    walk(n.nodes, (*path, i, "nodes"))
                    continue
                if n.name in seen:
                    raise PathValueError(
                        f"component names must be unique: '{n.name}' repeated", (*path, i)
                    )
                seen.add(n.name)

        walk(self.nodes, ("nodes",))
        if not any(isinstance(n, Compute) for n in self.leaves()):
            raise PathValueError("the architecture has no !Compute node", ("nodes",))
        return self

    def leaves(self) -> list[Leaf]:
        """Every non-Fork node in document order."""
        out: list[Leaf] = []

        def walk(nodes: list) -> None:
            for n in nodes:
                walk(n.nodes) if isinstance(n, Fork) else out.append(n)

        walk(self.nodes)
        return out

    def component(self, name: str) -> Leaf:
        """The node called ``name``."""
        for n in self.leaves():
            if n.name == name:
                return n
        raise KeyError(name)

    def computes(self) -> list[Compute]:
        """All compute units."""
        return [n for n in self.leaves() if isinstance(n, Compute)]

    def path_to(self, compute: str) -> list[Leaf]:
        """The flattened path from the root to ``compute`` (Forks entered only if they hold it)."""

        def search(nodes: list) -> list | None:
            path: list = []
            for n in nodes:
                if isinstance(n, Fork):
                    inner = search(n.nodes)
                    if inner is not None:
                        return path + inner
                    continue
                if isinstance(n, Compute):
                    if n.name == compute:
                        return path + [n]
                    continue  # other compute units are alternatives, not ancestors
                path.append(n)
            return None

        found = search(self.nodes)
        if found is None:
            raise KeyError(compute)
        return found


Fork.model_rebuild()
