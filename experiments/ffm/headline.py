"""The FFM paper's headline run (section 7.4): the optimal EDP mapping of GPT-3 6.7B
(one decoder layer, batch 64, 4096 tokens) on tpu_v4i, with the full fused mapspace.

The paper reports about 1.5 CPU-hours for it; the target here is under 10 minutes on 2
cores. Records the wall time per phase, the peak resident memory (this process and its
workers), the optimum (energy, latency, EDP), what is fused, and the mapper's counts.
--quick: batch 1, 512 tokens, for energy (the EDP mapping of GPT-3 on tpu_v4i takes
longer than a quick mode's budget, 3 minutes even at 64 tokens: see README.md).

usage: python experiments/ffm/headline.py [--quick] [--batch 64] [--tokens 4096]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import arguments, figure, gpt3, markdown_table, peak_mb, write_outputs  # noqa: E402

from fusemap.mapper.ffm import map_workload  # noqa: E402

PAPER_CPU_HOURS = 1.5
TARGET_SECONDS = 600.0


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the headline mapping; returns what the JSON holds."""
    parser = arguments(__doc__, "headline")
    parser.add_argument("--batch", type=int, default=None)
    parser.add_argument("--tokens", type=int, default=None)
    parser.add_argument("--objective", default=None, help="edp (default; quick: energy)")
    args = parser.parse_args(argv)
    quick = args.quick
    batch = args.batch or (1 if quick else 64)
    tokens = args.tokens or (512 if quick else 4096)
    objective = args.objective or ("energy" if quick else "edp")
    problem = gpt3(batch, tokens)
    if not problem.available():
        print(f"skipped: {problem.arch} or {problem.workload} is absent")
        return {}
    start = time.perf_counter()
    outcome = map_workload(problem.spec(), objective, jobs=args.jobs)
    seconds = time.perf_counter() - start
    res = outcome.best.result
    st = outcome.statistics
    data = {
        "problem": problem.to_json(), "quick": quick, "jobs": args.jobs, "objective": objective,
        "seconds": seconds, "phases": dict(st.seconds), "peak_mb": peak_mb(),
        "worker_peak_mb": st.peak_mb, "energy": res.energy, "latency": res.latency,
        "edp": res.energy * res.latency,
        "fused": [f"{f.tensor}@{f.memory}" for f in outcome.best.fused],
        "pmappings": dict(st.pmappings), "paper_cpu_hours": PAPER_CPU_HOURS,
        "target_seconds": TARGET_SECONDS,
    }  # fmt: skip
    print(f"{problem.name}: {seconds:.1f} s, peak {data['peak_mb']:.0f} MB, EDP "
          f"{data['edp']:.6g} J s (energy {res.energy:.6g} J, latency {res.latency:.6g} s)")  # fmt: skip
    fig, ax = figure()
    phases = data["phases"]
    ax.barh(list(phases), list(phases.values()))
    ax.set_xlabel("seconds (wall, 2 cores)")
    ax.set_title(f"{problem.name}, tpu_v4i, {objective}: {seconds:.0f} s in all")
    fig.tight_layout()
    table = markdown_table(
        ["problem", "wall s", "peak MB", "EDP (J s)", "energy (J)", "latency (s)", "fused"],
        [[problem.name, seconds, data["peak_mb"], data["edp"], res.energy, res.latency,
          ", ".join(data["fused"]) or "-"]],
    )  # fmt: skip
    write_outputs(args.out, args.name + ("_quick" if quick else ""), data, fig, table)
    return data


if __name__ == "__main__":
    main()
