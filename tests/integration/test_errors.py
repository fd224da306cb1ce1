"""Malformed specs through the CLI: one located line on stderr, exit status 2, no traceback.

Every case writes small YAML files to ``tmp_path`` (the line numbers in the expectations
are those of the texts below) and runs ``fusemap check`` in-process. A message reads
``error: <file>:<line>: <key>: <what is wrong>``.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli_helpers import run_cli
from tests.support.cli_specs import ARCH, MAPPING, WORKLOAD, assert_clean_error, check, sub, write


def test_the_base_spec_is_valid(tmp_path, monkeypatch, capsys):
    code, out = check(tmp_path, monkeypatch, capsys, mapping=MAPPING)
    assert code == 0, out
    assert "OK" in out


# (id, file to edit, old text, new text, expected message: file:line: key: what is wrong)
# fmt: off
CASES = [
    ("yaml-syntax", "arch", "    name: Buffer\n", "    name: [Buffer\n",
     r"arch\.yaml:1[12]: YAML syntax error"),
    ("unknown-key-did-you-mean", "arch", "    size: 1024\n", "    sise: 1024\n",
     r"arch\.yaml:12: Buffer\.sise: unknown key 'sise' \(did you mean 'size'\?\)"),
    ("missing-required", "arch", "    size: 1024\n", "",
     r"arch\.yaml:10: Buffer\.size: missing required field 'size'"),
    ("fanout-list", "arch", "fanout: 4}", "fanout: [1]}",
     r"arch\.yaml:18: PE\.spatial\[0\]\.fanout: expected a number or an expression, got list"),
    ("tensors-int", "arch", "    tensors: {keep: ~Intermediates, may_keep: All}\n", "    tensors: 3\n",
     r"arch\.yaml:6: DRAM\.tensors: expected a mapping, got 3"),
    ("size-unknown-name", "arch", "    size: 1024\n", "    size: big\n",
     r"arch\.yaml:12: Buffer\.size: unknown name 'big'"),
    ("size-quoted-word", "arch", "    size: 1024\n", "    size: 'big'\n",
     r"arch\.yaml:12: Buffer\.size: expected a number, got 'big'"),
    ("fanout-not-number", "arch", "fanout: 4}", "fanout: Nothing}",
     r"arch\.yaml:18: PE\.spatial\[0\]\.fanout: expected a number, got TensorSet"),
    ("unknown-tag", "arch", "  - !Container\n", "  - !Memry\n",
     r"arch\.yaml:16: PE: unknown node type '!Memry' \(expected one of 'Memory', 'Toll'"),
    ("energy-did-you-mean", "arch", "energy: 0.1}", "energy: Bufer.size}",
     r"arch\.yaml:21: MAC\.actions\[0\]\.energy: unknown name 'Bufer' \(did you mean 'Buffer'\?\)"),
    ("division-by-zero", "arch", "    size: 1024\n", "    size: 1024 / (2 - 2)\n",
     r"arch\.yaml:12: Buffer\.size: division by zero in '1024 / \(2 - 2\)'"),
    ("type-error", "arch", "    size: 1024\n", '    size: ("a" + 1)\n',
     r"arch\.yaml:12: Buffer\.size: unsupported operand types for \+: 'str' and 'int'"),
    ("multi-line-expression", "arch", "    size: 1024\n", '    size: |\n      (1024 +\n       "a")\n',
     r"arch\.yaml:12: Buffer\.size: unsupported operand types for \+: 'int' and 'str' in '\(1024 \+  +\"a\"\) *'$"),
    ("component-field-cycle", "arch", "    size: 1024\n", "    size: area * 2\n    area: size / 2\n",
     r"arch\.yaml:1[23]: Buffer\.(size|area): cycle between fields: (size -> area -> size|area -> size -> area)"),
    ("set-keys-overlap", "arch", "    size: 1024\n", "    size: 1024\n    bits_per_value: {All: 8, Inputs: 16}\n",
     r"arch\.yaml:13: Buffer\.bits_per_value\.Inputs: keys 'All' and 'Inputs' overlap on \{A, B\}"),
    ("duplicate-component", "arch", "    name: Buffer\n", "    name: DRAM\n",
     r"arch\.yaml:10: DRAM: component names must be unique: 'DRAM' repeated"),
    ("keep-unknown-name", "arch", "may_keep: All}", "may_keep: All - Q}",
     r"arch\.yaml:6: DRAM\.tensors: unknown name 'Q'"),
    ("top-level-unknown-key", "arch", "arch:\n", "archh: {}\narch:\n",
     r"arch\.yaml:1: archh: unknown key 'archh' \(did you mean 'arch'\?\)"),
    ("workload-unknown-key", "workload", "  bits_per_value: {All: 8}\n", "  bits_per_value: {All: 8}\n  einsumz: []\n",
     r"wl\.yaml:4: workload\.einsumz: unknown key 'einsumz' \(did you mean 'einsums'\?\)"),
    ("workload-bits-overlap", "workload", "{All: 8}", "{All: 8, Outputs: 16}",
     r"wl\.yaml:3: workload\.bits_per_value\.Outputs: keys 'All' and 'Outputs' overlap on \{Z\}"),
    ("duplicate-einsum", "workload", '  - einsum: "Z[m, n] = A[m, k] * B[k, n]"\n',
     '  - einsum: "Z[m, n] = A[m, k] * B[k, n]"\n  - einsum: "Y[m, n] = Z[m, n]"\n    name: Z\n',
     r"wl\.yaml:6: Z: Einsum names must be unique: Z repeated"),
    ("lowercase-rank", "workload", '  - einsum: "Z[m, n] = A[m, k] * B[k, n]"\n',
     "  - name: E\n    tensor_accesses:\n    - {name: A, projection: {m: m}}\n    - {name: Z, projection: [m], output: true}\n",
     r"wl\.yaml:7: E\.tensor_accesses\[0\]\.projection: rank names start with an uppercase letter, got 'm'"),
    ("concise-bad-syntax", "workload", '"Z[m, n] = A[m, k] * B[k, n]"', '"Z[m, n] == A[m, k]"',
     r"wl\.yaml:5: workload\.einsums\[0\]: expected 'Out\[\.\.\.\] = In\[\.\.\.\] \.\.\.'"),
    ("rename-expected-count", "workload", '"Z[m, n] = A[m, k] * B[k, n]"\n',
     '"Z[m, n] = A[m, k] * B[k, n]"\n    renames:\n    - {name: input, source: Inputs, expected_count: 1}\n',
     r"wl\.yaml:6: Z\.renames: rename 'input' = Inputs has 2 tensor\(s\) \{A, B\} in Einsum Z, expected 1"),
    ("unbounded-rank-variable", "workload", "{M: 4, K: 4, N: 4}", "{M: 4, K: 4}",
     r"wl\.yaml:5: Z: rank variable 'n' is unbounded; give its rank a size"),
    ("inconsistent-ranks", "workload", '"Z[m, n] = A[m, k] * B[k, n]"\n',
     '"Z[m, n] = A[m, k] * B[k, n]"\n  - "Y[m] = A[m]"\n',
     r"wl\.yaml:6: Y: tensor A has ranks \['M', 'K'\] in one Einsum and \['M'\] in Einsum Y"),
    ("missing-bits-per-value", "workload", "  bits_per_value: {All: 8}\n", "  bits_per_value: {Inputs: 8}\n",
     r"wl\.yaml:3: workload\.bits_per_value: tensor Z has no bits_per_value"),
    ("variables-cycle", "workload", "workload:\n", "variables: {a: b, b: a}\nworkload:\n",
     r"wl\.yaml:1: variables\.[ab]: cycle between fields: (a -> b -> a|b -> a -> b)"),
    ("rank-size-unknown-name", "workload", "{M: 4, K: 4, N: 4}", "{M: 4, K: 4, N: big}",
     r"wl\.yaml:2: workload\.rank_sizes\.N: unknown name 'big'"),
    ("rank-size-quoted", "workload", "{M: 4, K: 4, N: 4}", "{M: 4, K: 4, N: 'big'}",
     r"wl\.yaml:2: workload\.rank_sizes\.N: expected a number, got 'big'"),
    ("jinja-undefined", "workload", "{M: 4,", "{M: {{ SIZE_M }},",
     r"wl\.yaml:2: SIZE_M: undefined variable 'SIZE_M' \(pass it with -D SIZE_M=VALUE\)"),
    ("jinja-assert", "workload", "workload:\n", '{% assert 1 > 2, "M must be small" %}\nworkload:\n',
     r"wl\.yaml:1: assertion failed: M must be small"),
    ("python-tag", "workload", "{All: 8}", "!!python/object/apply:os.system [echo hi]",
     r"wl\.yaml:3: unsupported YAML tag '!!python/object/apply:os\.system'"),
    ("top-level-list", "workload", "workload:\n", "- workload:\n",
     r"wl\.yaml:1: the top level of a spec file must be a mapping, got a list"),
]

MAP_CASES = [
    ("unknown-tensor", "[A, B, Z]", "[A, B, Zz]",
     r"map\.yaml:3: mapping\.nodes\[0\]\.tensors: unknown tensor 'Zz' \(did you mean 'Z'\?\)"),
    ("tensors-not-list", "[A, B, Z]", "3",
     r"map\.yaml:3: mapping\.nodes\[0\]\.tensors: expected a list, got 3"),
    ("unknown-rank-variable", "rank_variable: n,", "rank_variable: q,",
     r"map\.yaml:5: mapping\.nodes\[2\]\.rank_variable: Einsum Z has no rank variable 'q'"),
    ("unknown-component", "component: DRAM}", "component: DRAMM}",
     r"map\.yaml:3: mapping\.nodes\[0\]\.component: unknown component 'DRAMM' \(did you mean 'DRAM'\?\)"),
    ("unknown-einsum", "einsum: Z,", "einsum: Zz,",
     r"map\.yaml:7: mapping\.nodes\[4\]\.einsum: unknown Einsum 'Zz' \(did you mean 'Z'\?\)"),
    ("storage-on-compute", "component: DRAM}", "component: MAC}",
     r"map\.yaml:3: mapping\.nodes\[0\]\.component: !Storage names MAC, which is a compute unit, not a memory"),
    ("tile-shape-word", "rank_variable: m, tile_shape: 1", "rank_variable: m, tile_shape: big",
     r"map\.yaml:4: mapping\.nodes\[1\]\.tile_shape: expected an integer, got 'big'"),
    ("unknown-fanout-dimension", "  - !Temporal {rank_variable: m, tile_shape: 1}",
     "  - !Spatial {rank_variable: m, tile_shape: 1, name: Y, component: PE}",
     r"map\.yaml:4: mapping\.nodes\[1\]\.name: PE has no fanout dimension 'Y' \(it has dimensions X\)"),
    ("compute-is-not-one-operation", "  - !Temporal {rank_variable: k, tile_shape: 1}\n", "",
     r"map\.yaml:6: mapping\.nodes\[3\]: Einsum Z: the compute leaf must be one operation, but 'k' still spans 4"),
]
# fmt: on


@pytest.mark.parametrize(
    ("which", "old", "new", "pattern"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_malformed_spec(tmp_path, monkeypatch, capsys, which, old, new, pattern):
    texts = {"arch": ARCH, "workload": WORKLOAD}
    texts[which] = sub(texts[which], old, new)
    code, out = check(tmp_path, monkeypatch, capsys, **texts)
    assert_clean_error(code, out, pattern)


@pytest.mark.parametrize(
    ("old", "new", "pattern"), [c[1:] for c in MAP_CASES], ids=[c[0] for c in MAP_CASES]
)
def test_malformed_mapping(tmp_path, monkeypatch, capsys, old, new, pattern):
    code, out = check(tmp_path, monkeypatch, capsys, mapping=sub(MAPPING, old, new))
    assert_clean_error(code, out, pattern)


def test_capacity_overflow_is_located_at_the_mapping(tmp_path, monkeypatch, capsys):
    """``evaluate`` checks capacity: 3 tensors of 16 values x 8 bits do not fit 100 bits."""
    arch = sub(ARCH, "    size: 1024\n", "    size: 100\n")
    mapping = sub(
        MAPPING,
        "component: DRAM}\n",
        "component: DRAM}\n  - !Storage {tensors: [A, B, Z], component: Buffer}\n",
    )
    files = [write(tmp_path, "arch.yaml", arch), write(tmp_path, "wl.yaml", WORKLOAD)]
    files.append(write(tmp_path, "map.yaml", mapping))
    code, out = run_cli(["evaluate", *files, "-q"], monkeypatch, capsys)
    assert_clean_error(code, out, r"map\.yaml:1: mapping: .*Buffer")


def test_empty_file(tmp_path, monkeypatch, capsys):
    code, out = check(tmp_path, monkeypatch, capsys, workload="")
    assert_clean_error(
        code,
        out,
        r"no 'workload:' section found in .*arch\.yaml, .*wl\.yaml \(.*wl\.yaml defines nothing\)",
    )


def test_missing_file(tmp_path, monkeypatch, capsys):
    arch = write(tmp_path, "arch.yaml", ARCH)
    code, out = run_cli(["check", arch, str(tmp_path / "nope.yaml")], monkeypatch, capsys)
    assert_clean_error(code, out, r"file not found: '.*nope\.yaml'")


def test_bad_define(tmp_path, monkeypatch, capsys):
    code, out = check(tmp_path, monkeypatch, capsys, extra=["-D", "1X=3"])
    assert_clean_error(code, out, r"bad definition '1X=3': expected NAME=VALUE")


@pytest.mark.slow
def test_debug_shows_traceback(tmp_path):
    """``--debug`` shows the traceback instead of the one line (run as a real process)."""
    arch = write(tmp_path, "arch.yaml", sub(ARCH, "    size: 1024\n", "    size: big\n"))
    wl = write(tmp_path, "wl.yaml", WORKLOAD)
    exe = Path(sys.executable).with_name("fusemap")
    plain = subprocess.run([str(exe), "check", arch, wl], capture_output=True, text=True)
    assert plain.returncode == 2 and "Traceback" not in plain.stderr
    debug = subprocess.run([str(exe), "--debug", "check", arch, wl], capture_output=True, text=True)
    assert debug.returncode != 0
    assert "Traceback (most recent call last)" in debug.stderr
    assert "unknown name 'big'" in debug.stderr


def test_subprocess_exit_status(tmp_path):
    """The installed entry point behaves the same as the in-process runs."""
    arch = write(tmp_path, "arch.yaml", sub(ARCH, "    size: 1024\n", "    size: 'big'\n"))
    wl = write(tmp_path, "wl.yaml", WORKLOAD)
    exe = Path(sys.executable).with_name("fusemap")
    proc = subprocess.run(
        [str(exe), "check", arch, wl], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr + proc.stdout
    assert re.fullmatch(
        r"error: .*arch\.yaml:12: Buffer\.size: expected a number, got 'big'\n", proc.stderr
    )


def test_running_out_of_memory_is_one_line_not_an_internal_error(tmp_path, monkeypatch, capsys):
    """A mapping too large for the machine's memory ends with one line saying so (its
    peak, what may help) and status 1, not a traceback nor "please report it"; with
    ``--debug`` the MemoryError itself."""
    from fusemap.cli import map_command
    from fusemap.examples import example_path

    def too_large(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(map_command, "map_workload", too_large)
    args = ["map", str(example_path("arch.yaml")), str(example_path("matmul_chain.yaml"))]
    code, out = run_cli(args, monkeypatch, capsys)
    assert code == 1 and len(out.strip().splitlines()) == 1
    assert re.fullmatch(r"error: out of memory \([0-9.]+ GB at the peak\): .*-j 1.*", out.strip())
    assert "internal error" not in out and "Traceback" not in out
    with pytest.raises(MemoryError):
        run_cli(["--debug", *args], monkeypatch, capsys)
