"""What ``evaluate``, ``map`` and ``report`` print and write: the annotated LoopTree,
the tables, and the files asked for (JSON with its provenance, plots, the HTML report,
mappings with a comment header saying where they came from)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..model.result import Result
from ..spec.mapping import Mapping
from .io import write_atomic
from .looptree import Annotations, annotate, merge_storage
from .provenance import write_json, yaml_header
from .render import text_tree
from .tables import Quantities, pareto_table, print_group, print_warnings, result_tables

Echo = Callable[[str], None]


def show_result(
    result: Result,
    mapping: Mapping | None,
    notes: Annotations | None = None,
    *,
    tree: bool = True,
    tables: bool = True,
    echo: Echo = print,
) -> None:
    """Print the LoopTree (storage merged, loops with their counts) and the tables."""
    if tree and mapping is not None:
        echo(text_tree(mapping, notes))
    if tables:
        print_group(result_tables(result))
    print_warnings(result)


def write_result_files(
    result: Result,
    mapping: Mapping | None,
    spec: Any,
    command: str,
    *,
    json_out: Path | None = None,
    json_data: dict[str, Any] | None = None,
    plot: Path | None = None,
    plots: Path | None = None,
    log: bool = False,
    report: Path | None = None,
    fused: Sequence | None = None,
    front: Sequence = (),
    statistics: dict[str, Any] | None = None,
    notes: Annotations | None = None,
    title: str | None = None,
    echo: Echo = print,
) -> None:
    """Write whatever was asked: JSON, the energy plot, every plot, the HTML report."""
    if json_out:
        write_json(
            json_out, json_data if json_data is not None else result.to_json(), spec, command
        )
    if plot:
        from .plots import energy_breakdown

        energy_breakdown(result, plot, log=log)
    if plots:
        from .plots import write_plots

        written = write_plots(result, plots, log=log, front=front or None)
        echo(f"wrote {len(written)} plots in {plots}: {', '.join(p.name for p in written)}")
    if report:
        from .html import write_report

        write_report(
            report, result, mapping, spec,
            title=title or _title(spec), command=command, fused=fused,
            front=front, statistics=statistics, notes=notes,
        )  # fmt: skip
        echo(f"wrote {report}")


def _title(spec: Any) -> str:
    files = [Path(f).name for f in (spec.inputs["files"] if spec is not None else [])]
    return "fusemap: " + (", ".join(files) or "result")


def save_mapping(
    out: Path, mapping: Mapping, spec: Any, command: str, lines: list[str] | None = None
) -> Path:
    """Write ``mapping`` (storage nodes merged) under a comment header with its inputs."""
    return write_atomic(out, yaml_header(spec, command, lines) + merge_storage(mapping).to_yaml())


def save_front(out: Path, points: Sequence, spec: Any, command: str) -> list[str]:
    """Every mapping of a Pareto front: ``out`` is point 1 (lowest energy), and
    ``<stem>-<k><suffix>`` is point k. Returns the file of each point."""
    files = []
    for k, m in enumerate(points, 1):
        path = out.with_name(f"{out.stem}-{k}{out.suffix}")
        q = Quantities(m.result)
        lines = [f"Pareto point {k} of {len(points)}: energy {q.energy(m.result.energy)}, "
                 f"latency {q.latency(m.result.latency)}"]  # fmt: skip
        save_mapping(path, m.mapping, spec, command, lines)
        files.append(str(path))
    best = points[0]
    q = Quantities(best.result)
    save_mapping(out, best.mapping, spec, command,
                 [f"Pareto point 1 of {len(points)} (lowest energy): energy "
                  f"{q.energy(best.result.energy)}, latency {q.latency(best.result.latency)}"])  # fmt: skip
    return files


def show_front(points: Sequence, files: Sequence[str] | None = None) -> None:
    """The Pareto front as a table with units (and the file of each mapping)."""
    print_group(pareto_table(points, files))


def drawing_notes(spec: Any, mapping: Mapping | None, workload=None, arch=None) -> Annotations:
    """The model's numbers for the drawing of ``mapping`` (none without a spec)."""
    if spec is None or mapping is None:
        return Annotations()
    return annotate(spec, mapping, workload, arch)
