"""fusemap: model tensor-algebra accelerators and find their optimal fused mappings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .spec.errors import ExpressionError, FusemapError, InvalidMappingError, SpecError
from .spec.spec import Spec, load_spec

__all__ = [
    "ExpressionError",
    "FusemapError",
    "InvalidMappingError",
    "Spec",
    "SpecError",
    "evaluate",
    "load",
    "load_spec",
]
__version__ = "0.1.0"


def load(*paths: str | Path, **variables: Any) -> Spec:
    """Load a spec from YAML files; keyword arguments are the Jinja variables."""
    return load_spec(*paths, variables=variables)


def evaluate(spec: Spec, mapping: Any = None):
    """Evaluate ``mapping`` (default: the spec's mapping) and return a ``Result``."""
    from .model.evaluate import evaluate_mapping

    return evaluate_mapping(spec, mapping)


def pmappings(spec: Spec, einsum: str, objective: str = "energy"):
    """The Pareto-optimal pmappings of one Einsum (fusion off) as a ``PmappingTable``.

    ``table.best(objective)`` is the best row, ``table.mapping(row)`` its LoopTree.
    """
    from .mapper.pmappings import generate_pmappings

    return generate_pmappings(spec, einsum, objective=objective)


def map_workload(spec: Spec, objective: str = "energy", **options: Any):
    """The optimal fused mapping of the whole workload (FFM) as a ``MapOutcome``.

    ``outcome.best.mapping`` is the LoopTree, ``outcome.best.result`` its ``Result``,
    ``outcome.best.fused`` the fused tensors; ``objective`` is energy, latency, edp or
    pareto (then ``outcome.mappings`` is the front). Options: ``orders``, ``jobs``.
    """
    from .mapper.ffm import map_workload as run

    return run(spec, objective, **options)
