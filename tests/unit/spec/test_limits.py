"""Every spec loads within limits the user can raise, or is refused naming the limit.

Each case is a spec that would run for minutes or take gigabytes without the limit: a
slow whitelisted call inside an expression, the arch re-evaluated for many Einsums,
Jinja loops that print nothing, ``~`` joins, padding, includes, path searches. Each
must exit with status 2 and one line naming the file, the line and the limit, quickly;
the same spec passes once the limit is raised (where that stays cheap).
"""

from __future__ import annotations

import re
import textwrap
import time
from pathlib import Path

import pytest

from fusemap.spec import limits
from fusemap.spec.errors import SpecError
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


def check(tmp_path: Path, monkeypatch, capsys, arch=ARCH, workload=WORKLOAD, options=()):
    files = []
    for name, text in (("arch.yaml", arch), ("wl.yaml", workload)):
        (tmp_path / name).write_text(textwrap.dedent(text))
        files.append(str(tmp_path / name))
    started = time.monotonic()
    code, out = run_cli([*options, "check", *files], monkeypatch, capsys)
    return code, out, time.monotonic() - started


def assert_limit(code: int, out: str, pattern: str, name: str) -> None:
    lines = [line for line in out.splitlines() if line.strip()]
    assert code == 2, out
    assert len(lines) == 1 and lines[0].startswith("error: "), out
    assert "internal error" not in out and "Traceback" not in out
    assert re.search(pattern, lines[0]), f"{pattern!r} not in {lines[0]!r}"
    assert f"--limit {name}=N" in lines[0], lines[0]


# Buffer's size (arch.yaml line 11) set to an expression that one call makes slow.
# fmt: off
SLOW_EXPRESSIONS = [
    ("max-key-str", "max(range(9999999), key=str)"),
    ("sum-in-comprehension", "len([sum(range(10**6)) for i in range(10**6)])"),
    ("sorted-key", "len(sorted(range(999999), key=str))"),
    ("any-over-generator", "any(str(x) == 'no' for x in range(10**7))"),
    ("zip-enumerate", "sum(1 for p in zip(range(10**7), enumerate(range(10**7))))"),
    ("prod-of-many", "prod(1 for i in range(10**7))"),
]
# fmt: on


@pytest.mark.parametrize(
    "value", [c[1] for c in SLOW_EXPRESSIONS], ids=[c[0] for c in SLOW_EXPRESSIONS]
)
def test_one_slow_call_cannot_walk_past_the_expression_limit(tmp_path, monkeypatch, capsys, value):
    arch = ARCH.replace("    size: 1024\n", f"    size: >-\n      {value}\n")
    code, out, took = check(
        tmp_path, monkeypatch, capsys, arch, options=["--limit", "expression_seconds=0.3"]
    )
    assert_limit(
        code, out, r"arch\.yaml:11: Buffer\.size: expression takes too long", "expression_seconds"
    )
    assert took < 10


def test_the_arch_evaluated_per_einsum_shares_one_budget(tmp_path, monkeypatch, capsys):
    """Each evaluation stays under expression_seconds; 40 Einsums together do not."""
    einsums = "".join(f'  - "Z{i}[m] = A{i}[m, k]"\n' for i in range(40))
    workload = WORKLOAD.replace('  - einsum: "Z[m] = A[m, k]"\n', einsums)
    arch = ARCH.replace("    size: 1024\n", "    size: 1024 + 0 * len(sorted(range(200000)))\n")
    options = ["--limit", "expression_seconds=5", "--limit", "evaluation_seconds=0.5"]
    code, out, took = check(tmp_path, monkeypatch, capsys, arch, workload, options)
    assert_limit(
        code,
        out,
        r"arch\.yaml:11: Buffer\.size: the spec's expressions take too long in total",
        "evaluation_seconds",
    )
    assert took < 20


# A first line of arch.yaml (a comment) that makes Jinja run away; (template, limit).
# fmt: off
RUNAWAY_TEMPLATES = [
    ("silent-nested-loops", "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "render_steps"),
    ("exponential-macro", "{% macro f(n) %}{% if n %}{{ f(n-1) }}{{ f(n-1) }}{% endif %}{% endmacro %}{{ f(60) }}", "render_seconds"),
    ("tilde-doubling", "{% set ns = namespace(s='x') %}{% for i in range(60) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}", "render_chars"),
    ("plus-doubling", "{% set ns = namespace(s=[1]) %}{% for i in range(60) %}{% set ns.s = ns.s + ns.s %}{% endfor %}", "value_size"),
    ("nested-list-doubling", "{% set ns = namespace(a=1) %}{% for i in range(80) %}{% set ns.a = [ns.a, ns.a] %}{% endfor %}", "render_chars"),
    ("ljust", "{{ 'x'.ljust(10**10) }}", "render_chars"),
    ("center-filter", "{{ 'x' | center(10**10) }}", "render_chars"),
    ("format-width", "{{ '{:>9999999999}'.format(1) }}", "render_chars"),
    ("printf-width", "{{ '%9999999999d' % 1 }}", "render_chars"),
    ("format-filter", "{{ '%*d' | format(10**10, 1) }}", "render_chars"),
    ("replace-growth", "{{ ('a' * 1000) | replace('a', 'b' * 100000) }}", "render_chars"),
    ("join-growth", "{{ (['x' * 100000] * 1000) | join }}", "render_chars"),
    ("range-too-long", "{{ range(10**8) | length }}", "value_size"),
    ("batch-fill", "{{ [1] | batch(10**9, 0) | list | length }}", "value_size"),
    ("repeat", "{{ [0] * 10**9 }}", "value_size"),
]
# fmt: on


@pytest.mark.parametrize(
    ("line", "name"), [c[1:] for c in RUNAWAY_TEMPLATES], ids=[c[0] for c in RUNAWAY_TEMPLATES]
)
def test_runaway_templates_are_stopped(tmp_path, monkeypatch, capsys, line, name):
    options = ["--limit", "render_seconds=2"] if name == "render_seconds" else []
    code, out, took = check(tmp_path, monkeypatch, capsys, f"# {line}\n" + ARCH, options=options)
    assert_limit(code, out, rf"arch\.yaml:1: .*limit {name} = ", name)
    assert took < 20


@pytest.mark.parametrize(
    "line",
    [
        "{% macro f(n, s) %}{% if n %}{{ f(n - 1, s ~ 'x') | length }}{% endif %}{% endmacro %}"
        "{{ f(200, 'y' * 1000000) }}",
        "{% for i in range(1000) %}{{ ('z' * 500000 ~ i) | length }}{% endfor %}",
        "{% for i in range(1000) %}{{ (range(100000) | list) | length }}{% endfor %}",
    ],
)
def test_large_values_built_in_total_are_bounded(tmp_path, monkeypatch, capsys, line):
    """Each value is within render_chars, but kept alive together (a recursion) or made
    again and again they are bounded by render_total."""
    options = ["--limit", "render_total=50000000"]
    code, out, _ = check(tmp_path, monkeypatch, capsys, f"# {line}\n" + ARCH, options=options)
    assert_limit(code, out, r"arch\.yaml:1: .*too much text and data in total", "render_total")


def test_big_integer_arithmetic_is_bounded(tmp_path, monkeypatch, capsys):
    line = "{% set ns = namespace(x=2**99999) %}{% for i in range(40) %}{% set ns.x = ns.x * ns.x %}{% endfor %}"
    code, out, _ = check(tmp_path, monkeypatch, capsys, f"# {line}\n" + ARCH)
    assert code == 2 and re.fullmatch(
        r"error: \S*arch\.yaml:1: unsafe template operation: integer product too large\n", out
    ), out
    arch = ARCH.replace(
        "    size: 1024\n",
        "    size: 2**9000 * 2**9000 * 2**9000 * 2**9000 * 2**9000 * 2**9000 * 2**9000 * 2**9000 * 2**9000 * 2**9000 * 2**9000 * 2**9000\n",
    )
    code, out, _ = check(tmp_path, monkeypatch, capsys, arch)
    assert code == 2 and "arch.yaml:11: Buffer.size: result too large" in out, out


def test_include_count(tmp_path, monkeypatch, capsys):
    (tmp_path / "part.yaml").write_text("x: 1\n")
    line = "{% for i in range(100000) %}{{ include('part.yaml') and '' }}{% endfor %}"
    code, out, took = check(
        tmp_path, monkeypatch, capsys, f"# {line}\n" + ARCH, options=["--limit", "includes=50"]
    )
    assert_limit(code, out, r"arch\.yaml:1: too many files rendered", "includes")
    assert took < 20


def test_include_text_of_itself_many_times(tmp_path, monkeypatch, capsys):
    (tmp_path / "part.yaml").write_text(
        "{% for i in range(1000) %}{{ include_text('leaf.yaml') }}{% endfor %}\n"
    )
    (tmp_path / "leaf.yaml").write_text("y: 2\n")
    line = "{% for i in range(1000) %}{{ include_text('part.yaml') | length }}{% endfor %}"
    code, out, took = check(tmp_path, monkeypatch, capsys, f"# {line}\n" + ARCH)
    assert_limit(code, out, r"(arch|part)\.yaml:1: too many files rendered", "includes")
    assert took < 20


@pytest.mark.parametrize("pattern", ["/usr/**", "/**/no-such-file-anywhere", "../../../../**/*.py"])
def test_path_search_scope(tmp_path, monkeypatch, capsys, pattern):
    line = f"{{{{ find_paths('{pattern}') | length }}}}"
    options = ["--limit", "find_entries=2000"]
    code, out, took = check(tmp_path, monkeypatch, capsys, f"# {line}\n" + ARCH, options=options)
    assert_limit(code, out, r"arch\.yaml:1: a path search looks at too many files", "find_entries")
    assert took < 20


def test_path_search_match_count(tmp_path, monkeypatch, capsys):
    for i in range(30):
        (tmp_path / f"f{i}.yaml").write_text("")
    line = "{{ find_paths('f*.yaml') | length }}"
    code, out, _ = check(
        tmp_path, monkeypatch, capsys, f"# {line}\n" + ARCH, options=["--limit", "find_matches=10"]
    )
    assert_limit(code, out, r"arch\.yaml:1: too many paths match 'f\*\.yaml'", "find_matches")
    code, out, _ = check(tmp_path, monkeypatch, capsys, f"# {line}\n" + ARCH)
    assert code == 0, out


def test_raising_a_limit_lets_the_spec_through(tmp_path, monkeypatch, capsys):
    line = "{% for i in range(3000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}"
    code, out, _ = check(
        tmp_path,
        monkeypatch,
        capsys,
        f"# {line}\n" + ARCH,
        options=["--limit", "render_steps=1000000"],
    )
    assert_limit(code, out, r"templates run too many steps", "render_steps")
    code, out, _ = check(
        tmp_path,
        monkeypatch,
        capsys,
        f"# {line}\n" + ARCH,
        options=["--limit", "render_steps=5000000"],
    )
    assert code == 0, out


def test_limits_from_the_environment(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(limits.ENV_VAR, "render_steps=1000, includes=5")
    limits.reset()
    assert limits.current().render_steps == 1000 and limits.current().includes == 5
    line = "{% for i in range(5000) %}{% endfor %}"
    code, out, _ = check(tmp_path, monkeypatch, capsys, f"# {line}\n" + ARCH)
    assert_limit(code, out, r"templates run too many steps", "render_steps")


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("render_second=3", "unknown limit 'render_second'"),
        ("render_seconds=-1", "limit render_seconds: must be positive"),
        ("render_seconds=soon", "limit render_seconds: expected a number"),
        ("render_seconds", "--limit: expected NAME=VALUE"),
    ],
)
def test_bad_limit_options(tmp_path, monkeypatch, capsys, option, message):
    code, out, _ = check(tmp_path, monkeypatch, capsys, options=["--limit", option])
    assert code == 2 and out.startswith(f"error: {message}"), out


def test_huge_yaml_is_refused_by_node_count(tmp_path, monkeypatch, capsys):
    items = "".join(f"  k{i}: [{', '.join(['1'] * 50)}]\n" for i in range(200))
    code, out, _ = check(
        tmp_path,
        monkeypatch,
        capsys,
        ARCH + "extra:\n" + items,
        options=["--limit", "yaml_nodes=5000"],
    )
    assert_limit(code, out, r"arch\.yaml: document too large", "yaml_nodes")


def test_source_lines_of_a_large_rendered_file_map_in_linear_time(tmp_path, monkeypatch, capsys):
    """A 10k-line file whose every line is rewritten by Jinja maps back exactly (the
    error at its end), in linear time (the old line diff took minutes here)."""
    body = "".join(f"  {{{{ 'k' ~ {i} }}}}: {{{{ {i} * 2 }}}}\n" for i in range(10_000))
    text = "{% set A = 1 %}\n" + ARCH + "variables:\n" + body + "  bad: [1, 2\n"
    code, out, took = check(tmp_path, monkeypatch, capsys, text)
    assert code == 2 and f"arch.yaml:{10_000 + 18}: YAML syntax error" in out, out
    assert took < 60


def test_configure_validates_names():
    with pytest.raises(SpecError, match="unknown limit"):
        limits.configure(nothing=1)
    assert limits.configure(render_chars=10).render_chars == 10


def test_total_latency_scored_by_the_mapper_shares_the_budget(tmp_path, monkeypatch, capsys):
    """The model evaluates total_latency for every tile shape the mapper scores."""
    arch = ARCH.replace(
        "    size: 1024\n",
        "    size: 4096\n    total_latency: sum(a.n_calls for a in actions) + 0 * len(sorted(range(900000)))\n",
    )
    workload = 'workload:\n  rank_sizes: {M: 64, K: 64, N: 64}\n  bits_per_value: {All: 8}\n  einsums:\n  - "Z[m, n] = A[m, k] * B[k, n]"\n'
    (tmp_path / "arch.yaml").write_text(arch)
    (tmp_path / "wl.yaml").write_text(workload)
    files = [str(tmp_path / "arch.yaml"), str(tmp_path / "wl.yaml")]
    code, out = run_cli(["--limit", "evaluation_seconds=0.2", "map", *files], monkeypatch, capsys)
    out = out.strip().splitlines()[-1] + "\n"
    assert_limit(
        code,
        out,
        r"arch\.yaml:12: Buffer\.total_latency: the spec's expressions take too long in total",
        "evaluation_seconds",
    )
