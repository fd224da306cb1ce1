"""Cost rules of format-and-model.md §2 (actions, energy, latency, leak, area, capacity), by hand.

Unless a test says otherwise the arch is MainMemory -> GlobalBuffer -> MAC (every action
energy 1, throughput inf for memories and 1 for the MAC), values are 8 bits and the
memories move 8 bits per action, so one action moves one value. The workhorse is the
matmul ``Z[m, n] = A[m, k] * B[k, n]`` with M=2, K=3, N=4 (24 operations).
"""

from __future__ import annotations

import pytest

from tests.support.model_helpers import (
    action,
    arch,
    basic_matmul_mapping,
    compute,
    compute_unit,
    container,
    conv1d,
    dim,
    loops,
    mapping,
    matmul,
    memory,
    run,
    rw,
    sequential,
    spatial,
    storage,
    temporal,
    three_level,
    two_level,
    two_matvecs,
    usage_bits,
)

MM, GB, MAC = "MainMemory", "GlobalBuffer", "MAC"


# -- values / bits per action -------------------------------------------------------------


def test_values_per_action_precedence(tmp_path):
    M, K, N = 2, 3, 4
    gb = memory(
        GB,
        "inf",
        bits_per_action=64,  # component bits per action
        values_per_action={"A": 4, "B": 4},  # component values per action
        bits_per_value={"Z": 16},  # Z is 16 bits wide here
        actions=[
            action("read", 1, bits_per_action=32, values_per_action={"A": 2}),
            action("write", 1),
        ],
    )
    a = arch(memory(MM, "inf", 1, 1, bits_per_action=None), gb, compute_unit(MAC))
    r = run(tmp_path, a, matmul(M, K, N), basic_matmul_mapping())
    # Values moved at GlobalBuffer (see test_fills_from_parent and friends):
    # reads A 24, B 24, Z 24; writes A 6, B 12, Z 24.
    assert r.count(GB, "read", tensor="A") == 24 / 2  # action values_per_action
    assert r.count(GB, "read", tensor="B") == 24 / 4  # component values_per_action
    assert r.count(GB, "read", tensor="Z") == 24 / (32 / 16)  # action bpa / component bpv
    assert r.count(GB, "write", tensor="A") == 6 / 4  # component vpa (action has none)
    assert r.count(GB, "write", tensor="B") == 12 / 4
    assert r.count(GB, "write", tensor="Z") == 24 / (64 / 16)  # component bpa / bpv
    # MainMemory sets no bits_per_action: one action per bit (workload: 8 bits/value).
    assert r.count(MM, "read", tensor="A") == 6 * 8
    assert r.count(MM, "write", tensor="Z") == 8 * 8
    # Capacity uses the component's bits per value: A 6*8 + B 12*8 + Z 4*16 bits.
    assert usage_bits(r, GB) == 6 * 8 + 12 * 8 + 4 * 16


# -- energy and latency scales --------------------------------------------------------------


def test_energy_scales_multiply(tmp_path):
    gb = memory(
        GB,
        energy_scale=2,
        actions=[action("read", 5, energy_scale=3), action("write", 1)],
    )
    a = arch(memory(MM), gb, compute_unit(MAC))
    r = run(tmp_path, a, matmul(2, 3, 4), basic_matmul_mapping())
    # 72 reads at 5 * 2 * 3 = 30 each; 42 writes at 1 * 2 = 2 each.
    assert r.count(GB, "read") == 72
    assert r.energy_of(GB, action="read") == pytest.approx(72 * 30)
    assert r.energy_of(GB, action="write") == pytest.approx(42 * 2)


def test_actions_scale_multiplies_counts_and_latency(tmp_path):
    gb = memory(
        GB,
        actions_scale=1.5,
        actions=[action("read", 1, 4), action("write", 1, 2)],
    )
    a = arch(memory(MM), gb, compute_unit(MAC, throughput=1000))
    r = run(tmp_path, a, matmul(2, 3, 4), basic_matmul_mapping())
    assert r.count(GB, "read") == 72 * 1.5
    assert r.count(GB, "write") == 42 * 1.5
    assert r.energy_of(GB) == pytest.approx((72 + 42) * 1.5)
    # Default latency: (72 / 4 + 42 / 2) * 1.5 = 58.5.
    assert r.einsums["Z"].components[GB].latency == pytest.approx((72 / 4 + 42 / 2) * 1.5)
    assert r.latency == pytest.approx(58.5)


def test_throughput_scale_and_parallel_instances(tmp_path):
    gb = memory(
        GB,
        throughput_scale=2,
        n_parallel_instances=2,
        area=10,
        leak_power=0,
        actions=[action("read", 1, 4, throughput_scale=3), action("write", 1, 2)],
    )
    a = arch(memory(MM), gb, compute_unit(MAC, throughput=1000))
    r = run(tmp_path, a, matmul(2, 3, 4), basic_matmul_mapping())
    read_tp = 4 * 2 * 3 * 2  # action * component scale * action scale * instances = 48
    write_tp = 2 * 2 * 2  # = 8
    assert r.einsums["Z"].components[GB].latency == pytest.approx(72 / read_tp + 42 / write_tp)
    # n_parallel_instances also multiplies area.
    assert r.components[GB].area == 10 * 2


@pytest.mark.parametrize(
    ("total_latency", "expected"),
    [
        (None, 72 / 4 + 42 / 2),  # default: sum of n_calls / throughput (shared port)
        ("max(a.n_calls / a.throughput for a in actions)", max(72 / 4, 42 / 2)),
        ("sum(a.n_calls for a in actions) / 10", (72 + 42) / 10),
    ],
)
def test_total_latency_expression(tmp_path, total_latency, expected):
    gb = memory(
        GB,
        total_latency=total_latency,
        actions=[action("read", 1, 4), action("write", 1, 2)],
    )
    a = arch(memory(MM), gb, compute_unit(MAC, throughput=1000))
    r = run(tmp_path, a, matmul(2, 3, 4), basic_matmul_mapping())
    assert r.einsums["Z"].components[GB].latency == pytest.approx(expected)
    assert r.latency == pytest.approx(expected)  # GlobalBuffer bounds the Einsum


def test_einsum_latency_is_max_and_total_is_sum(tmp_path):
    NA, NY, NZ = 8, 3, 4
    gb = memory(GB, actions=[action("read", 1, 8), action("write", 1, 8)])
    a = arch(memory(MM), gb, compute_unit(MAC, throughput=2))
    mp = mapping(
        storage(MM, "A", "B", "C", "Y", "Z"),
        sequential(
            [storage(GB, "A", "B", "Y"), loops("ny", "na"), compute("Y")],
            [storage(GB, "Y", "Z"), loops("nz", "ny"), compute("Z")],
        ),
    )
    r = run(tmp_path, a, two_matvecs(NA, NY, NZ), mp)
    y, z = r.einsums["Y"], r.einsums["Z"]
    # Einsum Y (24 ops): GB reads A 24, B 24, Y 3 + 24 - 3 = 24 -> 72; writes A 8, B 24,
    # Y 3 - 3 + 24 = 24 -> 56. GB latency 128 / 8 = 16 > MAC 24 / 2 = 12.
    assert y.components[GB].latency == pytest.approx((72 + 56) / 8)
    assert y.components[MAC].latency == pytest.approx(24 / 2)
    assert y.latency == pytest.approx(16)
    assert y.bound_by == GB
    # Einsum Z (12 ops, C straight from MainMemory): GB reads Y 12, Z 4 + 12 - 4 = 12;
    # writes Y 3, Z 12. GB latency 39 / 8 = 4.875 < MAC 12 / 2 = 6.
    assert z.components[GB].latency == pytest.approx((24 + 15) / 8)
    assert z.latency == pytest.approx(6)
    assert z.bound_by == MAC
    # Einsums run one after the other.
    assert r.latency == pytest.approx(16 + 6)
    assert r.components[GB].latency == pytest.approx(16 + 4.875)
    assert r.components[MAC].latency == pytest.approx(12 + 6)


# -- leak, area, power gating ---------------------------------------------------------------


def test_leak_energy_is_leak_power_times_einsum_latency(tmp_path):
    a = two_level(gb={"leak_power": 0.5}, mac={"leak_power": 0.25})
    r = run(tmp_path, a, matmul(2, 3, 4), basic_matmul_mapping())
    latency = 24  # the MAC bounds the Einsum: 24 ops at throughput 1
    gb, mac = r.einsums["Z"].components[GB], r.einsums["Z"].components[MAC]
    assert gb.leak_energy == pytest.approx(0.5 * latency)
    assert mac.leak_energy == pytest.approx(0.25 * latency)
    assert r.energy == pytest.approx(164 + 0.5 * latency + 0.25 * latency)
    assert gb.energy == pytest.approx(114 + 12)


def test_area_and_leak_count_enclosing_fanouts_not_their_own(tmp_path):
    # A component's own spatial fanout is already in its area and leak (the format's
    # meaning, e.g. tpu_v4i's LocalBuffer); its ancestors' fanouts multiply them.
    a = arch(
        memory(MM),
        memory(GB, area=10, leak_power=1, spatial=[dim("Y", 2)]),
        container("PE", dim("X", 4)),
        compute_unit(MAC, area=7, leak_power=0.5),
    )
    r = run(tmp_path, a, matmul(2, 3, 4), basic_matmul_mapping())
    assert r.components[GB].area == 10
    assert r.components[GB].leak_power == 1
    assert r.components[MAC].area == 7 * 2 * 4
    assert r.components[MAC].leak_power == 0.5 * 2 * 4
    assert r.area == 10 + 7 * 8
    # Not power gateable: all 8 MACs leak for the whole Einsum (latency 24).
    assert r.einsums["Z"].components[MAC].leak_energy == pytest.approx(0.5 * 8 * 24)


def test_area_of_a_compute_unit_no_einsum_uses(tmp_path):
    # The ALU sits above the PE array; no Einsum runs on it, yet it has area (x 2 for
    # GlobalBuffer's fanout above it).
    a = arch(
        memory(MM),
        memory(GB, spatial=[dim("Y", 2)]),
        compute_unit("ALU", area=3),
        container("PE", dim("X", 4)),
        compute_unit(MAC, area=7),
    )
    r = run(tmp_path, a, matmul(2, 3, 4), basic_matmul_mapping())
    assert r.components["ALU"].area == 3 * 2
    assert r.area == 3 * 2 + 7 * 8


@pytest.mark.parametrize(("gateable", "fraction"), [(True, 2 / 4), (False, 1.0)])
def test_power_gating_scales_leak_once(tmp_path, gateable, fraction):
    # Deliberate difference (b): 2 of 4 MACs used -> leak factor 0.5 (not 0.125).
    M, K, N = 4, 2, 2
    a = two_level(
        fanout=4,
        fanout_fields={"power_gateable": gateable},
        gb={"leak_power": 0.5},
        mac={"leak_power": 0.25},
    )
    mp = mapping(
        storage(MM, "A", "B", "Z"),
        storage(GB, "A", "B", "Z"),
        loops("m", "k"),
        spatial("n"),
        compute("Z"),
    )
    r = run(tmp_path, a, matmul(M, K, N), mp)
    latency = M * K  # each MAC does 8 of the 16 operations at throughput 1
    assert r.latency == pytest.approx(latency)
    total_leak = 0.25 * 4
    assert r.einsums["Z"].components[MAC].leak_energy == pytest.approx(
        total_leak * fraction * latency
    )
    # GlobalBuffer sits above the gated dimension: it always leaks in full.
    assert r.einsums["Z"].components[GB].leak_energy == pytest.approx(0.5 * latency)


# -- capacity -----------------------------------------------------------------------------------


def test_capacity_sum_of_reservations_in_a_branch(tmp_path):
    M, K, N = 2, 3, 4
    r = run(tmp_path, two_level(), matmul(M, K, N), basic_matmul_mapping())
    # GB[A, B, Z] is split in order: A stops at B's node (6 values), B at Z's node (12),
    # Z is lowered past m (relevant) and stops at k (irrelevant): 1 x 4 values.
    assert usage_bits(r, GB) == (6 + 12 + 4) * 8
    # MainMemory backs every tensor: whole tensors, but unbounded memories report 0.
    assert usage_bits(r, MM) == (6 + 12 + 8) * 8
    assert r.components[MM].usage == 0


def test_capacity_lowered_reservation_stops_at_irrelevant_loop(tmp_path):
    M, K, N = 2, 3, 4
    # A lowered past m and k (relevant) and stopped by n: 1 value.
    lowered = mapping(
        storage(MM, "A", "B", "Z"), storage(GB, "A"), loops("m", "k", "n"), compute("Z")
    )
    r = run(tmp_path, two_level(), matmul(M, K, N), lowered)
    assert usage_bits(r, GB) == 1 * 8
    # With n first, A cannot be lowered: the whole 2 x 3 tile.
    first = mapping(
        storage(MM, "A", "B", "Z"), storage(GB, "A"), loops("n", "m", "k"), compute("Z")
    )
    r = run(tmp_path, two_level(), matmul(M, K, N), first)
    assert usage_bits(r, GB) == M * K * 8


def test_capacity_lowered_past_partially_relevant_loop(tmp_path):
    P, R = 8, 3
    # I = X[p + r]: the reservation goes below the first (partially relevant) loop and stops.
    p_first = mapping(storage(MM, "I", "W", "O"), storage(GB, "I"), loops("p", "r"), compute("O"))
    r = run(tmp_path, two_level(), conv1d(P, R), p_first)
    assert usage_bits(r, GB) == ((1 - 1) + (R - 1) + 1) * 8  # p = 1, r = 3: 3 values
    r_first = mapping(storage(MM, "I", "W", "O"), storage(GB, "I"), loops("r", "p"), compute("O"))
    r = run(tmp_path, two_level(), conv1d(P, R), r_first)
    assert usage_bits(r, GB) == ((P - 1) + (1 - 1) + 1) * 8  # p = 8, r = 1: 8 values


def test_capacity_backing_reservation_not_lowered(tmp_path):
    # GlobalBuffer backs Z (no MainMemory copy): its reservation holds all of Z even though
    # the next loop (m) is relevant.
    M, K, N = 2, 3, 4
    mp = mapping(storage(MM, "A", "B"), storage(GB, "Z"), loops("m", "k", "n"), compute("Z"))
    r = run(tmp_path, two_level(), matmul(M, K, N), mp)
    assert usage_bits(r, GB) == M * N * 8
    # Backing: nothing to write back to, nothing fetched.
    assert r.count(MM, "write", tensor="Z") == 0


def test_capacity_merged_storage_node_order(tmp_path):
    M, K, N = 2, 3, 4

    def usage(order):
        mp = mapping(
            storage(MM, "A", "B", "Z"), storage(GB, *order), loops("m", "k", "n"), compute("Z")
        )
        return usage_bits(run(tmp_path, two_level(), matmul(M, K, N), mp), GB)

    # [A, Z]: A stops at Z's node (6 values); Z lowered past m, stopped by k (4 values).
    assert usage(["A", "Z"]) == (6 + 4) * 8
    # [Z, A]: Z stops at A's node (8 values); A lowered past m and k, stopped by n (1).
    assert usage(["Z", "A"]) == (8 + 1) * 8


def test_capacity_max_across_sequential_branches(tmp_path):
    NA, NY, NZ = 4, 3, 4
    mp = mapping(
        storage(MM, "A", "B", "C", "Y", "Z"),
        sequential(
            [storage(GB, "A", "B", "Y"), loops("ny", "na"), compute("Y")],
            [storage(GB, "Y", "C", "Z"), loops("nz", "ny"), compute("Z")],
        ),
    )
    r = run(tmp_path, two_level(), two_matvecs(NA, NY, NZ), mp)
    # Branch Y: A 4 (stops at B's node) + B 12 (stops at Y's) + Y lowered past ny, stopped
    # by na: 1 -> 17 values. Branch Z: Y 3 + C 12 + Z 1 -> 16 values. Max, not sum.
    assert usage_bits(r, GB) == max(4 + 12 + 1, 3 + 12 + 1) * 8


def _fused_matvecs(a_above_loop: bool):
    top = [storage(MM, "A", "B", "C", "Y", "Z")]
    if a_above_loop:
        top += [storage(GB, "A"), temporal("ny"), storage(GB, "Y")]
    else:
        top += [temporal("ny"), storage(GB, "Y"), storage(GB, "A")]
    return mapping(
        *top,
        sequential(
            [storage(GB, "B"), loops("na"), compute("Y")],
            [storage(GB, "C", "Z"), loops("nz"), compute("Z")],
        ),
    )


def test_capacity_lifetimes_across_fused_split(tmp_path):
    NA, NY, NZ = 4, 3, 8
    r = run(tmp_path, two_level(), two_matvecs(NA, NY, NZ), _fused_matvecs(False))
    # Reservations (values): Y 1 (ny = 1; stops at the next storage node), A 4 (all of A;
    # stops at B's node), B 1 (lowered past na), C 1 x 8 = 8 (stops at Z's node), Z 1.
    # Y is shared: live in both branches. A is used by branch Y only and no loop lies
    # between it and the split: live in branch Y only.
    branch_y = 1 + 4 + 1
    branch_z = 1 + 8 + 1
    assert usage_bits(r, GB) == max(branch_y, branch_z) * 8  # 80 bits
    # If A sits above the ny loop, that loop repeats both branches: A stays live in Z's.
    r = run(tmp_path, two_level(), two_matvecs(NA, NY, NZ), _fused_matvecs(True))
    assert usage_bits(r, GB) == max(branch_y, branch_z + 4) * 8  # 112 bits


def test_capacity_usage_fraction(tmp_path):
    r = run(tmp_path, two_level(gb_size=352), matmul(2, 3, 4), basic_matmul_mapping())
    assert usage_bits(r, GB) == 176
    assert r.components[GB].usage == pytest.approx(176 / 352)
    assert r.components[GB].size == 352


def test_three_level_register_traffic(tmp_path):
    # MainMemory -> GlobalBuffer -> Register -> MAC; Register holds a 1 x K row of A
    # under m, so A is read once per value from GB and re-read N times from Register.
    M, K, N = 2, 3, 4
    mp = mapping(
        storage(MM, "A", "B", "Z"),
        storage(GB, "A", "B", "Z"),
        temporal("m"),
        storage("Register", "A"),
        loops("n", "k"),
        compute("Z"),
    )
    r = run(tmp_path, three_level(), matmul(M, K, N), mp)
    assert rw(r, GB, "A") == (M * K, M * K)
    assert rw(r, "Register", "A") == (M * K * N, M * K)
    # Energies 100 / 10 / 1 per action for A: MM 6 reads, GB 6 + 6, Register 24 + 6.
    assert r.energy_of(MM, tensor="A") == 100 * 6
    assert r.energy_of(GB, tensor="A") == 10 * 12
    assert r.energy_of("Register", tensor="A") == 1 * 30


def test_per_instance_counts_below_a_fanout_set_latency(tmp_path):
    # MainMemory -> GlobalBuffer -> PE (X: 4) -> Register -> MAC; n is spread over the 4
    # PEs. Register (below the fanout) has one instance per PE: its latency counts the
    # actions of one instance; GlobalBuffer (above) counts all of its actions.
    M, K, N = 2, 3, 4
    a = arch(
        memory(MM),
        memory(GB, actions=[action("read", 1, 1), action("write", 1, 1)]),
        container("PE", dim("X", 4)),
        memory("Register", actions=[action("read", 1, 1), action("write", 1, 1)]),
        compute_unit(MAC, throughput=1),
    )
    mp = mapping(
        storage(MM, "A", "B", "Z"),
        storage(GB, "A", "B", "Z"),
        temporal("m"),
        spatial("n"),
        storage("Register", "B"),
        loops("k"),
        compute("Z"),
    )
    r = run(tmp_path, a, matmul(M, K, N), mp)
    # B: a K x 1 column per (m, n): 8 fills of 3 values, then one read per operation.
    assert rw(r, "Register", "B") == (M * K * N, M * N * K)
    assert rw(r, GB, "B") == (M * N * K, K * N)
    # A (irrelevant to n) is multicast from GB: 6 reads. Z: 8 write-backs + 24 - 8 = 24.
    # GB reads 24 (B) + 6 (A) + 24 (Z) = 54; writes 6 (A) + 12 (B) + 24 (Z) = 42.
    assert r.count(GB, "read") == 54
    assert r.einsums["Z"].components[GB].latency == pytest.approx(54 + 42)
    # One Register: 24 / 4 = 6 reads and 6 writes; one MAC: 6 operations.
    assert r.einsums["Z"].components["Register"].latency == pytest.approx(6 + 6)
    assert r.einsums["Z"].components[MAC].latency == pytest.approx(6)
    assert r.latency == pytest.approx(96)


def _pe_above_register_arch():
    return arch(
        memory(MM),
        memory(GB),
        container("PE", dim("X", 4)),
        memory("Register", actions=[action("read", 1, 1), action("write", 1, 1)]),
        compute_unit(MAC, throughput=1),
    )


def test_multicast_into_a_memory_writes_every_instance(tmp_path):
    # n spread over 4 PEs, each with its own Register holding a 1 x K row of A. The row is
    # read once from GB per m (multicast), but written into all 4 Registers.
    M, K, N = 2, 3, 4
    mp = mapping(
        storage(MM, "A", "B", "Z"),
        storage(GB, "A", "B", "Z"),
        temporal("m"),
        spatial("n"),
        storage("Register", "A"),
        loops("k"),
        compute("Z"),
    )
    r = run(tmp_path, _pe_above_register_arch(), matmul(M, K, N), mp)
    assert r.count(GB, "read", tensor="A") == M * K  # 6: one transfer per row
    assert r.count("Register", "write", tensor="A") == M * K * N  # 24: 4 copies of 6
    assert r.count("Register", "read", tensor="A") == M * K * N  # one per operation
    # One Register: 2 rows of 3 values written, 6 values read (throughput 1 each).
    assert r.einsums["Z"].components["Register"].latency == pytest.approx(6 + 6)


def test_spatial_reduction_from_memories(tmp_path):
    # k spread over 3 PEs, each accumulating its partial sums of Z in its own Register;
    # the sums are reduced on the way to GB (one write per output element).
    M, K, N = 2, 3, 4
    mp = mapping(
        storage(MM, "A", "B", "Z"),
        storage(GB, "A", "B", "Z"),
        loops("m", "n"),
        spatial("k"),
        storage("Register", "Z"),
        compute("Z"),
    )
    r = run(tmp_path, _pe_above_register_arch(), matmul(M, K, N), mp)
    # GB: 8 reduced writes from the Registers; reads: 8 write-backs to MainMemory (the
    # Registers' initial fills are all skipped: each starts from zero).
    assert rw(r, GB, "Z") == (M * N, M * N)
    # Each of the 3 Registers per (m, n): the MAC writes its product (its first read is
    # skipped), then the Register sends the partial sum up: 24 writes, 24 reads in all.
    assert rw(r, "Register", "Z") == (M * N * K, M * N * K)
    assert rw(r, MM, "Z") == (0, M * N)
    # One Register: 8 writes + 8 reads.
    assert r.einsums["Z"].components["Register"].latency == pytest.approx(16)
