"""The mapper: the optimal fused mapping of a workload on an architecture.

The pipeline, one package or module per phase:

1. ``space/``: the mapspace of each Einsum, as templates (:func:`templates`): compute
   unit, storage nodes in order, spatial loops; everything but tile shapes.
2. ``tiling/``: the tile-shape search of each template, pruned as it goes.
3. ``pmappings/``: the Pareto-optimal pmappings of each Einsum in one table
   (:func:`generate_pmappings`; :func:`generate_tables` for every Einsum, identical
   Einsums sharing one table).
4. ``join/``: the FFM join of the tables along an Einsum order (the function
   ``fusemap.mapper.join.join``; the package's name takes ``join`` here), capped and
   deepened by :mod:`.caps`, then the joined rows assembled into one LoopTree
   (:func:`assemble`).
5. The model scores the assembled mapping again (:func:`map_workload` does it all and
   answers a :class:`MapOutcome`; :func:`best_pmapping` maps one Einsum alone).

Names are imported when first used: importing a phase does not import the others.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "templates": ".space.templates",
    "generate_pmappings": ".pmappings.generate",
    "generate_tables": ".pmappings.tables",
    "assemble": ".join.assemble",
    "map_workload": ".ffm",
    "MapOutcome": ".outcome",
    "best_pmapping": ".one_einsum",
}
"""Exported name -> module defining it."""

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value
