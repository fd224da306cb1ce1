"""experiments/ffm: a baseline run that finds no valid mapping is counted, not a crash
(GPT-3 at 2,048 tokens: a GA seed found none in 2,000 evaluations)."""

from __future__ import annotations

import json
import math
import sys
from types import SimpleNamespace

from tests.support.paths import ROOT

sys.path.insert(0, str(ROOT / "experiments" / "ffm"))

import convergence  # noqa: E402


def _run(history: list[float]) -> SimpleNamespace:
    found = [h for h in history if math.isfinite(h)]
    trace = SimpleNamespace(history=history, seconds=[0.1 * (i + 1) for i in range(3)],
                            valid=len(found))  # fmt: skip
    return SimpleNamespace(trace=trace, evaluations=3, outcome=object() if found else None)


def test_a_seed_without_a_valid_mapping_is_counted_apart():
    inf = math.inf
    runs = [_run([inf, 3.0, 1.5]), _run([inf, inf, inf])]
    s = convergence._summary(runs, optimum=1.0, ffm_seconds=1.0, cost=0.1, tables=0.0)
    assert s["seeds_found"] == [0, 1, 1]
    assert s["final_distance"] == [0.5, None]
    assert s["distance_mean"] == [None, None, None]  # a mean over all seeds: never finite
    assert s["evaluations_to_within_5pct"] == [None, None]
    json.dumps(s, allow_nan=False)  # plain JSON: no NaN or infinity
    data = {"baselines": {"ga": s}, "budget": 3, "ffm": {"edp": 1.0, "seconds": 1.0},
            "seconds_per_evaluation": 0.1, "checks": {}}  # fmt: skip
    row = convergence._table(data).splitlines()[-1]
    assert row.startswith("| ga | 3 | 0.5 ± 0 | 1/2 | 0/2 | - |")


def test_every_seed_with_a_mapping_gives_a_mean():
    runs = [_run([3.0, 2.0, 1.02]), _run([5.0, 1.5, 1.5])]
    s = convergence._summary(runs, optimum=1.0, ffm_seconds=1.0, cost=0.1, tables=0.0)
    assert s["seeds_found"] == [2, 2, 2]
    assert [round(m, 9) for m in s["distance_mean"]] == [3.0, 0.75, 0.26]
    assert [round(d, 9) for d in s["distance_std"]] == [1.0, 0.25, 0.24]
    assert s["evaluations_to_within_5pct"] == [3, None]
