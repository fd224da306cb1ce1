"""experiments/fusemax/reproduce.py: the averages against FLAT land within 10% of the
paper's 6.7x speedup and 0.79 energy (attention-cascades.md §3).

BERT, TrXL and T5 differ only in the number of heads, which scales every design alike,
so their ratios are equal: the test runs BERT and XLM on all six lengths, checks TrXL and
T5 equal BERT at one length, and weights BERT three times in the 4-model mean.
"""

from __future__ import annotations

import json
import sys

import pytest

from tests.support.paths import ROOT

sys.path.insert(0, str(ROOT / "experiments" / "fusemax"))

import reproduce  # noqa: E402

pytestmark = pytest.mark.slow  # the FuseMax experiment on every model and length (minutes)


def test_trxl_and_t5_ratios_equal_bert():
    bert = reproduce.compare("bert", 1024)
    for model in ("trxl", "t5"):
        other = reproduce.compare(model, 1024)
        assert other.speedup_vs_flat == pytest.approx(bert.speedup_vs_flat, rel=1e-12)
        assert other.energy_vs_flat == pytest.approx(bert.energy_vs_flat, rel=1e-12)


def test_averages_match_the_paper(tmp_path):
    out = tmp_path / "fusemax.json"
    data = reproduce.main(["--json", str(out), "--models", "bert,xlm"])
    assert json.loads(out.read_text()) == data
    assert (tmp_path / "fusemax.png").stat().st_size > 0
    rows = data["points"]
    assert len(rows) == 12
    first = rows[0]
    assert first["fusemax"]["dram_bytes"] == 402_653_184
    assert first["flat"]["cycles"] == pytest.approx(12_582_912)  # §5.7: 4 B H M P / 256

    def mean(key: str) -> float:
        bert = [r[key] for r in rows if r["model"] == "bert"]
        xlm = [r[key] for r in rows if r["model"] == "xlm"]
        return (3 * sum(bert) + sum(xlm)) / (4 * len(bert))

    assert mean("speedup_vs_flat") == pytest.approx(6.72, rel=0.10)
    assert mean("energy_vs_flat") == pytest.approx(0.787, rel=0.10)
    for r in rows:  # FuseMax never spills; its buffer use is at most 16 MiB
        assert r["fusemax"]["footprint_bytes"] <= 16 * 2**20
