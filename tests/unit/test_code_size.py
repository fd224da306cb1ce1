"""The code stays in pieces a reader can hold (issue 17), read with ``ast``.

* no module of ``src/fusemap`` over 500 lines;
* no function (or method) over 80 lines, ``end_lineno - lineno + 1`` (decorators not
  counted, nested functions counted in their own right and inside their parent), one
  case per module;
* the layers import downwards only: ``fusemap.mapper`` and ``fusemap.model`` import
  neither ``fusemap.report`` nor ``fusemap.cli``, and the model never imports the mapper
  (imports inside functions and under ``TYPE_CHECKING`` included).
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

from tests.support.paths import ROOT

PACKAGE = ROOT / "src" / "fusemap"
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80
FORBIDDEN = {
    "mapper": ("fusemap.report", "fusemap.cli"),
    "model": ("fusemap.report", "fusemap.cli", "fusemap.mapper"),
}
"""Top-level subpackage -> the packages none of its modules may import."""


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _name(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


@cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def _functions(path: Path) -> list[tuple[str, int]]:
    """(qualified name, lines) of every function and method of the module."""
    return _functions_of(_tree(path))


def _functions_of(tree: ast.Module) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                out.append((name, child.end_lineno - child.lineno + 1))
                walk(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                walk(child, f"{prefix}{child.name}.")
            else:
                walk(child, prefix)

    walk(tree, "")
    return out


def _imports(path: Path) -> set[str]:
    """Every module the file imports, absolute."""
    parts = ["fusemap", *path.relative_to(PACKAGE).with_suffix("").parts]
    return _imported(_tree(path), parts[:-1])


def _imported(tree: ast.Module, package: list[str]) -> set[str]:
    """The absolute names of what ``tree`` (a module of ``package``) imports; ``from .x
    import y`` gives both ``<package>.x`` and ``<package>.x.y``, as ``y`` may be a
    module."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            found.add(module)
            found |= {f"{module}.{alias.name}" for alias in node.names}
    return found


def _case(kind: str, name: str) -> pytest.param:
    return pytest.param(name, id=f"{kind}:{name}")


MODULES = {_name(p): p for p in _modules()}
LAYERED = [name for name in MODULES if name.split("/")[0] in FORBIDDEN]


def test_the_package_is_found():
    assert "spec/spec.py" in MODULES and "model/reuse.py" in MODULES and LAYERED


@pytest.mark.parametrize("name", [_case("module", n) for n in MODULES])
def test_module_lines(name):
    lines = len(MODULES[name].read_text().splitlines())
    assert lines <= MAX_MODULE_LINES, f"{name}: {lines} lines (at most {MAX_MODULE_LINES})"


@pytest.mark.parametrize("name", [_case("functions", n) for n in MODULES])
def test_function_lines(name):
    long = [f"{q}: {n} lines" for q, n in _functions(MODULES[name]) if n > MAX_FUNCTION_LINES]
    assert not long, f"{name}, over {MAX_FUNCTION_LINES} lines: {'; '.join(long)}"


def test_function_lines_are_counted_from_def_to_the_last_line():
    """Methods and nested functions by qualified name; decorators not counted."""
    text = "class A:\n    @staticmethod\n    def f():\n        def g():\n            pass\n\n        return g\n"
    assert _functions_of(ast.parse(text)) == [("A.f", 5), ("A.f.g", 2)]


@pytest.mark.parametrize("name", [_case("imports", n) for n in LAYERED])
def test_layers_import_downwards(name):
    banned = FORBIDDEN[name.split("/")[0]]
    bad = sorted(
        m for m in _imports(MODULES[name]) if any(m == b or m.startswith(b + ".") for b in banned)
    )
    assert not bad, f"{name} imports {', '.join(bad)}"


def test_the_import_reader_sees_relative_imports():
    """In ``fusemap/mapper/a.py``, ``from ..report import tables`` imports
    ``fusemap.report``; in ``fusemap/mapper/join/b.py`` (or its ``__init__``),
    ``from ... import cli`` imports ``fusemap.cli``."""
    text = "from ..report import tables\nfrom . import ffm\nimport fusemap.cli as c\n"
    found = _imported(ast.parse(text), ["fusemap", "mapper"])
    assert found == {
        "fusemap.report", "fusemap.report.tables", "fusemap.mapper", "fusemap.mapper.ffm",
        "fusemap.cli",
    }  # fmt: skip
    deeper = _imported(ast.parse("from ... import cli\n"), ["fusemap", "mapper", "join"])
    assert "fusemap.cli" in deeper
