"""The concise Einsum form, ``"Out[...] = <one operator over tensors> [:: reduce]"``.

Plain specs write ``Z[m, n] = A[m, k] * B[k, n]``; extended Einsums (FuseMax cascades)
name one map operator per Einsum and optionally a reduce operator after ``::``:

* ``A[...]`` copy; ``A * B * ...`` multiply; ``A + B + ...`` add; ``A - B`` subtract;
  ``A / B`` divide; ``max(A, B, ...)`` max; ``exp(A - B)`` (or ``exp(A)``) exp_difference;
  ``name(A, ...)`` a custom operator called ``name``.
* ``GM[p] = QK[m, p] :: max`` reduces the rank variables missing from the output with max.

The right side is read by :func:`ast.parse` after every tensor access is replaced by a
placeholder, and only the shapes above are accepted; nothing is ever executed.
"""

from __future__ import annotations

import ast
import re

_TENSOR = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*\[([^\]]*)\]")
_VAR = re.compile(r"^[a-z][A-Za-z0-9_]*$")
_SYMBOL = re.compile(r"^[A-Z][A-Za-z0-9_]*$")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_REDUCE = ("add", "max", "none")
_HELP = (
    "write one operator per Einsum: A * B, A + B, A - B, A / B, max(A, B), exp(A - B), "
    "f(A, ...) or a single tensor, optionally followed by ':: max' (or ':: add'); "
    "split longer expressions into several Einsums"
)


def parse_concise(text: str) -> tuple[str, list[dict]]:
    """``"Z[m, n] = A[m, k] * B[k, n]"`` -> (name, tensor accesses), each tensor once."""
    parsed = parse_concise_full(text)
    return parsed["name"], parsed["tensor_accesses"]


def parse_concise_full(text: str) -> dict:
    """Name, tensor accesses, operands in order, map operator and reduce operator (or None).

    A tensor that the right side reads several times (``RM[m1, p]`` and ``RM[m1+1, p]``),
    or that is also the output (a recurrence), is one tensor access but several operands.
    """
    if text.count("=") != 1 or "==" in text:
        raise ValueError(f"expected 'Out[...] = In[...] ...', got '{text}'")
    lhs, rhs = text.split("=")
    outs = _TENSOR.findall(lhs)
    if len(outs) != 1 or _TENSOR.sub("", lhs).strip():
        raise ValueError(f"the left side of '{text}' must be one tensor, e.g. Z[m, n]")
    rhs, reduce_op = _split_reduce(rhs, text)
    accesses = [_access(outs[0], output=True)]
    operands: list[dict] = []
    for found in _TENSOR.findall(rhs):
        operand = _access(found, output=False)
        operand.pop("output")
        operands.append(operand)
        if not any(a["name"] == found[0] for a in accesses):
            accesses.append(_access(found, output=False))
    map_op = _map_operator(rhs, len(operands), text)
    return {
        "name": outs[0][0],
        "tensor_accesses": accesses,
        "operands": operands,
        "map_operator": map_op,
        "reduce_operator": reduce_op,
    }


def _split_reduce(rhs: str, text: str) -> tuple[str, str | None]:
    """Cut a trailing ``:: op`` (outside brackets) off the right side."""
    depth, cut = 0, -1
    for i, ch in enumerate(rhs):
        depth += (ch == "[") - (ch == "]")
        if depth == 0 and rhs.startswith("::", i):
            cut = i
    if cut < 0:
        return rhs, None
    op = rhs[cut + 2 :].strip()
    if op not in _REDUCE:
        raise ValueError(
            f"unknown reduce operator '{op}' in '{text}' (expected one of {', '.join(_REDUCE)})"
        )
    return rhs[:cut], op


def _map_operator(rhs: str, n_operands: int, text: str) -> str:
    """The operator of the right side, with tensors replaced by placeholder names."""
    counter = iter(range(n_operands))
    skeleton = _TENSOR.sub(lambda _: f"_t{next(counter)}", rhs).strip()
    try:
        tree = ast.parse(skeleton, mode="eval").body
    except SyntaxError:
        raise ValueError(f"cannot read the right side of '{text}': {_HELP}") from None
    op = _classify(tree)
    if op is None or n_operands == 0:
        raise ValueError(f"cannot read the operator of '{text}': {_HELP}")
    return op


def _is_operand(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id.startswith("_t")


def _chain(node: ast.AST, kind: type) -> list[ast.AST]:
    """Operands of ``a op b op c`` (any nesting of one associative operator)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, kind):
        return _chain(node.left, kind) + _chain(node.right, kind)
    return [node]


_ASSOCIATIVE: tuple[tuple[type[ast.operator], str], ...] = (
    (ast.Mult, "multiply"),
    (ast.Add, "add"),
)
"""Operators whose chains ``a op b op c`` are one operation, and its name."""
_BINARY: tuple[tuple[type[ast.operator], str], ...] = ((ast.Sub, "subtract"), (ast.Div, "divide"))
"""Operators of exactly two operands, and the operation's name."""


def _classify(tree: ast.AST) -> str | None:
    if _is_operand(tree):
        return "copy"
    if isinstance(tree, ast.BinOp):
        for kind, name in _ASSOCIATIVE:
            if isinstance(tree.op, kind):
                return name if all(map(_is_operand, _chain(tree, kind))) else None
        for kind, name in _BINARY:
            if isinstance(tree.op, kind) and _is_operand(tree.left) and _is_operand(tree.right):
                return name
        return None
    if isinstance(tree, ast.Call) and isinstance(tree.func, ast.Name) and not tree.keywords:
        name, args = tree.func.id, tree.args
        if name.startswith("_") or not args:
            return None
        if name == "exp" and len(args) == 1:
            arg = args[0]
            if _is_operand(arg):
                return "exp_difference"
            if (
                isinstance(arg, ast.BinOp)
                and isinstance(arg.op, ast.Sub)
                and _is_operand(arg.left)
                and _is_operand(arg.right)
            ):
                return "exp_difference"
            return None
        if name == "max" and len(args) < 2:
            return None  # a reduction is written ':: max'
        return name if all(map(_is_operand, args)) else None
    return None


def _access(found: tuple[str, str], output: bool) -> dict:
    """One tensor access; an index entry is ``v``, ``Rank: expr``, ``v + 1`` or ``SIZE``."""
    name, index = found
    projection: dict[str, str] = {}
    for entry in (e.strip() for e in index.split(",")):
        if not entry:
            continue
        if ":" in entry:
            rank, expr = (s.strip() for s in entry.split(":", 1))
        elif _VAR.match(entry) or _SYMBOL.match(entry):
            # A bare rank variable (rank = its upper-cased name), or a rank size used as a
            # constant coordinate: RNV[f, M1, p] reads coordinate M1 of rank M1.
            rank, expr = entry.upper(), entry
        else:
            variables = {v for v in _IDENT.findall(entry) if _VAR.match(v)}
            if len(variables) != 1:
                raise ValueError(f"index '{entry}' of {name}: name its rank, e.g. 'RANK: {entry}'")
            rank, expr = variables.pop().upper(), entry
        projection[rank] = expr
    return {"name": name, "projection": projection, "output": output}
