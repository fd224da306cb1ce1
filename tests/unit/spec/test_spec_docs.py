"""Every spec field documents itself, and every CLI command has --help."""

from __future__ import annotations

import pytest
from pydantic import BaseModel
from typer.testing import CliRunner

from fusemap.cli import app
from fusemap.spec import arch, mapping, spec, workload
from fusemap.spec.base import SpecModel


def _spec_models() -> list[type[BaseModel]]:
    found: dict[str, type[BaseModel]] = {}
    for module in (arch, mapping, spec, workload):
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, SpecModel) and value is not SpecModel:
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return [found[k] for k in sorted(found)]


MODELS = _spec_models()


def test_models_found() -> None:
    names = {m.__name__ for m in MODELS}
    assert {"Memory", "Compute", "Storage", "Temporal", "Einsum", "Workload", "Spec"} <= names


@pytest.mark.parametrize("model", MODELS, ids=lambda m: f"{m.__module__}.{m.__name__}")
def test_every_field_has_a_one_line_docstring(model: type[BaseModel]) -> None:
    for name, info in model.model_fields.items():
        if name == "type":  # the YAML tag itself
            continue
        assert info.description, f"{model.__name__}.{name} has no docstring"
        assert "\n" not in info.description.strip(), f"{model.__name__}.{name}: one line please"


@pytest.mark.parametrize("command", [[], ["check"], ["render"], ["evaluate"], ["demo"]])
def test_help(command: list[str]) -> None:
    result = CliRunner().invoke(app, [*command, "--help"])
    assert result.exit_code == 0
    assert "Usage" in result.output
