"""The functions Jinja templates may call, and the checks run before each filter.

Every global is a plain function written here (no Python type or builtin is handed to a
template), and bounds what it builds; every filter and test is wrapped to count a step,
refuse arguments that would build too much (padding, repeats, joins) and bound its
result. Used by :mod:`.jinja_sandbox`, which passes its environment in.
"""

from __future__ import annotations

import functools
import math
import re
import types
from collections.abc import Callable, Iterable
from typing import Any

from jinja2.exceptions import SecurityError
from jinja2.runtime import Macro
from jinja2.utils import Namespace

from . import limits

_MAX_PRECISION = 1000
_MAX_JSON_INDENT = 64
_PRINTF = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(\*|\d+)?(?:\.(\*|\d+))?[hlL]?[a-zA-Z%]")


def safe(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Mark ``fn`` (a plain function written for templates) as callable by them."""
    # A marker in the function's own __dict__ (is_safe_function reads it): no declared attribute.
    fn.fusemap_safe = True  # type: ignore[attr-defined]
    return fn


def is_safe_function(obj: Any) -> bool:
    """A function marked with :func:`safe`."""
    return type(obj) is types.FunctionType and obj.__dict__.get("fusemap_safe") is True


def name_of(obj: Any) -> str:
    """How a refusal names a callable."""
    name = getattr(obj, "__name__", None)
    return repr(name) if isinstance(name, str) else f"a {type(obj).__name__}"


def expanded_size(value: Any, budget: int) -> int:
    """Size of ``value`` written out: characters of strings, 64-bit words of integers,
    one per other element, a nested container counted as often as it appears (but
    measured once); stops past ``budget``."""
    memo: dict[int, int] = {}

    def size(x: Any) -> int:
        if isinstance(x, str):
            return len(x) + 1
        if isinstance(x, int):
            return 1 + x.bit_length() // 64
        if not isinstance(x, list | tuple | dict):
            return 1
        if id(x) in memo:
            return memo[id(x)]
        total = 1
        for item in (*x.keys(), *x.values()) if isinstance(x, dict) else x:
            total += size(item)
            if total > budget:
                break
        memo[id(x)] = total
        return total

    return size(value)


def replaced_size(text: str, old: str, new: str) -> int:
    count = len(text) + 1 if old == "" else text.count(old)
    return len(text) + count * (len(new) - len(old))


def check_printf(fmt: str, values: Any) -> None:
    """``fmt % values``: no width or precision beyond the ``render_chars`` limit."""
    chars = limits.current().render_chars
    args = values if isinstance(values, tuple) else (values,)
    for match in _PRINTF.finditer(fmt):
        for part in match.groups():
            if part == "*":
                if any(isinstance(a, int) and abs(a) > chars for a in args):
                    raise SecurityError(limits.exceeded("render_chars", "format pads too far"))
            elif part is not None and int(part) > chars:
                raise SecurityError(limits.exceeded("render_chars", "format pads too far"))


# ---------------------------------------------------------------- filters and tests
def guarded_filter(env: Any, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` with a step counted, its arguments checked and its result bounded."""
    skip = 1 if getattr(fn, "jinja_pass_arg", None) is not None else 0
    check = _FILTER_CHECKS.get(name)

    @functools.wraps(fn)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        env.tick()
        if len(args) > skip:
            value = args[skip]
            if isinstance(value, list | tuple | dict):
                env._printable(value)  # filters may print or walk the whole value
            if check is not None:
                args = (*args[:skip], *check(*args[skip:], **kwargs))
        return env.bounded(fn(*args, **kwargs))

    return guarded


def _over(n: Any, limit_name: str, what: str) -> None:
    if (
        isinstance(n, int)
        and not isinstance(n, bool)
        and abs(n) > getattr(limits.current(), limit_name)
    ):
        raise SecurityError(limits.exceeded(limit_name, what))


def _check_center(value: Any, width: Any = 80, *rest: Any, **kw: Any) -> tuple:
    _over(width, "render_chars", "center pads too far")
    return (value, width, *rest)


def _check_indent(s: Any, width: Any = 4, *rest: Any, **kw: Any) -> tuple:
    lines = str(s).count("\n") + 1
    per = len(width) if isinstance(width, str) else width if isinstance(width, int) else 0
    _over(len(str(s)) + lines * per, "render_chars", "indent too large")
    return (s, width, *rest)


def _check_format(value: Any, *args: Any, **kwargs: Any) -> tuple:
    check_printf(str(value), tuple(args) or tuple(kwargs.values()))
    return (value, *args)


def _check_count(value: Any, count: Any = None, *rest: Any, **kw: Any) -> tuple:
    _over(count, "value_size", "too many groups")
    return (value, count, *rest)


def _check_replace(s: Any, old: Any = "", new: Any = "", *rest: Any, **kw: Any) -> tuple:
    if isinstance(old, str) and isinstance(new, str):
        _over(replaced_size(str(s), old, new), "render_chars", "replace too large")
    return (s, old, new, *rest)


def _check_join(value: Any, d: Any = "", *rest: Any, **kw: Any) -> tuple:
    items = list(value) if not isinstance(value, list | tuple) else value
    _over(len(items), "value_size", "join of too many items")
    total = sum(len(x) if isinstance(x, str) else 1 for x in items)
    _over(total + len(str(d)) * len(items), "render_chars", "join too large")
    return (items, d, *rest)


def _check_round(value: Any, precision: Any = 0, *rest: Any, **kw: Any) -> tuple:
    if isinstance(precision, int) and abs(precision) > _MAX_PRECISION:
        raise SecurityError(f"round precision too large (over {_MAX_PRECISION})")
    return (value, precision, *rest)


def _check_wordwrap(s: Any, width: Any = 79, *rest: Any, **kw: Any) -> tuple:
    wrap = rest[1] if len(rest) > 1 else kw.get("wrapstring")
    if isinstance(wrap, str):
        _over(len(str(s)) * (1 + len(wrap)), "render_chars", "wordwrap too large")
    return (s, width, *rest)


def _check_tojson(value: Any, indent: Any = None, *rest: Any, **kw: Any) -> tuple:
    if isinstance(indent, int) and indent > _MAX_JSON_INDENT:
        raise SecurityError(f"tojson indent too large (over {_MAX_JSON_INDENT})")
    return (value, indent, *rest)


def _check_sum(
    iterable: Any, attribute: Any = None, start: Any = 0, *rest: Any, **kw: Any
) -> tuple:
    items = list(iterable) if not isinstance(iterable, list | tuple) else iterable
    start = kw.pop("start", start) if "start" in kw else start
    if not isinstance(start, int | float):
        limit = limits.current().render_chars
        if expanded_size(items, limit) > limit:
            raise SecurityError(limits.exceeded("render_chars", "sum too large"))
    return (items, attribute, start, *rest)


_FILTER_CHECKS: dict[str, Callable[..., tuple]] = {
    "center": _check_center, "indent": _check_indent, "format": _check_format,
    "batch": _check_count, "slice": _check_count, "replace": _check_replace,
    "join": _check_join, "round": _check_round, "wordwrap": _check_wordwrap,
    "tojson": _check_tojson, "sum": _check_sum,
}  # fmt: skip


# --------------------------------------------------------------------------- globals
def safe_globals(env: Any) -> dict[str, Any]:
    """The functions (and ``pi``) every template sees; no Python type or builtin."""
    bounded, walk = env.bounded, env._iterate
    lim = limits.current

    def collect(iterable: Iterable[Any] = ()) -> list[Any]:
        out = []
        for x in walk(iterable):
            out.append(x)
            if len(out) > lim().value_size:
                raise SecurityError(limits.exceeded("value_size", "list too large"))
        return bounded(out)

    def keyed(key: Any) -> Any:
        if key is None:
            return None
        if not is_safe_function(key) and not isinstance(key, Macro):
            raise SecurityError(f"{name_of(key)} may not be used as a key")
        return key

    def range_(*args: int) -> range:
        r = range(*args)
        if len(r) > lim().value_size:
            raise SecurityError(limits.exceeded("value_size", f"range too big ({len(r):,} items)"))
        return r

    def str_(value: Any = "") -> str:
        return bounded(str(env._printable(value)))

    def int_(value: Any = 0, *args: Any) -> int:
        if isinstance(value, str) and len(value) > 5000:
            raise SecurityError("integer text too long")
        return int(value, *args)

    def round_(value: Any, ndigits: Any = None) -> Any:
        _check_round(value, ndigits or 0)
        return round(value, ndigits)

    def extreme(fn: Callable[..., Any]) -> Callable[..., Any]:
        def pick(*args: Any, key: Any = None, **kwargs: Any) -> Any:
            items = walk(args[0]) if len(args) == 1 else args
            return fn(items, key=keyed(key), **kwargs) if key else fn(items, **kwargs)

        pick.__name__ = fn.__name__
        return pick

    def sorted_(iterable: Iterable[Any], key: Any = None, reverse: bool = False) -> list[Any]:
        return sorted(collect(iterable), key=keyed(key), reverse=bool(reverse))

    def sum_(iterable: Iterable[Any], start: Any = 0) -> Any:
        items, _, start = _check_sum(collect(iterable), None, start)
        return bounded(sum(items, start))

    def prod(iterable: Iterable[Any], start: Any = 1) -> Any:
        for x in walk(iterable):
            start = env.call_binop(None, "*", start, x)
        return start

    def dict_(*args: Any, **kwargs: Any) -> dict[Any, Any]:
        items = [a if isinstance(a, dict) else collect(a) for a in args]
        return bounded(dict(*items, **kwargs))

    def namespace(*args: Any, **kwargs: Any) -> Namespace:
        return Namespace(dict_(*args, **kwargs))

    functions: dict[str, Callable[..., Any]] = {
        "abs": abs, "min": extreme(min), "max": extreme(max), "round": round_, "sum": sum_,
        "len": len, "sorted": sorted_, "enumerate": lambda x, start=0: walk(enumerate(x, start)),
        "zip": lambda *xs: walk(zip(*xs, strict=False)), "int": int_, "float": float, "str": str_,
        "bool": bool, "list": collect, "tuple": lambda x=(): tuple(collect(x)),
        "dict": dict_, "namespace": namespace, "range": range_, "prod": prod,
        **{n: getattr(math, n) for n in ("ceil", "floor", "log", "log2", "log10", "sqrt", "exp")},
    }  # fmt: skip
    out: dict[str, Any] = {}
    for name, fn in functions.items():
        wrapped = as_function(fn)
        wrapped.__name__ = name
        out[name] = safe(wrapped)
    out["pi"] = math.pi
    return out


def as_function(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A fresh plain function calling ``fn`` (a builtin's attributes stay out of reach)."""

    def call(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    return call
