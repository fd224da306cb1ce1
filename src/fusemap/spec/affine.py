"""Affine index expressions (``p*2 + r``) and box bounds of rank variables.

Projections and iteration-space constraints are affine in the rank variables. Bounds
are found by interval propagation over the constraints, which is exact for the box
shapes the field uses (no polyhedral library needed).
"""

from __future__ import annotations

import ast
import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property

from .errors import SpecError


@dataclass(frozen=True)
class Affine:
    """``sum(coef * var) + const`` with integer coefficients."""

    coeffs: tuple[tuple[str, int], ...]
    const: int = 0

    @cached_property
    def variables(self) -> tuple[str, ...]:
        """Rank variables with a non-zero coefficient."""
        return tuple(v for v, _ in self.coeffs)

    def coefficient(self, var: str) -> int:
        """Coefficient of ``var`` (0 if absent)."""
        return dict(self.coeffs).get(var, 0)

    @cached_property
    def is_single_variable(self) -> bool:
        """True for a bare ``v`` (coefficient 1, no constant): the rank var is Relevant."""
        return len(self.coeffs) == 1 and self.coeffs[0][1] == 1 and self.const == 0

    def extent(self, shape: Mapping[str, int | float]) -> float:
        """Dense box extent of the image when each variable spans ``shape[var]`` values."""
        return sum(abs(c) * (shape.get(v, 1) - 1) for v, c in self.coeffs) + 1

    def range(self, bounds: Mapping[str, tuple[int, int]]) -> tuple[int, int]:
        """Min and max over a box of variable bounds."""
        lo = hi = self.const
        for v, c in self.coeffs:
            a, b = bounds[v]
            lo += min(c * a, c * b)
            hi += max(c * a, c * b)
        return lo, hi

    def __str__(self) -> str:
        parts = [v if c == 1 else f"{c}*{v}" for v, c in self.coeffs]
        if self.const or not parts:
            parts.append(str(self.const))
        return " + ".join(parts)


def parse_affine(text: str | int, constants: Mapping[str, float] | None = None) -> Affine:
    """Parse an affine expression; names not in ``constants`` are rank variables."""
    if isinstance(text, int):
        return Affine((), text)
    try:
        tree = ast.parse(str(text).strip(), mode="eval").body
    except SyntaxError:
        raise SpecError(f"cannot read index expression '{text}'") from None
    coeffs, const = _linear(tree, constants or {}, str(text))
    if const.denominator != 1 or any(c.denominator != 1 for c in coeffs.values()):
        raise SpecError(f"index expression '{text}' must have integer coefficients")
    return Affine(
        tuple((v, int(c)) for v, c in coeffs.items() if c != 0),
        int(const),
    )


def _linear(node: ast.AST, constants: Mapping[str, float], text: str) -> tuple[dict, Fraction]:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return {}, Fraction(node.value)
    if isinstance(node, ast.Name):
        if node.id in constants:
            return {}, Fraction(constants[node.id])
        return {node.id: Fraction(1)}, Fraction(0)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        c, k = _linear(node.operand, constants, text)
        sign = -1 if isinstance(node.op, ast.USub) else 1
        return {v: sign * x for v, x in c.items()}, sign * k
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        c1, k1 = _linear(node.left, constants, text)
        c2, k2 = _linear(node.right, constants, text)
        sign = 1 if isinstance(node.op, ast.Add) else -1
        out = dict(c1)
        for v, x in c2.items():
            out[v] = out.get(v, 0) + sign * x
        return out, k1 + sign * k2
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        c1, k1 = _linear(node.left, constants, text)
        c2, k2 = _linear(node.right, constants, text)
        if c1 and c2:
            raise SpecError(f"index expression '{text}' is not affine (product of variables)")
        if c1:
            return {v: x * k2 for v, x in c1.items()}, k1 * k2
        return {v: x * k1 for v, x in c2.items()}, k1 * k2
    raise SpecError(f"index expression '{text}' is not affine in the rank variables")


@dataclass(frozen=True)
class Constraint:
    """``lo <= expr <= hi`` (either side may be infinite; an equality keeps its exact Fraction)."""

    expr: Affine
    lo: float | Fraction
    hi: float | Fraction


_OPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "=="}


def parse_constraints(text: str, constants: Mapping[str, float] | None = None) -> list[Constraint]:
    """``0 <= m < 128`` or ``a <= b and c < d`` -> constraints."""
    try:
        tree = ast.parse(str(text).strip(), mode="eval").body
    except SyntaxError:
        raise SpecError(f"cannot read constraint '{text}'") from None
    parts = tree.values if isinstance(tree, ast.BoolOp) and isinstance(tree.op, ast.And) else [tree]
    out: list[Constraint] = []
    for part in parts:
        if not isinstance(part, ast.Compare):
            raise SpecError(f"constraint '{text}' must compare, e.g. '0 <= m < 8'")
        operands = [part.left, *part.comparators]
        for (a, b), op in zip(zip(operands, operands[1:], strict=False), part.ops, strict=True):
            if type(op) not in _OPS:
                raise SpecError(f"constraint '{text}': unsupported comparison")
            ca, ka = _linear(a, constants or {}, text)
            cb, kb = _linear(b, constants or {}, text)
            diff = dict(ca)  # a - b  (op)  0
            for v, x in cb.items():
                diff[v] = diff.get(v, 0) - x
            expr = Affine(tuple((v, int(c)) for v, c in diff.items() if c != 0), 0)
            k = ka - kb
            kind = _OPS[type(op)]
            if kind == "<":
                out.append(Constraint(expr, -math.inf, math.floor(-k - Fraction(1, 10**9))))
            elif kind == "<=":
                out.append(Constraint(expr, -math.inf, math.floor(-k)))
            elif kind == ">":
                out.append(Constraint(expr, math.ceil(-k + Fraction(1, 10**9)), math.inf))
            elif kind == ">=":
                out.append(Constraint(expr, math.ceil(-k), math.inf))
            else:
                out.append(Constraint(expr, -k, -k))
    return out


def box_bounds(
    variables: list[str], constraints: list[Constraint]
) -> dict[str, tuple[float, float]]:
    """Tightest box [lo, hi] per variable implied by the constraints (interval propagation)."""
    bounds: dict[str, list[float]] = {v: [-math.inf, math.inf] for v in variables}
    for c in constraints:
        for v in c.expr.variables:
            bounds.setdefault(v, [-math.inf, math.inf])
    for _ in range(100):
        changed = False
        for c in constraints:
            for var, coef in c.expr.coeffs:
                rest_lo = rest_hi = 0.0
                for v, k in c.expr.coeffs:
                    if v == var:
                        continue
                    a, b = bounds[v]
                    rest_lo += min(k * a, k * b)
                    rest_hi += max(k * a, k * b)
                lo, hi = c.lo - rest_hi, c.hi - rest_lo  # coef * var in [lo, hi]
                if coef > 0:
                    new = (_ceil(lo / coef), _floor(hi / coef))
                else:
                    new = (_ceil(hi / coef), _floor(lo / coef))
                cur = bounds[var]
                if new[0] > cur[0]:
                    cur[0], changed = new[0], True
                if new[1] < cur[1]:
                    cur[1], changed = new[1], True
        if not changed:
            break
    return {v: (b[0], b[1]) for v, b in bounds.items()}


def _ceil(x: float) -> float:
    return x if math.isinf(x) or math.isnan(x) else math.ceil(x - 1e-9)


def _floor(x: float) -> float:
    return x if math.isinf(x) or math.isnan(x) else math.floor(x + 1e-9)
