"""First visits of an output under spreads of uneven tiles (``reuse.first_visits``):
each instance that starts its own partial sums skips the first read of the values of
the tile it really gets, once; the counts never go negative. By hand, and over every
mapping of small random cases."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fusemap.model.evaluate import evaluate_mapping
from fusemap.spec import mapping as M
from fusemap.spec.errors import InvalidMappingError
from fusemap.spec.spec import load_spec
from tests.support import model_helpers as mh
from tests.support.mapper_bruteforce import mappings


def _spec(tmp_path, bounds: dict, z, g_reuse: str, x_fanout: int | None = None):
    """Z = A B (``z``: Z's projection) below a DRAM; a register file on a fanout G of 2
    (``g_reuse``), reads 2 and writes 3 per value; MACs on a fanout X that reuses
    inputs only (each MAC starts its own partial sums), if ``x_fanout``."""
    a, b = (["m", "k"], ["k", "n"]) if "k" in bounds else (["p"], ["r"])
    wl = mh.workload(
        bounds,
        mh.einsum("Z", mh.access("A", a), mh.access("B", b), mh.access("Z", z, True)),
    )
    x = [mh.dim("X", x_fanout, may_reuse="Inputs")] if x_fanout else None
    ar = mh.arch(
        mh.memory("DRAM", "inf", 50, 50),
        mh.memory(
            "RF",
            "inf",
            2,
            3,
            spatial=[mh.dim("G", 2, may_reuse=g_reuse)],
            tensors={"may_keep": "All"},
        ),
        mh.compute_unit("MAC", 1, spatial=x),
    )
    path = tmp_path / "uneven_first.yaml"
    path.write_text(mh.to_yaml({**ar, **wl}))
    return load_spec(path)


def _z_counts(spec, *loops) -> dict[str, tuple[float, float]]:
    """(reads, writes) of Z per memory for DRAM [A, B, Z] / ``loops`` / RF [A, B, Z] at
    the first spatial loop over G / the rest / the MAC."""
    held = [M.Storage(tensors=["A", "B", "Z"], component=c) for c in ("DRAM", "RF")]
    split = next(i for i, n in enumerate(loops) if getattr(n, "name", "") == "G") + 1
    nodes = [
        held[0],
        *loops[:split],
        held[1],
        *loops[split:],
        M.Compute(einsum="Z", component="MAC"),
    ]
    r = evaluate_mapping(spec, M.Mapping(nodes=nodes), einsums=["Z"])
    comps = r.einsums["Z"].components
    return {
        c: (comps[c].tensors["Z"]["read"].count, comps[c].tensors["Z"]["write"].count)
        for c in ("DRAM", "RF")
    }


def _spatial(var: str, tile: int, dim: str) -> M.Spatial:
    return M.Spatial(
        rank_variable=var, tile_shape=tile, name=dim, component="RF" if dim == "G" else "MAC"
    )


def test_nested_spreads_start_partial_sums_only_in_instances_used(tmp_path):
    """k = 5 over the 2 register files as 3 + 2 (reduced on the way up), then over the
    MACs one each: 3 + 2 = 5 MACs start partial sums per m, not 2 x 3. Per m: 5
    products written into the register files and none read back (each the first of
    its MAC), each register file reads its one value out to DRAM (2), DRAM gets one
    reduced write. x 5 values of m."""
    spec = _spec(tmp_path, {"m": 5, "k": 5, "n": 1}, ["m", "n"], "Outputs", 3)
    got = _z_counts(
        spec,
        M.Temporal(rank_variable="m", tile_shape=1),
        _spatial("k", 3, "G"),
        _spatial("k", 1, "X"),
    )
    assert got == {"DRAM": (0.0, 5.0), "RF": (10.0, 25.0)}  # was -5 + 10 = 5 reads


def test_spread_below_an_uneven_temporal_loop(tmp_path):
    """k = 6 cut by a temporal loop into 4 + 2, each spread over G by 2 (2 + 2, then 2
    on one register file), then over 2 MACs. Per m: the first iteration uses 2
    register files x 2 MACs, which start the partial sums (4 of the 6 products
    unread); the second refills register file 0 from DRAM (1 read, 1 write) and its 2
    MACs read it back. Register files: writes 6 products + 1 fill = 7, reads 2 + 3
    values sent up (2 then 1) = 5; DRAM: 1 read, 2 writes. x 5 values of m."""
    spec = _spec(tmp_path, {"m": 5, "k": 6, "n": 1}, ["m", "n"], "Outputs", 3)
    got = _z_counts(
        spec,
        M.Temporal(rank_variable="m", tile_shape=1),
        M.Temporal(rank_variable="k", tile_shape=4),
        _spatial("k", 2, "G"),
        _spatial("k", 1, "X"),
    )
    assert got == {"DRAM": (5.0, 10.0), "RF": (25.0, 35.0)}  # was 30 reads, 37.5 writes


def test_an_output_window_spread_unevenly(tmp_path):
    """Z[p + r] = A[p] B[r], p = 2, r = 5 over the 2 register files as 3 + 2, no
    reduction: their windows of Z hold 4 and 3 values, all first visits (7, not 2 x 4:
    DRAM read -1 before). The MAC writes its 10 products into the register files,
    whose 7 values go to DRAM; the MAC reads back 10 less the first of each window's
    leaf tile (2, the model's rule for a loop indexing the output in part)."""
    spec = _spec(tmp_path, {"p": 2, "r": 5}, {"X": "p + r"}, "Nothing")
    got = _z_counts(
        spec,
        _spatial("r", 3, "G"),
        M.Temporal(rank_variable="p", tile_shape=1),
        M.Temporal(rank_variable="r", tile_shape=1),
    )
    assert got == {"DRAM": (0.0, 7.0), "RF": (15.0, 10.0)}


def _random_case(seed: int, tmp_path):
    """A matmul or an output window (``p + r``) with small ranks, fanouts at the
    register files and the MACs, any reuse."""
    rng = random.Random(seed)
    reuse = lambda: rng.choice(["All", "Nothing", "Inputs", "Outputs"])  # noqa: E731
    if rng.random() < 0.5:
        bounds = {"m": rng.choice([1, 3, 5]), "k": rng.choice([3, 5, 6]), "n": 1}
        wl = mh.workload(bounds, mh.chain_matmul("Z", "A", "B", "Z", "k", "n"))
    else:
        bounds = {"p": rng.choice([1, 2, 3]), "r": rng.choice([3, 5, 6])}
        z = mh.access("Z", {"X": "p + r"}, True)
        wl = mh.workload(bounds, mh.einsum("Z", mh.access("A", ["p"]), mh.access("B", ["r"]), z))
    ar = mh.arch(
        mh.memory("DRAM", "inf", 50, 50),
        mh.memory(
            "RF",
            "inf",
            2,
            3,
            spatial=[mh.dim("G", 2, may_reuse=reuse())],
            tensors={"may_keep": "All"},
        ),
        mh.compute_unit("MAC", 1, spatial=[mh.dim("X", rng.choice([2, 3]), may_reuse=reuse())]),
    )
    path = tmp_path / f"first{seed}.yaml"
    path.write_text(mh.to_yaml({**ar, **wl, "mapper": {"imperfect_max_bound": 8}}))
    return load_spec(path)


def _least_count(spec, limit: int = 4000) -> float:
    """The least action count of any tensor at any memory over the case's mappings."""
    least = float("inf")
    for n, (mapping, wl, ae) in enumerate(mappings(spec, "Z", 8)):
        if n >= limit:
            break
        try:
            r = evaluate_mapping(spec, mapping, workload=wl, arch=ae, einsums=["Z"])
        except InvalidMappingError:
            continue
        for use in r.einsums["Z"].components.values():
            for acts in use.tensors.values():
                least = min([least, *(x.count for x in acts.values())])
    return least


def test_no_count_is_negative_under_nested_spreads(tmp_path):
    """The case that gave -5 reads (k over G, then over the MACs) and an output window
    spread unevenly: no count of any mapping is negative."""
    spec = _spec(tmp_path, {"m": 5, "k": 5, "n": 1}, ["m", "n"], "Outputs", 3)
    assert _least_count(spec) == 0.0
    spec = _spec(tmp_path, {"p": 3, "r": 5}, {"X": "p + r"}, "Nothing", 3)
    assert _least_count(spec) == 0.0


@pytest.mark.slow
@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 10_000))
def test_no_count_is_ever_negative(seed, tmp_path_factory):
    assert _least_count(_random_case(seed, tmp_path_factory.mktemp("first"))) >= 0.0
