"""Limits and the whitelisted functions that expressions may call (all bounded).

Split from the evaluator so each stays readable; the evaluator imports everything here.
Every function bounds the size of what it builds, and every function that walks an
iterable checks the expression's deadline as it goes: one slow call cannot run past the
time limit that the evaluator checks between its own steps.
"""

from __future__ import annotations

import math
import operator
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from fusemap.spec import limits
from fusemap.spec.cim_functions import CIM_FUNCTIONS
from fusemap.spec.errors import ExpressionError

MAX_TEXT = 10_000
MAX_DEPTH = 100
MAX_NODES = 5_000
MAX_POW_BITS = 10_000
MAX_EXPONENT = 10_000
MAX_INT_BITS = 100_000
MAX_RANGE = 10_000_000
MAX_ITERATIONS = 10_000_000
_TICK = 255  # check the clock every 256 items


class Guard:
    """The deadline of the expression being evaluated (one at a time: nested
    evaluations, e.g. of another component's field, share the outermost one)."""

    depth = 0
    deadline = math.inf
    limit = "expression_seconds"
    text = ""

    @classmethod
    def check(cls) -> None:
        """Refuse when the expression has run past its deadline."""
        if time.monotonic() > cls.deadline:
            what = f"expression takes too long: '{cls.text}'"
            if cls.limit == "evaluation_seconds":
                what = f"the spec's expressions take too long in total (at '{cls.text}')"
            raise ExpressionError(limits.exceeded(cls.limit, what))


def too_large(what: str) -> ExpressionError:
    return ExpressionError(f"{what} too large")


def _int(x: Any) -> bool:
    return isinstance(x, int)


def _seq(x: Any) -> bool:
    return isinstance(x, str | list | tuple)


def _ticking(iterable: Iterable[Any]) -> Iterator[Any]:
    """``iterable``, checking the deadline every few items."""
    for n, x in enumerate(iterable):
        if not n & _TICK:
            Guard.check()
        yield x


def safe_pow(a: Any, b: Any, mod: Any = None) -> Any:
    """``a ** b`` (or ``pow(a, b, mod)``) refusing huge exponents and results."""
    if mod is not None:
        if not (_int(a) and _int(b) and _int(mod)):
            raise TypeError("pow() with 3 arguments needs integers")
        if max(a.bit_length(), b.bit_length(), mod.bit_length()) > MAX_POW_BITS:
            raise too_large("power")
        return pow(a, b, mod)
    if isinstance(b, int | float) and abs(b) > MAX_EXPONENT:
        raise too_large("exponent")
    if _int(a) and _int(b) and b > 0 and abs(a) > 1 and b * math.log2(abs(a)) > MAX_POW_BITS:
        raise too_large("power")
    result = operator.pow(a, b)
    if isinstance(result, complex):
        raise ExpressionError(f"{a!r} ** {b!r} has no real result")
    return result


def _bounded(fn: Callable[..., Any], what: str, too_big: Callable[..., bool]) -> Callable[..., Any]:
    """``fn``, refusing arguments for which ``too_big`` holds ("<what> too large")."""

    def bounded(*args: Any, **kwargs: Any) -> Any:
        if too_big(*args, **kwargs):
            raise too_large(what)
        return fn(*args, **kwargs)

    return bounded


def value_size(x: Any, budget: int | None = None) -> int:
    """Rough memory of ``x`` in elements (a string counts its length, an integer its
    64-bit words); stops counting past ``budget``."""
    if budget is None:
        budget = limits.current().value_size
    if isinstance(x, str):
        return max(len(x), 1)
    if isinstance(x, int):
        return 1 + x.bit_length() // 64
    if not isinstance(x, list | tuple | dict):
        return 1
    size = 1
    for item in x.items() if isinstance(x, dict) else x:
        size += value_size(item, budget - size)
        if size > budget:
            break
    return size


def max_size() -> int:
    """The ``value_size`` limit in force."""
    return limits.current().value_size


def _content(seq: Any) -> int:
    return len(seq) if isinstance(seq, str) else value_size(seq, max_size() + 1) - 1


def _mul_too_big(a: Any, b: Any) -> bool:
    if _int(a) and _int(b):
        return a.bit_length() + b.bit_length() > MAX_INT_BITS
    n, seq = (b, a) if _int(b) else (a, b)
    return _int(n) and _seq(seq) and n > 0 and _content(seq) * n > max_size()


def _range_len(*args: Any) -> int:
    try:
        return len(range(*args))
    except OverflowError:
        return MAX_RANGE + 1


def collect(iterable: Iterable[Any] = ()) -> list[Any]:
    """``list(iterable)``, refusing results larger than the ``value_size`` limit."""
    out, size, limit = [], 0, max_size()
    for n, x in enumerate(iterable):
        if not n & _TICK:
            Guard.check()
        size += value_size(x, limit + 1 - size)
        if size > limit:
            raise too_large("list")
        out.append(x)
    return out


def _sorted(iterable: Iterable[Any], *, key: Any = None, reverse: bool = False) -> list[Any]:
    return sorted(collect(iterable), key=key, reverse=reverse)


def _tuple(iterable: Iterable[Any] = ()) -> tuple[Any, ...]:
    return tuple(collect(iterable))


safe_mul = _bounded(operator.mul, "result", _mul_too_big)
safe_add = _bounded(
    operator.add,
    "sequence",
    lambda a, b: _seq(a) and _seq(b) and _content(a) + _content(b) > max_size(),
)
safe_lshift = _bounded(
    operator.lshift,
    "integer",
    lambda a, b: _int(a) and _int(b) and a.bit_length() + b > MAX_INT_BITS,
)
_factorial = _bounded(math.factorial, "factorial argument", lambda n: _int(n) and n > 1000)
_range = _bounded(range, "range", lambda *args: _range_len(*args) > MAX_RANGE)
_round = _bounded(round, "ndigits", lambda x, ndigits=None: _int(ndigits) and abs(ndigits) > 1000)
_str = _bounded(str, "string", lambda x="": value_size(x) > max_size())
_int_fn = _bounded(int, "integer text", lambda x=0, *a, **k: isinstance(x, str) and len(x) > 5000)


def safe_mod(a: Any, b: Any) -> Any:
    if isinstance(a, str):
        raise ExpressionError("string formatting with % is not allowed")
    return operator.mod(a, b)


def _sum(iterable: Iterable[Any], start: Any = 0) -> Any:
    if _seq(start):
        raise ExpressionError("sum() adds numbers only")
    return sum(_ticking(iterable), start)


def _prod(iterable: Iterable[Any], *, start: Any = 1) -> Any:
    for n, x in enumerate(iterable):
        if not n & _TICK:
            Guard.check()
        start = safe_mul(start, x)
    return start


def _lcm(*args: int) -> int:
    result = 1
    for x in args:
        result = math.lcm(result, x)
        if result.bit_length() > MAX_INT_BITS:
            raise too_large("integer")
    return result


def _extreme(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``min``/``max``: one iterable argument is walked with deadline checks."""

    def extreme(*args: Any, **kwargs: Any) -> Any:
        if len(args) == 1:
            return fn(_ticking(args[0]), **kwargs)
        return fn(*args, **kwargs)

    return extreme


def _walking(fn: Callable[..., Any], n_iterables: int | None = None) -> Callable[..., Any]:
    """``fn`` whose first ``n_iterables`` (default: all) positional arguments are
    iterables, walked with deadline checks."""

    def walking(*args: Any, **kwargs: Any) -> Any:
        n = len(args) if n_iterables is None else n_iterables
        return fn(*(_ticking(a) for a in args[:n]), *args[n:], **kwargs)

    return walking


_MATH = "ceil floor log log2 log10 sqrt exp isinf isnan isclose gcd trunc"
FUNCTIONS: dict[str, Callable[..., Any]] = {
    **{name: getattr(math, name) for name in _MATH.split()},
    "prod": _prod, "factorial": _factorial, "lcm": _lcm, "abs": abs, "round": _round,
    "sum": _sum, "range": _range, "len": len, "min": _extreme(min), "max": _extreme(max),
    "float": float, "int": _int_fn, "str": _str, "bool": bool, "list": collect,
    "tuple": _tuple, "enumerate": _walking(enumerate, 1), "zip": _walking(zip),
    "sorted": _sorted, "any": _walking(any), "all": _walking(all), "pow": safe_pow,
    **CIM_FUNCTIONS,
}  # fmt: skip
"""Functions every expression may call (the only callable values); the CiM ones are
documented in :mod:`fusemap.spec.cim_functions`."""

CONSTANTS: dict[str, Any] = {
    "inf": math.inf, "pi": math.pi, "e": math.e, "nan": math.nan, "true": True, "false": False,
}  # fmt: skip
"""Constants every expression may use."""

BUILTINS: dict[str, Any] = {**FUNCTIONS, **CONSTANTS}
_CALLABLE: dict[int, Callable[..., Any]] = {id(f): f for f in FUNCTIONS.values()}


def is_whitelisted(value: object) -> bool:
    """Whether ``value`` is one of the functions expressions may call (by identity)."""
    return _CALLABLE.get(id(value)) is value
