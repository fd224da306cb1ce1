"""Hostile specs end to end through the CLI: refused with one clean line, no side effects.

Each spec tries to run code, read objects it should not see, or exhaust time or memory.
Where it tries to create a file, the file is a sentinel in ``tmp_path`` that must not
exist afterwards. Unit tests of the evaluator and the loader are in test_expressions.py
and test_loader.py; these go through ``fusemap check`` / ``fusemap evaluate``.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support.cli_helpers import run_cli

ARCH = """\
arch:
  nodes:
  - !Memory
    name: DRAM
    size: inf
    actions:
    - {name: read, energy: 1, throughput: inf}
    - {name: write, energy: 1, throughput: inf}
  - !Memory
    name: Buffer
    size: 1024
    actions: [{name: read, energy: 0.5}, {name: write, energy: 0.5}]
  - !Compute
    name: MAC
    actions: [{name: compute, energy: 0.1}]
"""

WORKLOAD = """\
workload:
  rank_sizes: {M: 2, K: 2}
  bits_per_value: {All: 8}
  einsums:
  - einsum: "Z[m] = A[m, k]"
"""

MAPPING = """\
mapping:
  nodes:
  - !Storage {tensors: [A, Z], component: DRAM}
  - !Temporal {rank_variable: m, tile_shape: 1}
  - !Temporal {rank_variable: k, tile_shape: 1}
  - !Compute {einsum: Z, component: MAC}
"""


def sub(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


def run_spec(tmp_path, monkeypatch, capsys, arch=ARCH, workload=WORKLOAD, mapping=MAPPING):
    files = []
    for name, text in (("arch.yaml", arch), ("wl.yaml", workload), ("map.yaml", mapping)):
        (tmp_path / name).write_text(textwrap.dedent(text))
        files.append(str(tmp_path / name))
    return run_cli(["evaluate", "-q", *files], monkeypatch, capsys)


def assert_refused(code: int, out: str, pattern: str) -> None:
    assert code == 2, out
    assert "Traceback" not in out
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), out
    assert re.search(pattern, lines[0]), f"{pattern!r} not in {lines[0]!r}"


def test_the_base_spec_evaluates(tmp_path, monkeypatch, capsys):
    code, out = run_spec(tmp_path, monkeypatch, capsys)
    assert code == 0, out


# Each case replaces Buffer's "size: 1024" (arch.yaml line 11) with a hostile value, written
# as a block scalar so YAML takes any text (a block scalar is an expression, not a quoted
# literal); {sentinel} is a file the value tries to create.
# fmt: off
SIZE_CASES = [
    ("import-os-system", "__import__('os').system('touch {sentinel}')",
     r"arch\.yaml:11: Buffer\.size: ('__import__' is not allowed|calling anything but a whitelisted function)"),
    ("class-bases", "().__class__.__bases__", r"arch\.yaml:11: Buffer\.size: '__(class|bases)__' is not allowed"),
    ("format-string-escape", "'{{0}}'.format(1)",
     r"arch\.yaml:11: Buffer\.size: (calling anything but a whitelisted function|a str has no attribute)"),
    ("lambda", "(lambda: 1)()", r"arch\.yaml:11: Buffer\.size: (lambda|calling anything but a whitelisted function) not allowed"),
    ("bare-lambda", "lambda: 1", r"arch\.yaml:11: Buffer\.size: lambda not allowed"),
    ("walrus", "(x := 3)", r"arch\.yaml:11: Buffer\.size: assignment expressions \(:=\) not allowed"),
    ("huge-power", "10**10**10", r"arch\.yaml:11: Buffer\.size: exponent too large"),
    ("deep-nesting", "(" * 500 + "1" + ")" * 500, r"arch\.yaml:11: Buffer\.size: expression too large"),
    ("huge-string", "'a' * 10**9", r"arch\.yaml:11: Buffer\.size: result too large"),
    ("huge-range", "len([x for x in range(10**9)])", r"arch\.yaml:11: Buffer\.size: range too large"),
    ("builtins-name", "__builtins__", r"arch\.yaml:11: Buffer\.size: '__builtins__' is not allowed"),
    ("call-a-value", "Buffer.size()", r"arch\.yaml:11: Buffer\.size: calling anything but a whitelisted function"),
]
# fmt: on


@pytest.mark.parametrize(
    ("value", "pattern"), [c[1:] for c in SIZE_CASES], ids=[c[0] for c in SIZE_CASES]
)
def test_hostile_size_expression(tmp_path, monkeypatch, capsys, value, pattern):
    sentinel = tmp_path / "pwned"
    block = f"    size: >-\n      {value.format(sentinel=sentinel)}\n"
    arch = sub(ARCH, "    size: 1024\n", block)
    code, out = run_spec(tmp_path, monkeypatch, capsys, arch=arch)
    assert_refused(code, out, pattern)  # a rule's refusal (the pattern), not the time limit's
    assert not sentinel.exists()


def test_lambda_in_total_latency(tmp_path, monkeypatch, capsys):
    """total_latency is evaluated by the model, but its text is checked with the arch."""
    arch = sub(
        ARCH, "    size: 1024\n", "    size: 1024\n    total_latency: >-\n      (lambda a: 0)(1)\n"
    )
    mapping = sub(
        MAPPING,
        "  - !Temporal {rank_variable: m",
        "  - !Storage {tensors: [A, Z], component: Buffer}\n  - !Temporal {rank_variable: m",
    )
    code, out = run_spec(tmp_path, monkeypatch, capsys, arch=arch, mapping=mapping)
    assert_refused(
        code,
        out,
        r"arch\.yaml:12: Buffer\.total_latency: (lambda|calling anything but a whitelisted function) not allowed",
    )


def test_huge_energy(tmp_path, monkeypatch, capsys):
    arch = sub(ARCH, "energy: 0.1}", "energy: 10**10**10}")
    code, out = run_spec(tmp_path, monkeypatch, capsys, arch=arch)
    assert_refused(code, out, r"arch\.yaml:15: MAC\.actions\[0\]\.energy: exponent too large")


def test_numbers_too_large_for_a_float(tmp_path, monkeypatch, capsys):
    """Allowed integers (10**600) that no float holds are refused where they are written."""
    arch = sub(ARCH, "energy: 0.1}", "energy: 10**300 * 10**300}")
    code, out = run_spec(tmp_path, monkeypatch, capsys, arch=arch)
    assert_refused(code, out, r"arch\.yaml:15: MAC\.actions\[0\]\.energy: number too large")
    workload = sub(WORKLOAD, "{M: 2, K: 2}", "{M: 10**400, K: 2}")
    code, out = run_spec(tmp_path, monkeypatch, capsys, workload=workload)
    assert_refused(code, out, r"wl\.yaml:2: workload\.rank_sizes\.M: number too large")


def test_usage_errors_exit_2(monkeypatch, capsys):
    code, out = run_cli(["check", "--no-such-option"], monkeypatch, capsys)
    assert code == 2 and "No such option" in out and "Traceback" not in out


# fmt: off
TEMPLATE_CASES = [
    ("cycler-globals", "{{ cycler.__init__.__globals__ }}", r"arch\.yaml:1: cycler: undefined variable 'cycler'"),
    ("subclasses", "{{ ''.__class__.__mro__[1].__subclasses__() }}", r"arch\.yaml:1: unsafe template operation"),
    ("self-globals", "{{ self.__init__.__globals__ }}", r"arch\.yaml:1: (self: undefined variable|unsafe template operation)"),
    ("huge-loop", "{% for i in range(10**9) %}x{% endfor %}", r"arch\.yaml:1: .*range too big .*limit value_size"),
    ("setenv", "{{ setenv('FUSEMAP_PWNED', '1') }}", r"arch\.yaml:1: setenv is not allowed"),
    ("include-outside", "{{ include('/etc/passwd_does_not_exist') }}", r"arch\.yaml:1: file '/etc/passwd_does_not_exist' not found"),
]
# fmt: on


@pytest.mark.parametrize(
    ("line", "pattern"), [c[1:] for c in TEMPLATE_CASES], ids=[c[0] for c in TEMPLATE_CASES]
)
def test_hostile_template(tmp_path, monkeypatch, capsys, line, pattern):
    code, out = run_spec(tmp_path, monkeypatch, capsys, arch=f"# {line}\n" + ARCH)
    assert_refused(code, out, pattern)
    assert "FUSEMAP_PWNED" not in __import__("os").environ


# fmt: off
YAML_CASES = [
    ("python-name-tag", "    size: 1024\n", "    size: !!python/name:os.system\n",
     r"arch\.yaml:11: unsupported YAML tag '!!python/name:os\.system'"),
    ("python-apply-tag", "    size: 1024\n", "    size: !!python/object/apply:os.system ['touch {sentinel}']\n",
     r"arch\.yaml:11: unsupported YAML tag '!!python/object/apply:os\.system'"),
    ("billion-laughs", "arch:\n",
     "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
     + "".join(f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
               for p, c in zip("abcdefg", "bcdefgh", strict=True))
     + "arch:\n",
     r"arch\.yaml: document too large"),
]
# fmt: on


@pytest.mark.parametrize(
    ("old", "new", "pattern"), [c[1:] for c in YAML_CASES], ids=[c[0] for c in YAML_CASES]
)
def test_hostile_yaml(tmp_path, monkeypatch, capsys, old, new, pattern):
    sentinel = tmp_path / "pwned"
    arch = sub(ARCH, old, new.replace("{sentinel}", str(sentinel)))
    code, out = run_spec(tmp_path, monkeypatch, capsys, arch=arch)
    assert_refused(code, out, pattern)
    assert not sentinel.exists()


def test_mapping_tile_shape_code(tmp_path, monkeypatch, capsys):
    mapping = sub(
        MAPPING,
        "rank_variable: m, tile_shape: 1",
        "rank_variable: m, tile_shape: \"__import__('os')\"",
    )
    code, out = run_spec(tmp_path, monkeypatch, capsys, mapping=mapping)
    assert_refused(
        code,
        out,
        r"map\.yaml:4: mapping\.nodes\[1\]\.tile_shape: expected an integer, got \"__import__\('os'\)\"",
    )


def test_custom_expression_functions_are_refused(tmp_path, monkeypatch, capsys):
    sentinel = tmp_path / "pwned"
    plugin = tmp_path / "plugin.py"
    plugin.write_text(f"open({str(sentinel)!r}, 'w').close()\ndef f():\n    return 1\n")
    arch = ARCH + f"config:\n  expression_custom_functions: [{plugin}]\n"
    code, out = run_spec(tmp_path, monkeypatch, capsys, arch=arch)
    assert_refused(
        code,
        out,
        r"arch\.yaml:17: config\.expression_custom_functions: custom expression functions are refused",
    )
    assert not sentinel.exists()


@pytest.mark.slow
def test_hostile_define_value(tmp_path):
    """A -D value is data: Jinja prints it, it is never evaluated as a template."""
    sentinel = tmp_path / "pwned"
    arch = tmp_path / "arch.yaml"
    arch.write_text(sub(ARCH, "    size: 1024\n", "    size: {{ SIZE }}\n"))
    wl = tmp_path / "wl.yaml"
    wl.write_text(WORKLOAD)
    value = f"SIZE=__import__('os').system('touch {sentinel}')"
    exe = Path(sys.executable).with_name("fusemap")
    proc = subprocess.run(
        [str(exe), "check", str(arch), str(wl), "-D", value],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stdout + proc.stderr
    assert re.fullmatch(
        r"error: .*arch\.yaml:11: Buffer\.size: ('__import__' is not allowed|calling anything but a whitelisted function).*\n",
        proc.stderr,
    )
    assert not sentinel.exists()
