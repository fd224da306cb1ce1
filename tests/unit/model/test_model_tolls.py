"""A toll above every holder of a tensor backs it: the tensor enters (leaves) the arch
through it, as inputs reach a compute-in-memory array through its row drivers and outputs
leave through its ADCs. Counts by hand."""

from __future__ import annotations

import textwrap

import pytest

import fusemap

SPEC = textwrap.dedent(
    """\
    arch:
      nodes:
      - !Toll
        name: In
        direction: down
        tensors: {keep: A}
        actions: [{name: read, energy: 1}]
      - !Toll
        name: Out
        direction: up
        tensors: {keep: Z}
        actions: [{name: read, energy: 10}]
      - !Memory
        name: Buf
        size: SIZE
        tensors: {keep: A | B}
        actions: [{name: read, energy: 0.5}, {name: write, energy: 2}]
      - !Compute
        name: MAC
        actions: [{name: compute, energy: 0.25}]
    workload:
      rank_sizes: {M: 3, K: 4}
      bits_per_value: {All: 1}
      einsums:
      - "Z[m] = A[m, k] * B[k]"
    mapping:
      nodes:
      - !Toll {tensors: [A], component: In}
      - !Toll {tensors: [Z], component: Out}
      - !Storage {tensors: [B, A], component: Buf}
      - !Temporal {rank_variable: m, tile_shape: 1}
      - !Temporal {rank_variable: k, tile_shape: 1}
      - !Compute {einsum: Z, component: MAC}
    """
)


def _evaluate(tmp_path, text: str):
    (tmp_path / "spec.yaml").write_text(text)
    return fusemap.evaluate(fusemap.load(tmp_path / "spec.yaml"))


def test_tensors_enter_and_leave_through_tolls_that_back_them(tmp_path):
    r = _evaluate(tmp_path, SPEC.replace("SIZE", "5"))
    z = r.einsum("Z").components
    # A (3 x 4 values of 1 bit) fills Buf once from outside, through In (down): 12.
    assert r.count("In", "read") == 12
    assert r.count("Buf", "write", tensor="A") == 12
    # Buf serves A and B to the 12 computes (B[k] is re-read for every m).
    assert r.count("Buf", "read", tensor="A") == 12 and r.count("Buf", "read", tensor="B") == 12
    assert r.count("Buf", "write", tensor="B") == 0  # Buf backs B: nothing above it
    # Z has no memory: each of the 12 partial sums leaves through Out (up).
    assert r.count("Out", "read") == 12
    assert z["In"].energy == 12 * 1 and z["Out"].energy == 12 * 10
    assert r.energy == 12 + 120 + 12 * 2 + 24 * 0.5 + 12 * 0.25
    # A's tile in Buf (last of its node) is lowered past m and k, relevant to A: 1 bit;
    # B (backed here) 4 bits.
    assert r.components["Buf"].usage_bits == 1 + 4 and r.components["Buf"].usage == 1.0


def test_without_the_toll_the_memory_backs_the_tensor(tmp_path):
    text = SPEC.replace("SIZE", "inf").replace("  - !Toll {tensors: [A], component: In}\n", "")
    r = _evaluate(tmp_path, text)
    assert r.count("In", "read") == 0 and r.count("Buf", "write", tensor="A") == 0
    assert r.count("Out", "read") == 12  # Z still leaves through Out
    assert r.energy == pytest.approx(120 + 24 * 0.5 + 12 * 0.25)
    assert r.components["Buf"].usage_bits == 12 + 4  # A and B held whole where they live
