"""Issue 18, Found 1, 3 and 4: numbers printed in the right unit, capacities in bytes with
binary prefixes, unitless toy specs as plain numbers, piped output never cut."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from fusemap.cli import app
from fusemap.examples import example_path
from fusemap.model.evaluate import evaluate_mapping
from fusemap.spec.errors import InvalidMappingError
from fusemap.spec.spec import load_spec
from tests.support.paths import ROOT, SHARED, shared_path

FILES = [example_path(n) for n in ("arch.yaml", "three_matmuls.yaml", "fused_mapping.yaml")]


def run(*args: str):
    return CliRunner().invoke(app, list(args))


# -- Found 1: area ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "m2,text",
    [
        (1.5e-6, "1.5 mm²"),  # the built-in Buffer (main printed "1.5 µm²")
        (112e-6, "112 mm²"),  # tpu_v4i's GlobalBuffer (main printed "112 µm²")
        (2e-9, "2000 µm²"),  # 1 mm² = 1e6 µm²
        (3.5e-12, "3.5 µm²"),
        (0.25, "250,000 mm²"),
        (0.0, "0 m²"),
    ],
)
def test_area_uses_squared_prefixes(m2, text):
    from fusemap import units

    assert units.area(m2) == text


def test_evaluate_prints_the_buffer_area_in_mm2():
    result = run("evaluate", *FILES)
    assert result.exit_code == 0, result.output
    buffer_row = next(line for line in result.output.splitlines() if line.startswith("│ Buffer"))
    assert "1.5 mm²" in buffer_row and "µm²" not in buffer_row


@pytest.mark.slow
def test_tpu_global_buffer_area_reads_as_its_spec_says():
    case = SHARED / "reference/model-mapper-shapes/ffm_gpt3_tok1024"
    shared_path(case)
    workload = (case / (case / "workload.path").read_text().strip()).resolve()
    params = json.loads((case / "params.json").read_text())
    spec = load_spec(case / "arch.yaml", workload, case / "mapping.yaml", variables=params)
    result = evaluate_mapping(spec)
    text = _plain_cli(["evaluate", str(case / "arch.yaml"), str(workload), str(case / "mapping.yaml"),
                       *[x for k, v in params.items() for x in ("-D", f"{k}={v}")]])  # fmt: skip
    row = next(line for line in text.splitlines() if line.startswith("│ GlobalBuffer"))
    assert "112 mm²" in row  # main: "112 µm²"
    assert result.components["GlobalBuffer"].area == pytest.approx(112e-6)


# -- Found 3: capacities in bytes, readable overflow, unitless toy specs ----------------


@pytest.mark.parametrize(
    "bits,text",
    [
        (2_097_152, "256 KiB"),  # main: "2.097 Mb"
        (163_840, "20 KiB"),  # main: "163.8 kb"
        (280, "35 B"),  # main: "280b" (no space)
        (16, "2 B"),
        (4, "4 bit"),
        (33_554_432 * 8, "32 MiB"),
        (float("inf"), "∞"),
    ],
)
def test_capacities_are_bytes_with_binary_prefixes(bits, text):
    from fusemap import units

    assert units.capacity(bits) == text


def test_buffer_usage_column_reads_in_bytes():
    text = _plain_cli(["evaluate", *FILES])
    assert re.search(r"\d+(\.\d+)?% of 256 KiB", text)
    assert " kb" not in text and "Mb" not in text and not re.search(r"\db\b", text)


def test_overflow_error_is_in_readable_units():
    spec = load_spec(*FILES, variables={"BUFFER_KIB": 1})
    with pytest.raises(InvalidMappingError) as info:
        evaluate_mapping(spec)
    message = str(info.value)
    assert "needs 12.12 KiB (99,328 bits) but its size is 1 KiB (8,192 bits)" in message
    assert "e+" not in message


def test_passes_table_gives_fiber_sizes_in_binary_bytes():
    cascade = str(ROOT / "examples/attention/cascade4.yaml")
    text = _plain_cli(["passes", cascade, "--rank", "M", "-D", "MODEL=bert", "-D", "SEQ=1024"])
    qk = next(line for line in text.splitlines() if line.startswith("│ QK") and "786,432" in line)
    assert "2 KiB" in qk  # 1,024 fp16 values; main: "2.048 kB"


def test_unitless_toy_spec_prints_plain_numbers():
    """A spec whose actions cost 1 and take 1 per second counts actions and cycles."""
    case = SHARED / "reference/model/matmul1_unfused_test_model"
    shared_path(case)
    params = json.loads((case / "params.json").read_text())
    spec = load_spec(case / "arch.yaml", case / "workload.yaml", case / "mapping.yaml",
                     variables=params)  # fmt: skip
    text = _plain_cli(["evaluate", str(case / "arch.yaml"), str(case / "workload.yaml"),
                       str(case / "mapping.yaml"),
                       *[x for k, v in params.items() for x in ("-D", f"{k}={v}")]])  # fmt: skip
    assert not re.search(r"\d [kMGT]?J\b", text) and not re.search(r"\d [kMGTmµn]?s\b", text)
    assert "unitless" in text
    result = evaluate_mapping(spec)
    assert result.unitless == {"energy", "latency"}
    assert result.units["energy"] == "1" and result.units["latency"] == "1"


def test_real_spec_keeps_its_units():
    result = evaluate_mapping(load_spec(*FILES))
    assert result.unitless == frozenset()
    assert "µJ" in _plain_cli(["evaluate", *FILES])


# -- Found 4: piped output is never cut at 80 columns -----------------------------------


@pytest.mark.slow
def test_piped_output_is_not_cut():
    cmd = [sys.executable, "-m", "fusemap.cli", "check", *FILES]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    # every tensor row holds all its columns on one line (main wrapped at 80 columns)
    row = next(line for line in lines if line.startswith("│ T1 ") and "64×64" in line)
    assert row.rstrip().endswith("│") and "intermediate" in row and "4 KiB" in row
    proc = subprocess.run(
        [sys.executable, "-m", "fusemap.cli", "evaluate", *FILES],
        capture_output=True, text=True, check=False, cwd=ROOT,
    )  # fmt: skip
    buffer_row = next(line for line in proc.stdout.splitlines() if line.startswith("│ Buffer"))
    assert "of 256 KiB" in buffer_row and "mm²" in buffer_row  # no cell wrapped
    assert max(len(line) for line in proc.stdout.splitlines()) > 80


def _plain(renderable) -> str:
    from rich.console import Console

    console = Console(width=400, record=True, markup=False)
    with console.capture() as cap:
        console.print(renderable)
    return cap.get()


def _plain_cli(args: list[str]) -> str:
    result = run(*args)
    assert result.exit_code == 0, result.output
    return result.output
