"""What a written result says about where it came from: the JSON schema version, fusemap's
version, the command, the input files (with their SHA-256) and the ``-D`` values.

``docs/json.md`` documents the JSON written with this header; a written mapping carries the
same facts as YAML comments, so a mapping found months ago can be traced to its inputs.
"""

from __future__ import annotations

import hashlib
import math
import os
from pathlib import Path
from typing import Any

from ..spec.numbers import finite_json
from .io import write_atomic

SCHEMA_VERSION = 2
"""Version of the JSON result layout (1: the unversioned layout before units and inputs)."""


def fusemap_version() -> str:
    """The installed fusemap's version."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("fusemap")
    except PackageNotFoundError:  # running from a source tree
        from .. import __version__

        return __version__


def file_digest(path: str) -> str | None:
    """SHA-256 of a file's bytes (None when it cannot be read any more)."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def provenance(spec: Any, command: str) -> dict[str, Any]:
    """The header of a JSON result: schema, versions, command and inputs of ``spec``."""
    inputs = spec.inputs if spec is not None else {"files": [], "read": [], "variables": {}}
    return {
        "schema_version": SCHEMA_VERSION,
        "fusemap_version": fusemap_version(),
        "command": command,
        "inputs": {
            "files": [
                {"path": os.path.abspath(f), "sha256": file_digest(f)} for f in inputs["files"]
            ],
            "included": [os.path.abspath(f) for f in inputs["read"] if f not in inputs["files"]],
            "variables": {k: _plain(v) for k, v in inputs["variables"].items()},
        },
    }


def _plain(value: Any) -> Any:
    """A -D value as JSON can hold it (str subclasses become str, inf a string)."""
    if isinstance(value, str):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def with_provenance(data: dict[str, Any], spec: Any, command: str) -> dict[str, Any]:
    """``data`` (a result's JSON) preceded by the provenance header."""
    return {**provenance(spec, command), **data}


def write_json(path: str | Path, data: dict[str, Any], spec: Any, command: str) -> Path:
    """Write a result's JSON with its provenance header."""
    text = finite_json(with_provenance(data, spec, command), indent=1)  # never NaN/Infinity
    return write_atomic(path, text + "\n")


def yaml_header(spec: Any, command: str, lines: list[str] | None = None) -> str:
    """YAML comment lines for a written mapping: what wrote it and from which inputs."""
    info = provenance(spec, command)
    out = [f"# Written by fusemap {info['fusemap_version']}: {command}"]
    for f in info["inputs"]["files"]:
        digest = f["sha256"][:16] if f["sha256"] else "unreadable"
        out.append(f"# input: {f['path']} (sha256 {digest}...)")
    for name, value in info["inputs"]["variables"].items():
        out.append(f"# -D {name}={value}")
    out += [f"# {line}" for line in lines or []]
    # One line each, and no braces: the file is rendered with Jinja before YAML.
    clean = [" ".join(x.splitlines()).replace("{", "(").replace("}", ")") for x in out]
    return "\n".join(clean) + "\n"
