"""What a component asks the component model library, and where its answers go.

A component whose ``component_class`` is a model name (not ``Dummy``) and that lacks an
action energy or throughput, an area or a leak power is priced by the library. Its
attributes are ``size`` (memories), then ``arch.extra_attributes_for_all_component_models``
and its own ``extra_attributes_for_component_model`` (which win), evaluated in the
component's scope; an action passes ``bits_per_action`` (memories and tolls) and its own
``extra_attributes_for_component_model``. The spec's scales then apply to the answers as
to given values.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import component_models as cm
from .errors import Location, SpecError
from .expressions import Scope
from .fields import evaluate_fields


@dataclass
class Pricing:
    """The library's view of one component for one Einsum (answers cached by the module)."""

    component: str
    component_class: str
    attributes: dict[str, Any]
    actions: list[str]
    location: Location
    locate_action: Callable[[str], Location] = field(repr=False)

    def component_price(self) -> cm.ComponentPrice:
        """Area and leak power per instance, from the best model."""
        try:
            return cm.price_component(self.component_class, self.attributes, self.actions)
        except cm.ComponentModelError as err:
            raise SpecError(f"{self.component}: {err}", self.location) from None

    def action_price(self, action: str, arguments: dict[str, Any]) -> cm.ActionPrice:
        """Energy and throughput of one action."""
        try:
            return cm.price_action(
                self.component_class, self.attributes, self.actions, action, arguments
            )
        except cm.ComponentModelError as err:
            raise SpecError(f"{self.component}: {err}", self.locate_action(action)) from None


def needs(node: Any, fields: dict[str, Any]) -> dict[str, list[str]]:
    """What the spec leaves to the model: {"energy": actions, "throughput": actions,
    "component": ["area", "leak_power"]} (empty lists dropped)."""
    out = {
        "energy": [a.name for a in node.actions if a.energy is None],
        "throughput": [a.name for a in node.actions if a.throughput is None and a.latency is None],
        "component": [k for k in ("area", "leak_power") if fields.get(k) is None],
    }
    return {k: v for k, v in out.items() if v}


def describe(missing: dict[str, list[str]]) -> str:
    """``the energy and throughput of read and write, and its area and leak_power``."""
    energy, tp = missing.get("energy", []), missing.get("throughput", [])
    parts = []
    if energy and energy == tp:
        parts.append(f"the energy and throughput of {_listed(energy)}")
    else:
        parts += [f"the energy of {_listed(energy)}"] if energy else []
        parts += [f"the throughput of {_listed(tp)}"] if tp else []
    if missing.get("component"):
        parts.append(f"its {_listed(missing['component'])}")
    return _listed(parts, ", and ")


def component_pricing(
    spec: Any,
    node: Any,
    kind: str,
    fields: dict[str, Any],
    scope: Scope,
    locate: Callable[..., Location],
) -> Pricing | None:
    """The pricing of a plug-in component, or None when the spec gives every value.

    Fails (located at ``component_class``) when the library is missing."""
    if node.component_class in (None, "Dummy"):
        return None
    missing = needs(node, fields)
    if not missing:
        return None
    where = locate(node.name, "component_class")
    if not cm.available():
        raise SpecError(
            f"{node.name} needs {describe(missing)} from component model "
            f"'{node.component_class}'; the component model library that gives them is "
            f"not installed: {cm.INSTALL}",
            where,
        )
    attributes = {"size": fields["size"]} if kind == "memory" else {}
    attributes.update(model_attributes(spec, node, scope, locate))
    wanted = set(missing.get("energy", [])) | set(missing.get("throughput", []))
    actions = [a.name for a in node.actions if a.name in wanted]
    index = {a.name: i for i, a in enumerate(node.actions)}
    return Pricing(
        node.name,
        node.component_class,
        attributes,
        actions,
        where,
        lambda action: locate(node.name, "actions", index[action]),
    )


def model_attributes(
    spec: Any, node: Any, scope: Scope, locate: Callable[..., Location]
) -> dict[str, Any]:
    """The arch-wide and the component's own model attributes, evaluated."""
    shared = spec.arch.extra_attributes_for_all_component_models
    own = node.extra_attributes_for_component_model
    raw = {**shared, **own}

    def where(key: str) -> Location:
        if key in own:
            return locate(node.name, "extra_attributes_for_component_model", key)
        return spec.locate("arch", "extra_attributes_for_all_component_models", key)

    values = evaluate_fields(raw, scope, locate=where, self_is_outer=True)
    roots = [Path(f).resolve().parent for f in getattr(spec, "_files", [])]
    for key, value in values.items():
        _check_file(value, roots, where(key))
    return values


def _check_file(value: Any, roots: list[Path], where: Location) -> None:
    """A file a model will read (NeuroSim's ``cell_config``) must be a regular file in
    the folder of a spec file (or below it): a spec may not make a model read anything
    else (``/dev/zero``, ``/etc/...``)."""
    if not isinstance(value, str) or not ("/" in value or os.path.exists(value)):
        return
    path = Path(value).resolve()
    if path.is_file() and any(path.is_relative_to(root) for root in roots):
        return
    raise SpecError(
        f"'{value}' is not a file beside the spec: a file given to a component model must "
        f"be a regular file in the folder of a spec file or below it",
        where,
    )


def action_arguments(
    act: Any, bits_per_action: float | None, scope: Scope, locate: Callable[[str], Location]
) -> dict[str, Any]:
    """Arguments of one action query: bits per action and the action's own attributes."""
    args = {} if bits_per_action is None else {"bits_per_action": bits_per_action}
    extra = evaluate_fields(
        act.extra_attributes_for_component_model, scope, locate=locate, self_is_outer=True
    )
    return {**args, **extra}


def _listed(items: list[str], last: str = " and ") -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + last + items[-1]
