"""A mapspace too large to tile is refused, naming the Einsum and the limit.

On the FLAT arch (two fanouts of 256, four memories on the 2D PE's path) the dot
product of cascade 1 has 8,016,640 templates: enumerating them took 150 s and tiling
them would take hours, with no message. The limit ``templates`` (1,000,000 by default)
stops it in seconds with one line, and raising it lets a space through."""

from __future__ import annotations

import pytest

from fusemap.mapper.space.config import config_from_spec
from fusemap.mapper.space.templates import templates
from fusemap.spec import limits
from fusemap.spec.arch_eval import ArchEvaluator
from fusemap.spec.errors import FusemapError
from fusemap.spec.resolve import resolve_workload
from fusemap.spec.spec import load_spec
from tests.support.cli_helpers import run_cli
from tests.support.paths import ATTENTION

ARCH = str(ATTENTION / "flat.arch.yaml")
WORKLOAD = str(ATTENTION / "cascade1.yaml")


def _dot_product():
    spec = load_spec(ARCH, WORKLOAD, variables={"K": 4})
    wl = resolve_workload(spec)
    return spec, wl.einsums[0], ArchEvaluator(spec, wl)


def test_the_limit_names_the_einsum_where_it_is_written():
    spec, info, arch = _dot_product()
    limits.configure(templates=1000)
    with pytest.raises(FusemapError) as raised:
        templates(info, arch, config_from_spec(spec), compute="PE2D")
    text = str(raised.value)
    assert "cascade1.yaml:8" in text and "Y" in text, text
    assert "more than 1,000 templates" in text and "--limit templates=N" in text, text


def test_raising_the_limit_lets_the_space_through():
    spec, info, arch = _dot_product()
    limits.configure(templates=1000)
    with pytest.raises(FusemapError):
        templates(info, arch, config_from_spec(spec), compute="PE1D")
    limits.configure(templates=100_000)
    assert 1000 < len(templates(info, arch, config_from_spec(spec), compute="PE1D")) <= 100_000


def test_the_command_line_stops_with_one_line(monkeypatch, capsys):
    args = ["--limit", "templates=2000", "map", ARCH, WORKLOAD]
    code, out = run_cli(args, monkeypatch, capsys)
    assert code != 0
    lines = out.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), out
    assert "limit templates = 2,000" in out and "Traceback" not in out, out
