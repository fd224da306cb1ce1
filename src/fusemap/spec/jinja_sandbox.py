"""The Jinja sandbox spec files are rendered in: an allowlist, and a bound on every step.

Jinja's own sandbox blocks ``_`` attributes; it still lets a template reach whatever an
exposed Python type or callable can reach (``str.format`` on the ``str`` type reads any
attribute of its arguments). This sandbox exposes no Python type, module or raw builtin:

* the globals are plain functions written here (``str(x)``, ``list(x)``, ``range(n)``
  ...), each bounding what it builds;
* attributes are read only on data (strings, numbers, lists, tuples, dicts) and on the
  few Jinja objects a template works with (``loop``, namespaces, macros), and only
  those named in :data:`_ATTRIBUTES`; a value that is a type, module, function, frame or
  code object is never returned;
* a template may call only the globals, its macros, ``loop`` helpers and the allowed
  methods of data (``'x'.upper()``); ``format`` reads no attribute or item of its
  arguments and pads to at most the ``render_chars`` limit;
* every call, attribute, item, operator, loop iteration and filter counts one step
  against ``render_steps`` and checks the ``render_seconds`` deadline; a string is
  bounded by ``render_chars``, a list, tuple or dict by ``value_size`` (its length)
  and ``render_chars`` (its contents written out, shared parts counted each time).
"""

from __future__ import annotations

import functools
import math
import re
import string
import types
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from jinja2 import StrictUndefined, nodes
from jinja2.exceptions import SecurityError
from jinja2.ext import Extension
from jinja2.parser import Parser
from jinja2.runtime import BlockReference, LoopContext, Macro, Undefined
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.utils import Namespace

from . import limits
from .errors import Location, SpecError
from .jinja_functions import (
    as_function,
    check_printf,
    expanded_size,
    guarded_filter,
    is_safe_function,
    name_of,
    replaced_size,
    safe,
    safe_globals,
)
from .safe_functions import MAX_INT_BITS

_STR = (
    "capitalize casefold center count endswith find format format_map index isalnum "
    "isalpha isascii isdecimal isdigit isidentifier islower isnumeric isprintable isspace "
    "istitle isupper join ljust lower lstrip partition removeprefix removesuffix replace "
    "rfind rindex rjust rpartition rsplit rstrip split splitlines startswith strip "
    "swapcase title upper zfill"
)
_ATTRIBUTES: dict[type, frozenset[str]] = {
    str: frozenset(_STR.split()),
    int: frozenset({"bit_length", "real", "imag", "numerator", "denominator"}),
    float: frozenset({"is_integer", "real", "imag"}),
    list: frozenset({"index", "count"}),
    tuple: frozenset({"index", "count"}),
    dict: frozenset({"items", "keys", "values", "get"}),
    LoopContext: frozenset(
        {"changed", "cycle", "depth", "depth0", "first", "index", "index0", "last", "length"}
        | {"nextitem", "previtem", "revindex", "revindex0"}
    ),
    Macro: frozenset({"name", "arguments"}),
    BlockReference: frozenset({"super"}),
}
"""Attributes a template may read, per type of object (subclasses included)."""

_NEVER = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType,
          types.FrameType, types.CodeType, types.TracebackType, types.GeneratorType,
          types.CoroutineType, types.MethodType, types.BuiltinMethodType,
          types.MethodWrapperType, types.WrapperDescriptorType, types.MethodDescriptorType,
          types.GetSetDescriptorType, types.MemberDescriptorType, property, classmethod,
          staticmethod, functools.partial)  # fmt: skip
"""What an attribute read never returns (a callable one is reached by calling it)."""


class AssertExtension(Extension):
    """``{% assert cond, "message" %}``: a false condition is a SpecError at that line."""

    tags = {"assert"}

    def parse(self, parser: Parser) -> nodes.Node:
        """Parse ``assert cond[, message]`` into a call of :meth:`_check`."""
        lineno = next(parser.stream).lineno
        cond = parser.parse_expression()
        message: nodes.Expr = nodes.Const(None)
        if parser.stream.skip_if("comma"):
            message = parser.parse_expression()
        where = nodes.Const(parser.filename or parser.name or "<template>")
        call = self.call_method("_check", [cond, message, where, nodes.Const(lineno)])
        return nodes.ExprStmt(call, lineno=lineno)

    @staticmethod
    @safe
    def _check(cond: Any, message: Any, filename: str, lineno: int) -> str:
        if not cond:
            text = "assertion failed" if message is None else f"assertion failed: {message}"
            raise SpecError(text, Location(filename, lineno))
        return ""


class Trace:
    """What the last literal text a template printed was, and its source line."""

    __slots__ = ("text", "line")

    def __init__(self) -> None:
        self.text: str | None = None
        self.line = 0


class SpecEnvironment(ImmutableSandboxedEnvironment):
    """The sandbox of one load: StrictUndefined, no autoescape, an allowlist, a clock."""

    intercepted_binops = frozenset({"+", "-", "*", "/", "//", "%", "**"})

    def __init__(self) -> None:
        super().__init__(
            undefined=StrictUndefined,
            keep_trailing_newline=True,
            autoescape=False,
            extensions=[AssertExtension],
            finalize=self._printable,
        )
        lim = limits.current()
        self.clock = limits.Clock(
            lim.render_seconds, "render_seconds", "templates take too long", lim.render_steps
        )
        self.traces: list[Trace] = []
        self.built = 0
        self.globals.clear()
        self.globals.update(safe_globals(self))
        self.filters = {
            name: guarded_filter(self, name, fn)
            for name, fn in self.filters.items()
            if name != "random"  # not deterministic
        }
        # jinja2 types its default tests as dict[str, function], which is no Callable to mypy.
        self.tests = {
            name: guarded_filter(self, name, fn)  # type: ignore[arg-type]
            for name, fn in self.tests.items()
        }
        self.fusemap_literal = safe(as_function(self._literal))
        self.fusemap_iter = safe(as_function(self._iterate))
        self.fusemap_concat = safe(as_function(self._concat))
        self.fusemap_value = safe(as_function(self._value))

    # -------------------------------------------------------------- sizes and steps
    def tick(self) -> None:
        """One step of template code."""
        self.clock.tick()

    def bounded(self, value: Any) -> Any:
        """``value`` if its size is within the limits; iterators are walked with ticks."""
        lim = limits.current()
        if isinstance(value, str):
            if len(value) > lim.render_chars:
                raise SecurityError(limits.exceeded("render_chars", "string too large"))
            if len(value) >= _LARGE:
                self._built(len(value))
        elif isinstance(value, list | tuple | dict):
            if len(value) > lim.value_size:
                raise SecurityError(limits.exceeded("value_size", "value too large"))
            self._printable(value)
            if len(value) >= _LARGE:
                self._built(len(value))
        elif isinstance(value, int) and not isinstance(value, bool):
            if value.bit_length() > MAX_INT_BITS:
                raise SecurityError(f"integer too large (over {MAX_INT_BITS} bits)")
        elif isinstance(value, Iterator) and getattr(value, "gi_code", None) is not _WALK:
            return self._iterate(value)
        return value

    def _built(self, size: int) -> None:
        """Count a large value against ``render_total``: each may stay alive (a macro's
        argument at every level of a recursion), so their sum bounds the memory."""
        self.built += size
        if self.built > limits.current().render_total:
            what = "templates build too much text and data in total"
            raise SecurityError(limits.exceeded("render_total", what))

    def _printable(self, value: Any) -> Any:
        """Refuse containers whose contents, nested ones counted as often as they
        appear, are larger than ``render_chars`` (they could not be printed)."""
        if isinstance(value, list | tuple | dict):
            lim = limits.current().render_chars
            if expanded_size(value, lim) > lim:
                raise SecurityError(limits.exceeded("render_chars", "value too large"))
        return value

    def _iterate(self, iterable: Iterable[Any]) -> Iterator[Any]:
        for item in iterable:
            self.clock.tick()
            yield item

    def _literal(self, text: str, line: int) -> str:
        if self.traces:
            trace = self.traces[-1]
            trace.text, trace.line = text, line
        return text

    def _concat(self, *parts: Any) -> str:
        """``a ~ b ~ ...`` with the size of the result checked first."""
        texts = [str(self._printable(p)) for p in parts]
        if sum(map(len, texts)) > limits.current().render_chars:
            raise SecurityError(limits.exceeded("render_chars", "string too large"))
        return "".join(texts)

    def _value(self, value: Any) -> Any:
        return self.bounded(value)

    # ----------------------------------------------------------- the sandbox hooks
    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        """Only allowlisted attributes of allowlisted types, never a type or module."""
        self.clock.tick()
        if attr.startswith("_"):
            return False
        if not isinstance(obj, Namespace) and not any(
            attr in names for t, names in _ATTRIBUTES.items() if isinstance(obj, t)
        ):
            return False
        if isinstance(value, types.FunctionType):
            return is_safe_function(value)
        if isinstance(value, types.BuiltinMethodType | types.MethodType):
            return _is_allowed_method(value)
        return not isinstance(value, _NEVER)

    def getattr(self, obj: Any, attribute: str) -> Any:
        """``obj.attribute``: allowlisted attributes, else an item of a dict."""
        if isinstance(obj, Undefined):
            obj._fail_with_undefined_error()  # raises the undefined value's own error
        try:
            value = getattr(obj, attribute)
        except AttributeError:
            value = _MISSING
        if value is not _MISSING:
            if self.is_safe_attribute(obj, attribute, value):
                return self._method(obj, attribute, value)
            if not isinstance(obj, dict):
                return self.unsafe_undefined(obj, attribute)
        if isinstance(obj, dict):
            try:
                return obj[attribute]
            except (TypeError, LookupError):
                pass
        return self.undefined(obj=obj, name=attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        """``obj[argument]`` on data; a string argument falls back to an attribute."""
        self.clock.tick()
        if isinstance(obj, str | list | tuple | dict | range):
            try:
                return obj[argument]
            except (TypeError, LookupError):
                pass
        if isinstance(obj, Undefined):
            obj._fail_with_undefined_error()  # raises the undefined value's own error
        if isinstance(argument, str):
            try:
                value = getattr(obj, argument)
            except AttributeError:
                value = _MISSING
            if value is not _MISSING:
                if self.is_safe_attribute(obj, argument, value):
                    return self._method(obj, argument, value)
                return self.unsafe_undefined(obj, argument)
        return self.undefined(obj=obj, name=argument)

    def _method(self, obj: Any, name: str, value: Any) -> Any:
        """A str's ``format``/``format_map`` is replaced by the bounded formatter."""
        if isinstance(obj, str) and name in ("format", "format_map"):
            formatter = _Formatter(self)
            text = obj

            @safe
            def format_string(*args: Any, **kwargs: Any) -> str:
                if name == "format_map":
                    if kwargs or len(args) != 1:
                        raise TypeError("format_map() takes exactly one argument")
                    return formatter.vformat(text, (), args[0])
                return formatter.vformat(text, args, kwargs)

            return format_string
        return value

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
        """Call an allowed callable, with the size of padding and joins checked first."""
        __self.clock.tick()
        plain = is_safe_function(__obj) or isinstance(__obj, Undefined)
        if plain or isinstance(__obj, Macro | LoopContext | BlockReference):
            pass
        elif _is_allowed_method(__obj):
            _check_method(__obj, args, kwargs)
        else:
            raise SecurityError(f"{name_of(__obj)} is not safely callable")
        return __self.bounded(__context.call(__obj, *args, **kwargs))

    def call_binop(self, context: Any, operator_: str, left: Any, right: Any) -> Any:
        """Arithmetic with the size of the result checked before it is built."""
        self.clock.tick()
        lim = limits.current()
        if operator_ == "**":
            ints = isinstance(left, int) and isinstance(right, int) and abs(left) > 1
            if ints and right * math.log2(abs(left)) > MAX_INT_BITS:
                raise SecurityError(f"{left} ** {right} is too large")
        elif operator_ == "*":
            for seq, count in ((left, right), (right, left)):
                if isinstance(seq, str | list | tuple) and isinstance(count, int):
                    name = "render_chars" if isinstance(seq, str) else "value_size"
                    if len(seq) * count > getattr(lim, name):
                        what = "repeating a sequence that many times is too large"
                        raise SecurityError(limits.exceeded(name, what))
            ints = isinstance(left, int) and isinstance(right, int)
            if ints and left.bit_length() + right.bit_length() > MAX_INT_BITS:
                raise SecurityError("integer product too large")
        elif operator_ == "+" and isinstance(left, str | list | tuple):
            name = "render_chars" if isinstance(left, str) else "value_size"
            if isinstance(right, str | list | tuple) and len(left) + len(right) > getattr(
                lim, name
            ):
                raise SecurityError(limits.exceeded(name, "sum of sequences too large"))
        elif operator_ == "%" and isinstance(left, str):
            check_printf(left, right)
        return self.bounded(self.binop_table[operator_](left, right))

    # ------------------------------------------------------------- instrumentation
    def instrument(self, tree: nodes.Template) -> nodes.Template:
        """Rewrite a parsed template so its loops, joins and literals report to us."""

        def attr(name: str, args: list[nodes.Node], lineno: int) -> nodes.Call:
            fn = nodes.EnvironmentAttribute(name, lineno=lineno)
            return nodes.Call(fn, args, [], None, None, lineno=lineno)

        for loop in tree.find_all(nodes.For):
            loop.iter = attr("fusemap_iter", [loop.iter], loop.lineno)
        _rewrite(tree, attr)
        return tree


_MISSING = object()
_LARGE = 4096  # strings and containers at least this long count against render_total
_WALK = SpecEnvironment._iterate.__code__  # generators that already tick


def _rewrite(node: nodes.Node, attr: Callable[..., nodes.Call]) -> None:
    """Literals become ``fusemap_literal(text, line)``, ``~`` joins ``fusemap_concat``,
    list/tuple/dict displays ``fusemap_value``: each then passes through the sandbox."""
    for field in node.fields:
        value = getattr(node, field, None)
        if isinstance(value, list):
            new = []
            for item in value:
                if isinstance(item, nodes.Node):
                    _rewrite(item, attr)
                    item = _replace(item, attr)
                new.append(item)
            setattr(node, field, new)
        elif isinstance(value, nodes.Node):
            _rewrite(value, attr)
            setattr(node, field, _replace(value, attr))


def _replace(node: Any, attr: Callable[..., nodes.Call]) -> Any:
    if isinstance(node, nodes.TemplateData):
        line = nodes.Const(node.lineno)
        return attr("fusemap_literal", [nodes.Const(node.data), line], node.lineno)
    if isinstance(node, nodes.Concat):
        return attr("fusemap_concat", list(node.nodes), node.lineno)
    if isinstance(node, nodes.List | nodes.Dict) or (
        isinstance(node, nodes.Tuple) and node.ctx == "load"
    ):
        return attr("fusemap_value", [node], node.lineno)
    return node


def _is_allowed_method(obj: Any) -> bool:
    """A bound method of allowlisted data (``'a'.upper``) or of ``loop``."""
    if not isinstance(obj, types.BuiltinMethodType | types.MethodType):
        return False
    owner, name = getattr(obj, "__self__", None), getattr(obj, "__name__", "")
    if isinstance(owner, type | types.ModuleType) or owner is None:
        return False
    return any(name in names for t, names in _ATTRIBUTES.items() if isinstance(owner, t))


def _check_method(method: Any, args: tuple, kwargs: dict) -> None:
    """Refuse padding, joins and replacements whose result would be too large."""
    owner, name = method.__self__, method.__name__
    if not isinstance(owner, str):
        return
    chars = limits.current().render_chars
    numbers = [a for a in (*args, *kwargs.values()) if isinstance(a, int)]
    if name in ("ljust", "rjust", "center", "zfill") and any(n > chars for n in numbers):
        raise SecurityError(limits.exceeded("render_chars", f"str.{name} pads too far"))
    if name == "join" and args:
        items = args[0]
        if isinstance(items, list | tuple):
            total = sum(len(x) if isinstance(x, str) else 1 for x in items)
            if total + len(owner) * max(len(items) - 1, 0) > chars:
                raise SecurityError(limits.exceeded("render_chars", "str.join too large"))
    if name == "replace" and len(args) >= 2 and isinstance(args[0], str):
        old, new = args[0], args[1]
        if isinstance(new, str) and replaced_size(owner, old, new) > chars:
            raise SecurityError(limits.exceeded("render_chars", "str.replace too large"))


class _Formatter(string.Formatter):
    """``str.format`` for templates: fields name arguments only (``{0}``, ``{name}``),
    never their attributes or items, and pad to at most ``render_chars``."""

    def __init__(self, env: SpecEnvironment) -> None:
        super().__init__()
        self.env = env

    def get_field(self, field_name: str, args: Any, kwargs: Any) -> tuple[Any, str]:
        if "." in field_name or "[" in field_name:
            raise SecurityError(
                f"format field '{{{field_name}}}' reads an attribute or item, which "
                "templates may not do in a format string"
            )
        return self.get_value(
            int(field_name) if field_name.isdigit() else field_name, args, kwargs
        ), field_name

    def format_field(self, value: Any, format_spec: str) -> Any:
        self.env.tick()
        chars = limits.current().render_chars
        if any(int(n) > chars for n in re.findall(r"\d+", format_spec)):
            raise SecurityError(limits.exceeded("render_chars", "format pads too far"))
        return format(self.env._printable(value), format_spec)

    def vformat(self, format_string: str, args: Any, kwargs: Any) -> str:
        return str(self.env.bounded(super().vformat(format_string, args, kwargs)))
