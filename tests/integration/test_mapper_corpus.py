"""``fusemap map --einsum`` on the corpus: the single-Einsum optimum beats the reference.

For ``matmuls.yaml`` with one Einsum, the best energy must be at most the established
mapper's optimum in ``../shared/reference/mapper/cases.json``, and the written mapping,
scored by ``fusemap evaluate --einsum``, must give the same energy.
"""

from __future__ import annotations

import json

import pytest

from tests.support.cli_helpers import run_cli
from tests.support.marks import slow_except
from tests.support.paths import SHARED, absent_reason

CASES = SHARED / "reference" / "mapper" / "cases.json"
if not CASES.is_file():
    pytest.skip(absent_reason(CASES), allow_module_level=True)

SINGLE = ["simple_mm128_n1", "simple_e100_mm128_n1", "tpu_mm128_n1"]


def _case(name: str) -> dict:
    return next(c for c in json.loads(CASES.read_text())["cases"] if c["name"] == name)


@pytest.mark.parametrize("name", slow_except(SINGLE, fast=SINGLE[1:]))
def test_single_einsum_optimum_is_at_most_the_reference(name, tmp_path, monkeypatch, capsys):
    case = _case(name)
    defines = [x for k, v in case["params"].items() for x in ("-D", f"{k}={v}")]
    arch, wl = str(SHARED / case["arch"]), str(SHARED / case["workload"])
    out, res = tmp_path / "best.yaml", tmp_path / "best.json"
    code, text = run_cli(
        ["map", arch, wl, *defines, "--einsum", "Matmul0", "-o", str(out), "--json", str(res)],
        monkeypatch,
        capsys,
    )
    assert code == 0, text
    found = json.loads(res.read_text())
    assert found["energy"] <= case["reference_energy"] * (1 + 1e-9)
    assert found["statistics"]["pareto"] >= 1
    assert "Best pmapping of Matmul0" in text
    scored = tmp_path / "scored.json"
    code, text = run_cli(
        ["evaluate", arch, wl, str(out), *defines, "--einsum", "Matmul0", "-q"]
        + ["--json", str(scored)],
        monkeypatch,
        capsys,
    )
    assert code == 0, text
    again = json.loads(scored.read_text())["energy"]
    assert again == pytest.approx(found["energy"], rel=1e-12)


def test_map_errors_are_one_line(tmp_path, monkeypatch, capsys):
    case = _case("simple_mm128_n1")
    arch, wl = str(SHARED / case["arch"]), str(SHARED / case["workload"])
    base = ["map", arch, wl, "-D", "N_EINSUMS=1"]
    for extra, expected in (
        (["--einsum", "Nope"], "unknown Einsum 'Nope'"),
        (["--einsum", "Matmul0", "--objective", "speed"], "unknown objective 'speed'"),
        (["--objective", "speed"], "unknown objective 'speed'"),
        (["--orders", "some"], "unknown --orders 'some'"),
        (["--jobs", "0"], "--jobs must be at least 1"),
        (["--epsilon", "-1"], "--epsilon must be at least 0"),
    ):
        code, text = run_cli(base + extra, monkeypatch, capsys)
        assert code == 2
        assert expected in text
        assert "Traceback" not in text
        assert len(text.strip().splitlines()) == 1


def test_jobs_from_the_environment(tmp_path, monkeypatch, capsys):
    """FUSEMAP_JOBS sets --jobs (CI maps the reference cases with two workers)."""
    case = _case("simple_mm128_n1")
    arch, wl = str(SHARED / case["arch"]), str(SHARED / case["workload"])
    base = ["map", arch, wl, "-D", "N_EINSUMS=1", "-q"]
    monkeypatch.setenv("FUSEMAP_JOBS", "0")
    code, text = run_cli(base, monkeypatch, capsys)
    assert code == 2 and "--jobs must be at least 1" in text and "Traceback" not in text
    monkeypatch.setenv("FUSEMAP_JOBS", "two")
    code, text = run_cli(base, monkeypatch, capsys)
    assert code == 2 and "FUSEMAP_JOBS" in text and "Traceback" not in text


def test_evaluate_needs_einsum_for_a_partial_mapping(tmp_path, monkeypatch, capsys):
    case = _case("simple_mm128_n1")
    arch, wl = str(SHARED / case["arch"]), str(SHARED / case["workload"])
    out = tmp_path / "m.yaml"
    code, _ = run_cli(
        ["map", arch, wl, "-D", "N_EINSUMS=2", "--einsum", "Matmul1", "-o", str(out)],
        monkeypatch,
        capsys,
    )
    assert code == 0
    code, text = run_cli(["evaluate", arch, wl, str(out), "-D", "N_EINSUMS=2"], monkeypatch, capsys)
    assert code == 2
    assert "no !Compute node for Einsum(s) Matmul0" in text and "--einsum" in text


def test_mapper_knobs_are_validated(tmp_path, monkeypatch, capsys):
    case = _case("simple_mm128_n1")
    arch, wl = str(SHARED / case["arch"]), str(SHARED / case["workload"])
    knobs = tmp_path / "knobs.yaml"
    knobs.write_text("mapper:\n  imperfect_max_bound: many\n")
    code, text = run_cli(
        ["map", arch, wl, str(knobs), "-D", "N_EINSUMS=1", "--einsum", "Matmul0"],
        monkeypatch,
        capsys,
    )
    assert code == 2
    assert "knobs.yaml:2: mapper.imperfect_max_bound: expected an integer" in text


def test_map_workload_api_fuses_like_the_reference():
    import fusemap

    case = _case("simple_e100_mm128_n2")
    spec = fusemap.load(SHARED / case["arch"], SHARED / case["workload"], **case["params"])
    out = fusemap.map_workload(spec, "energy")
    assert out.best.result.energy <= case["reference_energy"] * (1 + 1e-9)
    assert [f.tensor for f in out.best.fused] == case["reference_fused"]


def test_map_epsilon_runs_the_dirty_join_first(tmp_path, monkeypatch, capsys):
    """``--epsilon`` reaches the mapper: the dirty join's bound is in the statistics,
    and the answer equals the exact join's."""
    import json

    case = _case("simple_mm128_n1")
    arch, wl = str(SHARED / case["arch"]), str(SHARED / case["workload"])
    energies = []
    for eps, bounded in (("0", False), ("0.2", True)):
        out = tmp_path / f"m{eps}.json"
        base = ["map", arch, wl, "-D", "N_EINSUMS=2", "--epsilon", eps, "--json", str(out)]
        code, _ = run_cli(base, monkeypatch, capsys)
        assert code == 0
        data = json.loads(out.read_text())
        assert (data["statistics"]["dirty_bound"] is not None) == bounded
        energies.append(data["energy"])
    assert energies[0] == energies[1]
