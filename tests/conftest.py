"""Every test starts with the default limits and a fresh expression budget."""

from __future__ import annotations

import os

import pytest

from fusemap.spec import limits


@pytest.fixture(autouse=True)
def _default_limits():
    saved = os.environ.pop(limits.ENV_VAR, None)
    limits.reset()
    limits.reset_budget()
    yield
    os.environ.pop(limits.ENV_VAR, None)
    if saved is not None:
        os.environ[limits.ENV_VAR] = saved
    limits.reset()
