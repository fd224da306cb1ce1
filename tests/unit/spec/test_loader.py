"""Tests of the spec loader: Jinja rendering, YAML parsing, includes, merges, safety."""

from __future__ import annotations

import logging
import os
import textwrap
from pathlib import Path

import pytest

from fusemap.spec.errors import FusemapError, SpecError
from fusemap.spec.loader import NoMergeDict, NoMergeList, load_files, parse_define
from fusemap.spec.values import QuotedStr
from tests.support.paths import CORPUS, needs_shared


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def load(directory: Path, text: str, **variables):
    return load_files([write(directory, "spec.yaml", text)], variables)


def error_of(directory: Path, text: str, **variables) -> str:
    with pytest.raises(SpecError) as info:
        load(directory, text, **variables)
    return str(info.value)


# -- plain YAML ------------------------------------------------------------------------


def test_plain_yaml_and_source_lines(tmp_path):
    spec = load(
        tmp_path,
        """
        arch:
          nodes:
          - name: A
            size: 10
          - name: B

            size: 20
        """,
    )
    assert spec.data == {"arch": {"nodes": [{"name": "A", "size": 10}, {"name": "B", "size": 20}]}}
    file = str(tmp_path / "spec.yaml")
    entries = spec.sources.entries
    assert entries[("arch",)] == (file, 1)
    assert entries[("arch", "nodes")] == (file, 2)
    assert entries[("arch", "nodes", 1)] == (file, 5)
    assert entries[("arch", "nodes", 1, "size")] == (file, 7)
    assert spec.files == [file]
    assert str(spec.sources.locate(("arch", "nodes", 1, "size"), spec.data).prefix()).endswith(
        "spec.yaml:7: B.size"
    )


def test_tags_become_type_keys(tmp_path):
    spec = load(
        tmp_path,
        """
        nodes:
        - !Memory
          name: M
        - !Nested
        - !Compute {name: C}
        """,
    )
    nodes = spec.data["nodes"]
    assert nodes == [
        {"type": "Memory", "name": "M"},
        {"type": "Nested"},
        {"type": "Compute", "name": "C"},
    ]
    assert list(nodes[0]) == ["type", "name"]
    assert "cannot be tagged !Memory" in error_of(tmp_path, "x: !Memory [1, 2]\n")
    assert "also has a 'type' key" in error_of(tmp_path, "x: !Memory {type: a}\n")
    assert "unsupported YAML tag '!foo-bar'" in error_of(tmp_path, "x: !foo-bar {a: 1}\n")
    assert "unsupported YAML tag '!lower'" in error_of(tmp_path, "x: !lower 3\n")


def test_quoted_and_plain_strings(tmp_path):
    data = load(tmp_path, "a: 'x'\nb: \"3\"\nc: x\nd: >\n  folded\n  text\n").data
    assert type(data["a"]) is QuotedStr and data["a"] == "x"
    assert type(data["b"]) is QuotedStr and data["b"] == "3"
    assert type(data["c"]) is str
    assert type(data["d"]) is str and data["d"] == "folded text\n"


def test_numbers_booleans_null(tmp_path):
    data = load(
        tmp_path,
        """
        a: 1e9
        b: 8e-12
        c: inf
        d: .inf
        e: 3
        f: -2.5
        g: true
        h: False
        i: ~
        j:
        k: 0x10
        l: 25e-9 * 54
        m: yes
        n: !!str 12
        """,
    ).data
    assert data["a"] == 1e9 and isinstance(data["a"], float)
    assert data["b"] == 8e-12
    assert data["c"] == "inf"
    assert data["d"] == float("inf")
    assert data["e"] == 3 and isinstance(data["e"], int)
    assert data["f"] == -2.5
    assert data["g"] is True and data["h"] is False
    assert data["i"] is None and data["j"] is None
    assert data["k"] == 16
    assert data["l"] == "25e-9 * 54"
    assert data["m"] == "yes"
    assert data["n"] == "12" and isinstance(data["n"], QuotedStr)


# -- merges ----------------------------------------------------------------------------


def test_shallow_merge(tmp_path):
    spec = load(
        tmp_path,
        """
        defs:
          a: &a {x: 1, y: 1}
          b: &b {y: 2, z: 2}
        m:
          name: M
          <<: [*a, *b]
          x: 5
        """,
    )
    assert spec.data["m"] == {"name": "M", "y": 1, "z": 2, "x": 5}
    file = str(tmp_path / "spec.yaml")
    assert spec.sources.entries[("m", "x")] == (file, 7)
    assert spec.sources.entries[("m", "y")] == (file, 2)
    assert spec.sources.entries[("m", "z")] == (file, 3)


def test_recursive_merge(tmp_path):
    spec = load(
        tmp_path,
        """
        a: &a
          sizes: {M: 1, N: 2}
          list: [1, 2]
          keep: !nomerge [9]
          scalar: from_a
        b: &b
          sizes: {K: 3, M: 99}
          list: [3]
          keep: [10]
          scalar: from_b
        c:
          <<<: [*a, *b]
          scalar: own
          own_list: !nomerge {q: 1}
        """,
    )
    c = spec.data["c"]
    assert c["sizes"] == {"M": 1, "N": 2, "K": 3}
    assert c["list"] == [1, 2, 3]
    assert c["keep"] == [9] and isinstance(c["keep"], NoMergeList)
    assert c["scalar"] == "own"
    assert isinstance(c["own_list"], NoMergeDict)
    file = str(tmp_path / "spec.yaml")
    assert spec.sources.entries[("c", "list", 2)] == (file, 8)
    assert spec.sources.entries[("c", "sizes", "K")] == (file, 7)


def test_recursive_merge_into_explicit_nomerge(tmp_path):
    data = load(
        tmp_path,
        """
        base: &base {tensors: [A], opts: {x: 1}}
        node:
          tensors: !nomerge [B]
          opts: {y: 2}
          <<<: *base
        """,
    ).data
    assert data["node"]["tensors"] == ["B"]
    assert data["node"]["opts"] == {"y": 2, "x": 1}


def test_merge_errors(tmp_path):
    text = "a: &a {x: 1}\nb:\n  <<: *a\n  <<<: *a\n"
    assert "at most one '<<' or '<<<'" in error_of(tmp_path, text)
    assert "needs a mapping" in error_of(tmp_path, "b:\n  <<<: [1, 2]\n")


# -- includes --------------------------------------------------------------------------


def test_include_keys_suffix_flow_list_and_list_item(tmp_path):
    write(
        tmp_path,
        "sub/part.yaml",
        """
        workload:
          rank_sizes: {M: {{M}}, B: {{B}}}
          einsums:
          - "A[m] = B[m]"
          - "C[m] = A[m]"
        """,
    )
    write(tmp_path, "sub/other.yaml", "workload:\n  rank_sizes: {K: 4, M: 999}\n  einsums: [X]\n")
    spec = load(
        tmp_path,
        """
        {% set M = 8 %}
        {% set P = include("sub/part.yaml", "", B=2) %}
        {% set O = include("sub/other.yaml", "workload") %}
        sizes: {{P}}.workload.rank_sizes
        einsums_only: {{ include("sub/part.yaml", "workload.einsums", B=3) }}
        workload:
          rank_sizes:
            <<<: [{{P}}.workload.rank_sizes, {{O}}.rank_sizes]
          einsums:
          - {{P}}.workload.einsums
          - {{O}}.einsums
          - own
        """,
    )
    data = spec.data
    assert data["sizes"] == {"M": 8, "B": 2}
    assert data["einsums_only"] == ["A[m] = B[m]", "C[m] = A[m]"]
    assert data["workload"]["rank_sizes"] == {"M": 8, "B": 2, "K": 4}
    assert data["workload"]["einsums"] == [["A[m] = B[m]", "C[m] = A[m]"], ["X"], "own"]
    part = str(tmp_path / "sub" / "part.yaml")
    assert spec.sources.entries[("workload", "einsums", 0, 1)] == (part, 5)
    assert spec.sources.entries[("sizes", "M")] == (part, 2)
    assert spec.sources.entries[("workload", "einsums", 0)][1] == 10
    assert part in spec.files


def test_include_missing_key(tmp_path):
    write(tmp_path, "part.yaml", "workload:\n  einsums: []\n  rank_sizes: {}\n")
    msg = error_of(tmp_path, '{% set P = include("part.yaml") %}\n\nw: {{P}}.workload.einsumz\n')
    assert "spec.yaml:3:" in msg
    assert "no key 'einsumz'" in msg
    assert "einsums, rank_sizes" in msg


def test_include_errors(tmp_path):
    assert "not found" in error_of(tmp_path, "a: {{ include('nope.yaml') }}\n")
    write(tmp_path, "loop.yaml", "a: {{ include('spec.yaml') }}\n")
    assert "include cycle" in error_of(tmp_path, "a: {{ include('loop.yaml') }}\n")
    write(tmp_path, "part.yaml", "a: 1\n")
    assert "whole value" in error_of(tmp_path, "a: x{{ include('part.yaml') }}\n")


def test_include_all_and_yaml_include_tags(tmp_path):
    write(tmp_path, "parts/a.yaml", "v: 1\n")
    write(tmp_path, "parts/b.yaml", "v: 2\n")
    data = load(
        tmp_path,
        """
        all: {{ include_all("parts/*.yaml", "v") }}
        one: !include parts/b.yaml
        dir: !includedir parts
        """,
    ).data
    assert data == {"all": [1, 2], "one": {"v": 2}, "dir": [{"v": 1}, {"v": 2}]}


def test_include_text(tmp_path):
    write(tmp_path, "text.yaml", "shared: &shared {x: {{X}}}\n")
    spec = load(tmp_path, '{% set X = 5 %}\n{{ include_text("text.yaml") }}\nm: {<<: *shared}\n')
    assert spec.data == {"shared": {"x": 5}, "m": {"x": 5}}
    # the pasted text is located in the file it came from (issue 18)
    assert spec.sources.entries[("shared",)] == (str(tmp_path / "text.yaml"), 1)


def test_search_path_functions(tmp_path):
    write(tmp_path, "lib/cell.yaml", "x: 1\n")
    data = load(
        tmp_path,
        """
        {{ add_to_path("lib") }}
        here: "{{ cwd() }}"
        found: "{{ find_path('cell.yaml') }}"
        paths: {{ find_paths('*.yaml') | length }}
        exists: {{ path_exists('cell.yaml') }}
        missing: {{ path_exists('nope.yaml') }}
        """,
    ).data
    assert data["here"] == str(tmp_path)
    assert data["found"] == str(tmp_path / "lib" / "cell.yaml")
    assert data["paths"] == 2
    assert data["exists"] is True and data["missing"] is False
    assert "not found" in error_of(tmp_path, "a: {{ find_path('nope.yaml') }}\n")


def test_search_path_is_shared_with_included_files(tmp_path):
    write(tmp_path, "types/att.yaml", "w: {{N}}\n")
    write(
        tmp_path,
        "model/_m.yaml",
        '{{ add_to_path("../types") }}\n{% set A = include("att.yaml") %}\nx: {{A}}.w\n',
    )
    data = load(
        tmp_path, '{% set N = 7 %}\n{% set M = include("model/_m.yaml") %}\ny: {{M}}.x\n'
    ).data
    assert data == {"y": 7}


# -- files, variables ------------------------------------------------------------------


def test_parse_define():
    assert parse_define("N=3") == ("N", 3)
    assert parse_define("X=1e9") == ("X", 1e9)
    assert parse_define("D=true") == ("D", True)
    assert parse_define("D=False") == ("D", False)
    assert parse_define("T=All") == ("T", "All")
    assert parse_define("E=") == ("E", "")
    assert parse_define("S='3'") == ("S", "3")
    assert parse_define("L=[16, 32, 1e3]") == ("L", [16, 32, 1e3])
    assert parse_define("L=['a', true]") == ("L", ["a", True])
    assert parse_define("L=[]") == ("L", [])
    for bad in ("novalue", "1X=3", "=3", "a-b=1", "L=[[1], 2]", "L=[{a: 1}]"):
        with pytest.raises(SpecError):
            parse_define(bad)


def test_first_top_level_key_wins(tmp_path, caplog):
    a = write(tmp_path, "a.yaml", "arch: {x: 1}\nvariables: {v: 1}\n")
    b = write(tmp_path, "b.yaml", "arch: {x: 2}\nworkload: {w: 1}\n")
    with caplog.at_level(logging.INFO, logger="fusemap"):
        spec = load_files([a, b])
    assert spec.data == {"arch": {"x": 1}, "variables": {"v": 1}, "workload": {"w": 1}}
    assert any("arch" in r.getMessage() for r in caplog.records)
    assert spec.sources.entries[("workload",)] == (str(b), 2)
    assert list(load_files([str(tmp_path / "*.yaml")]).data) == ["arch", "variables", "workload"]
    with pytest.raises(SpecError, match="not found"):
        load_files([tmp_path / "missing.yaml"])
    with pytest.raises(SpecError, match="no file matches"):
        load_files([str(tmp_path / "*.nothing")])


def test_top_level_must_be_mapping(tmp_path):
    assert "spec.yaml:1: the top level of a spec file must be a mapping" in error_of(
        tmp_path, "- 1\n"
    )


def test_assert_tag(tmp_path):
    assert load(tmp_path, '{% assert N < 10, "N too big" %}\na: {{N}}\n', N=3).data == {"a": 3}
    msg = error_of(tmp_path, 'a: 0\n\n{% assert N < 10, "N too big" %}\nb: 1\n', N=30)
    assert msg.endswith("spec.yaml:3: assertion failed: N too big")


def test_undefined_variable(tmp_path):
    msg = error_of(tmp_path, "a: 1\nb: {{ WIDTH }}\n")
    assert msg.endswith(
        "spec.yaml:2: WIDTH: undefined variable 'WIDTH' (pass it with -D WIDTH=VALUE)"
    )
    assert load(tmp_path, "{% set W = W | default(4) %}\nb: {{ W }}\n").data == {"b": 4}


def test_jinja_syntax_error(tmp_path):
    msg = error_of(tmp_path, "a: 1\n{% if %}\n")
    assert "spec.yaml:2: Jinja syntax error" in msg


def test_yaml_syntax_error_reports_source_line(tmp_path):
    text = """
    {% set A = 1 %}
    {% set B = 2 %}
    items:
    {% for i in range(4) %}
      - item{{i}}
    {% endfor %}
    x: {{A}}
    bad: [1, 2
    y: 3
    """
    msg = error_of(tmp_path, text)
    assert "YAML syntax error" in msg
    assert "spec.yaml:9:" in msg and "flow sequence started on line 8" in msg
    msg = error_of(tmp_path, "{% set A = 1 %}\n{% set B = 2 %}\na: 1\n  b: 2\n")
    assert "spec.yaml:4: YAML syntax error" in msg


def test_duplicate_key(tmp_path):
    msg = error_of(tmp_path, "a: 1\nb: 2\na: 3\n")
    assert "spec.yaml:3: duplicate key 'a'" in msg


# -- hostile input ---------------------------------------------------------------------

HOSTILE = [
    "{{ cycler.__init__.__globals__ }}",
    "{{ joiner.__init__.__globals__['os'] }}",
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ lipsum.__globals__ }}",
    "{{ self.__init__.__globals__ }}",
    "{{ config }}",
    "{{ request }}",
    "{{ range.__self__ }}",
    "{{ ''|attr('__class__') }}",
    "{{ namespace.__init__.__globals__ }}",
    "{% for x in range(10**9) %}{% endfor %}",
    "{{ 'a' * 10**9 }}",
    "{{ 2 ** 10000000 }}",
    "{{ setenv('PATH', '') }}",
    "{{ '{0.__class__}'.format(1) }}",
    "{% include '/etc/passwd' %}",
    "{% import 'os' as os %}",
    "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}",
    pytest.param(  # runs to the render_steps limit: 10 million steps
        "{% for a in range(99999) %}{% for b in range(99999) %}xxxxxxxx{% endfor %}{% endfor %}",
        marks=pytest.mark.slow,
    ),
]


@pytest.mark.parametrize("template", HOSTILE)
def test_hostile_templates(tmp_path, template):
    path = os.environ.get("PATH")
    with pytest.raises(SpecError) as info:
        load(tmp_path, f"a: 1\nb: {template}\n")
    assert "spec.yaml" in str(info.value)
    if "xxxxxxxx" not in template:  # an output budget overrun has no single line
        assert "spec.yaml:2" in str(info.value)
    assert os.environ.get("PATH") == path


def test_setenv_message(tmp_path):
    msg = error_of(tmp_path, "{{ setenv('X', '1') }}\n")
    assert "setenv is not allowed: a spec may not change the environment" in msg


@pytest.mark.parametrize(
    "text, tag",
    [
        (
            "a: !!python/object/apply:os.system ['touch {marker}']\n",
            "!!python/object/apply:os.system",
        ),
        ("a: !!python/name:os.system\n", "!!python/name:os.system"),
        ("a: !!python/object:os.system {{x: 'touch {marker}'}}\n", "!!python/object:os.system"),
    ],
)
def test_yaml_python_tags_execute_nothing(tmp_path, text, tag):
    marker = tmp_path / "pwned"
    msg = error_of(tmp_path, text.format(marker=marker))
    assert f"spec.yaml:1: unsupported YAML tag '{tag}'" in msg
    assert not marker.exists()


def test_billion_laughs(tmp_path):
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 10):
        lines.append(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]")
    assert "document too large (alias expansion?)" in error_of(tmp_path, "\n".join(lines) + "\n")


def test_recursive_alias(tmp_path):
    with pytest.raises(FusemapError):
        load(tmp_path, "a: &a [*a]\n")


def test_no_error_escapes(tmp_path):
    for text in ("{{ 1 / 0 }}", "{{ [1][5] }}", "{{ int('x') }}", "a: b: c", "\t- x", "{{ x.y }}"):
        with pytest.raises(SpecError):
            load(tmp_path, text, x={})


# -- the corpus ------------------------------------------------------------------------

needs_corpus = needs_shared(CORPUS)


def _flatten(items):
    for item in items:
        yield from _flatten(item) if isinstance(item, list) else [item]


@needs_corpus
def test_corpus_gpt3_workload():
    path = CORPUS / "workloads/transformers/gpt/gpt3_6.7B.yaml"
    spec = load_files([path], {"BATCH_SIZE": 1, "DECODE": False, "N_NEW_TOKENS": 2048})
    workload = spec.data["workload"]
    einsums = list(_flatten(workload["einsums"]))
    assert len(einsums) == 10  # multi_head.yaml: 8, dense_two_layer.yaml: 2
    assert workload["rank_sizes"]["H"] == 32  # from multi_head.yaml
    assert workload["rank_sizes"]["C"] == 16384  # from dense_two_layer.yaml
    assert workload["rank_sizes"]["P"] == 2048
    assert workload["bits_per_value"] == {"All": 16}
    assert spec.data["renames"]["einsums"][0]["name"] == "default"


@needs_corpus
def test_corpus_gpt3_assert_fires():
    path = CORPUS / "workloads/transformers/gpt/gpt3_6.7B.yaml"
    with pytest.raises(SpecError, match="assertion failed: N_NEW_TOKENS exceeds MAX_N_TOKENS"):
        load_files([path], {"BATCH_SIZE": 1, "DECODE": False, "N_NEW_TOKENS": 4096})


@pytest.mark.slow
@needs_corpus
def test_corpus_arches_and_mappings_load():
    files = sorted((CORPUS / "arches").glob("*.yaml"))
    files += sorted((CORPUS / "arches" / "fanout_variations").glob("*.yaml"))
    files += sorted((CORPUS / "arches" / "compute_in_memory").glob("[!_]*.yaml"))
    for path in files:
        assert "arch" in load_files([path]).data, path
    for path in sorted((CORPUS / "mappings").glob("*.yaml")):
        assert "mapping" in load_files([path], {"N_EINSUMS": 3}).data, path


def test_a_quoted_merge_key_is_a_plain_key(tmp_path) -> None:
    """Only a plain ``<<`` merges; ``"<<"`` is an ordinary key (as in YAML)."""
    path = tmp_path / "spec.yaml"
    path.write_text('base: &b {x: 1}\nplain: {<<: *b, y: 2}\nquoted: {"<<": 3, y: 2}\n')
    data = load_files([path]).data
    assert data["plain"] == {"x": 1, "y": 2}
    assert data["quoted"] == {"<<": 3, "y": 2}
