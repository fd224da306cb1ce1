"""The limits that bound the time and memory a spec may cost while it is loaded.

A spec is untrusted input: its Jinja templates and expressions run inside fusemap, so
every loop, string, list and wait they can cause has a ceiling. Each ceiling has a name,
a default that no real spec comes near, and can be raised by the user:

* on the command line: ``fusemap --limit render_seconds=300 check ...`` (repeatable);
* in the environment: ``FUSEMAP_LIMITS="render_seconds=300,includes=5000"``;
* from Python: ``fusemap.spec.limits.configure(render_seconds=300)``.

A spec that reaches one is refused with one line naming the limit and how to raise it.
"""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass

from .errors import ExpressionError, SpecError

ENV_VAR = "FUSEMAP_LIMITS"


@dataclass
class Limits:
    """Ceilings on the work a spec may cause (see the module docstring)."""

    render_seconds: float = 60.0
    """Time for rendering all Jinja templates of one load (includes too)."""
    render_steps: int = 10_000_000
    """Loop iterations, calls and operators Jinja templates may run in one load."""
    render_chars: int = 50_000_000
    """Characters of a file's rendered text, and of any string a template builds."""
    render_total: int = 1_000_000_000
    """Characters of the large strings (elements of the large lists) that templates
    build in one load, all together: what bounds their memory."""
    includes: int = 1_000
    """Files one load may render (include, include_all, include_text, !include)."""
    find_entries: int = 100_000
    """Directory entries a path search (find_paths, include_all) may look at."""
    find_matches: int = 10_000
    """Paths a path search may return."""
    yaml_nodes: int = 2_000_000
    """YAML nodes of all files of one load, aliases expanded."""
    value_size: int = 1_000_000
    """Elements of a list, tuple or dict (characters of a string, 64-bit words of an
    integer) that an expression or a template may build."""
    expression_seconds: float = 10.0
    """Time one expression may take."""
    evaluation_seconds: float = 120.0
    """Time all expressions may take together in one command (loading a spec, mapping
    it): the arch is evaluated once per Einsum, and the model evaluates total_latency
    for every tile shape the mapper scores, so a slow expression is paid many times."""
    sweep_points: int = 100_000
    """Points one sweep may have (every value range, and their product or zip)."""
    templates: int = 1_000_000
    """Templates the mapper may make for one Einsum (which memory holds each tensor,
    their order, the spatial loops): each is tiled, so a space past this takes hours and
    tens of GB (GPT-3 6.7B on tpu_v4i: 27,296 at most)."""
    loop_orders: int = 5_000_000
    """Rows the loop orders of fused prefixes may add to one Einsum's table (each order
    of the loops between two fused nodes is a row of its own, for the join to match a
    neighbour's order): what bounds the table's memory."""


_DEFAULTS = Limits()
_current = Limits()
_spent = [0.0]  # seconds of expression evaluation since the last reset_budget()


def current() -> Limits:
    """The limits in force."""
    return _current


def configure(**values: float | str) -> Limits:
    """Set limits by name (the others keep their values); returns the limits in force."""
    names = {f.name: f for f in dataclasses.fields(Limits)}
    for name, value in values.items():
        field = names.get(name)
        if field is None:
            known = ", ".join(names)
            raise SpecError(f"unknown limit {name!r} (known limits: {known})")
        try:
            number = float(value)
            if isinstance(getattr(_DEFAULTS, name), int):
                number = int(number)
        except (TypeError, ValueError, OverflowError):
            raise SpecError(f"limit {name}: expected a number, got {value!r}") from None
        if not number > 0:
            raise SpecError(f"limit {name}: must be positive, got {value!r}")
        setattr(_current, name, number)
    return _current


def reset() -> None:
    """Back to the defaults, then the ``FUSEMAP_LIMITS`` environment variable."""
    for f in dataclasses.fields(Limits):
        setattr(_current, f.name, getattr(_DEFAULTS, f.name))
    text = os.environ.get(ENV_VAR, "")
    if text.strip():
        configure(**parse_assignments(text.replace(",", " ").split(), ENV_VAR))


def parse_assignments(items: list[str], origin: str) -> dict[str, str]:
    """``["a=1", "b=2"]`` as ``{"a": "1", "b": "2"}``; ``origin`` names where they came from."""
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise SpecError(f"{origin}: expected NAME=VALUE, got {item!r}")
        out[name.strip()] = value.strip()
    return out


def exceeded(name: str, what: str) -> str:
    """The refusal text for limit ``name``: what was too much and how to raise it."""
    value = getattr(_current, name)
    shown = f"{value:g}" if isinstance(value, float) else f"{value:,}"
    return f"{what} (limit {name} = {shown}; raise it with --limit {name}=N)"


def reset_budget() -> None:
    """Start a new expression budget (``evaluation_seconds``), e.g. for a new spec."""
    _spent[0] = 0.0


def charge(seconds: float) -> None:
    """Add expression time to the budget."""
    _spent[0] += seconds


def expression_deadline(now: float) -> tuple[float, str]:
    """When an expression starting ``now`` must stop, and the limit that says so."""
    left = _current.evaluation_seconds - _spent[0]
    if left <= 0:
        raise ExpressionError(
            exceeded("evaluation_seconds", "the spec's expressions take too long in total")
        )
    if left < _current.expression_seconds:
        return now + left, "evaluation_seconds"
    return now + _current.expression_seconds, "expression_seconds"


class Clock:
    """A deadline checked every few steps (``time.monotonic`` is cheap but not free)."""

    __slots__ = ("deadline", "steps", "limit_steps", "name", "what")

    def __init__(self, seconds: float, name: str, what: str, steps: int = 0) -> None:
        self.deadline = time.monotonic() + seconds
        self.steps = 0
        self.limit_steps = steps
        self.name, self.what = name, what

    def tick(self, n: int = 1) -> None:
        """Count ``n`` steps; refuse past the step limit or the deadline."""
        self.steps += n
        if self.limit_steps and self.steps > self.limit_steps:
            raise SpecError(exceeded("render_steps", "templates run too many steps"))
        if time.monotonic() > self.deadline:
            raise SpecError(exceeded(self.name, self.what))


reset()
