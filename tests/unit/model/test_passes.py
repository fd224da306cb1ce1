"""Pass analysis of the attention cascades (attention-cascades.md §2 and §5.1).

Expected passes over R (K for cascades 1-3, M otherwise): 2, 1, 1, 3, 2, 2, 1 for
cascades 1, 2, 3, 4, 4 with deferred division, the 2-pass variant and cascade 5.
"""

from __future__ import annotations

import json

import pytest

from fusemap.analysis import analyze_passes
from tests.support.cli_helpers import run_cli
from tests.support.paths import ATTENTION

# (file, rank, passes, stages (None: not checked), live tensors -> elements of one fiber)
# Sizes: the examples' defaults, SEQ = 1024 (M = K = 1024) and M0 = 256 (M1 = 4).
CASES = [
    ("cascade1", "K", 2, {"Y": 1, "Z": 2}, {"A": 1024}),
    ("cascade2", "K", 1, {"Y": 1, "X": 1, "Z": 2}, {}),
    ("cascade3", "K", 1, None, {}),
    ("cascade4", "M", 3, {"QK": 1, "GM": 1, "SN": 2, "SD": 2, "A": 3, "AV": 3},
     {"QK": 1024, "SN": 1024}),
    ("cascade4_deferred", "M", 2, {"QK": 1, "GM": 1, "SN": 2, "SD": 2, "SNV": 2, "AV": 3},
     {"QK": 1024}),
    ("two_pass", "M", 2,
     {"BK": 1, "BV": 3, "QK": 1, "LM": 1, "SLN": 1, "SLD": 1, "GM": 1, "C": 2, "SD": 2,
      "CS": 3, "A": 3, "AV": 3},
     {"SLN": 1024, "LM": 4, "SLD": 4, "C": 4}),
    ("cascade5", "M", 1, None, {}),
]  # fmt: skip


@pytest.mark.parametrize(("name", "rank", "passes", "stages", "live"), CASES)
def test_cli_writes_passes_stages_and_live(
    tmp_path, monkeypatch, capsys, name, rank, passes, stages, live
):
    out = tmp_path / "passes.json"
    args = ["passes", str(ATTENTION / f"{name}.yaml"), "--rank", rank, "--json", str(out)]
    code, text = run_cli(args, monkeypatch, capsys)
    assert code == 0, text
    assert f"{passes} pass" in text
    data = json.loads(out.read_text())
    assert set(data) == {"passes", "stages", "live"}
    assert data["passes"] == passes
    if stages is not None:
        assert data["stages"] == stages
    else:
        assert set(data["stages"].values()) == {1}
    assert data["live"] == live


def test_api_cascade5_is_one_pass_over_split_m():
    a = analyze_passes(ATTENTION / "cascade5.yaml", "M", {"MODEL": "xlm", "SEQ": 4096})
    assert a.passes == 1 and not a.live
    assert a.components == ("M1", "M0") and a.iterative == ("M1",)
    assert list(a.stages) == [
        "BK", "BV", "QK", "LM", "RM", "SLN", "SLD", "SLNV", "PRM", "SPD", "RD", "SPNV",
        "RNV", "AV",
    ]  # fmt: skip
    assert a.barriers == ()  # LM reduces M0 only; RM, RD, RNV step m1; AV reads RNV[M1]
    assert set(a.sweeping) == {"BK", "BV", "QK", "LM", "SLN", "SLD", "SLNV"}


def test_api_cascade4_footprint_and_barriers():
    a = analyze_passes(ATTENTION / "cascade4.yaml", "M", {"SEQ": 2048, "B": 2, "H": 3})
    assert a.passes == 3 and a.barriers == ("GM", "SD", "AV")
    qk = a.live["QK"]
    assert (qk.stages, qk.fiber_elements, qk.fiber_bytes, qk.fibers) == (
        (1, 2),
        2048,
        4096,
        2 * 3 * 2048,
    )
    assert a.to_json()["live"] == {"QK": 2048, "SN": 2048}


def test_rank_components_follow_the_affine_split():
    a = analyze_passes(ATTENTION / "two_pass.yaml", "M0", {"SEQ": 512})
    assert a.components == ("M0",)
    # Over M0 alone, the chunk max LM is a full reduction: SLN waits for a whole chunk.
    assert a.passes == 3 and "LM" in a.barriers
    assert a.stages["SLN"] == 2 and a.live["SLN"].fiber_elements == 256


def test_passes_help(monkeypatch, capsys):
    code, text = run_cli(["passes", "--help"], monkeypatch, capsys)
    assert code == 0 and "--rank" in text and "--json" in text
