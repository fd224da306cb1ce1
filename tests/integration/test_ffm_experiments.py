"""experiments/ffm: each script's --quick mode runs and its JSON holds what the paper's
claims are checked with: FFM's EDP is the least of every mapper's, the baselines'
answers are valid and repeat per seed, the ratios are consistent with the numbers."""

from __future__ import annotations

import json
import math
import sys

import pytest

from tests.support.paths import ROOT

sys.path.insert(0, str(ROOT / "experiments" / "ffm"))

import convergence  # noqa: E402
import headline  # noqa: E402
import scaling  # noqa: E402
import transfusion  # noqa: E402

pytestmark = pytest.mark.slow  # each quick mode takes a minute or two


def _ran(data: dict, tmp_path, name: str) -> dict:
    if not data:
        pytest.skip("the experiment's inputs (../shared) are absent")
    assert json.loads((tmp_path / f"{name}_quick.json").read_text()) == json.loads(json.dumps(data))
    assert (tmp_path / f"{name}_quick.png").stat().st_size > 0
    assert (tmp_path / f"{name}_quick.md").read_text().startswith(("|", "FFM"))
    return data


def test_convergence_quick(tmp_path):
    data = _ran(convergence.main(["--quick", "--out", str(tmp_path)]), tmp_path, "convergence")
    assert data["checks"] == {"ffm_is_least": True, "answers_valid": True, "deterministic": True}
    for s in data["baselines"].values():
        assert all(d is None or d >= -1e-9 for d in s["final_distance"])  # None: none found
        assert s["seeds_found"][-1] == sum(d is not None for d in s["final_distance"])
        means = [m for m in s["distance_mean"] if m is not None]
        assert means and all(b <= a + 1e-12 for a, b in zip(means, means[1:], strict=False))


def test_scaling_quick(tmp_path):
    data = _ran(scaling.main(["--quick", "--out", str(tmp_path)]), tmp_path, "scaling")
    assert [p["einsums"] for p in data["points"]] == [1, 2, 3]
    for p in data["points"]:
        assert p["ffm"]["seconds"] > 0
        for b in p["baselines"].values():
            off = b["final_distance"]  # None: no valid mapping found
            assert off is None or off >= -1e-9  # never better than FFM's optimum
            got = b["time_to_within_5pct_x_ffm"]
            assert got is None or got <= b["spent_x_ffm"] + 1e-12


def test_headline_quick(tmp_path):
    data = _ran(headline.main(["--quick", "--out", str(tmp_path)]), tmp_path, "headline")
    assert math.isclose(data["edp"], data["energy"] * data["latency"], rel_tol=1e-12)
    assert data["seconds"] > 0 and data["peak_mb"] > 0


def test_transfusion_space_labels():
    """A point searched over one fused loop says so, unless separate runs proved it."""
    one = {"checked": False, "proved_apart": False}
    assert transfusion._space(one) == "one fused loop per rank variable"
    assert transfusion._space({**one, "proved_apart": True}) == "whole (proved apart)"
    assert transfusion._space({"checked": True}) == "whole"


def test_transfusion_quick(tmp_path):
    argv = ["--quick", "--out", str(tmp_path), "--proved-apart", "256"]
    data = _ran(transfusion.main(argv), tmp_path, "transfusion")
    for p in data["points"]:
        assert p["checked"] and p["ffm"]["space"] == p["transfusion"]["space"] == "whole"
        # Searched whole here, so not marked as proved by separate runs.
        assert not p["proved_apart"]
        # TransFusion is FFM's space constrained: never better than FFM's optimum.
        assert p["edp_ratio"] >= 1 - 1e-9
        assert p["edp_ratio"] == pytest.approx(p["energy_ratio"] * p["latency_ratio"])
        fused = set(p["transfusion"]["fused"])
        assert {"Q", "QK", "QK_softmax", "AV", "Z", "FFA"} <= fused
        assert not {"K", "V"} & fused
