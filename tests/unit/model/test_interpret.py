"""The cascade interpreter against closed forms and numpy softmax attention (fp64)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fusemap.analysis import interpret
from fusemap.spec.errors import FusemapError
from tests.support.paths import ATTENTION

E, F, M, P = 8, 5, 64, 64
SIZES = {"B": 1, "H": 2, "E": E, "F": F, "SEQ": M}


def qkv(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "Q": rng.standard_normal((1, 2, E, P)),
        "K": rng.standard_normal((1, 2, E, M)),
        "V": rng.standard_normal((1, 2, F, M)),
    }


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """softmax(Q^T K) V per batch and head, softmax over the keys m."""
    scores = np.einsum("bhep,bhem->bhmp", q, k)
    weights = np.exp(scores - scores.max(axis=2, keepdims=True))
    weights /= weights.sum(axis=2, keepdims=True)
    return np.einsum("bhmp,bhfm->bhfp", weights, v)


def run(name: str, arrays, **more) -> dict[str, np.ndarray]:
    return interpret(ATTENTION / f"{name}.yaml", arrays, {**SIZES, **more})


@pytest.mark.parametrize("name", ["cascade4", "cascade4_deferred"])
def test_unsplit_cascades_match_softmax_attention(name):
    arrays = qkv(1)
    out = run(name, arrays)
    np.testing.assert_allclose(out["AV"], attention(**_lower(arrays)), rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", ["two_pass", "cascade5"])
@pytest.mark.parametrize("m0", [8, 16, 32, 64])
def test_split_cascades_match_softmax_attention(name, m0):
    arrays = qkv(m0)
    out = run(name, arrays, M0=m0)
    np.testing.assert_allclose(out["AV"], attention(**_lower(arrays)), rtol=0, atol=1e-12)


def test_cascade5_running_values():
    arrays = qkv(3)
    out = run("cascade5", arrays, M0=16)
    scores = np.einsum("bhep,bhem->bhmp", arrays["Q"], arrays["K"])
    assert out["RM"].shape == (1, 2, 5, P)
    assert np.all(out["RM"][:, :, 0] == -np.inf) and np.all(out["RD"][:, :, 0] == 0)
    np.testing.assert_allclose(out["RM"][:, :, 4], scores.max(axis=2), rtol=0, atol=1e-12)
    denominator = np.exp(scores - scores.max(axis=2, keepdims=True)).sum(axis=2)
    np.testing.assert_allclose(out["RD"][:, :, 4], denominator, rtol=1e-13)


@pytest.mark.slow
@given(log_m0=st.integers(0, 5), seed=st.integers(0, 2**16))
@settings(max_examples=8, deadline=None)
def test_cascade5_equals_cascade4_for_any_chunk(log_m0, seed):
    rng = np.random.default_rng(seed)
    sizes = {"B": 1, "H": 1, "E": 3, "F": 2, "SEQ": 32}
    arrays = {
        "Q": rng.standard_normal((1, 1, 3, 32)) * 4,
        "K": rng.standard_normal((1, 1, 3, 32)),
        "V": rng.standard_normal((1, 1, 2, 32)),
    }
    c4 = interpret(ATTENTION / "cascade4.yaml", arrays, sizes)["AV"]
    c5 = interpret(ATTENTION / "cascade5.yaml", arrays, {**sizes, "M0": 2**log_m0})["AV"]
    np.testing.assert_allclose(c5, c4, rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", ["cascade1", "cascade2", "cascade3"])
def test_toy_cascades_match_their_closed_form(name):
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal(16), rng.standard_normal(16)
    out = interpret(ATTENTION / f"{name}.yaml", {"A": a, "B": b}, {"K": 16})
    z = out["ZK"] if name == "cascade3" else out["Z"]
    assert z.shape == ()
    assert z == pytest.approx((a @ b) * a.sum(), rel=1e-12)


def test_cascade3_prefixes():
    a, b = np.arange(1.0, 5.0), np.array([2.0, 1.0, -0.5, 3.0])
    out = interpret(ATTENTION / "cascade3.yaml", {"A": a, "B": b}, {"K": 4})
    np.testing.assert_allclose(out["Y"], np.concatenate([[0], np.cumsum(a * b)]))
    x = np.concatenate([[0], np.cumsum(a)])
    np.testing.assert_allclose(out["Z"], out["Y"] * x)  # Z[k] = Y[k] X[k], X prefix sums


def test_wrong_input_shape_is_a_clear_error():
    arrays = qkv(0)
    arrays["K"] = arrays["K"][..., :10]
    with pytest.raises(
        FusemapError, match=r"K has shape \(1, 2, 8, 10\), expected \(1, 2, 8, 64\)"
    ):
        run("cascade4", arrays)


def test_missing_input_and_custom_operator(tmp_path):
    path = tmp_path / "wl.yaml"
    path.write_text(
        "workload:\n  rank_sizes: {M: 3}\n  bits_per_value: {All: 8}\n"
        '  einsums: ["Y[m] = sigmoid(X[m])"]\n'
    )
    with pytest.raises(FusemapError, match="no array given for input tensor X"):
        interpret(path, {})
    with pytest.raises(FusemapError, match="unknown map operator 'sigmoid'"):
        interpret(path, {"X": np.zeros(3)})


def _lower(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {name.lower(): value for name, value in arrays.items()}
