"""A small valid spec (arch, workload, mapping) whose line numbers error tests name, and
running ``fusemap check`` on variants of it in-process (tests/integration/test_errors.py
and the spec tests that check one clean error line)."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

from tests.support.cli_helpers import run_cli

ARCH = """\
arch:
  nodes:
  - !Memory
    name: DRAM
    size: inf
    tensors: {keep: ~Intermediates, may_keep: All}
    actions:
    - {name: read, energy: 1, throughput: inf}
    - {name: write, energy: 1, throughput: inf}
  - !Memory
    name: Buffer
    size: 1024
    actions:
    - {name: read, energy: 0.5}
    - {name: write, energy: 0.5}
  - !Container
    name: PE
    spatial: [{name: X, fanout: 4}]
  - !Compute
    name: MAC
    actions: [{name: compute, energy: 0.1}]
"""
# Line 10 starts Buffer, 12 is Buffer.size, 16 starts PE, 18 is the fanout, 21 the MAC actions.

WORKLOAD = """\
workload:
  rank_sizes: {M: 4, K: 4, N: 4}
  bits_per_value: {All: 8}
  einsums:
  - einsum: "Z[m, n] = A[m, k] * B[k, n]"
"""

MAPPING = """\
mapping:
  nodes:
  - !Storage {tensors: [A, B, Z], component: DRAM}
  - !Temporal {rank_variable: m, tile_shape: 1}
  - !Temporal {rank_variable: n, tile_shape: 1}
  - !Temporal {rank_variable: k, tile_shape: 1}
  - !Compute {einsum: Z, component: MAC}
"""


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def sub(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


def check(tmp_path, monkeypatch, capsys, *, arch=ARCH, workload=WORKLOAD, mapping=None, extra=()):
    files = [write(tmp_path, "arch.yaml", arch), write(tmp_path, "wl.yaml", workload)]
    if mapping is not None:
        files.append(write(tmp_path, "map.yaml", mapping))
    return run_cli(["check", *files, *extra], monkeypatch, capsys)


def assert_clean_error(code: int, out: str, pattern: str) -> str:
    """Exit status 2, one ``error:`` line matching ``pattern``, no traceback."""
    assert code == 2, out
    assert "Traceback" not in out
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == 1, out
    assert lines[0].startswith("error: "), out
    assert re.search(pattern, lines[0]), f"{pattern!r} not in {lines[0]!r}"
    return lines[0]
