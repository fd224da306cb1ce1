"""min_usage that no spatial loop can reach: the mapper keeps the highest-usage choices.

Format §1.4: a mapper may, when no mapping reaches a dimension's min_usage, return the
highest-usage mappings instead (the established mapper does: Eyeriss's 14 x 12 PE array
with min_usage 1 maps 128 x 128 matmuls on 8 x 8 PEs).
"""

from __future__ import annotations

import textwrap

import pytest

import fusemap
from fusemap.mapper.one_einsum import best_pmapping

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
      rank_sizes: {M: RANK}
      bits_per_value: {All: 8}
      einsums:
      - "Z[m] = A[m] * B[m]"
    """
)


def _best(tmp_path, fanout: int, rank: int = 18):
    text = SPEC.replace("FANOUT", str(fanout)).replace("RANK", str(rank))
    (tmp_path / "spec.yaml").write_text(text)
    spec = fusemap.load(tmp_path / "spec.yaml")
    _, mapping, result = best_pmapping(spec, "Z", "energy")
    spatial = [n for n in mapping.walk() if type(n).__name__ == "Spatial"]
    return spatial, result


@pytest.mark.parametrize(
    ("fanout", "used"),
    [
        (6, 6),  # 6 divides 18: min_usage 1 is met
        (5, 3),  # no divisor of 18 is 5 or 4: the largest usable is 3 of 5
        (8, 6),  # divisors of 18 up to 8: 6
    ],
)
def test_unreachable_min_usage_keeps_the_highest_usage(tmp_path, fanout, used):
    # m has 18 points, above imperfect_max_bound (16): its spatial loops divide it.
    spatial, result = _best(tmp_path, fanout)
    assert [n.rank_variable for n in spatial] == ["m"]
    assert result.einsum("Z").fanout_usage == {"PE.X": used}


@pytest.mark.parametrize("fanout", [5, 8])
def test_an_uneven_spread_reaches_min_usage_on_a_small_rank(tmp_path, fanout):
    # m has 12 points: 5 and 8 do not divide them, but an imperfect loop may cut 12 into
    # 10 + 2 (8 + 4), then every instance takes 2 (1) of each tile.
    spatial, result = _best(tmp_path, fanout, rank=12)
    assert [n.rank_variable for n in spatial] == ["m"]
    assert result.einsum("Z").fanout_usage == {"PE.X": fanout}
