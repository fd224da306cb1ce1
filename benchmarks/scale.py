"""How check, evaluate and map scale with the number of Einsums and with rank sizes.

Chains of N matrix multiplications T{i+1}[m, n{i+1}] = T{i}[m, n{i}] * W{i}[n{i}, n{i+1}]
(M = 64, inner sizes 64) on the built-in accelerator, with an unfused mapping (one
branch per Einsum) for check and evaluate; and one matrix multiplication whose M is
1e3, 1e6, 1e9 or 1e15. Each command runs in its own process; the figures are its wall
time and peak resident memory. Targets (issue 16): check and evaluate linear in the
Einsums, 1,000 Einsums under 10 s; map of a 1,000-Einsum chain within 4 GB; map's cost
independent of the rank size (candidates are divisors).

usage: python benchmarks/scale.py [--einsums 100,300,1000] [--ranks 1e3,1e6,1e9,1e15]
                                  [--map-einsums 100,300,1000] [--timeout 3600]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fusemap.examples import example_path

CHAIN = """\
{% set N = N | default(4) %}
workload:
  rank_sizes:
    M: {{ M | default(64) }}
    {% for i in range(N + 1) %}
    N{{i}}: 64
    {% endfor %}
  bits_per_value: {All: 8}
  einsums:
  {% for i in range(N) %}
  - "T{{i+1}}[m, n{{i+1}}] = T{{i}}[m, n{{i}}] * W{{i}}[n{{i}}, n{{i+1}}]"
  {% endfor %}
"""

MAPPING = """\
{% set N = N | default(4) %}
mapping:
  nodes:
  - !Storage
    tensors: [{% for i in range(N + 1) %}T{{i}}, {% endfor %}{% for i in range(N) %}W{{i}}, {% endfor %}]
    component: DRAM
  - !Sequential
    nodes:
    {% for i in range(N) %}
    - !Nested
      nodes:
      - !Storage {tensors: [W{{i}}], component: Buffer}
      - !Temporal {rank_variable: m, tile_shape: 1}
      - !Temporal {rank_variable: n{{i}}, tile_shape: 1}
      - !Temporal {rank_variable: n{{i+1}}, tile_shape: 16}
      - !Spatial {rank_variable: n{{i+1}}, tile_shape: 1, name: X, component: PEArray}
      - !Compute {einsum: T{{i+1}}, component: MAC}
    {% endfor %}
"""


def run(argv: list[str], timeout: float) -> tuple[float, float, str]:
    """Wall seconds, peak resident MB and status of one command in its own process."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = start + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() > deadline:
            proc.kill()
            pid, status, usage = os.wait4(proc.pid, 0)
            return time.perf_counter() - start, usage.ru_maxrss / 1024, "timeout"
        time.sleep(0.05)
    seconds = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    err = (proc.stderr.read() if proc.stderr else "").strip().splitlines()
    return seconds, usage.ru_maxrss / 1024, "ok" if code == 0 else f"exit {code}: {err[-1:]}"


def fusemap(*args: str) -> list[str]:
    return [sys.executable, "-m", "fusemap.cli", *args]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--einsums", default="100,300,1000")
    ap.add_argument("--map-einsums", default="100,300,1000")
    ap.add_argument("--ranks", default="1e3,1e6,1e9,1e15")
    ap.add_argument("--timeout", type=float, default=3600)
    args = ap.parse_args()
    arch = str(example_path("arch.yaml"))
    print(f"{'command':<10}{'case':>16}{'seconds':>10}{'peak MB':>10}  status", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        wl, mapping = Path(tmp, "chain.yaml"), Path(tmp, "mapping.yaml")
        wl.write_text(CHAIN)
        mapping.write_text(MAPPING)
        out = str(Path(tmp, "out.json"))

        def show(command: str, case: str, argv: list[str]) -> None:
            seconds, mb, status = run(argv, args.timeout)
            print(f"{command:<10}{case:>16}{seconds:>10.2f}{mb:>10.0f}  {status}", flush=True)

        for n in [int(x) for x in args.einsums.split(",") if x]:
            case, d = f"{n} Einsums", f"N={n}"
            show("check", case, fusemap("check", arch, str(wl), str(mapping), "-D", d))
            show("evaluate", case, fusemap("evaluate", "-q", arch, str(wl), str(mapping), "-D", d))
        for n in [int(x) for x in args.map_einsums.split(",") if x]:
            show(
                "map", f"{n} Einsums", fusemap("map", arch, str(wl), "-D", f"N={n}", "--json", out)
            )
        for text in [x for x in args.ranks.split(",") if x]:
            size = int(float(text))
            d, case = ["-D", "N=1", "-D", f"M={size}"], f"M={text}"
            show("check", case, fusemap("check", arch, str(wl), str(mapping), *d))
            show("evaluate", case, fusemap("evaluate", "-q", arch, str(wl), str(mapping), *d))
            show("map", case, fusemap("map", arch, str(wl), *d, "--json", out))


if __name__ == "__main__":
    main()
