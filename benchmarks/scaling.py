"""FFM scaling with the number of Einsums (the FFM paper, section 7.5).

Chains of 1, 2, 4, ... 64 matrix multiplications (M = 8192, inner sizes alternating 4096
and 16384) on tpu_v4i, energy objective. Prints per chain: total time, time per Einsum,
pmapping and join time, distinct Einsums generated, peak resident memory, energy and
fused tensors, and what the check over several fused loops per rank variable did.
Targets (issue 5): per-Einsum time at 64 within 1.5x of that at 8; the
64-Einsum chain under 2 minutes on 2 cores (the established implementation needs about
17 s per Einsum there).

usage: python benchmarks/scaling.py [--max 64] [--jobs 2] [--sizes 8,64]
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

from fusemap.examples import example_path
from fusemap.mapper.ffm import map_workload
from fusemap.spec.spec import load_spec

HERE = Path(__file__).resolve().parent
ARCH = HERE.parent.parent / "shared/corpus/accelforge-examples/arches/tpu_v4i.yaml"


def peak_mb() -> float:
    """Peak RSS of this process and of its finished child processes (MB); the mapper
    reports its still-running workers' own (``statistics.peak_mb``)."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, kids) / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max", type=int, default=64)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--sizes", help="comma-separated chain lengths (default: 1, 2, 4, ...)")
    args = ap.parse_args()
    sizes = [n for n in (1, 2, 4, 8, 16, 32, 64) if n <= args.max]
    if args.sizes:
        sizes = [int(x) for x in args.sizes.split(",")]
    head = ("einsums", "total s", "s/einsum", "pmap s", "join s", "distinct", "peak MB", "energy")
    print("{:>8}{:>10}{:>10}{:>9}{:>9}{:>10}{:>9}{:>13}  fused".format(*head))
    per = {}
    for n in sizes:
        spec = load_spec(ARCH, example_path("matmul_chain.yaml"), variables={"N": n})
        t = time.perf_counter()
        out = map_workload(spec, "energy", jobs=args.jobs)
        total = time.perf_counter() - t
        per[n] = total / n
        st = out.statistics
        fused = ",".join(f"{f.tensor}@{f.memory}{list(f.loops) or ''}" for f in out.best.fused)
        if len(out.best.fused) > 3:
            fused = f"{len(out.best.fused)} of {n - 1} intermediates"
        print(
            f"{n:>8}{total:>10.2f}{total / n:>10.2f}{st.seconds['pmappings']:>9.2f}"
            f"{st.seconds['join']:>9.2f}{st.distinct_einsums:>10}{max(peak_mb(), st.peak_mb):>9.0f}"
            f"{out.best.result.energy:>13.5g}  {fused or '-'}",
            flush=True,
        )
        if st.full_space is not None:
            fs = st.full_space
            print(
                f"{'':>8}  several fused loops per variable: {fs.templates_bounded} templates "
                f"bounded, {fs.templates_searched} searched, {fs.rows_added} rows added, "
                f"{st.seconds['full space']:.2f} s",
                flush=True,
            )
        if st.self_bounded is not None:
            held = "held the answer" if st.self_bounded else "were not enough"
            print(f"{'':>8}  tables near each Einsum's least first: {held}", flush=True)
    if 8 in per and max(per) > 8:
        print(f"per-Einsum time at {max(per)} / at 8: {per[max(per)] / per[8]:.2f} (target <= 1.5)")


if __name__ == "__main__":
    main()
