"""The workload's data flow is validated: one writer per tensor, no cycle of Einsums.

A recurrence's reads of the previous step (``RD[m1]`` where RD is written at ``m1 + 1``)
are not dependencies on the current step, so the FuseMax cascades stay valid.
"""

from __future__ import annotations

import textwrap

import pytest

from fusemap.spec.resolve import resolve_workload
from fusemap.spec.spec import load_spec
from tests.support.cli_helpers import run_cli
from tests.support.cli_specs import ARCH, assert_clean_error
from tests.support.paths import ATTENTION

EXAMPLES = ATTENTION


def workload(*einsums: str, sizes: str = "{M: 4, K: 4, N: 4}") -> str:
    lines = "".join(f"  - {e}\n" for e in einsums)
    return f"workload:\n  rank_sizes: {sizes}\n  bits_per_value: {{All: 8}}\n  einsums:\n{lines}"


def run(tmp_path, monkeypatch, capsys, text: str, command: str = "check"):
    (tmp_path / "arch.yaml").write_text(ARCH)
    (tmp_path / "wl.yaml").write_text(textwrap.dedent(text))
    return run_cli(
        [command, str(tmp_path / "arch.yaml"), str(tmp_path / "wl.yaml")], monkeypatch, capsys
    )


# fmt: off
CASES = [
    ("two-einsum-cycle",
     workload('"Y[m] = X[m] * W[m]"', '"X[m] = Y[m] * V[m]"'),
     r"wl\.yaml:5: Y: the Einsums depend on each other in a cycle \(Y -> X -> Y\): Y writes Y, read by X; X writes X, read by Y"),
    ("three-einsum-cycle",
     workload('"A1[m] = C1[m] * W[m]"', '"B1[m] = A1[m] * V[m]"', '"C1[m] = B1[m] * U[m]"'),
     r"wl\.yaml:5: A1: the Einsums depend on each other in a cycle \(A1 -> B1 -> C1 -> A1\)"),
    ("cycle-after-a-valid-prefix",
     workload('"P[m] = I[m] * W[m]"', '"Q[m, n] = P[m] * R[m, n]"', '"R[m, n] = Q[m, n] * V[n]"'),
     r"wl\.yaml:6: Q: the Einsums depend on each other in a cycle \(Q -> R -> Q\): Q writes Q, read by R; R writes R, read by Q"),
    ("cycle-through-a-reduction",
     workload('"S[m] = T[m, k] :: add"', '"T[m, k] = S[m] * A[k]"', sizes="{M: 4, K: 4}"),
     r"wl\.yaml:5: S: the Einsums depend on each other in a cycle \(S -> T -> S\)"),
    ("two-writers",
     workload('"Y[m] = A[m] * W[m]"', '{name: E2, einsum: "Y[m] = B[m] * V[m]"}'),
     r"wl\.yaml:6: E2: tensor Y is written by two Einsums, Y and E2: each tensor must have one writer"),
    ("two-writers-different-indices",
     workload('"Y[m, n] = A[m, n]"', '{name: Again, einsum: "Y[m, n] = B[m, n] * C[n]"}'),
     r"wl\.yaml:6: Again: tensor Y is written by two Einsums, Y and Again"),
    ("recurrence-read-ahead-in-a-cycle",
     workload('{einsum: "R[m1+1] = S[m1] + R[m1]", iterative: {m1: 0}}', '"S[m1] = R[m1+1] * A[m1]"', sizes="{M1: 4}"),
     r"wl\.yaml:5: R: the Einsums depend on each other in a cycle \(R -> S -> R\)"),
]
# fmt: on


@pytest.mark.parametrize(("text", "pattern"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
@pytest.mark.parametrize("command", ["check", "map"])
def test_bad_data_flow_is_refused(tmp_path, monkeypatch, capsys, text, pattern, command):
    code, out = run(tmp_path, monkeypatch, capsys, text, command)
    line = assert_clean_error(code, out, pattern)
    assert "internal error" not in line


def test_a_recurrence_reading_the_previous_step_is_fine(tmp_path, monkeypatch, capsys):
    """SPD reads RD[m1], written later at m1 + 1 (the previous step): no cycle."""
    text = workload(
        '{einsum: "RD[m1+1] = SLD[m1] + SPD[m1]", iterative: {m1: 0}}',
        '"SPD[m1] = RD[m1] * PRM[m1]"',
        sizes="{M1: 4}",
    )
    code, out = run(tmp_path, monkeypatch, capsys, text)
    assert code == 0, out


@pytest.mark.parametrize(
    "name", ["cascade4.yaml", "cascade4_deferred.yaml", "cascade5.yaml", "two_pass.yaml"]
)
def test_fusemax_cascades_stay_valid(name: str) -> None:
    spec = load_spec(EXAMPLES / name)
    wl = resolve_workload(spec)
    assert all(len(t.writers) <= 1 for t in wl.tensors.values())
