"""LoopTree mappings: loops, storage nodes, tolls, compute leaves and splits.

The YAML form uses one tag per node (``!Storage``, ``!Temporal``, ...); the same classes
are usable from Python. ``Mapping.to_yaml()`` writes tags, so a mapping loads back equal.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union

from pydantic import Discriminator, Field, Tag, field_validator, model_validator

from .base import SpecModel, node_tag, register


class MappingNode(SpecModel):
    """Common fields of every LoopTree node."""

    text: str | None = None
    """Overrides the label drawn for this node."""

    if TYPE_CHECKING:
        # Every concrete node declares its YAML tag as a Literal field (pydantic's
        # discriminator); declared here for the type checker only, so it is no field.
        type: str


@register
class Storage(MappingNode):
    """Tensor tiles held in a memory."""

    type: Literal["Storage"] = "Storage"
    tensors: list[str]
    """Tensors whose tiles are held here (split into one node per tensor, in order)."""
    component: str
    """The !Memory that holds them."""
    persistent: bool = False
    """Kept for the whole workload."""
    binding: Any = None
    """Physical binding for distributed buffers."""

    @field_validator("tensors", mode="before")
    @classmethod
    def _one(cls, v: Any) -> Any:
        return [v] if isinstance(v, str) else v


@register
class Toll(MappingNode):
    """Tensors passing through a !Toll component."""

    type: Literal["Toll"] = "Toll"
    tensors: list[str]
    """Tensors charged by the toll."""
    component: str
    """The !Toll component."""
    persistent: bool = False
    """Kept for the whole workload."""

    _one = field_validator("tensors", mode="before")(
        lambda cls, v: [v] if isinstance(v, str) else v
    )


class Loop(MappingNode):
    """A loop over one rank variable with a step (tile shape)."""

    rank_variable: str
    """The rank variable iterated."""
    tile_shape: int = Field(ge=1)
    """Step of the loop: the tile of the rank variable below it."""
    initial_tile_shape: int | None = Field(None, ge=1)
    """First tile, for fused loops over rank variables with halos."""


@register
class Temporal(Loop):
    """A temporal loop."""

    type: Literal["Temporal"] = "Temporal"


@register
class Spatial(Loop):
    """A loop spread over the instances of a spatial fanout dimension."""

    type: Literal["Spatial"] = "Spatial"
    name: str
    """The spatial dimension (``spatial[].name`` in the arch)."""
    component: str
    """The arch node that has that dimension."""


@register
class Compute(MappingNode):
    """The leaf of a branch: the Einsum computed and the unit computing it."""

    type: Literal["Compute"] = "Compute"
    einsum: str
    """Einsum name."""
    component: str
    """The !Compute component."""


@register
class Reservation(MappingNode):
    """Capacity reserved in a memory (normally inserted by the model)."""

    type: Literal["Reservation"] = "Reservation"
    purposes: list[str] = Field(default_factory=list)
    """Tensors the space is for."""
    resource: str
    """The memory."""
    persistent: bool = False
    """Kept for the whole workload."""


@register
class TextBox(MappingNode):
    """A label (drawing only)."""

    type: Literal["TextBox"] = "TextBox"


class Branching(MappingNode):
    """A node with children."""

    nodes: list[MappingTreeNode] = Field(default_factory=list)
    """Children: a chain for !Nested, branches for splits."""

    @field_validator("nodes", mode="before")
    @classmethod
    def _list(cls, v: Any) -> Any:
        return [] if v is None else v


@register
class Nested(Branching):
    """A chain of nodes; only the last may have children."""

    type: Literal["Nested", "Mapping"] = "Nested"

    @model_validator(mode="after")
    def _chain(self) -> Nested:
        for node in self.nodes[:-1]:
            if isinstance(node, Split):
                raise ValueError(
                    f"a !{node.type} split must be the last node of its chain "
                    "(put the nodes after it inside one of its branches)"
                )
        return self


@register
class Split(Branching):
    """Branches processed one after the other."""

    type: Literal["Split", "Sequential", "Pipeline"] = "Split"


@register
class Sequential(Split):
    """Branches processed one after the other."""

    type: Literal["Sequential"] = "Sequential"


@register
class Pipeline(Split):
    """Branches whose Einsums may overlap in time."""

    type: Literal["Pipeline"] = "Pipeline"
    overlap: bool = False
    """An overlap region: branches run concurrently, latency combines per resource (README)."""


MappingTreeNode = Annotated[
    Union[
        Annotated[Storage, Tag("Storage")],
        Annotated[Toll, Tag("Toll")],
        Annotated[Temporal, Tag("Temporal")],
        Annotated[Spatial, Tag("Spatial")],
        Annotated[Compute, Tag("Compute")],
        Annotated[Reservation, Tag("Reservation")],
        Annotated[TextBox, Tag("TextBox")],
        Annotated[Nested, Tag("Nested")],
        Annotated[Sequential, Tag("Sequential")],
        Annotated[Pipeline, Tag("Pipeline")],
        Annotated[Split, Tag("Split")],
    ],
    Discriminator(node_tag),
]
"""Any LoopTree node (a YAML tag picks the kind)."""


@register
class Mapping(Nested):
    """A whole LoopTree: a chain of nodes from the root."""

    type: Literal["Mapping"] = "Mapping"
    title: str | None = None
    """Optional title."""

    def walk(self) -> Iterator[MappingNode]:
        """Every node, depth first, parents before children."""

        def go(node: MappingNode) -> Iterator[MappingNode]:
            yield node
            for child in getattr(node, "nodes", []):
                yield from go(child)

        yield from go(self)

    def branches(self) -> list[list[MappingNode]]:
        """One root-to-Compute chain per branch, splits removed, in order."""
        out: list[list[MappingNode]] = []

        def go(prefix: list[MappingNode], nodes: Sequence[MappingNode]) -> None:
            chain = list(prefix)
            for node in nodes:
                if isinstance(node, Split):
                    for child in node.nodes:
                        go(chain, child.nodes if isinstance(child, Nested) else [child])
                    return
                if isinstance(node, Nested):
                    go(chain, node.nodes)
                    return
                chain.append(node)
            out.append(chain)

        go([], self.nodes)
        return out

    def to_data(self) -> dict[str, Any]:
        """Plain data with ``type`` keys (the loader's form of YAML tags)."""
        return {"mapping": _node_data(self)}

    def to_yaml(self) -> str:
        """YAML text with tags, which loads back into an equal Mapping."""
        return dump_yaml(self.to_data())


def _node_data(node: MappingNode) -> dict[str, Any]:
    data: dict[str, Any] = {"type": node.type}
    for name in type(node).model_fields:
        if name in ("type", "nodes"):
            continue
        value = getattr(node, name)
        if value == type(node).model_fields[name].get_default(call_default_factory=True):
            continue
        data[name] = value
    if isinstance(node, Branching):
        data["nodes"] = [_node_data(n) for n in node.nodes]
    if isinstance(node, Mapping):
        data.pop("type")
    return data


def dump_yaml(data: Any) -> str:
    """Write plain data as YAML; dicts with a ``type`` key become tagged mappings.

    Spec files are rendered with Jinja before YAML parsing, so strings holding ``{``
    (``{{ }}``, ``{% %}``, ``{# #}``), line breaks or other unprintable characters are
    written as double-quoted scalars with escapes (``\\x7b`` for ``{``): the text loads
    back unchanged.
    """
    from ruamel.yaml import YAML
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    quoted: dict[str, str] = {}
    prefix = "__fusemap_quoted_"
    while _mentions(data, prefix):
        prefix += "_"

    def scalar(value: Any, flow: bool = False) -> Any:
        if isinstance(value, str):
            value = str(value)  # a QuotedStr from the loader is a plain string here
        if isinstance(value, str) and (
            _needs_escapes(value) or (flow and not _PLAIN_IN_FLOW.fullmatch(value))
        ):
            token = f"{prefix}{len(quoted)}__"
            quoted[token] = _double_quoted(value)
            return token
        return value

    def convert(value: Any) -> Any:
        if isinstance(value, dict):
            out = CommentedMap()
            tag = value.get("type")
            for k, v in value.items():
                if k != "type" or not isinstance(tag, str):
                    out[scalar(k, flow=True)] = convert(v)
            if isinstance(tag, str):
                out.yaml_set_ctag(_ctag(f"!{tag}"))
            return out
        if isinstance(value, list):
            if value and all(isinstance(v, (str, int, float)) for v in value):
                seq = CommentedSeq(scalar(v, flow=True) for v in value)
                seq.fa.set_flow_style()
                return seq
            return CommentedSeq(convert(v) for v in value)
        return scalar(value)

    yaml = YAML(typ="rt")
    yaml.default_flow_style = False
    yaml.width = 4096
    buf = io.StringIO()
    yaml.dump(convert(data), buf)
    text = buf.getvalue()
    if quoted:
        pattern = re.compile(re.escape(prefix) + r"\d+__")
        text = pattern.sub(lambda m: quoted[m.group(0)], text)
    return text


_PLAIN_IN_FLOW = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""Strings written plain inside ``[...]`` and as keys; any other is double-quoted
(ruamel writes ``[?0]`` plain, and reads it back as a mapping; it writes the key ``<<``
plain, and reads it back as a merge key)."""

_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r", "{": "\\x7b"}


_BREAKS = "\x85\u2028\u2029\ufeff"
"""Printable characters that YAML or Jinja may still read as line breaks or a BOM."""


def _needs_escapes(text: str) -> bool:
    return "{" in text or not all(c.isprintable() and c not in _BREAKS for c in text)


def _double_quoted(text: str) -> str:
    """``text`` as a YAML double-quoted scalar with no ``{`` and only printable characters."""
    out = []
    for c in text:
        if c in _ESCAPES:
            out.append(_ESCAPES[c])
        elif c.isprintable() and c not in _BREAKS:
            out.append(c)
        elif ord(c) < 0x100:
            out.append(f"\\x{ord(c):02x}")
        elif ord(c) < 0x10000:
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(f"\\U{ord(c):08x}")
    return '"' + "".join(out) + '"'


def _mentions(value: Any, text: str) -> bool:
    if isinstance(value, str):
        return text in value
    if isinstance(value, dict):
        return any(_mentions(k, text) or _mentions(v, text) for k, v in value.items())
    if isinstance(value, list):
        return any(_mentions(v, text) for v in value)
    return False


def _ctag(text: str) -> Any:
    from ruamel.yaml.tag import Tag as YamlTag

    return YamlTag(suffix=text)


Branching.model_rebuild()
Nested.model_rebuild()
Split.model_rebuild()
Sequential.model_rebuild()
Pipeline.model_rebuild()
Mapping.model_rebuild()
