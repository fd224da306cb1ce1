"""One test (at least) per counting rule of format-and-model.md §2, computed by hand.

Unless a test says otherwise the arch is MainMemory -> GlobalBuffer -> MAC (every action
energy 1, throughput inf for memories and 1 for the MAC), values are 8 bits and the
memories move 8 bits per action, so one action moves one value. The workhorse is the
matmul ``Z[m, n] = A[m, k] * B[k, n]`` with M=2, K=3, N=4 (24 operations).
"""

from __future__ import annotations

import math

import pytest

from tests.support.model_helpers import (
    access,
    arch,
    basic_matmul_mapping,
    compute,
    compute_unit,
    conv1d,
    einsum,
    loops,
    mapping,
    matmul,
    memory,
    run,
    rw,
    spatial,
    storage,
    temporal,
    toll,
    toll_node,
    two_level,
    usage_bits,
    workload,
)

MM, GB, MAC = "MainMemory", "GlobalBuffer", "MAC"


# -- fills, write-backs, skipped first reads ---------------------------------------------


def test_fills_from_parent(tmp_path):
    M, K, N = 2, 3, 4
    r = run(tmp_path, two_level(), matmul(M, K, N), basic_matmul_mapping())
    # GlobalBuffer holds the whole tensors (no loop above it): each input is filled once.
    assert rw(r, MM, "A") == (M * K, 0)  # 6 values read from MainMemory, none written
    assert rw(r, MM, "B") == (K * N, 0)  # 12
    # The fills are writes at GlobalBuffer; the MAC reads one value per operation.
    assert rw(r, GB, "A") == (M * K * N, M * K)  # (24, 6)
    assert rw(r, GB, "B") == (M * K * N, K * N)  # (24, 12)
    assert r.count(MAC, "compute") == M * K * N


def test_write_backs_of_outputs(tmp_path):
    M, K, N = 2, 3, 4
    r = run(tmp_path, two_level(), matmul(M, K, N), basic_matmul_mapping())
    # Each output value is written back once from GlobalBuffer to MainMemory...
    assert r.count(MM, "write", tensor="Z") == M * N  # 8
    # ... which is one GlobalBuffer read per output value, on top of the MAC traffic.
    # Every operation writes its partial sum to GlobalBuffer: M*K*N = 24 writes.
    assert r.count(GB, "write", tensor="Z") == M * K * N


def test_skipped_first_read_of_each_output(tmp_path):
    M, K, N = 2, 3, 4
    r = run(tmp_path, two_level(), matmul(M, K, N), basic_matmul_mapping())
    # The initial fill of Z into GlobalBuffer is skipped: MainMemory never reads Z and the
    # skipped fill is not a GlobalBuffer write (8 fills - 8 skipped + 24 from the MAC).
    assert rw(r, MM, "Z") == (0, M * N)
    assert r.count(GB, "write", tensor="Z") == (M * N - M * N) + M * K * N
    # GlobalBuffer reads of Z: 8 write-backs + 24 operand reads - 8 skipped first reads.
    assert r.count(GB, "read", tensor="Z") == M * N + M * K * N - M * N
    # Totals: energy 1 per action -> MM 6+12+8, GB (24*3) + (6+12+24), MAC 24.
    assert r.energy == pytest.approx((6 + 12 + 8) + (72 + 42) + 24)


def test_skip_initial_output_write_false_on_memory(tmp_path):
    # A memory with the flag off fetches the initial value of each output tile it holds
    # and serves initial values to its children: nothing it touches is skipped.
    M, K, N = 2, 3, 4
    a = two_level(gb={"skip_initial_output_write": False})
    r = run(tmp_path, a, matmul(M, K, N), basic_matmul_mapping())
    # The initial fill of Z is fetched from MainMemory: MM reads 8 and the fill is 8 GB writes.
    assert rw(r, MM, "Z") == (M * N, M * N)
    assert r.count(GB, "write", tensor="Z") == M * N + M * K * N  # 8 + 24
    # GlobalBuffer also sends the MAC the initial value of every output (8 of its 24
    # operand reads are no longer skipped): 8 write-backs + 24 operand reads.
    assert r.count(GB, "read", tensor="Z") == M * N + M * K * N
    # MainMemory's energy for Z doubles: 8 (write-backs) -> 16.
    assert r.energy_of(MM, tensor="Z") == 2 * M * N


def test_skip_initial_output_write_false_on_the_top_memory(tmp_path):
    # MainMemory with the flag off reads out the initial values of Z for GlobalBuffer
    # (8 reads); GlobalBuffer's own flag is on, so it writes only the MAC's results, and
    # the MAC still skips its first reads from GlobalBuffer.
    M, K, N = 2, 3, 4
    a = two_level()
    a["arch"]["nodes"][0]["skip_initial_output_write"] = False
    r = run(tmp_path, a, matmul(M, K, N), basic_matmul_mapping())
    assert rw(r, MM, "Z") == (M * N, M * N)
    assert r.count(GB, "write", tensor="Z") == M * K * N
    assert r.count(GB, "read", tensor="Z") == M * N + M * K * N - M * N


def test_skip_initial_output_write_false_on_compute(tmp_path):
    M, K, N = 2, 3, 4
    a = two_level(mac={"skip_initial_output_write": False})
    r = run(tmp_path, a, matmul(M, K, N), basic_matmul_mapping())
    # The MAC reads the initial value of every output: 8 write-backs + 24 operand reads.
    assert r.count(GB, "read", tensor="Z") == M * N + M * K * N
    # The GlobalBuffer fill is still skipped.
    assert rw(r, MM, "Z") == (0, M * N)
    assert r.count(GB, "write", tensor="Z") == M * K * N


# -- tile sizes ------------------------------------------------------------------------------


def test_tile_is_a_dense_box(tmp_path):
    M, K, N = 4, 3, 5
    mp = mapping(
        storage(MM, "A", "B", "Z"),
        temporal("m", 2),
        storage(GB, "A"),
        loops("n", "m", "k"),
        compute("Z"),
    )
    r = run(tmp_path, two_level(), matmul(M, K, N), mp)
    # The tile of A under m/2 is 2 x 3 = 6 values (48 bits); the next loop (n) is
    # irrelevant to A, so the reservation stays there.
    assert usage_bits(r, GB) == 2 * K * 8
    # Two such tiles are filled: all of A once.
    assert r.count(MM, "read", tensor="A") == (M // 2) * (2 * K)
    # B and Z bypass GlobalBuffer: one read of B per operation.
    assert r.count(MM, "read", tensor="B") == M * K * N


def test_halo_of_sliding_window(tmp_path):
    P, R = 8, 3
    mp = mapping(
        storage(MM, "I", "W", "O"),
        temporal("p", 4),
        storage(GB, "I", "W"),
        loops("p", "r"),
        compute("O"),
    )
    r = run(tmp_path, two_level(), conv1d(P, R), mp)
    tile_i = (4 - 1) + (R - 1) + 1  # X = p + r over p in 4 values, r in 3: 6 values
    # Two p-tiles, each fetching its 6-value window: 12 reads, although I has 10 values.
    assert r.count(MM, "read", tensor="I") == (P // 4) * tile_i
    assert (P // 4) * tile_i > (P - 1) + (R - 1) + 1
    # W (3 values) is irrelevant to p: refetched for each p-tile.
    assert r.count(MM, "read", tensor="W") == (P // 4) * R
    # Capacity: I stops at the W storage node (6 values), W stops at the loop over p
    # (irrelevant to W) with all 3 values: (6 + 3) * 8 bits.
    assert usage_bits(r, GB) == (tile_i + R) * 8
    # The MAC reads one I value per operation.
    assert r.count(GB, "read", tensor="I") == P * R


def test_strided_projection(tmp_path):
    P, R = 4, 3
    mp = mapping(
        storage(MM, "I", "W", "O"),
        temporal("p", 2),
        storage(GB, "I", "W"),
        loops("p", "r"),
        compute("O"),
    )
    r = run(tmp_path, two_level(), conv1d(P, R, stride=2), mp)
    tile_i = 2 * (2 - 1) + (R - 1) + 1  # X = 2*p + r at p-extent 2, r-extent 3: 5 values
    assert r.count(MM, "read", tensor="I") == (P // 2) * tile_i  # 10
    assert usage_bits(r, GB) == (tile_i + R) * 8


# -- temporal loops: relevant / partially relevant / irrelevant -------------------------------


def test_temporal_loop_irrelevant_refetches(tmp_path):
    M, K, N = 2, 3, 4
    mp = mapping(
        storage(MM, "A", "B", "Z"), temporal("n"), storage(GB, "A"), loops("m", "k"), compute("Z")
    )
    r = run(tmp_path, two_level(), matmul(M, K, N), mp)
    # n is irrelevant to A: the whole of A (6 values) is fetched again for each of N=4 n's.
    assert r.count(MM, "read", tensor="A") == N * M * K


def test_temporal_loop_relevant_fetches_once(tmp_path):
    M, K, N = 2, 3, 4
    mp = mapping(
        storage(MM, "A", "B", "Z"), temporal("m"), storage(GB, "A"), loops("n", "k"), compute("Z")
    )
    r = run(tmp_path, two_level(), matmul(M, K, N), mp)
    # m is relevant to A: M tiles of 1 x K values, each fetched once = all of A once.
    assert r.count(MM, "read", tensor="A") == M * (1 * K)


def test_temporal_loop_partially_relevant(tmp_path):
    P, R = 8, 3
    mp = mapping(
        storage(MM, "I", "W", "O"), temporal("p"), storage(GB, "I"), loops("r"), compute("O")
    )
    r = run(tmp_path, two_level(), conv1d(P, R), mp)
    # p is partially relevant to I (X = p + r): each of the 8 p-tiles fetches the window
    # (1-1)+(3-1)+1 = 3 values, no reuse across iterations: 24 reads for a 10-value tensor.
    assert r.count(MM, "read", tensor="I") == P * ((1 - 1) + (R - 1) + 1)


def test_temporal_loop_irrelevant_to_output_reads_back_partial_sums(tmp_path):
    M, K, N = 2, 3, 4
    mp = mapping(
        storage(MM, "A", "B", "Z"), temporal("k"), storage(GB, "Z"), loops("m", "n"), compute("Z")
    )
    r = run(tmp_path, two_level(), matmul(M, K, N), mp)
    # Z's tile (all 8 values) is filled and written back once per k: 24 each way. Only the
    # first visit of each element skips its read (k is irrelevant, so the skipped count
    # is not multiplied by K): MainMemory reads 24 - 8 = 16 partial sums.
    assert rw(r, MM, "Z") == (K * M * N - M * N, K * M * N)


# -- spatial loops -------------------------------------------------------------------------------


def _spatial_n_mapping():
    return mapping(
        storage(MM, "A", "B", "Z"),
        storage(GB, "A", "B", "Z"),
        loops("m", "k"),
        spatial("n"),
        compute("Z"),
    )


def test_spatial_multicast_of_input(tmp_path):
    M, K, N = 2, 3, 4
    r = run(tmp_path, two_level(fanout=4), matmul(M, K, N), _spatial_n_mapping())
    # n is irrelevant to A and A is in may_reuse (default All): one GB read per (m, k) is
    # multicast to the 4 MACs.
    assert r.count(GB, "read", tensor="A") == M * K
    # B is relevant to n: every MAC gets its own value.
    assert r.count(GB, "read", tensor="B") == M * K * N
    assert r.count(MAC, "compute") == M * K * N
    assert r.einsums["Z"].fanout_usage == {"PE.X": N}
    # MAC latency counts the operations of one instance: 24 / 4 = 6 at throughput 1.
    assert r.einsums["Z"].components[MAC].latency == M * K * N / N


def test_spatial_may_reuse_naming_the_tensor(tmp_path):
    M, K, N = 2, 3, 4
    a = two_level(fanout=4, fanout_fields={"may_reuse": "A"})
    r = run(tmp_path, a, matmul(M, K, N), _spatial_n_mapping())
    assert r.count(GB, "read", tensor="A") == M * K  # multicast


def test_spatial_no_multicast_with_may_reuse_nothing(tmp_path):
    M, K, N = 2, 3, 4
    a = two_level(fanout=4, fanout_fields={"may_reuse": "Nothing"})
    r = run(tmp_path, a, matmul(M, K, N), _spatial_n_mapping())
    # No multicast: each of the 4 MACs reads its own copy of A.
    assert r.count(GB, "read", tensor="A") == M * K * N


def test_spatial_loop_is_moved_down_to_its_level(tmp_path):
    # A loop over PE.X written above the GlobalBuffer storage counts as if written just
    # above the first holder at or below PE (here the MAC): same counts as below GB.
    M, K, N = 2, 3, 4
    above = mapping(
        storage(MM, "A", "B", "Z"),
        spatial("n"),
        storage(GB, "A", "B", "Z"),
        loops("m", "k"),
        compute("Z"),
    )
    r = run(tmp_path, two_level(fanout=4), matmul(M, K, N), above)
    assert rw(r, MM, "B") == (K * N, 0)  # not refetched per n
    assert rw(r, GB, "A") == (M * K, M * K)  # still multicast


def _spatial_k_mapping():
    return mapping(
        storage(MM, "A", "B", "Z"),
        storage(GB, "A", "B", "Z"),
        loops("m", "n"),
        spatial("k"),
        compute("Z"),
    )


def test_spatial_reduction_of_output(tmp_path):
    M, K, N = 2, 3, 4
    r = run(tmp_path, two_level(fanout=4), matmul(M, K, N), _spatial_k_mapping())
    # k is irrelevant to Z and Z is in may_reuse: the 3 partial sums are reduced across
    # the MACs, so one write per output reaches GlobalBuffer.
    assert r.count(GB, "write", tensor="Z") == M * N
    # Reads: 8 write-backs to MainMemory; the MACs' reads (8) are all skipped first reads.
    assert r.count(GB, "read", tensor="Z") == M * N + M * N - M * N
    assert r.einsums["Z"].fanout_usage == {"PE.X": K}


def test_spatial_reduction_without_may_reuse_writes_every_partial_sum(tmp_path):
    # Each of the 3 MACs (k split spatially) starts its own partial sums and writes them
    # to GlobalBuffer; with no reduction network (may_reuse: Nothing) those writes are
    # all GlobalBuffer sees, as the format defines it. The model says so in a warning.
    M, K, N = 2, 3, 4
    a = two_level(fanout=4, fanout_fields={"may_reuse": "Nothing"})
    r = run(tmp_path, a, matmul(M, K, N), _spatial_k_mapping())
    assert r.count(GB, "write", tensor="Z") == M * K * N  # 24 partial sums
    skipped = M * N * K  # every instance skips its first read of each of its outputs
    assert r.count(GB, "read", tensor="Z") == M * N + M * K * N - skipped  # 8 write-backs
    (warning,) = r.warnings
    assert "'k'" in warning and "PE.X" in warning and "GlobalBuffer" in warning
    # With the reduction network the same loop writes each output once, and no warning.
    r = run(tmp_path, two_level(fanout=4), matmul(M, K, N), _spatial_k_mapping())
    assert r.count(GB, "write", tensor="Z") == M * N
    assert r.warnings == []


# -- tolls -------------------------------------------------------------------------------------


def _toll_arch(direction):
    return arch(
        memory(MM, "inf", 1, 1),
        toll("Bus", direction, energy=2),
        memory(GB, "inf", 1, 1),
        compute_unit(MAC),
    )


def _toll_mapping():
    return mapping(
        storage(MM, "A", "B", "Z"),
        toll_node("Bus", "A", "B", "Z"),
        storage(GB, "A", "B", "Z"),
        loops("m", "k", "n"),
        compute("Z"),
    )


# Values crossing the Bus for M=2, K=3, N=4: fills A 6, B 12, Z 0 (its first fill is
# skipped); write-backs Z 8.
@pytest.mark.parametrize(
    ("direction", "per_tensor"),
    [
        ("down", {"A": 6, "B": 12, "Z": 0}),
        ("up", {"A": 0, "B": 0, "Z": 8}),
        ("up_and_down", {"A": 6, "B": 12, "Z": 8}),
        ({"A": "down", "B": "up", "Z": "up"}, {"A": 6, "B": 0, "Z": 8}),
        ({"Inputs": "up", "Outputs": "up_and_down"}, {"A": 0, "B": 0, "Z": 8}),
    ],
)
def test_toll_directions(tmp_path, direction, per_tensor):
    r = run(tmp_path, _toll_arch(direction), matmul(2, 3, 4), _toll_mapping())
    for t, n in per_tensor.items():
        assert r.count("Bus", "read", tensor=t) == n, t
    total = sum(per_tensor.values())
    assert r.count("Bus", "read") == total
    assert r.energy_of("Bus") == 2 * total  # energy 2 per crossing value
    assert "write" not in r.einsums["Z"].components["Bus"].actions  # a toll only reads
    # The toll does not change the memories' traffic.
    assert rw(r, MM, "A") == (6, 0)


def test_toll_counts_fetched_initial_fill(tmp_path):
    a = _toll_arch("down")
    a["arch"]["nodes"][2]["skip_initial_output_write"] = False
    r = run(tmp_path, a, matmul(2, 3, 4), _toll_mapping())
    assert r.count("Bus", "read", tensor="Z") == 2 * 4  # the 8 initial values go down


# -- copy Einsum ------------------------------------------------------------------------------


def test_copy_einsum(tmp_path):
    M, D = 2, 3
    wl = workload(
        {"m": M, "d": D},
        einsum(
            "I",
            access("I_in", ["m", "d"]),
            access("I", ["m", "d"], output=True),
            is_copy_operation=True,
        ),
    )
    mp = mapping(storage(MM, "I_in"), storage(GB, "I"), loops("m", "d"), compute("I"))
    r = run(tmp_path, two_level(mm_energy=5, gb_energy=3), wl, mp)
    # The source is read once at its backing holder, the destination written once at its.
    assert r.count(MM, "read") == M * D
    assert r.count(GB, "write") == M * D
    assert r.count(MM, "write") == 0
    assert r.count(GB, "read") == 0
    # No computes.
    assert r.count(MAC, "compute") == 0
    assert r.einsums["I"].operations == 0
    # Both are reported under the source tensor.
    assert set(r.einsums["I"].components[GB].tensors) == {"I_in"}
    assert r.count(GB, "write", tensor="I_in") == M * D
    assert r.energy == pytest.approx(5 * M * D + 3 * M * D)


# -- n_instances ------------------------------------------------------------------------------


@pytest.mark.parametrize(("wl_n", "einsum_n"), [(3, 1), (1, 2), (3, 2)])
def test_n_instances_scale_everything(tmp_path, wl_n, einsum_n):
    wl = matmul(2, 3, 4, n_instances=wl_n)
    wl["workload"]["einsums"][0]["n_instances"] = einsum_n
    r = run(tmp_path, two_level(), wl, basic_matmul_mapping())
    n = wl_n * einsum_n
    # One instance: energy MM 26 + GB 114 + MAC 24 = 164; latency 24 ops at throughput 1.
    assert r.energy == pytest.approx(164 * n)
    assert r.latency == pytest.approx(24 * n)
    assert r.count(MAC, "compute") == 24 * n
    assert r.count(MM, "read", tensor="A") == 6 * n
    assert r.count(GB, "read", tensor="Z") == 24 * n


# -- imperfect factorization ------------------------------------------------------------------


def test_imperfect_factorization_exact_counts(tmp_path):
    M, K, N = 8, 2, 2
    mp = mapping(
        storage(MM, "A", "B", "Z"),
        temporal("m", 3),
        storage(GB, "A", "B", "Z"),
        loops("m", "k", "n"),
        compute("Z"),
    )
    r = run(tmp_path, two_level(), matmul(M, K, N), mp)
    assert r.count(MAC, "compute") == M * K * N  # 32, not 9 * 2 * 2
    # B is irrelevant to m: refetched once per m-tile, ceil(8 / 3) = 3 times.
    assert r.count(MM, "read", tensor="B") == math.ceil(M / 3) * K * N  # 12
    # A is relevant: tiles of 3, 3 and 2 rows -> exactly 8 * K values, not 9 * K.
    assert r.count(MM, "read", tensor="A") == (3 + 3 + 2) * K  # 16
    assert rw(r, MM, "Z") == (0, M * N)
    # Capacity uses the largest tile: A 3x2 (stops at B's node), B 2x2 (stops at Z's
    # node), Z lowered past m/1 and stopped at k: 1x2.
    assert usage_bits(r, GB) == (3 * K + K * N + 1 * N) * 8


def test_imperfect_nested_loops_same_tiles_for_relevant_and_irrelevant(tmp_path):
    # Deliberate difference (c): m/3 then m/2 over 8 cuts m into tiles 2,1 | 2,1 | 2 =
    # 5 tiles. A tensor irrelevant to m (B) is fetched once per tile (5 times); the
    # relevant A gets exactly its 8 rows. (Fractional counting would give 8/3 * 3/2 = 4
    # for relevant and ceil(8/3) * 3/2 = 4.5 for irrelevant tensors.)
    M, K, N = 8, 2, 2
    mp = mapping(
        storage(MM, "A", "B", "Z"),
        temporal("m", 3),
        temporal("m", 2),
        storage(GB, "A", "B", "Z"),
        loops("m", "k", "n"),
        compute("Z"),
    )
    r = run(tmp_path, two_level(), matmul(M, K, N), mp)
    assert r.count(MM, "read", tensor="B") == 5 * K * N
    assert r.count(MM, "read", tensor="A") == (2 + 1 + 2 + 1 + 2) * K
    assert r.count(MM, "write", tensor="Z") == M * N
    assert r.count(MAC, "compute") == M * K * N
