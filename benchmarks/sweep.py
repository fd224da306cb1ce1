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

usage: python benchmarks/sweep.py [--points 6] [--size 512] [--workers 1,2]
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
    args = ap.parse_args()
    arch, workload = example_path("arch.yaml"), example_path("three_matmuls.yaml")
    buffers = [64 * 2**k for k in range(args.points)]
    fusemap = str(Path(sys.executable).with_name("fusemap"))
    with tempfile.TemporaryDirectory() as tmp:
        sweep = Path(tmp) / "sweep.yaml"
        text = SWEEP.format(arch=arch, workload=workload, size=args.size, last=buffers[-1])
        sweep.write_text(text)
        loop_s, out = timed([sys.executable, "-c", LOOP, arch, workload, str(args.size),
                             json.dumps(buffers)])  # fmt: skip
        loop = json.loads(out)
        n = len(buffers)
        print(f"{n} points (three matmuls, M = N = {args.size}), "
              f"{loop_s / n:.1f} s a point in a plain loop")  # fmt: skip
        head = ("run", "seconds", "points/min", "overhead", "fixed s", "same energies")
        print("{:>12}{:>10}{:>12}{:>10}{:>9}  {}".format(*head))
        print(f"{'plain loop':>12}{loop_s:>10.1f}{60 * n / loop_s:>12.2f}{'':>19}  -")
        for workers in (int(w) for w in args.workers.split(",")):
            folder = Path(tmp) / f"out-{workers}"
            took, _ = timed([fusemap, "sweep", str(sweep), "-o", str(folder), "--no-plots",
                             "--workers", str(workers)])  # fmt: skip
            rows = pd.read_parquet(folder / "points").sort_values("point")
            same = "yes" if list(rows.energy) == loop else "NO"
            overhead = fixed = ""
            if workers == 1:
                overhead = f"{100 * (took / loop_s - 1):+.1f}%"
                fixed = f"{took - rows.wall_seconds.sum():.1f}"
            print(f"{f'dask x{workers}':>12}{took:>10.1f}{60 * n / took:>12.2f}"
                  f"{overhead:>10}{fixed:>9}  {same}")  # fmt: skip


if __name__ == "__main__":
    main()
