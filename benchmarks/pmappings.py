"""Pmapping generation for every Einsum of GPT-3 6.7B on tpu_v4i (fusion off).

Target (issue 4): under 30 s in total on 2 cores (the established implementation takes
about 300 s for this stage on such a machine). Einsums equal up to tensor names (the Q,
K and V projections) are generated once. Prints, per Einsum: time, templates, partial
tile shapes evaluated / within capacity, Pareto-optimal pmappings, best energy, and the
peak resident memory of the worker process so far.

usage: python benchmarks/pmappings.py [--jobs 2] [--objective energy|all]
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

from joblib import Parallel, delayed

from fusemap.mapper.pmappings.generate import generate_pmappings
from fusemap.mapper.pmappings.signature import einsum_signature
from fusemap.spec.arch_eval import ArchEvaluator
from fusemap.spec.resolve import resolve_workload
from fusemap.spec.spec import load_spec

HERE = Path(__file__).resolve().parent
CORPUS = HERE.parent.parent / "shared/corpus/accelforge-examples"
ARCH = CORPUS / "arches/tpu_v4i.yaml"
WORKLOAD = CORPUS / "workloads/transformers/gpt/gpt3_6.7B.yaml"
VARIABLES = {"BATCH_SIZE": 1, "DECODE": False, "N_NEW_TOKENS": 2048}


def _load():
    spec = load_spec(ARCH, WORKLOAD, variables=VARIABLES)
    wl = resolve_workload(spec)
    return spec, wl, ArchEvaluator(spec, wl)


def one(einsum: str, objective: str) -> dict:
    """Generate one Einsum's pmappings in a worker; return figures only."""
    spec, wl, arch = _load()
    t = time.perf_counter()
    table = generate_pmappings(spec, einsum, objective=objective, workload=wl, arch=arch)
    seconds = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # worker's peak RSS
    st = table.stats
    return {
        "einsum": einsum,
        "seconds": seconds,
        "templates": st.templates,
        "evaluated": st.tile_shapes_evaluated,
        "valid": st.tile_shapes_valid,
        "pareto": st.pareto,
        "best_energy": float(table.energy.min()) if len(table) else float("nan"),
        "peak_mb": peak / 2**20,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--objective", default="energy", choices=["energy", "all"])
    args = ap.parse_args()
    start = time.perf_counter()
    spec, wl, arch = _load()
    groups: dict[tuple, list[str]] = {}
    for e in wl.einsums:
        groups.setdefault(einsum_signature(e, wl, arch), []).append(e.name)
    unique = [names[0] for names in groups.values()]
    # Biggest first, so the two workers finish together.
    unique.sort(key=lambda n: -len(wl.einsum(n).rank_variables))
    figures = Parallel(n_jobs=args.jobs)(delayed(one)(n, args.objective) for n in unique)
    total = time.perf_counter() - start
    by_name = {f["einsum"]: f for f in figures}
    print(
        f"GPT-3 6.7B on tpu_v4i, {len(wl.einsums)} Einsums, {len(unique)} distinct, "
        f"objective {args.objective}, {args.jobs} workers"
    )
    head = (
        "einsum",
        "seconds",
        "templates",
        "evaluated",
        "valid",
        "pareto",
        "peak RSS MB",
        "best energy",
    )
    print("{:<12}{:>9}{:>11}{:>13}{:>11}{:>8}{:>13}{:>14}".format(*head))
    for e in wl.einsums:
        names = next(ns for ns in groups.values() if e.name in ns)
        f = by_name[names[0]]
        same = "" if names[0] == e.name else f"  (= {names[0]})"
        print(
            f"{e.name:<12}{f['seconds'] if not same else 0:>9.2f}{f['templates']:>11}"
            f"{f['evaluated']:>13,}{f['valid']:>11,}{f['pareto']:>8}{f['peak_mb']:>13.1f}"
            f"{f['best_energy']:>14.4g}{same}"
        )
    cpu = sum(f["seconds"] for f in figures)
    print(f"total wall {total:.1f} s (generation CPU {cpu:.1f} s; target < 30 s wall on 2 cores)")


if __name__ == "__main__":
    main()
