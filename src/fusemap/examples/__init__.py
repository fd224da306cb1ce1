"""Built-in example specs (the project's own; used by ``fusemap demo`` and the tests)."""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent


def example_path(name: str) -> str:
    """Absolute path of a built-in example file."""
    path = HERE / name
    if not path.exists():
        raise FileNotFoundError(
            f"no built-in example '{name}' (have: {sorted(p.name for p in HERE.glob('*.yaml'))})"
        )
    return str(path)
