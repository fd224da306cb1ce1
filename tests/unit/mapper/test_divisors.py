"""Tile-shape candidates come from divisors, so mapping costs grow with their number,
not with the size of a rank (M = 1,000,000,007 or 1e15 maps in seconds)."""

from __future__ import annotations

import math
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fusemap.examples import example_path
from fusemap.mapper.space.divisors import divisors, prime_factors
from fusemap.mapper.space.tiles import candidate_sizes, next_sizes
from fusemap.mapper.tiling.rank_tiles import SizeIndex, tile_tables
from tests.support.cli_helpers import run_cli
from tests.support.marks import slow_except


def brute_divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


@given(st.integers(1, 5000))
@settings(max_examples=300, deadline=None)
def test_divisors_match_brute_force(n: int) -> None:
    assert list(divisors(n)) == brute_divisors(n)


@pytest.mark.parametrize(
    ("n", "count"),
    [
        (1_000_000_007, 2),  # prime
        (10**15, 256),  # 2^15 5^15
        (2**61 - 1, 2),  # Mersenne prime
        (600851475143, 16),  # 71 * 839 * 1471 * 6857
        (999999999989 * 1000003, 4),  # two large primes
        (963761198400, 6720),  # highly composite
    ],
)
def test_large_sizes_factor_fast(n: int, count: int) -> None:
    found = divisors(n)
    assert len(found) == count
    assert all(n % d == 0 for d in found) and list(found) == sorted(set(found))
    assert math.prod(p**e for p, e in prime_factors(n).items()) == n


def old_next_sizes(cands, bound, imperfect):
    """The definition the mapper used before (quadratic, for comparison)."""
    offsets, values = [0], []
    for c in cands:
        nxt = [c] + [d for d in cands if d < c and (c == bound and imperfect or c % d == 0)]
        values += nxt
        offsets.append(len(values))
    return offsets, values


@pytest.mark.parametrize("bound", [1, 2, 7, 12, 16, 60, 64, 97, 360, 1024, 5040])
@pytest.mark.parametrize("imperfect", [False, True])
def test_candidate_tables_are_unchanged(bound: int, imperfect: bool) -> None:
    if imperfect and bound > 64:
        return
    cands = candidate_sizes(bound, imperfect)
    want = list(range(1, bound + 1)) if imperfect else brute_divisors(bound)
    assert cands == want
    offsets, values = next_sizes(np.array(cands), bound, imperfect)
    old_offsets, old_values = old_next_sizes(cands, bound, imperfect)
    assert offsets.tolist() == old_offsets and values.tolist() == old_values


def test_size_index_matches_a_table() -> None:
    bound = 10**12
    cands, _, lookup = tile_tables(bound, False)
    assert isinstance(lookup, SizeIndex) and len(cands) == 169
    probe = np.array([1, 2, 3, 7, 10**6, 10**12, 999_999_999_999, 5**12])
    want = [list(cands).index(x) if bound % x == 0 else -1 for x in probe.tolist()]
    assert lookup[probe].tolist() == want
    small_cands, _, table = tile_tables(5040, False)
    assert SizeIndex(small_cands, 5040)[np.arange(5041)].tolist() == table.tolist()


WORKLOAD = """\
workload:
  rank_sizes: {{M: {M}, K: 64, N: 64}}
  bits_per_value: {{All: 8}}
  einsums:
  - "Z[m, n] = A[m, k] * B[k, n]"
"""


@pytest.mark.parametrize("m", slow_except([1_000_000_007, 10**15], fast=[1_000_000_007]))
def test_map_with_huge_ranks(tmp_path, monkeypatch, capsys, m: int) -> None:
    wl = tmp_path / "wl.yaml"
    wl.write_text(textwrap.dedent(WORKLOAD.format(M=m)))
    out = tmp_path / "best.json"
    args = ["map", str(example_path("arch.yaml")), str(wl), "--json", str(out)]
    code, text = run_cli(args, monkeypatch, capsys)
    assert code == 0, text
    assert "Total energy" in text


def test_map_refuses_ranks_beyond_64_bits(tmp_path, monkeypatch, capsys) -> None:
    wl = tmp_path / "wl.yaml"
    wl.write_text(textwrap.dedent(WORKLOAD.format(M=2**70)))
    code, text = run_cli(["map", str(example_path("arch.yaml")), str(wl)], monkeypatch, capsys)
    assert code == 2 and "wl.yaml:5: Z: rank variable 'm' has 1,180,591,620,717,411,303,42" in text
    assert "the mapper handles at most 2**62" in text
    code, text = run_cli(
        ["map", str(example_path("arch.yaml")), str(wl), "--einsum", "Z"], monkeypatch, capsys
    )
    assert code == 2 and "wl.yaml:5: Z: rank variable 'm' has" in text
    assert "internal error" not in text and len(text.strip().splitlines()) == 1


@pytest.mark.parametrize("key", ["imperfect_max_bound", "spread_max_bound"])
@pytest.mark.parametrize("value", [10**9, -1])
def test_imperfect_bound_is_bounded(tmp_path, monkeypatch, capsys, value: int, key: str) -> None:
    wl = tmp_path / "wl.yaml"
    wl.write_text(textwrap.dedent(WORKLOAD.format(M=64)) + f"mapper: {{{key}: {value}}}\n")
    code, text = run_cli(["map", str(example_path("arch.yaml")), str(wl)], monkeypatch, capsys)
    assert code == 2, text
    assert f"wl.yaml:6: mapper.{key}: expected an integer from 0 to 1024" in text
