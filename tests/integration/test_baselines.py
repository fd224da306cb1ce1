"""The baseline mappers (random, SA, GA): deterministic per seed, only valid answers
(re-evaluated by the model to the numbers they report), never better than FFM's
optimum, and drawing only compatibility-valid combinations."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from fusemap.examples import example_path
from fusemap.mapper.baselines import STRATEGIES, baseline_space, map_with_baseline
from fusemap.mapper.ffm import map_workload
from fusemap.model.evaluate import evaluate_mapping
from fusemap.spec.spec import load_spec
from tests.support.cli_helpers import run_cli

VARIABLES = {"N": 3, "M": 8, "SIZES": [8, 16, 8], "BUF": 2}


@pytest.fixture(scope="module")
def chain(tiny_arch_file):
    """A 3-matmul chain on the tiny arch (a buffer of 2 x 64 bits): fusion matters."""
    spec = load_spec(tiny_arch_file, example_path("matmul_chain.yaml"), variables=VARIABLES)
    space, _ = baseline_space(spec, "edp")
    return spec, space


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_baseline_is_deterministic_per_seed(chain, strategy):
    spec, space = chain
    a = map_with_baseline(spec, strategy, "edp", budget=40, seed=3, space=space)
    b = map_with_baseline(spec, strategy, "edp", budget=40, seed=3, space=space)
    assert a.trace.history == b.trace.history
    assert a.trace.best == b.trace.best
    assert a.evaluations == b.evaluations == 40
    other = map_with_baseline(spec, strategy, "edp", budget=40, seed=4, space=space)
    assert other.trace.history != a.trace.history or other.trace.best == a.trace.best


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_baseline_answer_is_a_valid_mapping_and_no_better_than_ffm(chain, strategy):
    spec, space = chain
    run = map_with_baseline(spec, strategy, "edp", budget=60, seed=1, space=space)
    best = run.outcome.best
    again = evaluate_mapping(spec, best.mapping)
    score = run.trace.best_score
    assert score is not None
    assert again.energy == pytest.approx(score.energy, rel=1e-9)
    assert again.latency == pytest.approx(score.latency, rel=1e-9)
    optimum = map_workload(spec, "edp").best.result
    assert optimum.energy * optimum.latency <= again.energy * again.latency * (1 + 1e-9)
    history = run.trace.history
    assert all(b <= a for a, b in zip(history, history[1:], strict=False))  # best only falls


def test_draws_agree_on_every_shared_tensor(chain):
    _, space = chain
    rng = np.random.default_rng(0)
    draws = [space.draw(rng) for _ in range(50)]
    found = [p for p in draws if p is not None]  # a draw may reach a dead end (None)
    assert len(found) >= 10
    for picks in found:
        seen = {}
        for j, row in enumerate(picks):
            rows = space.rows[j]
            for t, c in zip(rows.tensors, rows.keys[int(rows.key_of_row[row])], strict=True):
                assert seen.setdefault(t, c) == c


def test_compatible_rows_are_those_of_every_agreeing_key(chain):
    """The indexed lookup gives the rows of exactly the keys a plain scan accepts (in
    key order, so draws are unchanged): fixed compatibilities taken from other Einsums'
    keys, partial ones, and one no key has."""
    from fusemap.mapper.space.prefix import Compatibility

    _, space = chain
    rng = np.random.default_rng(5)
    every = [
        (t, c) for er in space.rows for key in er.keys for t, c in zip(er.tensors, key, strict=True)
    ]
    every.append((every[0][0], Compatibility(every[0][0], "nowhere", ())))
    tried = 0
    for j, er in enumerate(space.rows):
        for _ in range(40):
            picked = [every[i] for i in rng.choice(len(every), size=rng.integers(0, 4))]
            fixed = dict(picked)
            scan = [
                rows
                for key, rows in zip(er.keys, er.rows, strict=True)
                if all(fixed.get(t, c) == c for t, c in zip(er.tensors, key, strict=True))
            ]
            want = np.concatenate(scan) if scan else np.zeros(0, dtype=np.int64)
            got = space.compatible(j, fixed)
            assert got.tolist() == want.tolist()
            tried += len(want) > 0
    assert tried >= 20  # most lookups found rows


def test_map_with_a_baseline_from_the_command_line(tiny_arch_file, tmp_path, monkeypatch, capsys):
    out = tmp_path / "best.json"
    args = ["map", str(tiny_arch_file), str(example_path("matmul_chain.yaml")),
            "-D", "N=3", "-D", "M=8", "-D", "SIZES=[8, 16, 8]", "-D", "BUF=2",
            "--objective", "edp", "--mapper", "ga", "--budget", "30", "--seed", "2",
            "--json", str(out), "-q"]  # fmt: skip
    code, text = run_cli(args, monkeypatch, capsys)
    assert code == 0, text
    assert "ga baseline" in text
    data = json.loads(out.read_text())
    assert data["mapper"]["name"] == "ga" and data["mapper"]["evaluations"] == 30
    assert len(data["mapper"]["best_after"]) == 30


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_run_that_finds_no_valid_mapping_is_a_result(chain, strategy, monkeypatch):
    """Every combination refused (as the join refuses those over capacity): the run is
    returned with no outcome, for experiments to count; asked for its answer, a user
    error naming the baseline and the budget."""
    from fusemap.spec.errors import FusemapError

    spec, space = chain
    _refuse_every_combination(monkeypatch)
    run = map_with_baseline(spec, strategy, "edp", budget=25, seed=0, space=space)
    assert run.outcome is None and run.trace.best is None and run.trace.valid == 0
    assert run.evaluations == 25 and run.trace.best_value == float("inf")
    with pytest.raises(FusemapError, match=f"the {strategy} baseline found no valid mapping in 25"):
        run.answer()


def _refuse_every_combination(monkeypatch):
    """The baselines' join refuses every combination (as it refuses one over capacity)."""
    import fusemap.mapper.baselines.space as S

    none = SimpleNamespace(energy=np.zeros(0), latency=np.zeros(0))
    monkeypatch.setattr(S, "join", lambda *args, **kwargs: none)


def test_no_valid_mapping_from_the_command_line(tiny_arch_file, monkeypatch, capsys):
    _refuse_every_combination(monkeypatch)
    args = ["map", str(tiny_arch_file), str(example_path("matmul_chain.yaml")),
            "-D", "N=3", "-D", "M=8", "-D", "SIZES=[8, 16, 8]", "-D", "BUF=2",
            "--mapper", "random", "--budget", "7"]  # fmt: skip
    code, text = run_cli(args, monkeypatch, capsys)
    assert code != 0 and "Traceback" not in text
    assert "the random baseline found no valid mapping in 7 evaluations" in text


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--mapper", "anneal"], "unknown --mapper 'anneal'"),
        (["--mapper", "sa", "--budget", "0"], "--budget must be at least 1"),
        (["--mapper", "sa", "--objective", "pareto"], "one objective"),
    ],
)
def test_baseline_options_are_checked(tiny_arch_file, extra, message, monkeypatch, capsys):
    args = ["map", str(tiny_arch_file), str(example_path("matmul_chain.yaml")), *extra]
    code, text = run_cli(args, monkeypatch, capsys)
    assert code != 0 and message in text and "Traceback" not in text


@pytest.mark.slow
def test_a_baseline_answer_does_not_depend_on_the_workers(chain):
    """Tables made by 2 worker processes give the same draws and answer as in-process."""
    spec, space = chain
    alone = map_with_baseline(spec, "ga", "edp", budget=40, seed=5, space=space)
    spread = map_with_baseline(spec, "ga", "edp", budget=40, seed=5, jobs=2)
    assert spread.trace.history == alone.trace.history
    assert spread.outcome.best.result.energy == alone.outcome.best.result.energy
