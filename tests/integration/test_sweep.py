"""Sweeps on a local Dask cluster (issue 21): every row equals a serial ``fusemap map``
of its point; an interrupted sweep reruns only the rest; a bad point records its error
and the others complete; 1 and 2 workers give the same rows; specs travel with the
tasks; ``fusemap map --scheduler`` gives the local answer."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

import fusemap
from fusemap.sweeps import run as sweep_run
from fusemap.sweeps.run import run_sweep
from fusemap.sweeps.store import ResultStore
from tests.support.cli_helpers import run_cli
from tests.support.sweep_helpers import ARCH, SIX_POINTS, TIMING_COLUMNS, write_specs


@pytest.fixture(scope="module")
def cluster():
    """Two single-threaded worker processes, shared by the tests of this file."""
    from dask.distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as local,  # fmt: skip
        Client(local) as client,
    ):
        yield client


def serial_map(tmp_path, monkeypatch, capsys, buf: int, m: int) -> dict:
    """``fusemap map`` of one point, its JSON result."""
    out = tmp_path / f"map-{buf}-{m}.json"
    specs = tmp_path / "specs"
    args = ["map", str(specs / "arch.yaml"), str(specs / "workload.yaml"), "-q",
            "-D", f"BUF={buf}", "-D", f"M={m}", "--json", str(out)]  # fmt: skip
    code, text = run_cli(args, monkeypatch, capsys)
    assert code == 0, text
    return json.loads(out.read_text())


@pytest.mark.slow
def test_every_row_equals_a_serial_map_of_its_point(tmp_path, cluster, monkeypatch, capsys):
    path = write_specs(tmp_path)
    frame = fusemap.sweep(path, tmp_path / "out", client=cluster)
    assert list(frame.point) == [1, 2, 3, 4, 5, 6]
    assert list(zip(frame.BUF, frame.M, strict=True)) == [
        (b, m) for b in (1, 4) for m in (4, 8, 16)
    ]
    assert set(frame.status) == {"ok"}
    for row in frame.itertuples():
        want = serial_map(tmp_path, monkeypatch, capsys, row.BUF, row.M)
        assert (row.energy, row.latency, row.area) == (
            want["energy"],
            want["latency"],
            want["area"],
        )
        assert row.edp == want["energy"] * want["latency"]
        for name, comp in want["components"].items():
            assert getattr(frame, f"energy.{name}")[row.Index] == comp["energy"]
        assert row.fused == ", ".join(f"{f['tensor']}@{f['memory']}" for f in want["fused"])
        assert row.pmappings == sum(want["statistics"]["pmappings"].values())
        assert row.joined == sum(want["statistics"]["joined"])
        assert row.wall_seconds > 0 and row.mapper_seconds > 0
    # The Parquet dataset: one file per point, readable as a whole.
    files = sorted((tmp_path / "out/points").iterdir())
    assert len(files) == 6 and all(f.suffix == ".parquet" for f in files)
    data = pd.read_parquet(tmp_path / "out/points").sort_values("point")
    assert list(data.energy) == list(frame.energy)
    assert list(data.columns[:4]) == ["key", "point", "BUF", "M"]


@pytest.mark.slow
def test_an_interrupted_sweep_reruns_only_the_rest(tmp_path, cluster, monkeypatch):
    path = write_specs(tmp_path)
    written = []
    write = ResultStore.write

    def write_then_stop(self, record):  # the user presses Ctrl-C after 3 points
        out = write(self, record)
        written.append(out)
        if len(written) == 3:
            raise KeyboardInterrupt
        return out

    monkeypatch.setattr(ResultStore, "write", write_then_stop)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(path, tmp_path / "out", client=cluster)
    monkeypatch.setattr(ResultStore, "write", write)
    before = {p: p.stat().st_mtime_ns for p in (tmp_path / "out/points").iterdir()}
    assert sorted(before) == sorted(written)
    outcome = run_sweep(path, tmp_path / "out", client=cluster)
    assert (outcome.reused, outcome.computed) == (3, 3)
    assert outcome.count("ok") == 6 and len(list((tmp_path / "out/points").iterdir())) == 6
    assert {p: p.stat().st_mtime_ns for p in before} == before  # finished files untouched
    again = run_sweep(path, tmp_path / "out", client=cluster)
    assert (again.reused, again.computed) == (6, 0)
    assert (
        again.frame()
        .drop(columns=TIMING_COLUMNS)
        .equals(outcome.frame().drop(columns=TIMING_COLUMNS))
    )


@pytest.mark.slow
def test_a_bad_point_records_its_error_and_the_others_complete(tmp_path, cluster):
    sweep = SIX_POINTS.replace("BUF: [1, 4]", "BUF: [4, -1, big, 0.01]").replace(
        "{from: 4, to: 16, factor: 2}", "[4]"
    )
    path = write_specs(tmp_path, sweep)
    # DRAM may not keep T1: the buffer must (keep: ~DRAM), and at 0.01 it holds no value.
    on_chip = ARCH.replace("{keep: ~Intermediates, may_keep: All}", "{keep: ~Intermediates}")
    (tmp_path / "specs" / "arch.yaml").write_text(on_chip)
    outcome = run_sweep(path, tmp_path / "out", client=cluster)
    frame = outcome.frame()
    assert list(frame.status) == ["ok", "error", "error", "error"]
    assert frame.energy.iloc[0] > 0 and frame.energy.iloc[1:].isna().all()
    errors = list(frame.error)
    assert pd.isna(errors[0])
    assert "arch.yaml:15: Buffer.size: expected a number at least 0, got -64" in errors[1]
    assert "arch.yaml:15: Buffer.size: unknown name 'big'" in errors[2]
    assert "Einsum T1: no valid mapping" in errors[3]
    assert len(list((tmp_path / "out/points").iterdir())) == 4  # errors are recorded
    assert run_sweep(path, tmp_path / "out", client=cluster).computed == 0
    retried = run_sweep(path, tmp_path / "out", client=cluster, retry_failed=True)
    assert (retried.reused, retried.computed) == (1, 3)


@pytest.mark.slow
def test_one_and_two_workers_give_the_same_rows(tmp_path, cluster):
    """The default local cluster, 1 worker, against the 2-worker cluster."""
    path = write_specs(tmp_path)
    one = fusemap.sweep(path, tmp_path / "one", workers=1)
    two = fusemap.sweep(path, tmp_path / "two", client=cluster)
    assert one.drop(columns=TIMING_COLUMNS).equals(two.drop(columns=TIMING_COLUMNS))
    assert sorted(p.name for p in (tmp_path / "one/points").iterdir()) == sorted(
        p.name for p in (tmp_path / "two/points").iterdir()
    )


@pytest.mark.slow
def test_the_local_cluster_starts_early_and_is_always_closed(tmp_path, monkeypatch):
    """The local cluster starts while the points load; it is closed after the sweep,
    when every point was finished before (unused), and when loading fails."""
    from fusemap.sweeps import cluster as cluster_mod

    started, closed = [], []

    class Recorded(cluster_mod.LocalStart):
        def __init__(self, n: int) -> None:
            super().__init__(n)
            started.append(n)

        def close(self) -> None:
            closed.append(self.cluster().status.name)
            super().close()
            assert self.cluster().status.name == "closed"

    monkeypatch.setattr(cluster_mod, "LocalStart", Recorded)
    path = write_specs(tmp_path)
    first = run_sweep(path, tmp_path / "out", workers=1)
    assert first.count("ok") == 6 and started == [1] and len(closed) == 1
    again = run_sweep(path, tmp_path / "out", workers=1)  # nothing left to run
    assert (again.reused, again.computed) == (6, 0) and len(started) == len(closed) == 2

    def fail(plan, step=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(sweep_run, "prepare_points", fail)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(path, tmp_path / "other", workers=1)
    assert len(started) == len(closed) == 3


@pytest.mark.slow
def test_specs_travel_with_the_tasks(tmp_path, cluster, monkeypatch):
    """The workers never read the spec files: they are gone once the points are loaded."""
    path = write_specs(tmp_path)
    prepare = sweep_run.prepare_points

    def prepare_then_delete(plan, step=None):
        points = prepare(plan, step)
        shutil.rmtree(tmp_path / "specs")
        return points

    monkeypatch.setattr(sweep_run, "prepare_points", prepare_then_delete)
    outcome = run_sweep(path, tmp_path / "out", client=cluster)
    assert outcome.count("ok") == 6


@pytest.mark.slow
def test_the_command_prints_a_summary_and_writes_plots(tmp_path, cluster, monkeypatch, capsys):
    path = write_specs(tmp_path)
    monkeypatch.chdir(tmp_path)
    address = cluster.scheduler.address
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", address)
    code, out = run_cli(["sweep", path.name], monkeypatch, capsys)
    assert code == 0, out
    assert "Dask dashboard: " in out and f"(the cluster at {address})" in out
    assert "6 points: 6 ok, 0 failed; 6 run now, 0 finished earlier" in out
    assert "Points by energy, best first" in out
    assert "best energy: 8.621 nJ at point 4 (BUF=4, M=4)" in out
    for name in ("objectives.png", "pareto.png"):
        assert (tmp_path / "sweep-results/plots" / name).read_bytes()[:4] == b"\x89PNG"
    code, out = run_cli(["sweep", path.name, "--no-plots"], monkeypatch, capsys)
    assert code == 0 and "6 of 6 points finished earlier" in out and "Dask" not in out


@pytest.mark.slow
def test_map_on_the_cluster_gives_the_local_answer(tmp_path, cluster, monkeypatch, capsys):
    write_specs(tmp_path)
    files = [str(tmp_path / "specs" / n) for n in ("arch.yaml", "workload.yaml")]
    results = []
    for extra in ([], ["--scheduler", cluster.scheduler.address]):
        out = tmp_path / f"map{len(extra)}.json"
        code, text = run_cli(["map", *files, "-q", *extra, "--json", str(out)], monkeypatch, capsys)
        assert code == 0, text
        data = json.loads(out.read_text())
        results.append(
            {k: v for k, v in data.items() if k not in ("statistics", "inputs", "command")}
        )
    assert results[0] == results[1]
    prefixes = cluster.run_on_scheduler(lambda dask_scheduler: list(dask_scheduler.task_prefixes))
    assert any("generate_kind" in p or "Batch" in p for p in prefixes), prefixes


def test_an_unreachable_scheduler_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("fusemap.sweeps.cluster.CONNECT_SECONDS", 1)
    path = write_specs(tmp_path)
    code, out = run_cli(
        ["sweep", str(path), "--scheduler", "tcp://127.0.0.1:9"], monkeypatch, capsys
    )
    assert code == 2 and out.startswith(
        "error: cannot reach the Dask scheduler at 'tcp://127.0.0.1:9'"
    )
    assert len(out.strip().splitlines()) == 1, out


@pytest.mark.slow
def test_points_are_submitted_a_few_at_a_time(tmp_path, cluster, monkeypatch):
    """At most twice the workers' threads plus 2 points wait on the cluster at once."""
    sweep = SIX_POINTS.replace("BUF: [1, 4]", "BUF: [1, 2, 3, 4]").replace(
        "{from: 4, to: 16, factor: 2}", "[4, 8]"
    )
    path = write_specs(tmp_path, sweep)
    submitted = []
    submit = cluster.submit

    def counting(*args, **kwargs):
        future = submit(*args, **kwargs)
        submitted.append(future)
        return future

    in_flight = []
    monkeypatch.setattr(cluster, "submit", counting)
    monkeypatch.setattr(
        ResultStore, "write",
        lambda self, record, write=ResultStore.write: (
            in_flight.append((len(submitted), sum(not f.done() for f in submitted))),
            write(self, record))[1],
    )  # fmt: skip
    outcome = run_sweep(path, tmp_path / "out", client=cluster)
    assert outcome.count("ok") == 8 and len(submitted) == 8
    assert in_flight[0][0] == 2 * 2 + 2 + 1  # the first 6, then one per finished point
    assert max(n for _, n in in_flight) <= 2 * 2 + 2


@pytest.mark.slow
def test_the_callers_limits_travel_to_the_workers(tmp_path, cluster):
    """The workers are other processes: without the task's limits they would use the
    defaults (evaluation_seconds = 120) and every point would map."""
    from fusemap.spec import limits

    limits.configure(evaluation_seconds=1e-6)
    path = write_specs(tmp_path, SIX_POINTS.replace("{from: 4, to: 16, factor: 2}", "[4]"))
    frame = run_sweep(path, tmp_path / "out", client=cluster).frame()
    assert list(frame.status) == ["error", "error"]
    assert all("limit evaluation_seconds = 1e-06" in e for e in frame.error)
