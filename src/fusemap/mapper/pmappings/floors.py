"""Lower bounds of templates' energy: each template's least (floors), and its least over
the whole fused space, found by a relaxed twin searched beside it
(:mod:`fusemap.mapper.full_space`)."""

from __future__ import annotations

import math

import numpy as np

from ..space.prefix import marked
from ..space.templates import template_key
from ..tiling.result import TemplateResult
from ..tiling.tiler import TemplateTiler


def with_relaxed_twins(
    tilers: list[TemplateTiler], variants: set[int], bounded: bool = True
) -> tuple[list[TemplateTiler], set[int]]:
    """``tilers`` with a relaxed twin (:meth:`TemplateTiler.relaxed_twin`) right after
    each unmarked one with two loop gaps or more above its deepest fused node."""
    out: list[TemplateTiler] = []
    moved: set[int] = set()
    for i, t in enumerate(tilers):
        if i in variants:
            moved.add(len(out))
        out.append(t)
        if t.p_max >= 2 and not marked(t.t) and i not in variants:
            out.append(t.relaxed_twin(bounded))
    return out, moved


def floor_under(result: TemplateResult, ceiling: float) -> float:
    """A relaxed twin's least energy if at most ``ceiling``, else +inf (its rows above
    the ceiling were cut by the branch and bound)."""
    least = result.least_energy
    return least if least <= ceiling * (1 + 1e-9) else np.inf


def least_latency(result: TemplateResult) -> float:
    """A relaxed twin's least latency (+inf: no row; -inf, bounding nothing, if a
    latency was left unknown)."""
    least = result.least_latency
    return -np.inf if math.isnan(least) else least


def least_energy_by_template(
    done: list[TemplateResult], tilers: list[TemplateTiler]
) -> dict[tuple, float]:
    """Per template, a lower bound of the energy of every valid tile shape of it: its
    least energy, or for a template the branch and bound emptied (it fuses nothing and
    no row beat the best template finished before it), that best; +inf if none is valid."""
    best: dict[tuple, float] = {}
    for r, t in zip(done, tilers, strict=True):
        if t.alone:
            best[t.held_key] = min(best.get(t.held_key, np.inf), r.least_energy)
    out: dict[tuple, float] = {}
    for r, t in zip(done, tilers, strict=True):
        if np.isfinite(r.least_energy):
            floor = r.least_energy
        elif t.alone:
            floor = best.get(t.held_key, np.inf)
        else:
            floor = np.inf
        key = template_key(t.t)
        out[key] = min(out.get(key, np.inf), floor)
    return out


def least_latency_by_template(
    done: list[TemplateResult], tilers: list[TemplateTiler]
) -> dict[tuple, float]:
    """Per template, a lower bound of the latency of every valid tile shape of it (its
    rows' least, :func:`least_latency`; searched with latency, no row is cut for energy
    alone)."""
    out: dict[tuple, float] = {}
    for r, t in zip(done, tilers, strict=True):
        key = template_key(t.t)
        out[key] = min(out.get(key, np.inf), least_latency(r))
    return out
