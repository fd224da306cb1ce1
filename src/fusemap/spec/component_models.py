"""Prices from the field's component model library (``hwcomponents``, an optional extra).

A component that names a ``component_class`` and lacks an action energy or throughput,
an area or a leak power gets them from the library: the best model for the class and
the component's attributes prices the component (its area and leak power) and each of
its actions. Every distinct query is asked once per process (the library may run CACTI
or NeuroSim behind it), and each answer says which model gave it.

Without the library, asking is an error that names what was needed and how to install
it: nothing falls back to a made-up value.
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

INSTALL = "pip install 'fusemap[components]' (Python 3.12+)"
BUILD = "python -m fusemap.component_binaries"


class ComponentModelError(Exception):
    """The library is missing, or it could not price a query (message: one line)."""


@dataclass(frozen=True)
class ActionPrice:
    """Energy (J) and throughput (actions/s) of one action, and the model that gave them."""

    energy: float
    throughput: float
    model: str


@dataclass(frozen=True)
class ComponentPrice:
    """Area (m^2) and leak power (W) of one component instance, and the model."""

    area: float
    leak_power: float
    model: str


_MODELS: dict[tuple, Any] = {}
_ACTIONS: dict[tuple, ActionPrice] = {}
_LIBRARY: list[Any] = []  # the imported module, once
queries = {"models": 0, "actions": 0}
"""How many queries actually reached the library (tests check the caching)."""


def library() -> Any:
    """The ``hwcomponents`` module, or ComponentModelError naming the install command."""
    if not _LIBRARY:
        try:
            import hwcomponents
        except ImportError:
            raise ComponentModelError(
                f"the component model library is not installed: {INSTALL}"
            ) from None
        _LIBRARY.append(hwcomponents)
    return _LIBRARY[0]


def available() -> bool:
    """Whether the library can be imported here."""
    try:
        library()
    except ComponentModelError:
        return False
    return True


def _frozen(value: Any) -> Any:
    """A hashable stand-in for an attribute value (lists and dicts included)."""
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), _frozen(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    return value


def _model_key(component_class: str, attributes: Mapping[str, Any], actions) -> tuple:
    return (component_class.lower(), _frozen(attributes), tuple(sorted(actions)))


def _model(component_class: str, attributes: Mapping[str, Any], actions: list[str]) -> Any:
    key = _model_key(component_class, attributes, actions)
    if key not in _MODELS:
        hwc = library()
        queries["models"] += 1
        try:
            with warnings.catch_warnings():  # the library's own deprecation notices
                warnings.simplefilter("ignore", DeprecationWarning)
                _MODELS[key] = hwc.get_model(component_class, dict(attributes), list(actions))
        except Exception as err:  # the library reports its failures with any exception
            _MODELS[key] = ComponentModelError(_summary(err, component_class))
    found = _MODELS[key]
    if isinstance(found, ComponentModelError):
        raise ComponentModelError(str(found))
    return found


def price_component(
    component_class: str, attributes: Mapping[str, Any], actions: list[str]
) -> ComponentPrice:
    """Area and leak power of the best model for the class and attributes."""
    model = _model(component_class, attributes, actions)
    area, leak = _number(model.area, "area"), _number(model.leak_power, "leak power")
    return ComponentPrice(area, leak, type(model).__name__)


def price_action(
    component_class: str,
    attributes: Mapping[str, Any],
    actions: list[str],
    action: str,
    arguments: Mapping[str, Any],
) -> ActionPrice:
    """Energy and throughput of ``action`` with ``arguments`` (e.g. ``bits_per_action``)."""
    key = (_model_key(component_class, attributes, actions), action, _frozen(arguments))
    if key not in _ACTIONS:
        model = _model(component_class, attributes, actions)
        queries["actions"] += 1
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                cost = model.try_call_arbitrary_action(action, **dict(arguments))
        except Exception as err:
            raise ComponentModelError(_summary(err, f"{component_class}.{action}")) from None
        energy = _number(cost.energy, f"{action} energy")
        throughput = _number(cost.throughput, f"{action} throughput")
        _ACTIONS[key] = ActionPrice(energy, throughput, type(model).__name__)
    return _ACTIONS[key]


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise ComponentModelError(f"the model gave {what} {value!r}, not a number")
    if value < 0:
        raise ComponentModelError(f"the model gave a negative {what} ({value})")
    return float(value)


_ERROR_LINE = re.compile(r"^(\w*(Error|Exception)): (.*)$")


def _summary(err: Exception, query: str) -> str:
    """One line out of the library's multi-line reports: the causes it logged."""
    text = str(err)
    lines = [line.strip(" |\t") for line in text.splitlines()]
    causes = list(dict.fromkeys(m.group(0) for m in map(_ERROR_LINE.match, lines) if m))
    if any(k in text for k in ("GLIBC", "CACTI failed", "NeuroSIM returned error")):
        return (
            f"the component model library could not price {query}: a simulator binary "
            f"it runs does not work on this machine; build it with: {BUILD}"
        )
    if causes:
        detail = "; ".join(causes[:3])
    else:
        detail = " ".join(line for line in lines if line)
        detail = detail.split(" Supported components:")[0]
    if len(detail) > 400:
        detail = detail[:400] + " ..."
    return f"the component model library could not price {query}: {detail}"
