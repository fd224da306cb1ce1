"""The public entry points: fusemap.load / fusemap.evaluate, Result.to_json, the CLI."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import fusemap
from fusemap.model.result import Result
from tests.support.model_helpers import basic_matmul_mapping, matmul, two_level, write_spec

# MainMemory -> GlobalBuffer (leak 0.5) -> MAC, Z = A * B with M=2, K=3, N=4.
# Energy (see test_model_rules): MM 26 + GB 114 + MAC 24 = 164 dynamic, latency 24
# (MAC, throughput 1), GB leak 0.5 * 24 = 12.
ENERGY = 164 + 0.5 * 24
LATENCY = 24


@pytest.fixture
def files(tmp_path):
    a = two_level(gb={"leak_power": 0.5, "area": 3}, gb_size="{{GB_SIZE}}")
    return write_spec(tmp_path, a, matmul(2, 3, 4), basic_matmul_mapping())


def test_load_and_evaluate(files):
    spec = fusemap.load(*files, GB_SIZE=352)
    assert isinstance(spec, fusemap.Spec)
    result = fusemap.evaluate(spec)
    assert isinstance(result, Result)
    assert result.energy == pytest.approx(ENERGY)
    assert result.latency == pytest.approx(LATENCY)
    assert result.components["GlobalBuffer"].usage == pytest.approx(176 / 352)
    # Helpers agree with the nested data.
    z = result.einsums["Z"]
    assert result.einsum("Z") is z
    assert result.component("MAC").energy == pytest.approx(24)
    assert (
        result.count("GlobalBuffer", "read") == z.components["GlobalBuffer"].actions["read"].count
    )
    assert result.count("GlobalBuffer", "read", einsum="Z", tensor="A") == 24
    assert result.energy_of("GlobalBuffer", action="read") == pytest.approx(72)
    assert result.energy_of(einsum="Z") == pytest.approx(ENERGY)


def test_load_without_variable_fails(files):
    # Jinja is strict: an undefined variable is an error, not an empty value.
    with pytest.raises(fusemap.SpecError, match="GB_SIZE"):
        fusemap.load(*files)


def test_evaluate_other_mapping(files, tmp_path):
    spec = fusemap.load(*files, GB_SIZE=352)
    other = fusemap.load(*files, GB_SIZE=352).mapping
    assert fusemap.evaluate(spec, other).energy == pytest.approx(ENERGY)


def test_to_json_shape(files):
    data = fusemap.evaluate(fusemap.load(*files, GB_SIZE=352)).to_json()
    json.dumps(data)  # plain JSON types only
    assert data["energy"] == pytest.approx(ENERGY)
    assert data["latency"] == pytest.approx(LATENCY)
    z = data["einsums"]["Z"]
    assert {"energy", "latency", "components"} <= set(z)
    assert set(z["components"]) == {"MainMemory", "GlobalBuffer", "MAC"}
    gb = z["components"]["GlobalBuffer"]
    assert {"energy", "latency", "leak_energy", "actions", "tensors"} <= set(gb)
    assert gb["leak_energy"] == pytest.approx(12)
    assert gb["actions"]["read"] == {"count": 72, "energy": 72}
    assert gb["tensors"]["A"]["read"]["count"] == 24
    assert z["components"]["MAC"]["actions"]["compute"]["count"] == 24
    comps = data["components"]
    assert {"energy", "usage", "area", "leak_power"} <= set(comps["GlobalBuffer"])
    assert comps["GlobalBuffer"]["usage"] == pytest.approx(0.5)
    assert comps["GlobalBuffer"]["area"] == 3
    assert comps["GlobalBuffer"]["leak_power"] == 0.5
    assert comps["MainMemory"]["usage"] == 0  # unbounded
    assert {"energy", "area", "leak_power"} <= set(comps["MAC"])
    assert "usage" not in comps["MAC"]
    assert json.loads(fusemap.evaluate(fusemap.load(*files, GB_SIZE=352)).dumps()) == data


@pytest.mark.slow
def test_cli_evaluate_writes_json_and_plot(files, tmp_path):
    out_json, out_png = tmp_path / "out" / "r.json", tmp_path / "out" / "r.png"
    out_json.parent.mkdir()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "fusemap.cli",
            "evaluate",
            *map(str, files),
            "-D",
            "GB_SIZE=352",
            "--json",
            str(out_json),
            "--plot",
            str(out_png),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    for name in ("MainMemory", "GlobalBuffer", "MAC"):
        assert name in proc.stdout
    data = json.loads(out_json.read_text())
    assert data["energy"] == pytest.approx(ENERGY)
    assert data["einsums"]["Z"]["components"]["MAC"]["actions"]["compute"]["count"] == 24
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_cli_quiet_prints_no_table(files, tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "fusemap.cli", "evaluate", *map(str, files), "-D", "GB_SIZE=352"]
        + ["-q"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "GlobalBuffer" not in proc.stdout


def test_a_memory_of_no_size_holding_nothing(tmp_path):
    """A buffer of size 0 that the mapping bypasses: in use 0 (it divided by its size and
    stopped with an internal error before). By hand, every MAC (24) reads its operands
    from MainMemory: A 24, B 24, Z written 24 times and read 24 - 8 (its first update
    reads nothing): 88, plus the MACs' 24."""
    a = two_level(gb_size=0, gb_energy=1000)
    m = basic_matmul_mapping()
    m["mapping"]["nodes"] = [n for n in m["mapping"]["nodes"] if "GlobalBuffer" not in str(n)]
    result = fusemap.evaluate(fusemap.load(*write_spec(tmp_path, a, matmul(2, 3, 4), m)))
    assert result.components["GlobalBuffer"].usage == 0
    assert result.energy == pytest.approx(24 + 24 + 24 + 16 + 24)
