"""FFM against every LoopTree: the mapper's optimum equals the independent oracle's.

The oracle (``tests/looptree_oracle.py``) enumerates whole LoopTrees from the LoopTree
grammar and scores each with the model; it shares no code with the mapper. Random tiny
workloads (chains of 2 and 3 matmuls, a tensor read by two Einsums, a tensor read two
Einsums after it is written, a workload input read by two Einsums, ranks of 2 and 3, of
2 with three memory levels and in the fanout and skip shapes; and the shared-copy
shapes below), 2- and 3-level architectures whose buffers cannot hold everything:
FFM's energy, latency and EDP optima must equal the oracle's, and the
mapping FFM returns must score, in the model, what FFM reports. The cases are
independent: ``make test-oracle`` runs them two at a time (pytest-xdist).

Fanout cases (``_fanout_spec``, 16 seeds): the buffer is one of 2 instances (a spatial
fanout, ``may_reuse`` All or Nothing, ``min_usage: 1`` on some), so the oracle's trees
have spatial loops, shared by fused Einsums above a split (spatial fusion) or not, above
every node in the fanout's memory on their paths (each instance holds its own tiles: the
mapspace). They run again with spatial loops also below such a node, which the model
accepts (it then counts the node's traffic once for all instances, bypassing
``may_reuse``, and warns): FFM must equal that optimum or the better tree must be such a
tree.

Where the oracle finds a tree better than FFM's answer, the case is marked xfail
(strict: it fails once FFM finds the tree, so the mark must then go) with what FFM
misses; the mapper is not changed here.
"""

from __future__ import annotations

import math
import random

import pytest

from fusemap.mapper.ffm import map_workload
from fusemap.model.evaluate import evaluate_mapping
from fusemap.spec.spec import load_spec
from looptree_oracle import LoopTreeOracle
from model_helpers import access, arch, compute_unit, einsum, memory, to_yaml, workload

SHAPES = ("chain2", "chain2", "chain3", "fanout", "skip", "elementwise")


def _mm(name, a, w, out, k, n, m="m", k_rank=None) -> dict:
    """``out[m, n] = a[m, k] * w[k, n]``; ``k_rank``: the rank ``k`` indexes, when it is
    not named after ``k`` (another Einsum names that rank's variable)."""
    if k_rank is None:
        ins = access(a, [m, k]), access(w, [k, n])
    else:
        ins = access(a, {m.upper(): m, k_rank: k}), access(w, {k_rank: k, n.upper(): n})
    return einsum(name, *ins, access(out, [m, n], output=True))


def _product(name, a, b, out) -> dict:
    """An elementwise product over ``m`` and ``n``."""
    return einsum(name, access(a, ["m", "n"]), access(b, ["m", "n"]),
                  access(out, ["m", "n"], output=True))  # fmt: skip


def _workload(rng: random.Random, shape: str, largest: int) -> dict:
    """The Einsums of ``shape`` and their rank sizes, each at most ``largest``."""
    small = [2, 2, 3]
    if shape == "chain2":
        b = {"m": rng.choice([2, 3, 4]), "n0": rng.choice(small), "n1": rng.choice([2, 3, 4])}
        b["n2"] = rng.choice(small)
        es = [_mm("E0", "T0", "W0", "T1", "n0", "n1"), _mm("E1", "T1", "W1", "T2", "n1", "n2")]
    elif shape == "chain3":
        b = {"m": 2, "n0": 2, "n1": rng.choice([2, 3]), "n2": 2, "n3": 2}
        es = [_mm(f"E{i}", f"T{i}", f"W{i}", f"T{i + 1}", f"n{i}", f"n{i + 1}") for i in range(3)]
    elif shape == "fanout":  # T1 is read by E1 and E2
        b = {"m": 2, "n0": 2, "n1": rng.choice([2, 3]), "n2": 2, "n3": 2}
        es = [
            _mm("E0", "T0", "W0", "T1", "n0", "n1"),
            _mm("E1", "T1", "W1", "T2", "n1", "n2"),
            _mm("E2", "T1", "W2", "T3", "n1", "n3"),
        ]
    elif shape == "skip":  # A is written by E0 and read by E2, after E1
        b = {"m": 2, "n": rng.choice([2, 3]), "k": 2}
        es = [
            _mm("E0", "X", "W0", "A", "k", "n"),
            _mm("E1", "Y", "W1", "B", "k", "n"),
            _product("E2", "A", "B", "C"),
        ]
    elif shape == "shared_input":  # X is read by E0 and E1, whose outputs E2 multiplies
        b = {"m": rng.choice([2, 3]), "k": 2, "n": rng.choice([2, 3])}
        es = [
            _mm("E0", "X", "W0", "A", "k", "n"),
            _mm("E1", "X", "W1", "B", "k", "n"),
            _product("E2", "A", "B", "C"),
        ]
    elif shape == "two_inputs":  # X and W are both read by E0 and E1 (shared copies of both)
        b = {"m": rng.choice([2, 3]), "k": 2, "n": 2}
        es = [
            _mm("E0", "X", "W", "A", "k", "n"),
            _mm("E1", "X", "W", "B", "k", "n"),
            _product("E2", "A", "B", "C"),
        ]
    elif shape == "input_renamed":  # shared_input, E1 naming X's second rank j, not k
        b = {"m": rng.choice([2, 3]), "k": 2, "j": 2, "n": rng.choice([2, 3])}
        es = [
            _mm("E0", "X", "W0", "A", "k", "n"),
            _mm("E1", "X", "W1", "B", "j", "n", k_rank="K"),
            _product("E2", "A", "B", "C"),
        ]
    elif shape == "chain_renamed":  # chain2, E1 naming T1's second rank j, not n1
        b = {"m": rng.choice([2, 3]), "n0": 2, "n1": 2, "j": 2, "n2": rng.choice([2, 3])}
        es = [
            _mm("E0", "T0", "W0", "T1", "n0", "n1"),
            _mm("E1", "T1", "W1", "T2", "j", "n2", k_rank="N1"),
        ]
    elif shape == "input_window":  # shared_input, each reading X's M rank through a window
        b = {"m": 2, "r": 2, "s": 2, "k": 2, "n": rng.choice([2, 3])}
        es = [
            einsum(
                "E0",
                access("X", {"M": "m + r", "K": "k"}),
                access("W0", ["k", "n"]),
                access("A", ["m", "n"], output=True),
            ),
            einsum(
                "E1",
                access("X", {"M": "m + s", "K": "k"}),
                access("W1", ["k", "n"]),
                access("B", ["m", "n"], output=True),
            ),
            _product("E2", "A", "B", "C"),
        ]
    elif shape == "input_skip":  # X is read by E0 and by E2, after E1 (which reads A)
        b = {"m": rng.choice([2, 3]), "k": 2, "n": 2}
        es = [
            _mm("E0", "X", "W0", "A", "k", "n"),
            _product("E1", "A", "S", "B"),
            einsum(
                "E2",
                access("X", ["m", "k"]),
                access("B", ["m", "n"]),
                access("C", ["m", "n"], output=True),
            ),
        ]
    else:  # a matmul, then an elementwise product with a third tensor
        b = {"m": rng.choice([2, 3, 4]), "k": 2, "n": rng.choice([2, 3, 4])}
        es = [
            _mm("E0", "X", "W", "A", "k", "n"),
            einsum(
                "E1",
                access("A", ["m", "n"]),
                access("S", ["m", "n"]),
                access("B", ["m", "n"], output=True),
            ),  # fmt: skip
        ]
    b = {v: min(n, largest) for v, n in b.items()}
    return workload(b, *es), b


def _arch(rng: random.Random, levels: int, gb_bits: int, spatial: dict | None = None) -> dict:
    tp = lambda: rng.choice(["inf", 2, 4])  # noqa: E731
    nodes = [
        memory(
            "DRAM",
            "inf",
            rng.choice([20, 50, 100]),
            rng.choice([20, 50, 100]),
            read_tp=tp(),
            write_tp=tp(),
            tensors={"keep": "~Intermediates", "may_keep": "All"},
        ),  # fmt: skip
        memory(
            "GB",
            gb_bits,
            rng.choice([1, 2, 4]),
            rng.choice([1, 2, 4]),
            read_tp=tp(),
            tensors={"may_keep": "All"},
            spatial=[spatial] if spatial else None,
        ),  # fmt: skip
    ]
    if levels == 3:
        nodes.append(memory("RF", rng.choice([8, 16]), 0.5, 0.5, tensors={"may_keep": "All"}))
    nodes.append(compute_unit("MAC", rng.choice([1, 2]), throughput=rng.choice([1, 2])))
    return arch(*nodes)


def _extent(expr: str, bounds: dict) -> int:
    """Extent of a rank indexed by a sum of rank variables."""
    return 1 + sum(bounds[v.strip()] - 1 for v in expr.split("+"))


def _spec(seed: int, tmp_path, shape: str | None = None):
    rng = random.Random(seed)
    shape = shape or SHAPES[seed % len(SHAPES)]
    levels = 3 if seed % 5 == 4 and shape in ("chain2", "elementwise") else 2
    # Ranks of 2 where the trees multiply (a third memory level, three Einsums but in a
    # chain), else at most 3: the oracle stays within the CI budget.
    wl, bounds = _workload(rng, shape, 2 if levels == 3 or shape in ("skip", "fanout") else 3)
    return _write(rng, seed, tmp_path, wl, bounds, levels), shape


def _write(rng, seed, tmp_path, wl, bounds, levels, spatial=None):
    """The spec of workload ``wl`` on a random arch whose buffer may not hold it all."""
    sizes = {}
    for e in wl["workload"]["einsums"]:
        for a in e["tensor_accesses"]:
            proj = a["projection"]
            proj = proj.values() if isinstance(proj, dict) else proj
            sizes[a["name"]] = math.prod(_extent(x, bounds) for x in proj)
    biggest = max(sizes.values()) * 8
    gb = rng.choice([biggest // 2, biggest, 2 * biggest])
    path = tmp_path / f"case{seed}.yaml"
    path.write_text(to_yaml({**_arch(rng, levels, max(gb, 16), spatial), **wl}))
    return load_spec(path)


FANOUT_SHAPES = ("chain2", "elementwise", "fanout", "skip", "chain2", "chain3")


def _fanout_spec(seed: int, tmp_path):
    """A random case whose buffer is one of 2 instances (a spatial fanout): may_reuse
    All on even seeds, Nothing on odd ones; ``min_usage: 1`` on seeds 4k+2 and 4k+3 when
    every Einsum has a rank of even size (so the mapper's spatial loops, which divide
    their rank, reach it too: neither falls back)."""
    rng = random.Random(7000 + seed)
    shape = FANOUT_SHAPES[seed % len(FANOUT_SHAPES)]
    largest = 3 if shape in ("chain2", "elementwise") and seed % 3 else 2
    wl, bounds = _workload(rng, shape, largest)
    spatial = {"name": "X", "fanout": 2, "may_reuse": "Nothing" if seed % 2 else "All"}
    even = all(any(bounds[v] % 2 == 0 for v in _variables(e)) for e in wl["workload"]["einsums"])
    if seed % 4 in (2, 3) and even:
        spatial["min_usage"] = 1
    return _write(rng, seed, tmp_path, wl, bounds, 2, spatial), shape


def _variables(einsum_yaml: dict) -> set:
    """The rank variables an Einsum's projections name."""
    out = set()
    for a in einsum_yaml["tensor_accesses"]:
        proj = a["projection"]
        for expr in proj.values() if isinstance(proj, dict) else proj:
            out |= {v.strip() for v in expr.split("+")}
    return out


# The oracle's trees that FFM misses (oracle's optimum against FFM's), by seed: none
# since the join reserves a held tile once per run of Einsums sharing its level
# (seeds 28, 34, 40) and the fused prefixes carry every equivalent loop order of a gap
# (seeds 22, 23; mapper/gap_orders.py).
MISSED: dict[int, str] = {}
CASES = [
    pytest.param(
        seed,
        marks=pytest.mark.xfail(strict=True, reason=f"seed {seed}: FFM misses the optimum: {why}"),
    )
    if (why := MISSED.get(seed))
    else seed
    for seed in range(48)
]


# A workload input read by two Einsums that share loops: the optimum may keep one copy
# of it for both above a loop they share (seed 3: X in GB under ``m``, above ``n``; FFM
# found 3144 against 2768 before shared copies, ``mapper/copies.py``).
SHARED_INPUT = [0, 1, 2, 3, 4, 6, 7, 8]


@pytest.mark.oracle
@pytest.mark.parametrize("seed", SHARED_INPUT)
def test_ffm_equals_every_looptree_with_a_shared_input(seed, tmp_path):
    _check(*_spec(seed, tmp_path, "shared_input"))


# More shared copies: X's second rank named j by E1 (the loops the two share, over m
# and n, still cut one tile: seeds 0, 1 and 3 missed, 3144 against 2768 on seed 3,
# while copies.same_view compared the projections' variable names); X read through a
# window over a variable of each user's own (seed 0 missed, 1884 against 1752); X read
# again two Einsums later, after one that does not read it (a copy reserved at the
# users' last shared loop is then not formed, until 2026-11-25: the join now counts it
# for the Einsum between); T1's rank named apart by its two users; X and W both read by
# E0 and E1 (seeds 1 and 3 missed until 2026-11-25, 776 against 720 and 2292 against
# 1924: a later user could share one copy per gap only, its first node there).
SHARED_COPIES = [
    *[("input_renamed", seed) for seed in range(5)],
    *[("input_window", seed) for seed in range(4)],
    *[("input_skip", seed) for seed in (1, 3, 4, 6, 7, 8)],
    *[("chain_renamed", seed) for seed in range(4)],
    *[("two_inputs", seed) for seed in (0, 1, 3, 4)],
]


@pytest.mark.oracle
@pytest.mark.parametrize(("shape", "seed"), SHARED_COPIES)
def test_ffm_equals_every_looptree_sharing_copies(shape, seed, tmp_path):
    _check(*_spec(seed, tmp_path, shape))


# Seeds 25, 28 and 31 missed until 2026-11-25: an Einsum's own node between a shared
# spatial loop and a shared temporal loop below it (the other user's prefix had the
# spatial loop last in the gap; gap_orders now moves it). Seeds 7 and 34 missed until
# 2026-11-26: uneven spreads (m = 3 over 2 instances as 2 + 1, directly or below a
# temporal loop cutting 2 + 1; mapper/uneven.py).
FANOUT_SEEDS = [*range(12), 25, 28, 31, 34]


@pytest.mark.oracle
@pytest.mark.parametrize("seed", FANOUT_SEEDS)
def test_ffm_equals_every_looptree_below_a_fanout(seed, tmp_path):
    """The buffer is one of 2 instances (a spatial fanout): the oracle puts spatial loops
    anywhere a loop may go above every storage node of the fanout's memory on their paths
    (each instance holds its own tiles), and FFM (spatial fusion) must reach its optimum."""
    spec, _ = _fanout_spec(seed, tmp_path)
    _check(spec, None, spatial_under_holders=False)


@pytest.mark.oracle
@pytest.mark.parametrize("seed", range(12))
def test_trees_with_a_node_above_its_own_spread_only_bypass_may_reuse(seed, tmp_path):
    """Spatial loops also below a storage node of their own memory, which the model
    accepts: such a node's traffic with its parent is counted once for every instance.
    Those trees are outside the mapspace (docs/mapspace.md): where the oracle finds one
    better than FFM, the model warns about it (seeds 1, 3, 5, 7, 9 and 11, all with
    may_reuse Nothing, which such a node bypasses); elsewhere FFM equals it."""
    spec, _ = _fanout_spec(seed, tmp_path)
    best = LoopTreeOracle(spec, spatial_under_holders=True).solve()
    for objective in ("energy", "latency", "edp"):
        r = map_workload(spec, objective).best.result
        got = _value(r, objective)
        assert best[objective].value <= got * (1 + 1e-9)
        if best[objective].value < got * (1 - 1e-9):
            warned = evaluate_mapping(spec, best[objective].mapping).warnings
            assert any("over the instances that hold it" in w for w in warned), objective


@pytest.mark.oracle
@pytest.mark.parametrize("seed", CASES)
def test_ffm_equals_every_looptree(seed, tmp_path):
    _check(*_spec(seed, tmp_path))


def _value(result, objective: str) -> float:
    """A result's value of ``objective``."""
    e, lat = result.energy, result.latency
    return {"energy": e, "latency": lat, "edp": e * lat}[objective]


def _check(spec, _shape, spatial_under_holders: bool = True) -> None:
    best = LoopTreeOracle(spec, spatial_under_holders=spatial_under_holders).solve()
    for objective in ("energy", "latency", "edp"):
        outcome = map_workload(spec, objective)
        r = outcome.best.result
        got = _value(r, objective)
        assert got == pytest.approx(best[objective].value, rel=1e-9), (
            objective,
            got,
            best[objective].value,
            best[objective].mapping.to_yaml(),
        )
        again = evaluate_mapping(spec, outcome.best.mapping)
        assert again.energy == pytest.approx(r.energy, rel=1e-9)
        assert again.latency == pytest.approx(r.latency, rel=1e-9)
