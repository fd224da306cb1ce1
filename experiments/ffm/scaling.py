"""FFM's and the baselines' time against the number of Einsums (the FFM paper, section
7.5, Fig. 9).

Chains of matmuls (M = 8192; the paper's (N; K) cycle (16384; 16384) -> (4096; 16384)
-> (4096; 4096) -> (16384; 4096)) on tpu_v4i, EDP. Per chain: FFM's time and time per
Einsum; each baseline's time to come within 5% of FFM's optimum, timed the paper's way
(evaluations x the measured cost of one), with the paper's timeout at 1000x FFM's time,
and at most --max-evaluations evaluations (then the row says "not within 5%" and how far
it got). --quick: chains of 1-3 small matmuls on the project's own arch.yaml.

usage: python experiments/ffm/scaling.py [--quick] [--lengths 1,2,4,8,16,32,64]
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    arguments,
    chain,
    figure,
    markdown_table,
    run_ffm,
    small_chain,
    write_outputs,
)

from fusemap.mapper.baselines import STRATEGIES, baseline_space, map_with_baseline  # noqa: E402

WITHIN = 0.05
TIMEOUT = 1000.0  # x FFM's time (the paper's)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the experiment; returns what the JSON holds."""
    parser = arguments(__doc__, "scaling")
    parser.add_argument("--lengths", default=None, help="chain lengths, comma-separated")
    parser.add_argument("--max-evaluations", type=int, default=None,
                        help="per baseline run (default 1000; quick 100)")  # fmt: skip
    args = parser.parse_args(argv)
    quick = args.quick
    lengths = [int(x) for x in (args.lengths or ("1,2,3" if quick else "1,2,4,8,16,32,64"))
               .split(",")]  # fmt: skip
    cap = args.max_evaluations or (100 if quick else 1000)
    points = []
    for n in lengths:
        problem = small_chain(n) if quick else chain(n)
        if not problem.available():
            print(f"skipped: {problem.arch} is absent")
            return {}
        points.append(_point(problem, n, cap, args.jobs))
    data = {"quick": quick, "max_evaluations": cap, "within": WITHIN, "timeout_x_ffm": TIMEOUT,
            "points": points}  # fmt: skip
    write_outputs(args.out, args.name + ("_quick" if quick else ""), data, _plot(data),
                  _table(data))  # fmt: skip
    return data


def _point(problem: Any, n: int, cap: int, jobs: int) -> dict[str, Any]:
    """FFM and the three baselines on one chain."""
    spec = problem.spec()
    ffm = run_ffm(spec, "edp", jobs)
    print(f"{problem.name}: FFM {ffm.seconds:.1f} s ({ffm.seconds / n:.2f} s per Einsum)",
          flush=True)  # fmt: skip
    space, tables = baseline_space(spec, "edp", jobs)
    runs = {s: map_with_baseline(spec, s, "edp", budget=cap, seed=0, space=space)
            for s in STRATEGIES}  # fmt: skip
    cost = max(space.seconds / max(space.joins, 1), 1e-9)  # one evaluation, mean of all
    baselines = {}
    for strategy, run in runs.items():
        history = np.array(run.trace.history) / ffm.edp - 1
        limit = min(cap, max(1, int(TIMEOUT * ffm.seconds / cost)))
        hits = np.flatnonzero(history[:limit] <= WITHIN)
        reached = int(hits[0]) + 1 if len(hits) else None
        baselines[strategy] = {
            "seconds_per_evaluation": cost,
            "evaluations": limit,
            "evaluations_to_within_5pct": reached,
            "time_to_within_5pct_x_ffm": None if reached is None else reached * cost / ffm.seconds,
            "spent_x_ffm": limit * cost / ffm.seconds,
            "final_distance": _finite(history[limit - 1]),  # None: no valid mapping found
            "wall_seconds": run.trace.seconds[limit - 1] + tables,
        }
        got = baselines[strategy]["time_to_within_5pct_x_ffm"]
        print(f"  {strategy}: " + (f"within 5% at {got:.3g}x FFM" if got is not None else
              f"not within 5% after {limit} evaluations"), flush=True)  # fmt: skip
    return {"einsums": n, "problem": problem.to_json(), "ffm": ffm.to_json(),
            "ffm_seconds_per_einsum": ffm.seconds / n, "baselines": baselines}  # fmt: skip


def _finite(x: float) -> float | None:
    """``x``, or None if infinite (a baseline that found no valid mapping)."""
    return float(x) if math.isfinite(x) else None


def _plot(data: dict[str, Any]) -> Any:
    """FFM's time and per-Einsum time; the baselines' time to 5% (hollow: not reached,
    at the time they spent)."""
    fig, axes = figure(2)
    n = [p["einsums"] for p in data["points"]]
    axes[0].plot(n, [p["ffm"]["seconds"] for p in data["points"]], "o-", label="FFM")
    axes[0].plot(n, [p["ffm_seconds_per_einsum"] for p in data["points"]], "s--",
                 label="FFM per Einsum")  # fmt: skip
    for strategy in STRATEGIES:
        got = [p["baselines"][strategy]["time_to_within_5pct_x_ffm"] for p in data["points"]]
        spent = [p["baselines"][strategy]["spent_x_ffm"] for p in data["points"]]
        line = axes[1].plot(n, [math.nan if g is None else g for g in got], "o-",
                            label=f"{strategy}: to within 5%")[0]  # fmt: skip
        axes[1].plot(n, [s if g is None else math.nan for g, s in zip(got, spent, strict=True)],
                     "o", mfc="none", color=line.get_color(),
                     label=f"{strategy}: not within 5% (time spent)")  # fmt: skip
    axes[0].set_ylabel("seconds")
    axes[1].set_ylabel("baseline time / FFM's time (evaluations x cost)")
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("Einsums in the chain")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("Scaling with the number of Einsums (EDP)")
    fig.tight_layout()
    return fig


def _table(data: dict[str, Any]) -> str:
    """One row per chain."""
    rows = []
    for p in data["points"]:
        cells: list[Any] = [p["einsums"], p["ffm"]["seconds"], p["ffm_seconds_per_einsum"]]
        for strategy in STRATEGIES:
            b = p["baselines"][strategy]
            got = b["time_to_within_5pct_x_ffm"]
            off = b["final_distance"]
            found = f"{off:.2f} off" if off is not None else "no valid mapping"
            cells.append(f"{got:.3g}x" if got is not None else
                         f"> {b['spent_x_ffm']:.3g}x ({found})")  # fmt: skip
        rows.append(cells)
    return markdown_table(["Einsums", "FFM s", "FFM s / Einsum",
                           *(f"{s}: time to 5% (x FFM)" for s in STRATEGIES)], rows)  # fmt: skip


if __name__ == "__main__":
    main()
