"""A tiny arch and two-Einsum workload (a point maps in about 0.1 s) and sweep files."""

from __future__ import annotations

from pathlib import Path

ARCH = """\
{% set BUF = BUF | default(4) %}
arch:
  nodes:
  - !Memory
    name: DRAM
    size: inf
    leak_power: 0
    area: 0
    tensors: {keep: ~Intermediates, may_keep: All}
    actions:
    - {name: read, energy: 8e-12, throughput: 1e9}
    - {name: write, energy: 8e-12, throughput: 1e9}
  - !Memory
    name: Buffer
    size: {{BUF}} * 8 * 8
    leak_power: 1e-4
    area: 1e-6
    tensors: {keep: ~DRAM, may_keep: All}
    actions:
    - {name: read, energy: 1e-12, throughput: 4e9}
    - {name: write, energy: 1e-12, throughput: 4e9}
  - !Compute
    name: MAC
    leak_power: 0
    area: 1e-9
    actions:
    - {name: compute, energy: 0.5e-12, throughput: 1e9}
"""

WORKLOAD = """\
{% set M = M | default(4) %}
workload:
  rank_sizes: {M: {{M}}, N0: 4, N1: 4, N2: 4}
  bits_per_value: {All: 8}
  einsums:
  - "T1[m, n1] = T0[m, n0] * W0[n0, n1]"
  - "T2[m, n2] = T1[m, n1] * W1[n1, n2]"
"""

SIX_POINTS = """\
arch: specs/arch.yaml
workload: specs/workload.yaml
objective: energy
sweep:
  BUF: [1, 4]
  M: {from: 4, to: 16, factor: 2}
"""
"""2 x 3 points; M varies fastest."""


def write_specs(folder: Path, sweep: str = SIX_POINTS, name: str = "sweep.yaml") -> Path:
    """The specs in ``folder/specs`` and the sweep file ``folder/name``."""
    specs = folder / "specs"
    specs.mkdir(exist_ok=True)
    (specs / "arch.yaml").write_text(ARCH)
    (specs / "workload.yaml").write_text(WORKLOAD)
    path = folder / name
    path.write_text(sweep)
    return path


TIMING_COLUMNS = ["wall_seconds", "mapper_seconds", "peak_mb"]
"""Columns that measure the run, not the point."""
