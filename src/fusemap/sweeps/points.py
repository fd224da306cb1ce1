"""The points of a sweep, each loaded on the client: its spec (rendered, parsed and
validated here, so it travels to the workers whole: they need no file system) and the
key of its result, a hash of the rendered spec and of what the point computes."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..spec.errors import FusemapError
from ..spec.spec import Spec, canonical_data, check_variables_used, load_spec
from .plan import SweepPlan


@dataclass(frozen=True)
class Point:
    """One point of a sweep: the swept variables' values, its key, and its spec (or why
    the spec could not be loaded at these values)."""

    index: int
    values: dict[str, Any]
    """The swept variables (the fixed ones are the plan's)."""
    key: str
    spec: Spec | None
    error: str | None = None


def prepare_points(plan: SweepPlan, step: Callable[[int, int], None] | None = None) -> list[Point]:
    """Load the spec of every point; a point whose spec fails to load keeps its error.

    Unless the plan allows it, a variable that no point's templates read is an error,
    located in the sweep file (a variable may be read only at some points: a template's
    ``{% if %}``)."""
    points: list[Point] = []
    referenced: set[str] = set()
    values = plan.points()
    for index, swept in enumerate(values):
        variables = {**plan.fixed, **swept}
        try:
            spec = load_spec(*plan.files, variables=variables, allow_unused=True)
        except FusemapError as err:
            key = point_key(plan, variables, ["unloadable", _raw_digest(plan.files), str(err)])
            points.append(Point(index, swept, key, None, " ".join(str(err).splitlines())))
        else:
            referenced |= spec.referenced
            points.append(Point(index, swept, point_key(plan, variables, spec.digest()), spec))
        if step:
            step(index + 1, len(values))
    if not plan.allow_unused and any(p.spec is not None for p in points):
        check_variables_used(
            {**plan.fixed, **values[0]},
            referenced,
            "set allow_unused: true in the sweep file",
            lambda name: plan.locate("variables" if name in plan.fixed else "sweep", name),
        )
    return points


def point_key(plan: SweepPlan, variables: dict[str, Any], rendered: Any) -> str:
    """The result's key: the rendered spec, the variables and what the point computes
    (objective, orders, map or evaluate). 32 hex digits (128 bits)."""
    what = [rendered, canonical_data(variables), plan.objective, plan.orders, plan.mode]
    text = json.dumps(what, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _raw_digest(files: tuple[str, ...]) -> str:
    """The files' bytes, for a point whose spec cannot be rendered (so that fixing a file
    gives the point a new key and it runs again)."""
    h = hashlib.sha256()
    for name in files:
        try:
            with open(name, "rb") as f:
                h.update(f.read())
        except OSError as e:
            h.update(str(e).encode())
    return h.hexdigest()
