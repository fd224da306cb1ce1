"""fusemap's own safe expression evaluator (format-and-model.md §1.1).

Expressions are parsed with :func:`ast.parse` and interpreted by a whitelist walker:
nothing is ever handed to Python's code execution. Size, depth, exponent, repetition,
range and iteration limits keep a hostile spec from exhausting time or memory.
"""

from __future__ import annotations

import ast
import difflib
import functools
import io
import math
import operator
import re
import time
import tokenize
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from fusemap.spec import limits
from fusemap.spec.errors import ExpressionError, Location, UnknownNameError
from fusemap.spec.safe_functions import (
    BUILTINS,
    CONSTANTS,  # noqa: F401  (re-exported)
    FUNCTIONS,
    MAX_DEPTH,
    MAX_ITERATIONS,
    MAX_NODES,
    MAX_TEXT,
    Guard,
    collect,
    is_whitelisted,
    max_size,
    safe_add,
    safe_lshift,
    safe_mod,
    safe_mul,
    safe_pow,
    too_large,
    value_size,
)
from fusemap.spec.values import QuotedStr


class ExprObject:
    """Base of objects whose attributes (and items) expressions may read."""

    def expr_getattr(self, name: str) -> Any:
        """Value of ``self.name`` inside an expression."""
        raise ExpressionError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def expr_getitem(self, key: Any) -> Any:
        """Value of ``self[key]`` inside an expression."""
        raise ExpressionError(f"'{type(self).__name__}' object is not subscriptable")

    def expr_call(self, name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """Value of ``self.name(*args, **kwargs)`` inside an expression (a method call)."""
        raise ExpressionError(
            f"calling anything but a whitelisted function or a spec object's method not "
            f"allowed ('{name}' is not a method of a {type(self).__name__.lstrip('_')})"
        )


class Scope:
    """Layered name lookup; the last layer wins, whitelisted names sit below all layers."""

    def __init__(self, *layers: Mapping[str, Any]):
        self.layers: tuple[Mapping[str, Any], ...] = layers

    def child(self, *more_layers: Mapping[str, Any]) -> Scope:
        """A scope with ``more_layers`` above (taking precedence over) this one's."""
        return Scope(*self.layers, *more_layers)

    def __contains__(self, name: object) -> bool:
        return any(name in layer for layer in self.layers) or name in BUILTINS

    def lookup(self, name: str) -> Any:
        """Value of ``name``; ExpressionError (with a suggestion) if it is unknown."""
        for layer in reversed(self.layers):
            if name in layer:
                return layer[name]
        if name in BUILTINS:
            return BUILTINS[name]
        values = {n for n in self.names() if n not in FUNCTIONS}  # not called: a value
        raise UnknownNameError(name, f"unknown name '{name}'{_suggest(name, values)}")

    def names(self) -> set[str]:
        """Every name visible in this scope."""
        out = set(BUILTINS)
        for layer in self.layers:
            out.update(k for k in layer if isinstance(k, str))
        return out


def _suggest(name: str, names: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, sorted(names), n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


_BINOPS: dict[type, tuple[str, Callable[[Any, Any], Any]]] = {
    ast.Add: ("+", safe_add), ast.Sub: ("-", operator.sub), ast.Mult: ("*", safe_mul),
    ast.Div: ("/", operator.truediv), ast.FloorDiv: ("//", operator.floordiv),
    ast.Mod: ("%", safe_mod), ast.Pow: ("**", safe_pow), ast.BitOr: ("|", operator.or_),
    ast.BitAnd: ("&", operator.and_), ast.BitXor: ("^", operator.xor),
    ast.LShift: ("<<", safe_lshift), ast.RShift: (">>", operator.rshift),
}  # fmt: skip
_UNARY: dict[type, Callable[[Any], Any]] = {
    ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_,
    ast.Invert: operator.invert,
}  # fmt: skip
_COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Is: operator.is_, ast.IsNot: operator.is_not,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
}  # fmt: skip
_ALLOWED = (
    ast.Expression, ast.Constant, ast.Name, ast.List, ast.Tuple, ast.Dict, ast.UnaryOp,
    ast.BinOp, ast.BoolOp, ast.Compare, ast.IfExp, ast.Call, ast.keyword, ast.GeneratorExp,
    ast.ListComp, ast.comprehension, ast.Subscript, ast.Slice, ast.Attribute, ast.Load,
    ast.Store, ast.And, ast.Or, *_BINOPS, *_UNARY, *_COMPARE,
)  # fmt: skip
_FORBIDDEN = {
    ast.Lambda: "lambda", ast.NamedExpr: "assignment expressions (:=)", ast.JoinedStr: "f-strings",
    ast.Starred: "starred arguments (*x)", ast.Await: "await", ast.Yield: "yield",
    ast.YieldFrom: "yield", ast.Set: "set literals", ast.SetComp: "set comprehensions",
    ast.DictComp: "dict comprehensions", ast.MatMult: "the @ operator",
}  # fmt: skip


def _check(tree: ast.Expression, text: str) -> None:
    """Reject anything outside the whitelist, and trees that are too big or too deep."""
    stack: list[tuple[ast.AST, int]] = [(tree, 0)]
    count = 0
    while stack:
        node, depth = stack.pop()
        count += 1
        if count > MAX_NODES or depth > MAX_DEPTH:
            raise ExpressionError("expression too large")
        if not isinstance(node, _ALLOWED):
            what = _FORBIDDEN.get(type(node), f"'{type(node).__name__}' syntax")
            raise ExpressionError(f"{what} not allowed in '{text}'")
        name = getattr(node, "id", None) or getattr(node, "attr", None)
        if isinstance(node, ast.keyword):
            if node.arg is None:
                raise ExpressionError(f"**arguments not allowed in '{text}'")
            name = node.arg
        if isinstance(name, str) and name.startswith("_"):
            raise ExpressionError(f"'{name}' is not allowed")
        bad = None
        if isinstance(node, ast.Constant) and not isinstance(node.value, int | float | str | None):
            bad = f"literal {node.value!r}"
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Lambda):
            bad = "calling anything but a whitelisted function"
        elif isinstance(node, ast.Dict) and None in node.keys:
            bad = "**dict unpacking"
        elif isinstance(node, ast.comprehension) and node.is_async:
            bad = "async comprehensions"
        if bad:
            raise ExpressionError(f"{bad} not allowed in '{text}'")
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))


def _targets(node: ast.expr) -> set[str]:
    if isinstance(node, ast.Name):
        return {node.id}
    if isinstance(node, ast.Tuple | ast.List):
        return set().union(*(_targets(e) for e in node.elts))
    raise ExpressionError("comprehension targets must be names")


def _free_names(node: ast.AST, bound: frozenset[str]) -> set[str]:
    if isinstance(node, ast.Name):
        return set() if node.id in bound else {node.id}
    out: set[str] = set()
    if isinstance(node, ast.GeneratorExp | ast.ListComp):
        inner = bound
        for gen in node.generators:
            out |= _free_names(gen.iter, inner)
            inner = inner | _targets(gen.target)
            for cond in gen.ifs:
                out |= _free_names(cond, inner)
        return out | _free_names(node.elt, inner)
    for child in ast.iter_child_nodes(node):
        out |= _free_names(child, bound)
    return out


class Expression:
    """A parsed, checked expression; immutable and shared through the parse cache."""

    __slots__ = ("text", "tree", "names")

    def __init__(self, text: str, tree: ast.Expression):
        self.text = text
        self.tree = tree
        self.names: frozenset[str] = frozenset(_free_names(tree, frozenset()))

    def __repr__(self) -> str:
        return f"Expression({self.text!r})"

    def evaluate(self, scope: Scope) -> Any:
        """Evaluate in ``scope``; every failure is an ExpressionError.

        The outermost evaluation sets the deadline (``expression_seconds``, or what is
        left of ``evaluation_seconds``) and charges its time to the spec's budget."""
        run = lambda: _Interpreter(self.text, scope).visit(self.tree.body, {})  # noqa: E731
        if Guard.depth:
            return _guard(self.text, run)
        start = time.monotonic()
        Guard.deadline, Guard.limit = limits.expression_deadline(start)
        Guard.text, Guard.depth = self.text, 1
        try:
            return _guard(self.text, run)
        finally:
            Guard.depth, Guard.deadline = 0, math.inf
            limits.charge(time.monotonic() - start)


@functools.lru_cache(maxsize=4096)
def parse_expression(text: str) -> Expression:
    """Parse and check ``text`` (cached); ExpressionError if invalid or not allowed."""
    if len(text) > MAX_TEXT:
        raise ExpressionError("expression too large")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        if "too many nested" in str(exc.msg):
            raise ExpressionError("expression too large") from None
        raise ExpressionError(f"invalid expression '{text}': {exc.msg}") from None
    except (RecursionError, MemoryError):
        raise ExpressionError("expression too large") from None
    except ValueError as exc:
        raise ExpressionError(f"invalid expression '{text}': {exc}") from None
    _check(tree, text)
    depth = 0
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text.strip()).readline):
            if tok.type == tokenize.OP:
                depth += (tok.string in "([{") - (tok.string in ")]}")
            if depth > MAX_DEPTH:
                raise ExpressionError("expression too large (nested too deeply)")
    except (tokenize.TokenError, SyntaxError):
        raise ExpressionError(f"invalid expression '{text}'") from None
    return Expression(text, tree)


def _guard(text: str, fn: Callable[[], Any]) -> Any:
    """Run ``fn``, turning Python errors into ExpressionErrors about ``text``."""
    try:
        return fn()
    except ExpressionError:
        raise
    except ZeroDivisionError:
        raise ExpressionError(f"division by zero in '{text}'") from None
    except (RecursionError, MemoryError):
        raise ExpressionError(f"expression too large: '{text}'") from None
    except OverflowError as exc:
        raise ExpressionError(f"overflow ({exc}) in '{text}'") from None
    except (ArithmeticError, TypeError, ValueError, LookupError) as exc:
        raise ExpressionError(f"{exc} in '{text}'") from None


class _Interpreter:
    """Walks a checked tree; ``env`` holds comprehension variables."""

    def __init__(self, text: str, scope: Scope):
        self.text = text
        self.scope = scope
        self.iterations = self.steps = 0

    def visit(self, node: ast.expr, env: dict[str, Any]) -> Any:
        self.steps += 1
        if not self.steps & 63:
            Guard.check()
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.List | ast.Tuple):
            items = collect(self.visit(e, env) for e in node.elts)
            return items if isinstance(node, ast.List) else tuple(items)
        if isinstance(node, ast.IfExp):
            return self.visit(node.body if self.visit(node.test, env) else node.orelse, env)
        if isinstance(node, ast.Slice):
            parts = (node.lower, node.upper, node.step)
            return slice(*(None if p is None else self.visit(p, env) for p in parts))
        return getattr(self, "_" + type(node).__name__)(node, env)

    def _Name(self, node: ast.Name, env: dict[str, Any]) -> Any:
        return env[node.id] if node.id in env else self.scope.lookup(node.id)

    def _Dict(self, node: ast.Dict, env: dict[str, Any]) -> Any:
        result = {}
        for k, v in zip(node.keys, node.values, strict=True):
            assert k is not None  # parse_expression refuses ``**`` in a dict
            key = self.visit(k, env)  # the key first, as a dict display does
            result[key] = self.visit(v, env)
        if value_size(result) > max_size():
            raise too_large("dict")
        return result

    def _UnaryOp(self, node: ast.UnaryOp, env: dict[str, Any]) -> Any:
        value = self.visit(node.operand, env)
        try:
            return _UNARY[type(node.op)](value)
        except TypeError:
            raise ExpressionError(
                f"bad operand type for unary operator: '{type(value).__name__}' in '{self.text}'"
            ) from None

    def _BinOp(self, node: ast.BinOp, env: dict[str, Any]) -> Any:
        a, b = self.visit(node.left, env), self.visit(node.right, env)
        symbol, fn = _BINOPS[type(node.op)]
        try:
            return fn(a, b)
        except TypeError:
            raise ExpressionError(
                f"unsupported operand types for {symbol}: '{type(a).__name__}' and "
                f"'{type(b).__name__}' in '{self.text}'"
            ) from None

    def _BoolOp(self, node: ast.BoolOp, env: dict[str, Any]) -> Any:
        value: Any = None
        for operand in node.values:
            value = self.visit(operand, env)
            if bool(value) == isinstance(node.op, ast.Or):
                return value
        return value

    def _Compare(self, node: ast.Compare, env: dict[str, Any]) -> Any:
        left = self.visit(node.left, env)
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            right = self.visit(comparator, env)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True

    def _Call(self, node: ast.Call, env: dict[str, Any]) -> Any:
        """Whitelisted functions (by name or as a value, e.g. ``(f if c else g)(x)``) and
        the methods spec objects offer (``Macro.get_fanout()``); nothing else is called."""
        func = node.func
        if isinstance(func, ast.Attribute):
            owner = self.visit(func.value, env)
            args, kwargs = self._arguments(node, env)
            if not isinstance(owner, ExprObject):
                kind = type(owner).__name__
                raise ExpressionError(f"a {kind} has no attribute '{func.attr}' in '{self.text}'")
            return owner.expr_call(func.attr, args, kwargs)
        if isinstance(func, ast.Name):
            name = func.id
            if name not in env and name not in self.scope:
                raise ExpressionError(f"unknown function '{name}'{_suggest(name, FUNCTIONS)}")
            fn = self._Name(func, env)
        else:
            name = ast.unparse(func)
            fn = self.visit(func, env)
        if not is_whitelisted(fn):
            raise ExpressionError(
                f"'{name}' is not a function that can be called (only whitelisted functions are)"
            )
        args, kwargs = self._arguments(node, env)
        Guard.check()
        return fn(*args, **kwargs)

    def _arguments(self, node: ast.Call, env: dict[str, Any]) -> tuple[list, dict]:
        args = [self.visit(a, env) for a in node.args]
        return args, {k.arg: self.visit(k.value, env) for k in node.keywords}

    def _Attribute(self, node: ast.Attribute, env: dict[str, Any]) -> Any:
        value = self.visit(node.value, env)
        if not isinstance(value, ExprObject):
            kind = type(value).__name__
            raise ExpressionError(f"a {kind} has no attribute '{node.attr}' in '{self.text}'")
        return value.expr_getattr(node.attr)

    def _Subscript(self, node: ast.Subscript, env: dict[str, Any]) -> Any:
        value, key = self.visit(node.value, env), self.visit(node.slice, env)
        if isinstance(value, ExprObject):
            return value.expr_getitem(key)
        if not isinstance(value, list | tuple | str | dict | range):
            raise ExpressionError(f"cannot subscript a {type(value).__name__} in '{self.text}'")
        try:
            return value[key]
        except KeyError:
            raise ExpressionError(f"key {key!r} not found in '{self.text}'") from None

    def _ListComp(self, node: ast.ListComp, env: dict[str, Any]) -> Any:
        return collect(self._generate(node, 0, env))

    def _GeneratorExp(self, node: ast.GeneratorExp, env: dict[str, Any]) -> Any:
        def guarded() -> Iterator[Any]:  # errors surface even when consumed later
            it = self._generate(node, 0, env)
            while True:
                try:
                    item = _guard(self.text, lambda: next(it))
                except StopIteration:
                    return
                yield item

        return guarded()

    def _generate(self, node: ast.GeneratorExp | ast.ListComp, index: int, env: dict[str, Any]):
        gen, last = node.generators[index], index == len(node.generators) - 1
        inner = dict(env)  # rebound per item; Python closures bind late the same way
        for item in self.visit(gen.iter, env):
            self.iterations += 1
            if self.iterations > MAX_ITERATIONS:
                raise too_large("comprehension")
            self._bind(gen.target, item, inner)
            if gen.ifs and not all(self.visit(cond, inner) for cond in gen.ifs):
                continue
            if last:
                yield self.visit(node.elt, inner)
            else:
                yield from self._generate(node, index + 1, inner)

    def _bind(self, target: ast.expr, value: Any, env: dict[str, Any]) -> None:
        if isinstance(target, ast.Name):
            env[target.id] = value
            return
        values = list(value)
        assert isinstance(target, ast.Tuple | ast.List)  # _targets() allows nothing else
        elts = target.elts
        if len(values) != len(elts):
            raise ExpressionError(
                f"cannot unpack {len(values)} values into {len(elts)} in '{self.text}'"
            )
        for t, v in zip(elts, values, strict=True):
            self._bind(t, v, env)


_INT_RE = re.compile(r"[+-]?\d+(?:_\d+)*")
_FLOAT_RE = re.compile(r"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?|inf|infinity)", re.I)


def to_number(text: str) -> int | float | bool | None:
    """``text`` as an int, float or bool ("true"/"false"), or None if it is not one."""
    s = text.strip()
    if s.lower() in ("true", "false"):
        return s.lower() == "true"
    try:
        if _INT_RE.fullmatch(s):
            return int(s)
        if _FLOAT_RE.fullmatch(s):
            return float(s)
    except ValueError:
        pass
    return None


def evaluate(value: Any, scope: Scope, *, location: Location | None = None) -> Any:
    """Evaluate one spec value: literals pass through, plain strings are expressions."""
    if not isinstance(value, str):
        return value
    number = to_number(value)
    if isinstance(value, QuotedStr):
        return number if number is not None and not isinstance(number, bool) else str(value)
    if number is not None:
        return number
    try:
        return parse_expression(value).evaluate(scope)
    except ExpressionError as exc:
        raise (exc.located(location) if location is not None else exc) from None


def __getattr__(name: str) -> Any:
    """``evaluate_fields`` and ``LazyFields`` live in :mod:`fusemap.spec.fields`."""
    if name in ("evaluate_fields", "LazyFields"):
        from . import fields

        return getattr(fields, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
