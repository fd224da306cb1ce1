"""Each tensor's view of a chain: spatial loops written above memories that lie above their
fanout (the shape the FFM mapper writes for tpu_v4i), counted by hand.

Arch: MainMemory -> GlobalBuffer -> LocalBuffer (2 instances, dimension Z) -> MAC.
Workload: Z[m, n] = A[m, k] * B[k, n] with M=2, K=3, N=4 (one action = one value).
"""

from __future__ import annotations

import pytest

from fusemap.spec.errors import InvalidMappingError
from tests.support.model_helpers import (
    arch,
    compute,
    compute_unit,
    dim,
    loops,
    mapping,
    matmul,
    memory,
    run,
    rw,
    spatial,
    storage,
    temporal,
    usage_bits,
)

MM, GB, LB = "MainMemory", "GlobalBuffer", "LocalBuffer"
M, K, N = 2, 3, 4


def cores(**z) -> dict:
    return arch(memory(MM), memory(GB), memory(LB, spatial=[dim("Z", 2, **z)]), compute_unit())


def over_cores(tile: int = 2):
    """The spatial loop over the two LocalBuffer instances."""
    return spatial("n", tile, name="Z", component=LB)


def test_spatial_loop_above_another_tensors_node_keeps_its_written_order(tmp_path):
    # n is split over the cores above A's GlobalBuffer node, then stepped by a temporal
    # loop. A's view moves the spatial loop below GlobalBuffer, B's and Z's keep it
    # where it is written (above the temporal loop): nothing is reordered.
    mp = mapping(
        storage(MM, "A", "B", "Z"),
        over_cores(),
        storage(GB, "A"),
        temporal("n"),
        storage(LB, "B", "Z"),
        loops("m", "k"),
        compute("Z"),
    )
    r = run(tmp_path, cores(), matmul(M, K, N), mp)
    # A: GlobalBuffer holds all of A once (6); it feeds the 24 MAC operations, but the
    # loop over n multicasts A to both cores, so GlobalBuffer reads 12.
    assert rw(r, MM, "A") == (M * K, 0)
    assert rw(r, GB, "A") == (M * K * N // 2, M * K)
    # B: each core gets its half of B once (12 in all) and reads it for every operation.
    assert rw(r, MM, "B") == (K * N, 0)
    assert rw(r, LB, "B") == (M * K * N, K * N)
    # Z: 8 tiles of one value, first fills skipped; the MACs write 24 and read 24 - 8.
    assert rw(r, MM, "Z") == (0, M * N)
    assert rw(r, LB, "Z") == (M * N + M * K * N - M * N, M * N - M * N + M * K * N)
    assert r.count("MAC", "compute") == M * K * N
    # GlobalBuffer: A (6 values, 8 bits). LocalBuffer per core: B's k-column (3) and
    # Z's one value (lowered past m).
    assert usage_bits(r, GB) == 6 * 8
    assert usage_bits(r, LB) == (3 + 1) * 8
    assert r.warnings == []


def test_memory_above_the_fanout_holds_every_instances_tile(tmp_path):
    # B's GlobalBuffer node sits below the spatial loop but above its fanout: it holds
    # the tiles of both cores at once, 2 columns of 3 (lowered past the temporal n).
    mp = mapping(
        storage(MM, "A", "B", "Z"),
        over_cores(),
        storage(GB, "B"),
        temporal("n"),
        storage(LB, "A", "B", "Z"),
        loops("m", "k"),
        compute("Z"),
    )
    r = run(tmp_path, cores(), matmul(M, K, N), mp)
    assert usage_bits(r, GB) == 2 * K * 8
    # B still moves through GlobalBuffer once (12) and into the cores once (12).
    assert rw(r, GB, "B") == (K * N, K * N)
    assert rw(r, LB, "B") == (M * K * N, K * N)


def test_partial_sums_of_a_split_reduction_without_reduction_network(tmp_path):
    # k is split over the cores (Z does not index k) and the fanout may not reduce Z:
    # each core starts its own partial sums (its first fills skipped) and writes them to
    # GlobalBuffer. Counted as the format defines it, with a warning naming the loop.
    mp = mapping(
        storage(MM, "A", "B", "Z"),
        storage(GB, "Z"),
        spatial("k", 2, name="Z", component=LB),
        storage(LB, "A", "B", "Z"),
        loops("m", "n", "k"),
        compute("Z"),
    )
    wl = matmul(M, 4, N)
    r = run(tmp_path, cores(may_reuse="Nothing"), wl, mp)
    # Both cores write their 8 partial sums; GlobalBuffer sends none of them down.
    assert rw(r, GB, "Z") == (M * N, 2 * M * N)
    # Each core: 16 operations, 8 first reads skipped, 8 partial sums written back.
    assert rw(r, LB, "Z") == (2 * M * N + M * 4 * N - 2 * M * N, M * 4 * N)
    (warning,) = r.warnings
    assert "'k'" in warning and "LocalBuffer.Z" in warning and "line" in warning
    # With a reduction network (may_reuse: All) GlobalBuffer receives one sum per value.
    r = run(tmp_path, cores(), wl, mp)
    assert rw(r, GB, "Z") == (M * N, M * N)
    assert r.warnings == []


def test_spatial_loop_moved_below_a_temporal_loop_over_the_same_variable(tmp_path):
    # The temporal loop over n lies above B's GlobalBuffer node and the spatial loop
    # over n must move below that node (its fanout is below GlobalBuffer): the tiles of n
    # would be cut the wrong way round. The message names both loops and the node.
    mp = mapping(
        storage(MM, "A", "B", "Z"),
        over_cores(),
        temporal("n"),
        storage(GB, "B"),
        storage(LB, "A", "B", "Z"),
        loops("m", "k"),
        compute("Z"),
    )
    with pytest.raises(InvalidMappingError) as info:
        run(tmp_path, cores(), matmul(M, K, N), mp)
    message = str(info.value)
    for words in (
        "!Spatial loop over 'n'",
        "LocalBuffer.Z",
        "!Temporal loop over 'n'",
        "B in GlobalBuffer",
        "mapping.yaml:",
    ):
        assert words in message, message


def test_a_node_above_the_spread_of_its_own_instances_is_filled_once_and_warned(tmp_path):
    # A in LocalBuffer written above the loop that spreads n over the two LocalBuffer
    # instances: A's view keeps it above (the loop moves only down to a holder below it),
    # so A is filled once, 6 values, as if both cores shared one copy, although Z may not
    # multicast (may_reuse Nothing); the model says so. Written below the loop, each core
    # is filled with its own copy: 2 x 6 = 12.
    wl = matmul(M, K, N)
    cores_nothing = cores(may_reuse="Nothing")
    above = mapping(
        storage(MM, "A", "B", "Z"),
        storage(LB, "A"),
        over_cores(),
        storage(LB, "B", "Z"),
        loops("m", "k", "n"),
        compute("Z"),
    )
    r = run(tmp_path, cores_nothing, wl, above)
    assert rw(r, LB, "A")[1] == M * K
    (warning,) = [w for w in r.warnings if "above the !Spatial" in w]
    assert "of A in LocalBuffer" in warning and "'n' (LocalBuffer.Z" in warning
    below = mapping(
        storage(MM, "A", "B", "Z"),
        over_cores(),
        storage(LB, "A", "B", "Z"),
        loops("m", "k", "n"),
        compute("Z"),
    )
    r = run(tmp_path, cores_nothing, wl, below)
    assert rw(r, LB, "A")[1] == 2 * M * K
    assert not [w for w in r.warnings if "above the !Spatial" in w]
