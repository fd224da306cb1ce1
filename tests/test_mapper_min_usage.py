"""min_usage that no spatial loop can reach: the mapper keeps the highest-usage choices.

Format §1.4: a mapper may, when no mapping reaches a dimension's min_usage, return the
highest-usage mappings instead (the established mapper does: Eyeriss's 14 x 12 PE array
with min_usage 1 maps 128 x 128 matmuls on 8 x 8 PEs).
"""

from __future__ import annotations

import textwrap

import pytest

import fusemap
from fusemap.mapper.single import best_pmapping

SPEC = textwrap.dedent(
    """\
    arch:
      nodes:
      - !Memory
        name: MainMemory
        size: inf
        actions: [{name: read, energy: 1}, {name: write, energy: 1}]
      - !Container
        name: PE
        spatial: [{name: X, fanout: FANOUT, min_usage: 1}]
      - !Memory
        name: Reg
        size: 64
        actions: [{name: read, energy: 0.1}, {name: write, energy: 0.1}]
      - !Compute
        name: MAC
        actions: [{name: compute, energy: 0.5}]
    workload:
      rank_sizes: {M: 12}
      bits_per_value: {All: 8}
      einsums:
      - "Z[m] = A[m] * B[m]"
    """
)


def _best(tmp_path, fanout: int):
    (tmp_path / "spec.yaml").write_text(SPEC.replace("FANOUT", str(fanout)))
    spec = fusemap.load(tmp_path / "spec.yaml")
    _, mapping, result = best_pmapping(spec, "Z", "energy")
    spatial = [n for n in mapping.walk() if type(n).__name__ == "Spatial"]
    return spatial, result


@pytest.mark.parametrize(
    ("fanout", "used"),
    [
        (6, 6),  # 6 divides 12: min_usage 1 is met
        (5, 4),  # no divisor of 12 is 5: the largest usable is 4 of 5
        (8, 6),  # divisors of 12 up to 8: 6
    ],
)
def test_unreachable_min_usage_keeps_the_highest_usage(tmp_path, fanout, used):
    spatial, result = _best(tmp_path, fanout)
    # One spatial loop over m on X (m has 12 points: 6, 4 and 6 instances divide them).
    assert [n.rank_variable for n in spatial] == ["m"]
    assert result.einsum("Z").fanout_usage == {"PE.X": used}
