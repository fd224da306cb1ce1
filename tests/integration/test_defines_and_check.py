"""Issue 18, Found 2 (an unused -D is an error) and Found 5 (check says OK only for specs
that can be priced, and prints evaluated sizes)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

import fusemap
from fusemap.cli import app
from fusemap.examples import example_path
from fusemap.spec.errors import SpecError
from fusemap.spec.spec import load_spec
from tests.support.paths import CORPUS, shared_path

FILES = [example_path(n) for n in ("arch.yaml", "three_matmuls.yaml", "fused_mapping.yaml")]


def run(*args: str):
    return CliRunner().invoke(app, list(args))


# -- Found 2 ---------------------------------------------------------------------------


def test_misspelled_define_is_an_error_with_a_suggestion():
    result = run("evaluate", *FILES, "-D", "BUFER_KIB=4")
    assert isinstance(result.exception, SpecError)
    message = str(result.exception)
    assert message.startswith("-D BUFER_KIB: ")
    assert "no spec file uses it (did you mean 'BUFFER_KIB'?)" in message
    assert "--allow-unused" in message


def test_unused_define_is_accepted_when_the_user_says_so():
    result = run("evaluate", *FILES, "-D", "BUFER_KIB=4", "--allow-unused", "-q")
    assert result.exit_code == 0, result.output


def test_used_define_changes_the_result_and_passes():
    result = run("check", *FILES[:2], "-D", "M=5", "-D", "BUFFER_KIB=64")
    assert result.exit_code == 0, result.output
    assert "size 64 KiB" in result.output


def test_python_api_refuses_unused_variables_too():
    with pytest.raises(SpecError, match="did you mean 'BUFFER_KIB'"):
        fusemap.load(*FILES, BUFER_KIB=4)
    spec = load_spec(*FILES, variables={"BUFER_KIB": 4}, allow_unused=True)
    assert spec.inputs["variables"] == {"BUFER_KIB": 4}


def test_a_variable_read_only_under_a_false_branch_still_counts_as_used(tmp_path):
    """Statically read anywhere in a file is "used" (a sweep variable may be off)."""
    path = tmp_path / "w.yaml"
    path.write_text(
        "{% if FLAG | default(false) %}{% set X = SIZE %}{% endif %}\n"
        "workload:\n  iteration_space_shape: {m: 0 <= m < 2}\n  bits_per_value: {All: 8}\n"
        "  einsums: ['Z[m] = A[m]']\n"
    )
    load_spec(path, variables={"SIZE": 3})


# -- Found 5 ---------------------------------------------------------------------------


@pytest.mark.parametrize("arch", ["eyeriss", "simba"])
def test_check_does_not_say_ok_for_a_spec_that_cannot_be_priced(arch):
    shared_path(CORPUS)
    from fusemap.spec import component_models

    if component_models.available():
        pytest.skip("the component model library is installed: these specs can be priced")
    files = [CORPUS / "arches" / f"{arch}.yaml", CORPUS / "workloads/basic/matmuls.yaml"]
    result = run("check", *map(str, files), "-D", "N_EINSUMS=2")
    assert "OK" not in result.output
    assert isinstance(result.exception, SpecError)
    message = str(result.exception)
    assert "component_class" in message and "pip install 'fusemap[components]'" in message
    assert f"{arch}.yaml:" in message  # where the component is written


def test_check_prints_evaluated_sizes_not_expressions():
    shared_path(CORPUS)
    files = [CORPUS / "arches/tpu_v4i.yaml", CORPUS / "workloads/basic/matmuls.yaml"]
    result = run("check", *map(str, files), "-D", "N_EINSUMS=2")
    out = result.output
    assert "GlobalBuffer  size 128 MiB" in out  # size: 1024*1024*128*8 (bits)
    assert "LocalBuffer  size 4 MiB  spatial: Z×4" in out
    assert "size=" not in out and "1024*1024" not in out


def test_check_ok_names_what_was_verified():
    result = run("check", *FILES)
    assert result.exit_code == 0, result.output
    assert "OK: the spec is valid and its mapping evaluates." in result.output
    result = run("check", *FILES[:2])
    assert "OK: the spec is valid and can be priced." in result.output


def test_check_reports_an_overflowing_mapping():
    result = run("check", *FILES, "-D", "BUFFER_KIB=1")
    assert "OK" not in result.output
    assert "overflows" in str(result.exception)
