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
    "diff",
    "evaluate",
    "load",
    "load_spec",
    "map_workload",
    "pmappings",
    "sweep",
    "write_report",
    "to_frame",
]
__version__ = "0.1.0"


def load(*paths: str | Path, **variables: Any) -> Spec:
    """Load a spec from YAML files; keyword arguments are the Jinja variables.

    A variable no file uses is an error (``load_spec(..., allow_unused=True)`` accepts it).
    """
    return load_spec(*paths, variables=variables)


def evaluate(spec: Spec, mapping: Any = None):
    """Evaluate ``mapping`` (default: the spec's mapping) and return a ``Result``."""
    from .model.evaluate import evaluate_mapping

    return evaluate_mapping(spec, mapping)


def pmappings(spec: Spec, einsum: str, objective: str = "energy"):
    """The Pareto-optimal pmappings of one Einsum (fusion off) as a ``PmappingTable``.

    ``table.best(objective)`` is the best row, ``table.mapping(row)`` its LoopTree.
    """
    from .mapper.pmappings.generate import generate_pmappings

    return generate_pmappings(spec, einsum, objective=objective)


def map_workload(spec: Spec, objective: str = "energy", **options: Any):
    """The optimal fused mapping of the whole workload (FFM) as a ``MapOutcome``.

    ``outcome.best.mapping`` is the LoopTree, ``outcome.best.result`` its ``Result``,
    ``outcome.best.fused`` the fused tensors; ``objective`` is energy, latency, edp or
    pareto (then ``outcome.mappings`` is the front). Options: ``orders``, ``jobs``.
    """
    from .mapper.ffm import map_workload as run

    return run(spec, objective, **options)


def sweep(sweep_file: str | Path, out: str | Path | None = None, **options: Any):
    """Run the sweep of ``sweep_file`` (as ``fusemap sweep``) and return a pandas
    DataFrame, one row per point: the swept variables, status, energy, latency, EDP,
    area, ``energy.<component>``, fused tensors, mapper statistics, wall time.

    Results go to ``out`` (default ``<sweep name>-results``) as a Parquet dataset; points
    finished there before are read, not run again. Options: ``client`` (a Dask client to
    use), else ``scheduler`` (or ``DASK_SCHEDULER_ADDRESS``), else a local cluster of
    ``workers`` processes (default: one per core); ``retry_failed``; ``progress``
    (a progress bar and messages). See ``fusemap.sweeps.run_sweep``."""
    from .sweeps.run import run_sweep

    if options.get("progress"):
        options.setdefault("echo", print)
    return run_sweep(sweep_file, out, **options).frame()


def to_frame(obj: Any):
    """A pandas DataFrame in long format of a ``Result`` (one row per Einsum, component,
    tensor and action), mapper statistics, a ``MapOutcome``'s Pareto front or a diff."""
    from .report.frames import to_frame as frame

    return frame(obj)


def write_report(result: Any, out: str | Path, spec: Spec | None = None, mapping: Any = None):
    """Write the self-contained HTML report of ``result`` (a ``Result`` or a
    ``MapOutcome``) to ``out``; ``spec`` adds the LoopTree's numbers and the inputs."""
    from .report.html import write_report as write

    if hasattr(result, "mappings"):  # a MapOutcome
        best = result.best
        front = result.mappings if result.objective == "pareto" else ()
        return write(out, best.result, best.mapping, spec, fused=best.fused, front=front)
    if mapping is None and spec is not None:
        mapping = spec.mapping
    return write(out, result, mapping, spec)


def diff(a: Any, b: Any):
    """What changed between two results (``Result`` or JSON dicts): a ``Diff`` with
    ``.changed()`` and ``.to_frame()``."""
    from .report.diff import diff_data

    def data(x: Any) -> dict:
        return x.to_json() if hasattr(x, "to_json") else x

    return diff_data(data(a), data(b))
