"""The values of one swept variable: a list as written, or a range.

Ranges (``to`` is included when the steps land on it):

* ``{from: 64, to: 256, step: 64}``: 64, 128, 192, 256 (a negative step counts down);
* ``{from: 16, to: 1024, factor: 2}``: 16, 32, ..., 1024 (geometric; plotted on a log axis);
* ``{from: 1e9, to: 1e12, count: 4, scale: log}``: 1e9, 1e10, 1e11, 1e12 (``scale:
  linear``, the default, spaces them evenly).

Integers stay integers when every bound is one (and, for ``count``, when the values
fall on integers), so ``BUFFER_KIB`` reads 64, not 64.0, in templates and tables.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..spec import limits
from ..spec.errors import Location, SpecError
from ..spec.numbers import number

RANGE_KEYS = ("from", "to", "step", "factor", "count", "scale")
Locate = Callable[..., Location]
"""``locate(*keys)``: where a key of this variable's entry was written."""


@dataclass(frozen=True)
class SweptVariable:
    """A Jinja variable and the values the sweep gives it, in order."""

    name: str
    values: tuple[Any, ...]
    log: bool = False
    """Spaced geometrically (``factor`` or ``scale: log``): plots use a log axis."""


def swept_variable(name: str, raw: Any, locate: Locate) -> SweptVariable:
    """The values of ``name`` from its entry in the sweep file (a list or a range)."""
    if isinstance(raw, list):
        if not raw:
            raise SpecError("no values given (an empty list)", locate())
        _check_count(len(raw), locate())
        return SweptVariable(name, tuple(raw))
    if not isinstance(raw, Mapping):
        raise SpecError(
            "expected a list of values or a range {from, to, step | factor | count}, "
            f"got {raw!r}",
            locate(),
        )
    for key in raw:
        if key not in RANGE_KEYS:
            raise SpecError(
                f"unknown key '{key}' (a range has {', '.join(RANGE_KEYS)})", locate(key)
            )
    for key in ("from", "to"):
        if key not in raw:
            raise SpecError(f"missing required field '{key}'", locate(key))
    how = [k for k in ("step", "factor", "count") if k in raw]
    if len(how) != 1:
        raise SpecError("give exactly one of step, factor or count", locate(*how[1:2]))
    start = number(raw["from"], locate("from"))
    stop = number(raw["to"], locate("to"))
    scale = raw.get("scale", "linear")
    if scale not in ("linear", "log"):
        raise SpecError(f"scale must be linear or log, got {scale!r}", locate("scale"))
    if "scale" in raw and how[0] != "count":
        raise SpecError("scale goes with count (step is linear, factor geometric)", locate("scale"))
    kind = how[0]
    if kind == "step":
        values = _by_step(start, stop, number(raw["step"], locate("step")), locate)
    elif kind == "factor":
        values = _by_factor(start, stop, number(raw["factor"], locate("factor")), locate)
    else:
        count = number(raw["count"], locate("count"), low=1, whole=True)
        values = _by_count(start, stop, count, scale == "log", locate)
    return SweptVariable(name, tuple(values), log=kind == "factor" or scale == "log")


def _by_step(start: float, stop: float, step: float, locate: Locate) -> list[Any]:
    if step == 0 or (stop - start) * step < 0:
        raise SpecError(f"step {step:g} never goes from {start:g} to {stop:g}", locate("step"))
    exact = _integers(start, stop, step)
    n = (
        int((stop - start) // step) + 1  # all ints: int() only tells the type checker
        if exact
        else math.floor((stop - start) / step * (1 + 1e-12) + 1e-9) + 1
    )
    _check_count(n, locate())
    if exact:
        return [int(start + k * step) for k in range(n)]
    return [_tidy(start + k * step, start, step) for k in range(n)]


def _by_factor(start: float, stop: float, factor: float, locate: Locate) -> list[Any]:
    if start <= 0 or stop <= 0:
        raise SpecError("a geometric range needs from and to above 0", locate("from"))
    if factor <= 0 or factor == 1 or (stop - start) * (factor - 1) < 0:
        raise SpecError(
            f"factor {factor:g} never goes from {start:g} to {stop:g}", locate("factor")
        )
    n = math.floor(math.log(stop / start) / math.log(factor) * (1 + 1e-12) + 1e-9) + 1
    _check_count(n, locate())
    if _integers(start, stop, factor):
        while n > 1 and start * factor ** (n - 1) > stop:  # logarithms round either way
            n -= 1
        return [int(start * factor**k) for k in range(n)]
    return [_tidy(start * factor**k, start, factor) for k in range(n)]


def _by_count(start: float, stop: float, count: int, log: bool, locate: Locate) -> list[Any]:
    _check_count(count, locate("count"))
    if log and (start <= 0 or stop <= 0):
        raise SpecError("a log range needs from and to above 0", locate("from"))
    if count == 1:
        return [start]
    out = []
    for k in range(count):
        t = k / (count - 1)
        v = start * (stop / start) ** t if log else start + (stop - start) * t
        out.append(_tidy(v, start, stop))
    return out


def _tidy(value: float, *bounds: float) -> Any:
    """``value`` without float noise (0.30000000000000004 -> 0.3); an int when every bound
    is one and ``value`` lies on an integer."""
    if not math.isfinite(value):
        raise SpecError(f"range value {value} is not finite")
    clean = float(f"{value:.12g}")
    if _integers(*bounds) and abs(clean - round(clean)) <= 1e-9 * max(1.0, abs(clean)):
        return int(round(clean))
    return clean


def _integers(*values: float) -> bool:
    return all(isinstance(v, int) and not isinstance(v, bool) for v in values)


def _check_count(n: int, where: Location) -> None:
    limit = limits.current().sweep_points
    if n > limit:
        raise SpecError(
            limits.exceeded("sweep_points", f"{n:,} values is too many for one sweep"), where
        )
