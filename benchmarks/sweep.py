"""Sweep throughput on Dask (issue 21): points per minute with 1 and 2 workers, and the
overhead of Dask against mapping the same points in a plain loop.

The points: the built-in three matmuls (M = N = 512 by default: about 4.5 s a point;
``--size 65536``: about 14 s) on the built-in arch, BUFFER_KIB = 64, 128, ..., one value
per point. Both run as a user runs
them, each in a fresh process: the plain loop is a Python script that loads and maps
every point; the sweep is ``fusemap sweep --workers N``, which starts a local cluster of
N worker processes, maps every point there and writes its Parquet file. Every run must
give the same energies. Printed: wall time, points per minute, Dask's overhead (the
1-worker sweep against the loop) and its fixed part (starting and stopping the cluster,
the workers' imports), measured as the 1-worker sweep's time beyond the sum of the
workers' own time per point. Target: overhead under 5% for points of 10 s or more.

Machines here are shared and noisy (one run measured +1.8%, another +6.9%, on the same
code): ``--rounds R`` runs the loop and the 1-worker sweep back to back R times and
prints the median and range of the overhead.

usage: python benchmarks/sweep.py [--points 6] [--size 512] [--workers 1,2] [--rounds 1]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from fusemap.examples import example_path

SWEEP = """\
arch: {arch}
workload: {workload}
variables: {{M: {size}, N: {size}}}
sweep:
  BUFFER_KIB: {{from: 64, to: {last}, factor: 2}}
"""

LOOP = """\
import json, sys
from fusemap.mapper.ffm import map_workload
from fusemap.spec.spec import load_spec
arch, workload, size, buffers = sys.argv[1], sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4])
energies = []
for kib in buffers:
    spec = load_spec(arch, workload, variables={"M": size, "N": size, "BUFFER_KIB": kib})
    energies.append(map_workload(spec, "energy").best.result.energy)
print(json.dumps(energies))
"""


def timed(command: list[str]) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    return time.perf_counter() - start, done.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=6)
    ap.add_argument("--size", type=int, default=512, help="M and N of the three matmuls")
    ap.add_argument("--workers", default="1,2", help="comma-separated worker counts")
    ap.add_argument("--rounds", type=int, default=1,
                    help="plain loop and 1-worker sweep run back to back this many times")  # fmt: skip
    args = ap.parse_args()
    arch, workload = example_path("arch.yaml"), example_path("three_matmuls.yaml")
    buffers = [64 * 2**k for k in range(args.points)]
    n = len(buffers)
    fusemap = str(Path(sys.executable).with_name("fusemap"))
    with tempfile.TemporaryDirectory() as tmp:
        sweep = Path(tmp) / "sweep.yaml"
        text = SWEEP.format(arch=arch, workload=workload, size=args.size, last=buffers[-1])
        sweep.write_text(text)
        loop_cmd = [sys.executable, "-c", LOOP, arch, workload, str(args.size), json.dumps(buffers)]

        def sweep_run(workers: int, name: str) -> tuple[float, pd.DataFrame]:
            folder = Path(tmp) / name
            took, _ = timed([fusemap, "sweep", str(sweep), "-o", str(folder), "--no-plots",
                             "--workers", str(workers)])  # fmt: skip
            return took, pd.read_parquet(folder / "points").sort_values("point")

        head = ("run", "seconds", "points/min", "overhead", "fixed s", "same energies")
        print(f"{n} points (three matmuls, M = N = {args.size})")
        print("{:>12}{:>10}{:>12}{:>10}{:>9}  {}".format(*head))
        overheads = []
        loop: list[float] = []
        for k in range(args.rounds):  # back to back, so both see the same machine
            loop_s, out = timed(loop_cmd)
            loop = json.loads(out)
            print(f"{'plain loop':>12}{loop_s:>10.1f}{60 * n / loop_s:>12.2f}{'':>19}  -")
            took, rows = sweep_run(1, f"out-1-{k}")
            overheads.append(100 * (took / loop_s - 1))
            same = "yes" if list(rows.energy) == loop else "NO"
            fixed = took - rows.wall_seconds.sum()
            print(f"{'dask x1':>12}{took:>10.1f}{60 * n / took:>12.2f}"
                  f"{overheads[-1]:>+9.1f}%{fixed:>9.1f}  {same}")  # fmt: skip
        for workers in (int(w) for w in args.workers.split(",") if int(w) != 1):
            took, rows = sweep_run(workers, f"out-{workers}")
            same = "yes" if list(rows.energy) == loop else "NO"
            print(f"{f'dask x{workers}':>12}{took:>10.1f}{60 * n / took:>12.2f}{'':>19}  {same}")
        if len(overheads) > 1:
            ordered = sorted(overheads)
            print(f"Dask overhead over {len(ordered)} rounds: median "
                  f"{ordered[len(ordered) // 2]:+.1f}%, range {ordered[0]:+.1f}% .. "
                  f"{ordered[-1]:+.1f}%")  # fmt: skip


if __name__ == "__main__":
    main()
