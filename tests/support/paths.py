"""Where the tests find the repository's files and the shared data folder.

The shared folder (``../shared`` beside the repository: the example corpus and the
reference results) is not part of the repository; set ``FUSEMAP_SHARED`` to use another
one. Tests that need it skip, saying so, when it is absent; the golden numbers
(``tests/golden``) check the model and the mapper without it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
"""The repository (the folder holding ``src/``, ``tests/`` and ``examples/``)."""
EXAMPLES = ROOT / "examples"
ATTENTION = EXAMPLES / "attention"
PACKAGE_EXAMPLES = ROOT / "src" / "fusemap" / "examples"

SHARED = Path(os.environ.get("FUSEMAP_SHARED") or ROOT.parent / "shared")
CORPUS = SHARED / "corpus" / "accelforge-examples"
REFERENCE = SHARED / "reference"


def absent_reason(path: Path) -> str:
    """Why a test that needs ``path`` (inside the shared folder) is skipped."""
    return (
        f"the shared data folder is absent here: no {path} (set FUSEMAP_SHARED or clone ../shared)"
    )


def shared_path(path: Path) -> Path:
    """``path`` if it exists, else skip the test that needs it, saying why."""
    if not path.exists():
        pytest.skip(absent_reason(path))
    return path


def needs_shared(path: Path) -> pytest.MarkDecorator:
    """Skip the marked tests (or module, as ``pytestmark``) when ``path`` is absent."""
    return pytest.mark.skipif(not path.exists(), reason=absent_reason(path))
