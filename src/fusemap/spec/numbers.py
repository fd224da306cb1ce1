"""The numbers a spec gives, checked against what they can mean.

An energy of NaN, a negative leak power, a fanout of 0 or a rank of 2.5 coordinates
would run through the model and come out as a plausible-looking wrong number (or an
internal error). Each is refused where it was written, with the key that holds it.
"""

from __future__ import annotations

import json
import math
from typing import Any

from .errors import Location, SpecError

MAX_BITS = 1023
"""Integers must fit a float: the model computes with floats."""


def number(
    value: Any,
    where: Location | None,
    *,
    low: float = -math.inf,
    above: bool = False,
    high: float = math.inf,
    infinite: bool = False,
    whole: bool = False,
) -> Any:
    """``value`` if it is a number in the range (``low`` < or <= value <= ``high``;
    infinity only if ``infinite``; an integer if ``whole``), else a located SpecError."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        shown = repr(value) if isinstance(value, str) else type(value).__name__
        raise SpecError(f"expected a number, got {shown}", where)
    if isinstance(value, int) and value.bit_length() > MAX_BITS:
        raise SpecError(f"number too large (over 2**{MAX_BITS})", where)
    if math.isnan(value):
        raise SpecError("expected a number, got NaN", where)
    if math.isinf(value) and not (infinite and value > 0):
        raise SpecError(f"expected a finite number, got {value}", where)
    if value < low or (above and value == low) or value > high:
        raise SpecError(f"expected a number {_range(low, above, high)}, got {value:g}", where)
    if whole and not math.isinf(value):
        if not float(value).is_integer():
            raise SpecError(f"expected a whole number, got {value:g}", where)
        return int(value)
    return value


def _range(low: float, above: bool, high: float) -> str:
    parts = []
    if low > -math.inf:
        parts.append(f"{'above' if above else 'at least'} {low:g}")
    if high < math.inf:
        parts.append(f"at most {high:g}")
    return " and ".join(parts)


def amount(value: Any, where: Location | None) -> float:
    """An energy, area, power or scale: finite and not negative."""
    return number(value, where, low=0)


def positive(value: Any, where: Location | None, *, infinite: bool = False) -> float:
    """A width, count per action or rate: above 0 (``infinite`` allows inf)."""
    return number(value, where, low=0, above=True, infinite=infinite)


def count(value: Any, where: Location | None) -> int:
    """A fanout or number of instances: a whole number, at least 1."""
    return number(value, where, low=1, whole=True)


def finite_json(data: Any, indent: int | None = 1) -> str:
    """JSON text of ``data`` with every infinite or NaN float written as ``null`` (JSON
    has no Infinity or NaN; Python's ``json`` would write them, other readers fail)."""
    return json.dumps(_finite(data), indent=indent, allow_nan=False)


def _finite(data: Any) -> Any:
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {k: _finite(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [_finite(v) for v in data]
    return data
