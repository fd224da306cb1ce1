"""The golden cases: the project's own examples (``src/fusemap/examples``, ``examples/``),
each evaluated on a fixed mapping, and the mapper's optima on a tiny workload.

``numbers(case)`` computes a case's numbers; ``tests/golden/numbers.json`` holds them as
the code computed them when it was last regenerated (``python tests/golden/regenerate.py``)
and ``test_golden.py`` checks the code still computes them. Nothing here reads the shared
folder: a clone alone checks these numbers. The compute-in-memory example
(``examples/cim``) is priced by the component model library, which is not always
installed; it has no golden numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fusemap.mapper.ffm import map_workload
from fusemap.mapper.pmappings.generate import generate_pmappings
from fusemap.model.evaluate import evaluate_mapping
from fusemap.spec.spec import load_spec
from tests.support.paths import ATTENTION, PACKAGE_EXAMPLES

FUSEMAX_EINSUMS = ["QK", "LM", "RM", "SLN", "SLD", "SLNV", "PRM", "SPD", "RD", "SPNV", "RNV", "AV"]
"""Cascade 5 without BK and BV (views of K and V the FuseMax mapping does not compute)."""

OBJECTIVES = ("energy", "latency", "edp")


@dataclass(frozen=True)
class Case:
    """Files (an arch, a workload, maybe a mapping) and variables; ``kind`` is
    ``evaluate`` (the spec's mapping, scored by the model), ``map einsum`` (the
    single-Einsum mapper's table of ``einsum``, every objective: its least energy,
    latency and EDP) or ``map`` (the whole workload: FFM's Pareto front of energy and
    latency, its least energy, latency and EDP; a slow test)."""

    name: str
    kind: str
    files: tuple[str, ...]
    variables: dict[str, Any] = field(default_factory=dict)
    einsums: tuple[str, ...] | None = None
    einsum: str | None = None

    def spec(self):
        return load_spec(*self.files, variables=self.variables)


def _example(name: str) -> str:
    return str(PACKAGE_EXAMPLES / name)


def _attention(name: str) -> str:
    return str(ATTENTION / name)


TINY_CHAIN = {"N": 2, "M": 4, "SIZES": [4, 8, 4], "BUFFER_KIB": 0.25}
"""Two matmuls (T1 = T0 W0 over 4 x 4 x 8, T2 = T1 W1), a buffer of 256 bytes."""

CASES = [
    Case(
        "arch.yaml: three matmuls, the fused mapping",
        "evaluate",
        (_example("arch.yaml"), _example("three_matmuls.yaml"), _example("fused_mapping.yaml")),
    ),
    Case(
        "arch.yaml: T1 of three matmuls, mapped alone",
        "map einsum",
        (_example("arch.yaml"), _example("three_matmuls.yaml")),
        einsum="T1",
    ),
    Case(
        "arch.yaml: a two-matmul chain, mapped",
        "map",
        (_example("arch.yaml"), _example("matmul_chain.yaml")),
        TINY_CHAIN,
    ),
    Case(
        "flat.arch.yaml: cascade 4, FLAT's mapping (BERT, 1K)",
        "evaluate",
        (
            _attention("cascade4.yaml"),
            _attention("flat.arch.yaml"),
            _attention("flat.mapping.yaml"),
        ),
    ),
    Case(
        "flat.arch.yaml: cascade 4, unfused (BERT, 1K)",
        "evaluate",
        (
            _attention("cascade4.yaml"),
            _attention("flat.arch.yaml"),
            _attention("flat.mapping.yaml"),
        ),
        {"UNFUSED": 1},
    ),
    Case(
        "fusemax.arch.yaml: cascade 5, FuseMax's mapping (BERT, 1K)",
        "evaluate",
        (
            _attention("cascade5.yaml"),
            _attention("fusemax.arch.yaml"),
            _attention("fusemax.mapping.yaml"),
        ),
        einsums=tuple(FUSEMAX_EINSUMS),
    ),
]
BY_NAME = {case.name: case for case in CASES}


def evaluated(case: Case) -> dict[str, float]:
    """Energy, latency and area of the case's mapping, and each component's energy."""
    spec = case.spec()
    result = evaluate_mapping(spec, einsums=list(case.einsums) if case.einsums else None)
    out = {"energy": result.energy, "latency": result.latency, "area": result.area}
    out |= {f"energy {name}": c.energy for name, c in sorted(result.components.items())}
    return out


def mapped(case: Case, objective: str = "pareto") -> dict[str, float]:
    """The least energy, latency and EDP of the mapper's answer: of its Pareto front, or
    of its one mapping for ``objective``."""
    outcome = map_workload(case.spec(), objective)
    results = [m.result for m in outcome.mappings] if objective == "pareto" else []
    results = results or [outcome.best.result]
    return {
        "energy": min(r.energy for r in results),
        "latency": min(r.latency for r in results),
        "edp": min(r.energy * r.latency for r in results),
    }


def mapped_alone(case: Case) -> dict[str, float]:
    """The least energy, latency and EDP of the single-Einsum mapper's table of
    ``case.einsum`` (``fusemap map --einsum``; every objective)."""
    table = generate_pmappings(case.spec(), case.einsum, objective="all")
    return {
        "energy": float(table.energy.min()),
        "latency": float(table.latency.min()),
        "edp": float((table.energy * table.latency).min()),
    }


def numbers(case: Case) -> dict[str, float]:
    compute = {"evaluate": evaluated, "map einsum": mapped_alone, "map": mapped}[case.kind]
    return compute(case)
