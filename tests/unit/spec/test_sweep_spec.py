"""The sweep file (issue 21): value ranges, validation with file, line and key, point
keys, the Parquet record round trip. No cluster here (tests/integration/test_sweep.py runs sweeps)."""

from __future__ import annotations

import re

import pytest

from fusemap.spec.errors import Location, SpecError
from fusemap.spec.spec import load_spec
from fusemap.sweeps.plan import load_sweep
from fusemap.sweeps.points import prepare_points
from fusemap.sweeps.ranges import swept_variable
from fusemap.sweeps.record import ERROR, OK, MapperFigures, PointRecord
from fusemap.sweeps.store import ResultStore
from tests.support.cli_helpers import run_cli
from tests.support.paths import ROOT
from tests.support.sweep_helpers import SIX_POINTS, write_specs


def values(raw):
    return list(swept_variable("X", raw, lambda *keys: Location("s.yaml", 1, "X")).values)


@pytest.mark.parametrize(
    "raw, expected",
    [
        ([3, "a", 1.5], [3, "a", 1.5]),
        ({"from": 64, "to": 256, "step": 64}, [64, 128, 192, 256]),
        ({"from": 64, "to": 250, "step": 64}, [64, 128, 192]),
        ({"from": 10, "to": 1, "step": -4}, [10, 6, 2]),
        ({"from": 0.1, "to": 0.5, "step": 0.1}, [0.1, 0.2, 0.3, 0.4, 0.5]),
        ({"from": 16, "to": 1024, "factor": 2}, [16, 32, 64, 128, 256, 512, 1024]),
        ({"from": 1, "to": 1000, "factor": 10}, [1, 10, 100, 1000]),
        ({"from": 1024, "to": 16, "factor": 0.25}, [1024.0, 256.0, 64.0, 16.0]),
        ({"from": 1, "to": 2, "count": 5}, [1, 1.25, 1.5, 1.75, 2]),
        ({"from": 0, "to": 8, "count": 5}, [0, 2, 4, 6, 8]),
        ({"from": 1e9, "to": 1e12, "count": 4, "scale": "log"}, [1e9, 1e10, 1e11, 1e12]),
        ({"from": 1, "to": 1000, "count": 4, "scale": "log"}, [1, 10, 100, 1000]),
        ({"from": 5, "to": 5, "count": 1}, [5]),
    ],
)
def test_ranges(raw, expected):
    got = values(raw)
    assert got == expected
    assert [type(v) for v in got] == [type(v) for v in expected]  # ints stay ints


def test_log_ranges_plot_on_a_log_axis():
    locate = lambda *k: Location()  # noqa: E731
    assert swept_variable("X", {"from": 1, "to": 8, "factor": 2}, locate).log
    assert swept_variable("X", {"from": 1, "to": 8, "count": 4, "scale": "log"}, locate).log
    assert not swept_variable("X", {"from": 1, "to": 8, "step": 1}, locate).log


@pytest.mark.parametrize(
    "sweep, where, message",
    [
        (
            "  BUF: {from: 1, to: 4, stepp: 1}",
            r"sweep\.yaml:6: sweep\.BUF\.stepp",
            "unknown key 'stepp'",
        ),
        (
            "  BUF: {from: 1, to: 4}",
            r"sweep\.yaml:6: sweep\.BUF",
            "exactly one of step, factor or count",
        ),
        (
            "  BUF: {from: 1, to: 4, step: 1, count: 2}",
            r"sweep\.yaml:6: sweep\.BUF\.count",
            "exactly one",
        ),
        (
            "  BUF: {to: 4, step: 1}",
            r"sweep\.yaml:6: sweep\.BUF\.from",
            "missing required field 'from'",
        ),
        (
            "  BUF: {from: big, to: 4, step: 1}",
            r"sweep\.yaml:6: sweep\.BUF\.from",
            "expected a number, got 'big'",
        ),
        (
            "  BUF: {from: 1, to: 8, step: -1}",
            r"sweep\.yaml:6: sweep\.BUF\.step",
            "never goes from 1 to 8",
        ),
        ("  BUF: {from: 1, to: 8, step: 0}", r"sweep\.yaml:6: sweep\.BUF\.step", "never goes"),
        ("  BUF: {from: 0, to: 8, factor: 2}", r"sweep\.yaml:6: sweep\.BUF\.from", "above 0"),
        ("  BUF: {from: 1, to: 8, count: 0}", r"sweep\.yaml:6: sweep\.BUF\.count", "at least 1"),
        (
            "  BUF: {from: 1, to: 8, count: 3, scale: cubic}",
            r"sweep\.yaml:6: sweep\.BUF\.scale",
            "linear or log",
        ),
        ("  BUF: []", r"sweep\.yaml:6: sweep\.BUF", "no values"),
        ("  BUF: 4", r"sweep\.yaml:6: sweep\.BUF", "expected a list of values or a range"),
        (
            "  BUF: {from: 1, to: 1e9, step: 1}",
            r"sweep\.yaml:6: sweep\.BUF",
            "limit sweep_points = 100,000",
        ),
        pytest.param(
            "  BUFF: [1, 2]",
            r"sweep\.yaml:6: sweep\.BUFF",
            r"no spec file uses it \(did you mean 'BUF'\?\).*allow_unused: true",
            marks=pytest.mark.slow,
        ),
        ("  energy: [1]", r"sweep\.yaml:6: sweep\.energy", "names a result column"),
        ("  2X: [1]", r"sweep\.yaml:6: sweep\.2X", "not a Jinja variable name"),
        (
            "  M: [4]\n  BUF: [1, 2]\ncombine: zip",
            r"sweep\.yaml:7: sweep\.BUF",
            "zip needs as many values",
        ),
        (
            "  BUF: [1]\nobjective: pareto",
            r"sweep\.yaml:7: objective",
            "'energy', 'latency' or 'edp'",
        ),
        ("  BUF: [1]\nworkers: 3", r"sweep\.yaml:7: workers", "unknown key 'workers'"),
        ("  BUF: [1]\nmapping: specs/nope.yaml", r"sweep\.yaml:7: mapping", "no such file"),
        ("  BUF: [1]\nvariables: {BUF: 2}", r"sweep\.yaml:6: sweep\.BUF", "both fixed"),
        ("  BUF: [1]\n{{ ''.__class__ }}", r"sweep\.yaml:7", "__class__"),
    ],
)
def test_a_bad_sweep_file_is_one_located_line(tmp_path, monkeypatch, capsys, sweep, where, message):
    head = "arch: specs/arch.yaml\nworkload: specs/workload.yaml\n# comment\n\nsweep:\n"
    path = write_specs(tmp_path, head + sweep + "\n")
    monkeypatch.chdir(tmp_path)
    code, out = run_cli(["sweep", path.name, "--no-plots"], monkeypatch, capsys)
    assert code == 2, out
    lines = out.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), out
    assert re.search(where, lines[0]), lines[0]
    assert re.search(message, lines[0]), lines[0]
    assert not (tmp_path / "sweep-results").exists()  # refused before any work


def test_a_missing_key_names_the_sweep_file(tmp_path):
    path = write_specs(tmp_path, "workload: specs/workload.yaml\nsweep: {M: [4]}\n")
    with pytest.raises(SpecError, match=r"sweep\.yaml: arch: missing required field 'arch'"):
        load_sweep(path)


def test_the_sweep_points_limit_can_be_raised(tmp_path, monkeypatch, capsys):
    path = write_specs(tmp_path)
    code, out = run_cli(["--limit", "sweep_points=5", "sweep", str(path)], monkeypatch, capsys)
    assert code == 2 and "the product has 6 points (limit sweep_points = 5" in out


def test_points_in_product_order_with_paths_relative_to_the_sweep_file(tmp_path):
    plan = load_sweep(write_specs(tmp_path))
    assert plan.files == (str(tmp_path / "specs/arch.yaml"), str(tmp_path / "specs/workload.yaml"))
    assert plan.points() == [{"BUF": b, "M": m} for b in (1, 4) for m in (4, 8, 16)]
    assert plan.mode == "map" and plan.objective == "energy"


def test_a_variable_read_only_at_some_points_is_used(tmp_path):
    """A template may read a variable only where another says so; the sweep checks
    every point's templates together."""
    sweep = SIX_POINTS.replace("objective: energy\n", "variables: {K: 3}\n")
    path = write_specs(tmp_path, sweep)
    with pytest.raises(SpecError, match=r"sweep\.yaml:3: variables\.K: variable 'K' is given"):
        prepare_points(load_sweep(path))
    (tmp_path / "specs/workload.yaml").write_text(
        "{% if M > 8 %}{% set _k = K %}{% endif %}\n"
        + (tmp_path / "specs/workload.yaml").read_text()
    )
    assert len(prepare_points(load_sweep(path))) == 6


def test_keys_follow_the_rendered_spec_and_the_variables(tmp_path):
    path = write_specs(tmp_path)
    keys = [p.key for p in prepare_points(load_sweep(path))]
    assert len(set(keys)) == 6 and all(re.fullmatch(r"[0-9a-f]{32}", k) for k in keys)
    assert keys == [p.key for p in prepare_points(load_sweep(path))]  # stable
    arch = tmp_path / "specs/arch.yaml"
    arch.write_text(arch.read_text() + "# a comment changes nothing\n")
    assert keys == [p.key for p in prepare_points(load_sweep(path))]
    arch.write_text(arch.read_text().replace("energy: 0.5e-12", "energy: 0.6e-12"))
    changed = [p.key for p in prepare_points(load_sweep(path))]
    assert all(a != b for a, b in zip(keys, changed, strict=True))
    path.write_text(SIX_POINTS.replace("energy\n", "latency\n"))
    assert set(keys).isdisjoint(p.key for p in prepare_points(load_sweep(path)))


def test_spec_digest_tells_literals_from_expressions(tmp_path):
    base = (
        'workload:\n  rank_sizes: {M: 4}\n  bits_per_value: {All: 8}\n  einsums: ["Z[m] = A[m]"]\n'
    )
    files = []
    for i, extra in enumerate(["x: 1", "x: 1", "x: '1'", "x: 1.0"]):
        f = tmp_path / f"w{i}.yaml"
        f.write_text(base + "variables:\n  " + extra + "\n")
        files.append(load_spec(f).digest())
    assert files[0] == files[1]
    assert len({files[0], files[2], files[3]}) == 3


def test_unloadable_points_are_kept_with_their_error(tmp_path):
    path = write_specs(tmp_path, SIX_POINTS.replace("BUF: [1, 4]", "BUF: [1, 'a: b']"))
    points = prepare_points(load_sweep(path))
    bad = [p for p in points if p.error]
    assert len(bad) == 3 and all(p.spec is None for p in bad)
    assert "arch.yaml:15" in bad[0].error  # where the value broke the template


def test_records_round_trip_through_parquet(tmp_path):
    path = write_specs(tmp_path, SIX_POINTS.replace("BUF: [1, 4]", "BUF: [1, 'x', 2.5]"))
    plan = load_sweep(path)
    points = prepare_points(load_sweep(path))
    store = ResultStore(tmp_path / "out", plan)
    figures = MapperFigures(1, 2, 3, 4, 5, 6, 0.5, '{"a": 1}', 0.25, 100.0)
    ok = PointRecord(points[0].key, 0, points[0].values, OK, "energy", "map", energy=1.0,
                     latency=2.0, area=3.0, component_energy={"DRAM": 0.75, "MAC": 0.25},
                     fused=("T1@Buffer",), mapper=figures, notes=("n",), wall_seconds=1.5)  # fmt: skip
    bad = PointRecord(points[4].key, 4, points[4].values, ERROR, "energy", "map", error="boom")
    for record in (ok, bad):
        store.write(record)
    assert store.read(points[0]) == ok
    assert store.read(points[4]) == bad
    assert store.read(points[1]) is None
    assert store.finished() == {ok.key, bad.key}
    import pandas as pd

    frame = pd.read_parquet(store.points).sort_values("point")
    assert list(frame.point) == [1, 5]
    assert list(frame.BUF) == ["1", "x"]  # one column type for the variable: text
    assert list(frame.status) == ["ok", "error"] and frame.edp.iloc[0] == 2.0
    assert not [p for p in store.points.iterdir() if p.name.startswith(".")]  # no temp files


def test_the_example_sweep_loads_every_point():

    example = ROOT / "examples/sweeps/transformer.yaml"
    plan = load_sweep(example)
    assert plan.names == ("BUFFER_KIB", "S") and plan.fixed == {"D": 64, "H": 2}
    points = prepare_points(plan)
    assert [p.values for p in points][:2] == [
        {"BUFFER_KIB": 16, "S": 32},
        {"BUFFER_KIB": 16, "S": 64},
    ]
    assert len(points) == 9 and all(p.spec is not None for p in points)


def test_lower_layers_never_import_the_sweeps():
    """spec -> model -> mapper -> report -> sweeps, cli: nothing below reaches up."""

    src = ROOT / "src/fusemap"
    for layer in ("spec", "model", "mapper", "analysis", "report"):
        for path in (src / layer).rglob("*.py"):
            imports = re.findall(r"^\s*(?:from|import) (\S+)", path.read_text(), re.M)
            assert not [m for m in imports if "sweeps" in m or m.endswith("cli")], path


def test_the_pareto_front_over_points():
    from fusemap.sweeps.plots import _labels, pareto_front

    def rec(i, energy, latency):
        return PointRecord(
            f"k{i}", i, {"X": i}, OK, "energy", "map", energy=energy, latency=latency
        )

    points = [rec(0, 5, 1), rec(1, 3, 2), rec(2, 4, 3), rec(3, 3, 2), rec(4, 1, 9), rec(5, 2, 9)]
    front = pareto_front(points)
    assert [r.index for r in front] == [0, 1, 4]  # 3 ties 1 (first wins); 2 and 5 dominated
    labels = {where: text for text, where in _labels(points, front)}
    assert labels[(2, 3)] == "2: X=1 (also 4)"
    assert labels[(3, 4)] == "#3" and labels[(9, 2)] == "#6"
