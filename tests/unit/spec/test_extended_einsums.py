"""Extended Einsums in the workload format: operators, operands, iterative ranks, splits.

Plain specs must read exactly as before; the extension only adds meaning to text that
used to be an error (``RM[m1+1, p]``, ``K[M: m1*M0 + m0]``, ``RNV[f, M1, p]``) or was
ignored (the operators between tensors).
"""

from __future__ import annotations

import re
import textwrap

import pytest

from fusemap.spec.affine import Affine
from fusemap.spec.resolve import resolve_workload
from fusemap.spec.spec import load_spec
from fusemap.spec.workload import Einsum
from tests.support.cli_helpers import run_cli
from tests.support.paths import ATTENTION, PACKAGE_EXAMPLES

SMALL = {"B": 1, "H": 2, "E": 8, "F": 5, "SEQ": 64, "M0": 16}


def einsum(text: str, **fields) -> Einsum:
    return Einsum.model_validate({"einsum": text, **fields})


def operands(e: Einsum) -> list[tuple[str, dict]]:
    return [(o.name, o.ranks()) for o in e.operand_list()]


# (concise text, map operator, reduce operator)
OPERATORS = [
    ("Z[m, n] = A[m, k] * B[k, n]", "multiply", "add"),
    ("Z[m] = A[m] * B[m] * C[m]", "multiply", "add"),
    ("Z[m] = A[m] + B[m]", "add", "add"),
    ("Z[m] = A[m] - B[m]", "subtract", "add"),
    ("Z[m] = A[m] / B[m]", "divide", "add"),
    ("Z[m] = max(A[m], B[m])", "max", "add"),
    ("Z[m] = exp(A[m] - B[m])", "exp_difference", "add"),
    ("Z[m] = exp(A[m])", "exp_difference", "add"),
    ("Z[m] = A[m]", "copy", "add"),
    ("Z[m] = sigmoid(A[m])", "sigmoid", "add"),
    ("GM[p] = QK[m, p] :: max", "copy", "max"),
    ("SD[p] = SN[m, p] :: add", "copy", "add"),
    ("Z[m] = A[m, k] * B[k] :: none", "multiply", "none"),
]


@pytest.mark.parametrize(("text", "map_op", "reduce_op"), OPERATORS)
def test_concise_operators(text, map_op, reduce_op):
    e = einsum(text)
    assert (e.map_operator, e.reduce_operator) == (map_op, reduce_op)


def test_plain_einsum_reads_as_before():
    e = einsum("Z[m, n] = A[m, k] * B[k, n]")
    assert e.name == "Z" and e.tensors == ["Z", "A", "B"]
    assert e.rank_variables == ["m", "n", "k"]
    assert operands(e) == [("A", {"M": "m", "K": "k"}), ("B", {"K": "k", "N": "n"})]
    assert "map_operator" not in e.to_data()  # the default, multiply


def test_explicit_fields_win_over_the_text():
    e = einsum("Y[m] = X[m]", map_operator="sigmoid", reduce_operator="max")
    assert (e.map_operator, e.reduce_operator) == ("sigmoid", "max")


def test_operands_keep_repeats_and_recurrences():
    prm = einsum("PRM[m1, p] = exp(RM[m1, p] - RM[m1+1, p])")
    assert prm.tensors == ["PRM", "RM"]  # one access per tensor, for the model
    assert operands(prm) == [("RM", {"M1": "m1", "P": "p"}), ("RM", {"M1": "m1+1", "P": "p"})]
    rm = einsum("RM[m1+1, p] = max(RM[m1, p], LM[m1, p])", iterative={"m1": "-inf"})
    assert rm.tensors == ["RM", "LM"] and rm.access("RM").ranks() == {"M1": "m1+1", "P": "p"}
    assert [name for name, _ in operands(rm)] == ["RM", "LM"]
    assert rm.iterated_ranks() == {"m1": "M1"} and rm.iterative == {"m1": "-inf"}


def test_iterative_long_form():
    e = einsum("RD[m1+1, p] = SLD[m1, p] + SPD[m1, p]", iterative={"m1": {"initial": 0}})
    assert e.iterative == {"m1": 0}


def test_split_and_read_out_projections():
    bk = einsum("BK[e, m1, m0] = K[e, M: m1*M0 + m0]")
    assert bk.map_operator == "copy" and bk.rank_variables == ["e", "m1", "m0"]
    assert bk.access("K").ranks() == {"E": "e", "M": "m1*M0 + m0"}
    av = einsum("AV[f, p] = RNV[f, M1, p] / RD[M1, p]")
    assert av.rank_variables == ["f", "p"]
    assert av.access("RD").ranks() == {"M1": "M1", "P": "p"}


def test_cascade5_resolves_with_sizes_and_constants():
    spec = load_spec(ATTENTION / "cascade5.yaml", variables=SMALL)
    wl = resolve_workload(spec)
    shapes = {t: i.shape for t, i in wl.tensors.items()}
    assert shapes["K"] == (1, 2, 8, 64) and shapes["BK"] == (1, 2, 8, 4, 16)
    assert shapes["RM"] == (1, 2, 5, 64) and shapes["RNV"] == (1, 2, 5, 5, 64)  # M1 + 1
    assert shapes["LM"] == (1, 2, 4, 64) and shapes["AV"] == (1, 2, 5, 64)
    assert wl.einsum("BK").projections["K"]["M"] == Affine((("m1", 16), ("m0", 1)))
    assert wl.einsum("AV").projections["RD"]["M1"] == Affine((), 4)
    assert dict(wl.einsum("RM").bounds) == {"b": 1, "h": 2, "m1": 4, "p": 64}
    assert dict(wl.einsum("PRM").bounds) == {"b": 1, "h": 2, "m1": 4, "p": 64}
    assert spec.workload.iterative_ranks() == {"M1"}
    assert set(spec.workload.iterated_tensors()) == {"RM", "RD", "RNV"}


def test_check_accepts_every_attention_example(monkeypatch, capsys):
    arch = PACKAGE_EXAMPLES / "arch.yaml"
    for path in sorted(ATTENTION.glob("cascade*.yaml")) + [ATTENTION / "two_pass.yaml"]:
        code, out = run_cli(["check", str(arch), str(path), "-D", "SEQ=64", "-D", "M0=16",
                             "--allow-unused"], monkeypatch, capsys)  # fmt: skip
        assert code == 0, (path, out)


WORKLOAD = """\
workload:
  rank_sizes: {M: 8, M1: 2, M0: 4, P: 4}
  bits_per_value: {All: 16}
  einsums:
  - einsum: "LM[m1, p] = X[m1, p] :: max"
"""

# (id, old text, new text, expected message)
# fmt: off
ERRORS = [
    ("two-operators", '"LM[m1, p] = X[m1, p] :: max"', '"LM[m1, p] = X[m1, p] * Y[m1, p] + Z[m1, p]"',
     r"wl\.yaml:5: workload\.einsums\[0\]: cannot read the operator of 'LM\[m1, p\] = X\[m1, p\] \* Y\[m1, p\] \+ Z\[m1, p\]': write one operator per Einsum"),
    ("constant-operand", '"LM[m1, p] = X[m1, p] :: max"', '"LM[m1, p] = 2 * X[m1, p]"',
     r"wl\.yaml:5: workload\.einsums\[0\]: cannot read the operator of"),
    ("bad-syntax", '"LM[m1, p] = X[m1, p] :: max"', '"LM[m1, p] = exp(X[m1, p] -)"',
     r"wl\.yaml:5: workload\.einsums\[0\]: cannot read the right side of"),
    ("unknown-reduce", ":: max", ":: min",
     r"wl\.yaml:5: workload\.einsums\[0\]: unknown reduce operator 'min' in .* \(expected one of add, max, none\)"),
    ("bad-reduce-field", ":: max\"\n", "\"\n    reduce_operator: mean\n",
     r"wl\.yaml:6: workload\.einsums\[0\]\.reduce_operator: reduce_operator must be one of add, max, none, got 'mean'"),
    ("ambiguous-index", '"LM[m1, p] = X[m1, p] :: max"', '"LM[m1, p] = X[m1*M0 + m0, p] :: max"',
     r"wl\.yaml:5: workload\.einsums\[0\]: index 'm1\*M0 \+ m0' of X: name its rank, e.g. 'RANK: m1\*M0 \+ m0'"),
    ("unknown-size-symbol", '"LM[m1, p] = X[m1, p] :: max"', '"LM[m1, p] = X[M: m1*Q0 + m1, p] :: max"',
     r"wl\.yaml:5: LM: unknown name 'Q0' in index expression 'm1\*Q0 \+ m1' \(uppercase names must be rank sizes or variables\)"),
    ("iterative-not-a-variable", ":: max\"\n", ":: max\"\n    iterative: {q: 0}\n",
     r"wl\.yaml:6: workload\.einsums\[0\]\.iterative\.q: iterative: 'q' is not a rank variable of Einsum LM"),
    ("iterative-not-stepped", ":: max\"\n", ":: max\"\n    iterative: {m1: 0}\n",
     r"wl\.yaml:6: workload\.einsums\[0\]\.iterative\.m1: iterative rank variable 'm1': the output must be written at 'm1 \+ 1'"),
    ("iterative-bad-key", ":: max\"\n", ":: max\"\n    iterative: {m1: {start: 0}}\n",
     r"wl\.yaml:6: workload\.einsums\[0\]\.iterative\.m1: only 'initial' may be given, got start"),
    ("unknown-rank", "", "",
     r"wl\.yaml:1: workload: --rank Q: not a rank of the workload \(its ranks: M1, P\)"),
]
# fmt: on


@pytest.mark.parametrize(("case", "old", "new", "pattern"), ERRORS, ids=[c[0] for c in ERRORS])
def test_errors_name_file_line_and_key(tmp_path, monkeypatch, capsys, case, old, new, pattern):
    text = WORKLOAD.replace(old, new, 1) if old else WORKLOAD
    path = tmp_path / "wl.yaml"
    path.write_text(textwrap.dedent(text))
    rank = "Q" if case == "unknown-rank" else "M"
    code, out = run_cli(["passes", str(path), "--rank", rank], monkeypatch, capsys)
    assert code == 2, out
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in out, out
    assert re.search(pattern, lines[0]), f"{pattern!r} not in {lines[0]!r}"
