"""Numbers that cannot mean anything are refused where they are written.

NaN, infinite or negative energies and powers, widths of 0 bits, fractional rank sizes,
fanouts of 0: each would run through the model into a plausible-looking wrong number or
an internal error. Each is one line with file, line and key, and exit status 2; and no
JSON fusemap writes holds NaN or Infinity (they are not JSON).
"""

from __future__ import annotations

import json

import pytest

from tests.support.cli_helpers import run_cli
from tests.support.cli_specs import ARCH, MAPPING, WORKLOAD, assert_clean_error, check, sub, write

# (id, file, old text, new text, expected: file:line: key: message)
# fmt: off
CASES = [
    ("energy-nan", "arch", "energy: 0.1}", "energy: .nan}", r"arch\.yaml:21: MAC\.actions\[0\]\.energy: expected a number, got NaN"),
    ("energy-nan-expression", "arch", "energy: 0.1}", "energy: 0 * inf}", r"arch\.yaml:21: MAC\.actions\[0\]\.energy: expected a number, got NaN"),
    ("energy-inf", "arch", "energy: 0.1}", "energy: .inf}", r"arch\.yaml:21: MAC\.actions\[0\]\.energy: expected a finite number, got inf"),
    ("energy-negative", "arch", "{name: read, energy: 0.5}", "{name: read, energy: -0.5}", r"arch\.yaml:14: Buffer\.actions\[0\]\.energy: expected a number at least 0, got -0\.5"),
    ("energy-scale-negative", "arch", "    size: 1024\n", "    size: 1024\n    energy_scale: -2\n", r"arch\.yaml:13: Buffer\.energy_scale: expected a number at least 0, got -2"),
    ("leak-negative", "arch", "    size: 1024\n", "    size: 1024\n    leak_power: -1e-3\n", r"arch\.yaml:13: Buffer\.leak_power: expected a number at least 0, got -0\.001"),
    ("leak-nan", "arch", "    size: 1024\n", "    size: 1024\n    leak_power: .nan\n", r"arch\.yaml:13: Buffer\.leak_power: expected a number, got NaN"),
    ("leak-inf", "arch", "    size: 1024\n", "    size: 1024\n    leak_power: inf\n", r"arch\.yaml:13: Buffer\.leak_power: expected a finite number, got inf"),
    ("area-negative", "arch", "    size: 1024\n", "    size: 1024\n    area: -3\n", r"arch\.yaml:13: Buffer\.area: expected a number at least 0, got -3"),
    ("container-area-nan", "arch", "    name: PE\n", "    name: PE\n    area: .nan\n", r"arch\.yaml:18: PE\.area: expected a number, got NaN"),
    ("size-negative", "arch", "    size: 1024\n", "    size: -1024\n", r"arch\.yaml:12: Buffer\.size: expected a number at least 0, got -1024"),
    ("size-nan", "arch", "    size: 1024\n", "    size: .nan\n", r"arch\.yaml:12: Buffer\.size: expected a number, got NaN"),
    ("throughput-zero", "arch", "{name: read, energy: 0.5}", "{name: read, energy: 0.5, throughput: 0}", r"arch\.yaml:14: Buffer\.actions\[0\]\.throughput: expected a number above 0, got 0"),
    ("latency-negative", "arch", "{name: read, energy: 0.5}", "{name: read, energy: 0.5, latency: -2}", r"arch\.yaml:14: Buffer\.actions\[0\]\.latency: expected a number at least 0, got -2"),
    ("bits-per-action-zero", "arch", "    size: 1024\n", "    size: 1024\n    bits_per_action: 0\n", r"arch\.yaml:13: Buffer\.bits_per_action: expected a number above 0, got 0"),
    ("component-bits-zero", "arch", "    size: 1024\n", "    size: 1024\n    bits_per_value: {All: 0}\n", r"arch\.yaml:13: Buffer\.bits_per_value: expected a number above 0, got 0"),
    ("instances-zero", "arch", "    size: 1024\n", "    size: 1024\n    n_parallel_instances: 0\n", r"arch\.yaml:13: Buffer\.n_parallel_instances: expected a number above 0, got 0"),
    ("fanout-zero", "arch", "fanout: 4}", "fanout: 0}", r"arch\.yaml:18: PE\.spatial\[0\]\.fanout: expected a number at least 1, got 0"),
    ("fanout-negative", "arch", "fanout: 4}", "fanout: -4}", r"arch\.yaml:18: PE\.spatial\[0\]\.fanout: expected a number at least 1, got -4"),
    ("fanout-fraction", "arch", "fanout: 4}", "fanout: 2.5}", r"arch\.yaml:18: PE\.spatial\[0\]\.fanout: expected a whole number, got 2\.5"),
    ("fanout-inf", "arch", "fanout: 4}", "fanout: inf}", r"arch\.yaml:18: PE\.spatial\[0\]\.fanout: expected a finite number, got inf"),
    ("min-usage-above-1", "arch", "fanout: 4}", "fanout: 4, min_usage: 2}", r"arch\.yaml:18: PE\.spatial\[0\]\.min_usage: expected a number at least 0 and at most 1, got 2"),
    ("workload-bits-zero", "workload", "{All: 8}", "{All: 0}", r"wl\.yaml:3: [AZB]\.bits_per_value: expected a number above 0, got 0"),
    ("workload-bits-negative", "workload", "{All: 8}", "{All: -8}", r"wl\.yaml:3: [AZB]\.bits_per_value: expected a number above 0, got -8"),
    ("workload-bits-nan", "workload", "{All: 8}", "{All: .nan}", r"wl\.yaml:3: [AZB]\.bits_per_value: expected a number, got NaN"),
    ("rank-fraction", "workload", "{M: 4, K: 4, N: 4}", "{M: 4.5, K: 4, N: 4}", r"wl\.yaml:2: workload\.rank_sizes\.M: expected a whole number, got 4\.5"),
    ("rank-zero", "workload", "{M: 4, K: 4, N: 4}", "{M: 0, K: 4, N: 4}", r"wl\.yaml:2: workload\.rank_sizes\.M: expected a number at least 1, got 0"),
    ("rank-negative", "workload", "{M: 4, K: 4, N: 4}", "{M: -4, K: 4, N: 4}", r"wl\.yaml:2: workload\.rank_sizes\.M: expected a number at least 1, got -4"),
    ("rank-nan", "workload", "{M: 4, K: 4, N: 4}", "{M: .nan, K: 4, N: 4}", r"wl\.yaml:2: workload\.rank_sizes\.M: expected a number, got NaN"),
    ("rank-expression-fraction", "workload", "{M: 4, K: 4, N: 4}", "{M: 10 / 4, K: 4, N: 4}", r"wl\.yaml:2: workload\.rank_sizes\.M: expected a whole number, got 2\.5"),
    ("workload-instances-zero", "workload", "  bits_per_value: {All: 8}\n", "  bits_per_value: {All: 8}\n  n_instances: 0\n", r"wl\.yaml:4: workload\.n_instances: expected a number above 0, got 0"),
]
# fmt: on


@pytest.mark.parametrize(
    ("where", "old", "new", "pattern"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_nonsense_numbers_are_refused(tmp_path, monkeypatch, capsys, where, old, new, pattern):
    texts = {"arch": ARCH, "workload": WORKLOAD}
    texts[where] = sub(texts[where], old, new)
    code, out = check(
        tmp_path,
        monkeypatch,
        capsys,
        arch=texts["arch"],
        workload=texts["workload"],
        mapping=MAPPING,
    )
    line = assert_clean_error(code, out, pattern)
    assert "internal error" not in line


def test_operator_count_and_total_latency_are_checked(tmp_path, monkeypatch, capsys):
    arch = sub(
        ARCH,
        "    actions: [{name: compute, energy: 0.1}]\n",
        "    actions: [{name: compute, energy: 0.1}]\n    operators: {multiply_add: {compute: -1}}\n",
    )
    code, out = check(tmp_path, monkeypatch, capsys, arch=arch, mapping=MAPPING)
    assert_clean_error(
        code,
        out,
        r"arch\.yaml:22: MAC\.operators\.multiply_add\.compute: expected a number at least 0, got -1",
    )
    arch = sub(ARCH, "    size: 1024\n", "    size: 1024\n    total_latency: -1\n")
    mapping = sub(
        MAPPING,
        "  - !Temporal {rank_variable: m",
        "  - !Storage {tensors: [A, B, Z], component: Buffer}\n  - !Temporal {rank_variable: m",
    )
    files = [
        write(tmp_path, "a.yaml", arch),
        write(tmp_path, "w.yaml", WORKLOAD),
        write(tmp_path, "m.yaml", mapping),
    ]
    code, out = run_cli(["evaluate", "-q", *files], monkeypatch, capsys)
    assert_clean_error(
        code, out, r"a\.yaml:13: Buffer\.total_latency: expected a number at least 0, got -1"
    )


def strict_json(text: str):
    def refuse(name: str):
        raise AssertionError(f"{name} in JSON output")

    return json.loads(text, parse_constant=refuse)


def test_json_never_holds_nan_or_infinity(tmp_path, monkeypatch, capsys):
    """An infinite latency (no throughput limit anywhere) or size is written as null."""
    files = [
        write(tmp_path, "a.yaml", ARCH),
        write(tmp_path, "w.yaml", WORKLOAD),
        write(tmp_path, "m.yaml", MAPPING),
    ]
    out = tmp_path / "r.json"
    code, text = run_cli(["evaluate", "-q", *files, "--json", str(out)], monkeypatch, capsys)
    assert code == 0, text
    strict_json(out.read_text())
    from fusemap.spec.numbers import finite_json

    data = strict_json(
        finite_json({"a": float("inf"), "b": [float("nan"), 1.5], "c": {"d": -float("inf")}})
    )
    assert data == {"a": None, "b": [None, 1.5], "c": {"d": None}}
