"""Every spec loads within limits the user can raise, or is refused naming the limit.

Each case is a spec that would run for minutes or take gigabytes without the limit: a
slow whitelisted call inside an expression, the arch re-evaluated for many Einsums,
Jinja loops that print nothing, ``~`` joins, padding, includes, path searches. Each
must exit with status 2 and one line naming the file, the line and the limit; the same
spec passes once the limit is raised (where that stays cheap).

No assertion reads the wall clock. A count limit must stop its case before the default
time limits do (the line names the count limit); the cases of time limits run on a fake
clock (``fake_clock``: each read of ``time.monotonic`` advances it a fixed step), so a
time limit is reached after a fixed number of deadline checks, only if the checks run
inside the slow work.
"""

from __future__ import annotations

import re
import sys
import textwrap
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


@pytest.fixture(autouse=True)
def _slow_fake_clock(fake_clock):
    """Every case on a fake clock of 0.1 us a read: the default time limits (minutes of
    reads) never fire before a count limit, however slow the machine; a count limit that
    failed would still meet them and name the wrong limit. Cases of time limits install
    a faster clock."""
    return fake_clock(step=1e-7)


def check(tmp_path: Path, monkeypatch, capsys, arch=ARCH, workload=WORKLOAD, options=()):
    files = []
    for name, text in (("arch.yaml", arch), ("wl.yaml", workload)):
        (tmp_path / name).write_text(textwrap.dedent(text))
        files.append(str(tmp_path / name))
    code, out = run_cli([*options, "check", *files], monkeypatch, capsys)
    return code, out


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
def test_one_slow_call_cannot_walk_past_the_expression_limit(
    tmp_path, monkeypatch, capsys, fake_clock, value
):
    """0.3 s are 300 reads of the clock: only deadline checks inside the call reach them
    (the call's own time does not move this clock)."""
    clock = fake_clock(step=1e-3)
    arch = ARCH.replace("    size: 1024\n", f"    size: >-\n      {value}\n")
    code, out = check(
        tmp_path, monkeypatch, capsys, arch, options=["--limit", "expression_seconds=0.3"]
    )
    assert_limit(
        code, out, r"arch\.yaml:11: Buffer\.size: expression takes too long", "expression_seconds"
    )
    assert clock.now >= 0.3


def test_the_arch_evaluated_per_einsum_shares_one_budget(tmp_path, monkeypatch, capsys, fake_clock):
    """Each evaluation stays under expression_seconds; 40 Einsums together do not. On
    the fake clock (1 ms a read) the spec passes with a large budget; with half of what
    it then spends (Buffer.size, about the whole of it) it is refused."""
    charged: list[float] = []
    charge = limits.charge
    monkeypatch.setattr(limits, "charge", lambda s: (charged.append(s), charge(s)))
    einsums = "".join(f'  - "Z{i}[m] = A{i}[m, k]"\n' for i in range(40))
    workload = WORKLOAD.replace('  - einsum: "Z[m] = A[m, k]"\n', einsums)
    arch = ARCH.replace("    size: 1024\n", "    size: 1024 + 0 * len(sorted(range(20000)))\n")
    fake_clock(step=1e-3)
    options = ["--limit", "expression_seconds=5", "--limit", "evaluation_seconds=1000"]
    code, out = check(tmp_path, monkeypatch, capsys, arch, workload, options)
    assert code == 0, out
    assert len(charged) >= 40 and max(charged) < 5, charged
    budget = sum(charged) / 2
    fake_clock(step=1e-3)
    options = ["--limit", "expression_seconds=5", "--limit", f"evaluation_seconds={budget}"]
    code, out = check(tmp_path, monkeypatch, capsys, arch, workload, options)
    assert_limit(
        code,
        out,
        r"arch\.yaml:11: Buffer\.size: the spec's expressions take too long in total",
        "evaluation_seconds",
    )


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
SLOW_RUNAWAY = {"silent-nested-loops"}  # 10 million steps up to the limit


@pytest.mark.parametrize(
    ("line", "name"),
    [
        pytest.param(*c[1:], id=c[0], marks=[pytest.mark.slow] if c[0] in SLOW_RUNAWAY else [])
        for c in RUNAWAY_TEMPLATES
    ],
)
def test_runaway_templates_are_stopped(tmp_path, monkeypatch, capsys, fake_clock, line, name):
    options = []
    if name == "render_seconds":  # 2 s: 2000 reads of the clock, i.e. of deadline checks
        options, clock = ["--limit", "render_seconds=2"], fake_clock(step=1e-3)
    code, out = check(tmp_path, monkeypatch, capsys, f"# {line}\n" + ARCH, options=options)
    assert_limit(code, out, rf"arch\.yaml:1: .*limit {name} = ", name)
    if name == "render_seconds":
        assert clock.now >= 2


@pytest.mark.parametrize(
    "line",
    [
        "{% macro f(n, s) %}{% if n %}{{ f(n - 1, s ~ 'x') | length }}{% endif %}{% endmacro %}"
        "{{ f(200, 'y' * 1000000) }}",
        "{% for i in range(1000) %}{{ ('z' * 500000 ~ i) | length }}{% endfor %}",
        pytest.param(
            "{% for i in range(1000) %}{{ (range(100000) | list) | length }}{% endfor %}",
            marks=pytest.mark.slow,  # 10**8 list items
        ),
    ],
)
def test_large_values_built_in_total_are_bounded(tmp_path, monkeypatch, capsys, line):
    """Each value is within render_chars, but kept alive together (a recursion) or made
    again and again they are bounded by render_total."""
    options = ["--limit", "render_total=50000000"]
    code, out = check(tmp_path, monkeypatch, capsys, f"# {line}\n" + ARCH, options=options)
    assert_limit(code, out, r"arch\.yaml:1: .*too much text and data in total", "render_total")


def test_big_integer_arithmetic_is_bounded(tmp_path, monkeypatch, capsys):
    line = "{% set ns = namespace(x=2**99999) %}{% for i in range(40) %}{% set ns.x = ns.x * ns.x %}{% endfor %}"
    code, out = check(tmp_path, monkeypatch, capsys, f"# {line}\n" + ARCH)
    assert code == 2 and re.fullmatch(
        r"error: \S*arch\.yaml:1: unsafe template operation: integer product too large\n", out
    ), out
    arch = ARCH.replace(
        "    size: 1024\n",
        "    size: 2**9000 * 2**9000 * 2**9000 * 2**9000 * 2**9000 * 2**9000 * 2**9000 * 2**9000 * 2**9000 * 2**9000 * 2**9000 * 2**9000\n",
    )
    code, out = check(tmp_path, monkeypatch, capsys, arch)
    assert code == 2 and "arch.yaml:11: Buffer.size: result too large" in out, out


def test_include_count(tmp_path, monkeypatch, capsys):
    (tmp_path / "part.yaml").write_text("x: 1\n")
    line = "{% for i in range(100000) %}{{ include('part.yaml') and '' }}{% endfor %}"
    code, out = check(
        tmp_path, monkeypatch, capsys, f"# {line}\n" + ARCH, options=["--limit", "includes=50"]
    )
    assert_limit(code, out, r"arch\.yaml:1: too many files rendered", "includes")


@pytest.mark.slow
def test_include_text_of_itself_many_times(tmp_path, monkeypatch, capsys):
    (tmp_path / "part.yaml").write_text(
        "{% for i in range(1000) %}{{ include_text('leaf.yaml') }}{% endfor %}\n"
    )
    (tmp_path / "leaf.yaml").write_text("y: 2\n")
    line = "{% for i in range(1000) %}{{ include_text('part.yaml') | length }}{% endfor %}"
    code, out = check(tmp_path, monkeypatch, capsys, f"# {line}\n" + ARCH)
    assert_limit(code, out, r"(arch|part)\.yaml:1: too many files rendered", "includes")


@pytest.mark.parametrize("pattern", ["/usr/**", "/**/no-such-file-anywhere", "../../../../**/*.py"])
def test_path_search_scope(tmp_path, monkeypatch, capsys, pattern):
    line = f"{{{{ find_paths('{pattern}') | length }}}}"
    options = ["--limit", "find_entries=2000"]
    code, out = check(tmp_path, monkeypatch, capsys, f"# {line}\n" + ARCH, options=options)
    assert_limit(code, out, r"arch\.yaml:1: a path search looks at too many files", "find_entries")


def test_path_search_match_count(tmp_path, monkeypatch, capsys):
    for i in range(30):
        (tmp_path / f"f{i}.yaml").write_text("")
    line = "{{ find_paths('f*.yaml') | length }}"
    code, out = check(
        tmp_path, monkeypatch, capsys, f"# {line}\n" + ARCH, options=["--limit", "find_matches=10"]
    )
    assert_limit(code, out, r"arch\.yaml:1: too many paths match 'f\*\.yaml'", "find_matches")
    code, out = check(tmp_path, monkeypatch, capsys, f"# {line}\n" + ARCH)
    assert code == 0, out


def test_raising_a_limit_lets_the_spec_through(tmp_path, monkeypatch, capsys):
    line = "{% for i in range(3000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}"
    code, out = check(
        tmp_path,
        monkeypatch,
        capsys,
        f"# {line}\n" + ARCH,
        options=["--limit", "render_steps=1000000"],
    )
    assert_limit(code, out, r"templates run too many steps", "render_steps")
    code, out = check(
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
    code, out = check(tmp_path, monkeypatch, capsys, f"# {line}\n" + ARCH)
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
    code, out = check(tmp_path, monkeypatch, capsys, options=["--limit", option])
    assert code == 2 and out.startswith(f"error: {message}"), out


def test_huge_yaml_is_refused_by_node_count(tmp_path, monkeypatch, capsys):
    items = "".join(f"  k{i}: [{', '.join(['1'] * 50)}]\n" for i in range(200))
    code, out = check(
        tmp_path,
        monkeypatch,
        capsys,
        ARCH + "extra:\n" + items,
        options=["--limit", "yaml_nodes=5000"],
    )
    assert_limit(code, out, r"arch\.yaml: document too large", "yaml_nodes")


def _rewritten_lines(folder: Path, monkeypatch, capsys, lines: int, profile: bool = True) -> int:
    """Check a file of ``lines`` lines, each rewritten by Jinja, with a YAML error at its
    end: the error must name the file's last line. Returns the calls the check made
    (Python and C functions, counted with ``sys.setprofile``)."""
    folder.mkdir(exist_ok=True)
    body = "".join(f"  {{{{ 'k' ~ {i} }}}}: {{{{ {i} * 2 }}}}\n" for i in range(lines))
    text = "{% set A = 1 %}\n" + ARCH + "variables:\n" + body + "  bad: [1, 2\n"
    calls = [0]

    def count(frame, event, arg):
        if event in ("call", "c_call"):
            calls[0] += 1

    sys.setprofile(count if profile else None)
    try:
        code, out = check(folder, monkeypatch, capsys, text)
    finally:
        sys.setprofile(None)
    assert code == 2 and f"arch.yaml:{lines + 18}: YAML syntax error" in out, out
    return calls[0]


def test_source_lines_of_a_rendered_file_map_in_linear_time(tmp_path, monkeypatch, capsys):
    """A file whose every line is rewritten by Jinja maps back exactly (the error at its
    end), in linear time: 4 times the lines, at most 4 times the function calls, as any
    cost linear in the lines gives (about 2.7 here: 0.43 and 1.2 million calls; the old
    line diff was quadratic)."""
    small = _rewritten_lines(tmp_path / "small", monkeypatch, capsys, 50)
    large = _rewritten_lines(tmp_path / "large", monkeypatch, capsys, 200)
    assert large <= 4 * small, (small, large)


@pytest.mark.slow
def test_source_lines_of_a_large_rendered_file_map_back(tmp_path, monkeypatch, capsys):
    """10k lines (the old line diff took minutes here)."""
    _rewritten_lines(tmp_path, monkeypatch, capsys, 10_000, profile=False)


def test_configure_validates_names():
    with pytest.raises(SpecError, match="unknown limit"):
        limits.configure(nothing=1)
    assert limits.configure(render_chars=10).render_chars == 10


def test_total_latency_scored_by_the_mapper_shares_the_budget(
    tmp_path, monkeypatch, capsys, fake_clock
):
    """The model evaluates total_latency for the tile shapes the mapper scores (on the
    fake clock, 0.4 ms a read, one evaluation costs about 0.14 s of the 0.2: the second
    one is refused)."""
    fake_clock(step=4e-4)
    arch = ARCH.replace(
        "    size: 1024\n",
        "    size: 4096\n    total_latency: sum(a.n_calls for a in actions) + 0 * len(sorted(range(90000)))\n",
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
