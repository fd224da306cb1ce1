"""Baseline mappers' convergence to FFM's optimal EDP (the FFM paper, section 7.4, Fig. 8).

Random sampling (Timeloop), simulated annealing (SET) and a genetic algorithm (TileFlow)
draw from the same pmapping tables as FFM, with the same join rules
(``fusemap.mapper.baselines``). For each, 10 seeds: the distance of the best EDP found
from FFM's optimum (best / optimum - 1) against time as a multiple of FFM's run time,
timed two ways: the paper's (evaluations x the measured cost of one evaluation) and the
real wall time (the tables' time included). The runs are spread over ``--jobs``
processes (each seeded: the same answers whatever the number). Checks written to the
JSON: FFM's EDP is the least of all; each baseline's answer, evaluated again by the
model, gives the numbers it reported; the same seed gives the same run.

Full: GPT-3 6.7B (one layer, batch 1, 2,048 tokens by default: FFM's EDP mapping of the
paper's batch 64 and 4096 tokens does not finish in minutes here, see README.md) on
tpu_v4i; --quick: a 4-matmul chain on the project's own arch.yaml, 3 seeds.

usage: python experiments/ffm/convergence.py [--quick] [--seeds 10] [--budget 2000]
       [--batch 1] [--tokens 2048]
"""

from __future__ import annotations

import math
import multiprocessing
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    arguments,
    figure,
    gpt3,
    markdown_table,
    run_ffm,
    small_chain,
    write_outputs,
)

from fusemap.mapper.baselines import (  # noqa: E402
    STRATEGIES,
    BaselineRun,
    baseline_space,
    map_with_baseline,
)
from fusemap.model.evaluate import evaluate_mapping  # noqa: E402

WITHIN = 0.05  # "within 5% of the optimum"
FLOOR = 1e-3  # the plot's least distance (a log axis: 0 and mean - std < 0 drawn here)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the experiment; returns what the JSON holds."""
    parser = arguments(__doc__, "convergence")
    parser.add_argument("--seeds", type=int, default=None, help="seeds per baseline")
    parser.add_argument("--budget", type=int, default=None, help="evaluations per run")
    parser.add_argument("--batch", type=int, default=1, help="GPT-3 batch (full run)")
    parser.add_argument("--tokens", type=int, default=2048, help="GPT-3 tokens (full run)")
    args = parser.parse_args(argv)
    quick = args.quick
    seeds = args.seeds or (3 if quick else 10)
    budget = args.budget or (150 if quick else 2000)
    problem = small_chain(4) if quick else gpt3(args.batch, args.tokens)
    if not problem.available():
        print(f"skipped: {problem.arch} or {problem.workload} is absent")
        return {}
    spec = problem.spec()
    ffm = run_ffm(spec, "edp", args.jobs)
    print(f"{problem.name}: FFM EDP {ffm.edp:.6g} in {ffm.seconds:.1f} s", flush=True)
    space, table_seconds = baseline_space(spec, "edp", args.jobs)
    runs = _baseline_runs(spec, space, seeds, budget, args.jobs, ffm.edp)
    cost = sum(r.join_seconds for rs in runs.values() for r in rs) / max(
        1, sum(r.joins for rs in runs.values() for r in rs)
    )
    data = {
        "problem": problem.to_json(),
        "quick": quick,
        "ffm": ffm.to_json(),
        "table_seconds": table_seconds,
        "seconds_per_evaluation": cost,
        "budget": budget,
        "seeds": seeds,
        "baselines": {
            s: _summary(rs, ffm.edp, ffm.seconds, cost, table_seconds) for s, rs in runs.items()
        },  # fmt: skip
        "checks": _checks(spec, runs, space, ffm.edp, budget),
    }
    fig = _plot(data, problem.name)
    write_outputs(args.out, args.name + ("_quick" if quick else ""), data, fig, _table(data))
    return data


_SHARED: dict[str, Any] = {}
"""The spec and the baselines' space, for the forked workers of :func:`_baseline_runs`
(inherited, not pickled: the space holds every table)."""


def _one_run(task: tuple[str, int, int]) -> BaselineRun:
    strategy, seed, budget = task
    spec, space = _SHARED["spec"], _SHARED["space"]
    return map_with_baseline(spec, strategy, "edp", budget=budget, seed=seed, space=space)


def _baseline_runs(
    spec: Any, space: Any, seeds: int, budget: int, workers: int, optimum: float
) -> dict[str, list[BaselineRun]]:
    """Every (baseline, seed) run, spread over ``workers`` forked processes (each run is
    seeded, so where it runs does not change it: the checks run seed 0 again here)."""
    tasks = [(s, seed, budget) for s in STRATEGIES for seed in range(seeds)]
    _SHARED.update(spec=spec, space=space)
    try:
        if workers > 1 and "fork" in multiprocessing.get_all_start_methods():
            with multiprocessing.get_context("fork").Pool(workers) as pool:
                done = pool.map(_one_run, tasks, chunksize=1)
        else:
            done = [_one_run(t) for t in tasks]
    finally:
        _SHARED.clear()
    runs: dict[str, list[BaselineRun]] = {s: [] for s in STRATEGIES}
    for (strategy, seed, _), run in zip(tasks, done, strict=True):
        runs[strategy].append(run)
        print(f"{strategy} seed {seed}: best/optimum {run.trace.best_value / optimum:.4f}",
              flush=True)  # fmt: skip
    return runs


def _summary(
    runs: list[BaselineRun], optimum: float, ffm_seconds: float, cost: float, tables: float
) -> dict[str, Any]:
    """Distances per evaluation (mean, std over seeds: None until every seed has a valid
    mapping; ``seeds_found``: how many have one), the time axes, and when each seed
    came within 5%."""
    distance = np.array([np.array(r.trace.history) / optimum - 1 for r in runs])
    found = np.isfinite(distance).sum(axis=0)  # seeds with a valid mapping by then
    finite = found == len(runs)
    mean = np.where(finite, np.where(finite, distance, 0).mean(axis=0), np.nan)
    std = np.where(finite, np.where(finite, distance, 0).std(axis=0), np.nan)
    evals = np.arange(1, distance.shape[1] + 1)
    wall = np.array([r.trace.seconds for r in runs]).mean(axis=0) + tables
    reached = [_first(d <= WITHIN) for d in distance]
    return {
        "time_x_ffm_paper": (evals * cost / ffm_seconds).tolist(),
        "time_x_ffm_wall": (wall / ffm_seconds).tolist(),
        "distance_mean": [None if math.isnan(x) else x for x in mean.tolist()],
        "distance_std": [None if math.isnan(x) else x for x in std.tolist()],
        "seeds_found": found.tolist(),  # the mean and std are over these
        "final_distance": [float(d[-1]) if np.isfinite(d[-1]) else None for d in distance],
        "evaluations_to_within_5pct": reached,
        "valid_fraction": float(np.mean([r.trace.valid / r.evaluations for r in runs])),
    }


def _first(mask: np.ndarray) -> int | None:
    """The 1-based evaluation where ``mask`` first holds (None: never)."""
    hits = np.flatnonzero(mask)
    return int(hits[0]) + 1 if len(hits) else None


def _checks(
    spec: Any, runs: dict[str, list[BaselineRun]], space: Any, optimum: float, budget: int
) -> dict[str, bool]:
    """FFM's EDP is the least; each answer re-evaluates to its numbers; seeds repeat."""
    least = all(r.trace.best_value >= optimum * (1 - 1e-9) for rs in runs.values() for r in rs)
    valid = True
    for rs in runs.values():
        for r in (r for r in rs if r.outcome is not None):  # None: found no valid mapping
            again = evaluate_mapping(spec, r.outcome.best.mapping)
            score = r.trace.best_score
            assert score is not None
            valid &= math.isclose(again.energy, score.energy, rel_tol=1e-9)
            valid &= math.isclose(again.latency, score.latency, rel_tol=1e-9)
    repeat = True
    for strategy, rs in runs.items():
        again = map_with_baseline(spec, strategy, "edp", budget=budget, seed=0, space=space)
        repeat &= again.trace.history == rs[0].trace.history
    return {"ffm_is_least": least, "answers_valid": bool(valid), "deterministic": repeat}


def _plot(data: dict[str, Any], title: str) -> Any:
    """Distance from the optimum against time (x FFM's), both time axes."""
    fig, axes = figure(2)
    for ax, axis in zip(axes, ("time_x_ffm_paper", "time_x_ffm_wall"), strict=True):
        for strategy, s in data["baselines"].items():
            x = np.array(s[axis])
            m = np.array([np.nan if v is None else v for v in s["distance_mean"]])
            sd = np.array([np.nan if v is None else v for v in s["distance_std"]])
            found = s["seeds_found"][-1]
            label = strategy if found == data["seeds"] else f"{strategy} ({found} seeds found one)"
            line = ax.plot(x, np.maximum(m, FLOOR), label=label)[0]
            ax.fill_between(x, np.maximum(m - sd, FLOOR), np.maximum(m + sd, FLOOR),
                            alpha=0.2, color=line.get_color())  # fmt: skip
        ax.axvline(1.0, color="k", lw=0.8, ls=":", label="FFM (optimal, distance 0)")
        ax.axhline(WITHIN, color="gray", lw=0.8, ls="--", label="within 5%")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_ylim(bottom=FLOOR)
        ax.set_xlabel("time / FFM's time" + (" (evaluations x cost)" if "paper" in axis
                                             else " (wall, tables included)"))  # fmt: skip
        ax.set_ylabel("EDP / optimal EDP - 1 (mean, ±1 std; log)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"Convergence to FFM's optimum: {title}")
    fig.tight_layout()
    return fig


def _table(data: dict[str, Any]) -> str:
    """One row per baseline."""
    rows = []
    for strategy, s in data["baselines"].items():
        final = np.array([d for d in s["final_distance"] if d is not None])
        reached = [r for r in s["evaluations_to_within_5pct"] if r is not None]
        seeds = len(s["final_distance"])
        rows.append([
            strategy, data["budget"],
            f"{final.mean():.3g} ± {final.std():.3g}" if len(final) else "-",
            f"{len(final)}/{seeds}", f"{len(reached)}/{seeds}",
            f"{np.mean(reached):.0f}" if reached else "-",
            f"{s['time_x_ffm_paper'][-1]:.3g}", f"{s['time_x_ffm_wall'][-1]:.3g}",
        ])  # fmt: skip
    head = (f"FFM: EDP {data['ffm']['edp']:.6g} J s in {data['ffm']['seconds']:.1f} s; "
            f"one evaluation {data['seconds_per_evaluation'] * 1e3:.1f} ms; checks "
            f"{data['checks']}\n\n")  # fmt: skip
    return head + markdown_table(
        ["baseline", "evaluations", "final distance (mean ± std, of seeds with one)",
         "seeds with a valid mapping", "seeds within 5%",
         "evaluations to 5% (mean)", "time x FFM (paper)", "time x FFM (wall)"],
        rows,
    )  # fmt: skip


if __name__ == "__main__":
    main()
