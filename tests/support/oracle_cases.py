"""The LoopTree oracle's random tiny cases (tests/oracles/test_looptree_oracle.py):
workloads of a few shapes (chains of 2 and 3 matmuls, a tensor read by two Einsums, a
tensor read two Einsums after it is written, shared inputs, ...), 2- and 3-level
architectures whose buffers cannot hold everything, and the spec of a seed. Other tests
build their cases from the same pieces."""

from __future__ import annotations

import math
import random

from fusemap.spec.spec import load_spec
from tests.support.model_helpers import (
    access,
    arch,
    compute_unit,
    einsum,
    memory,
    to_yaml,
    workload,
)

SHAPES = ("chain2", "chain2", "chain3", "fanout", "skip", "elementwise")


def mm(name, a, w, out, k, n, m="m", k_rank=None) -> dict:
    """``out[m, n] = a[m, k] * w[k, n]``; ``k_rank``: the rank ``k`` indexes, when it is
    not named after ``k`` (another Einsum names that rank's variable)."""
    if k_rank is None:
        ins = access(a, [m, k]), access(w, [k, n])
    else:
        ins = access(a, {m.upper(): m, k_rank: k}), access(w, {k_rank: k, n.upper(): n})
    return einsum(name, *ins, access(out, [m, n], output=True))


def product(name, a, b, out) -> dict:
    """An elementwise product over ``m`` and ``n``."""
    return einsum(name, access(a, ["m", "n"]), access(b, ["m", "n"]),
                  access(out, ["m", "n"], output=True))  # fmt: skip


def random_workload(rng: random.Random, shape: str, largest: int) -> dict:
    """The Einsums of ``shape`` and their rank sizes, each at most ``largest``."""
    small = [2, 2, 3]
    if shape == "chain2":
        b = {"m": rng.choice([2, 3, 4]), "n0": rng.choice(small), "n1": rng.choice([2, 3, 4])}
        b["n2"] = rng.choice(small)
        es = [mm("E0", "T0", "W0", "T1", "n0", "n1"), mm("E1", "T1", "W1", "T2", "n1", "n2")]
    elif shape == "chain3":
        b = {"m": 2, "n0": 2, "n1": rng.choice([2, 3]), "n2": 2, "n3": 2}
        es = [mm(f"E{i}", f"T{i}", f"W{i}", f"T{i + 1}", f"n{i}", f"n{i + 1}") for i in range(3)]
    elif shape == "fanout":  # T1 is read by E1 and E2
        b = {"m": 2, "n0": 2, "n1": rng.choice([2, 3]), "n2": 2, "n3": 2}
        es = [
            mm("E0", "T0", "W0", "T1", "n0", "n1"),
            mm("E1", "T1", "W1", "T2", "n1", "n2"),
            mm("E2", "T1", "W2", "T3", "n1", "n3"),
        ]
    elif shape == "skip":  # A is written by E0 and read by E2, after E1
        b = {"m": 2, "n": rng.choice([2, 3]), "k": 2}
        es = [
            mm("E0", "X", "W0", "A", "k", "n"),
            mm("E1", "Y", "W1", "B", "k", "n"),
            product("E2", "A", "B", "C"),
        ]
    elif shape == "shared_input":  # X is read by E0 and E1, whose outputs E2 multiplies
        b = {"m": rng.choice([2, 3]), "k": 2, "n": rng.choice([2, 3])}
        es = [
            mm("E0", "X", "W0", "A", "k", "n"),
            mm("E1", "X", "W1", "B", "k", "n"),
            product("E2", "A", "B", "C"),
        ]
    elif shape == "two_inputs":  # X and W are both read by E0 and E1 (shared copies of both)
        b = {"m": rng.choice([2, 3]), "k": 2, "n": 2}
        es = [
            mm("E0", "X", "W", "A", "k", "n"),
            mm("E1", "X", "W", "B", "k", "n"),
            product("E2", "A", "B", "C"),
        ]
    elif shape == "input_renamed":  # shared_input, E1 naming X's second rank j, not k
        b = {"m": rng.choice([2, 3]), "k": 2, "j": 2, "n": rng.choice([2, 3])}
        es = [
            mm("E0", "X", "W0", "A", "k", "n"),
            mm("E1", "X", "W1", "B", "j", "n", k_rank="K"),
            product("E2", "A", "B", "C"),
        ]
    elif shape == "chain_renamed":  # chain2, E1 naming T1's second rank j, not n1
        b = {"m": rng.choice([2, 3]), "n0": 2, "n1": 2, "j": 2, "n2": rng.choice([2, 3])}
        es = [
            mm("E0", "T0", "W0", "T1", "n0", "n1"),
            mm("E1", "T1", "W1", "T2", "j", "n2", k_rank="N1"),
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
            product("E2", "A", "B", "C"),
        ]
    elif shape == "input_skip":  # X is read by E0 and by E2, after E1 (which reads A)
        b = {"m": rng.choice([2, 3]), "k": 2, "n": 2}
        es = [
            mm("E0", "X", "W0", "A", "k", "n"),
            product("E1", "A", "S", "B"),
            einsum(
                "E2",
                access("X", ["m", "k"]),
                access("B", ["m", "n"]),
                access("C", ["m", "n"], output=True),
            ),
        ]
    elif shape == "scalar":  # a dot product S[] that scales a vector (FuseMax cascade 1)
        b = {"k": rng.choice([2, 3, 4]), "n": rng.choice([2, 3])}
        es = [
            einsum("E0", access("X", ["k"]), access("W", ["k"]), access("S", [], output=True)),
            einsum("E1", access("S", []), access("Y", ["n"]), access("B", ["n"], output=True)),
        ]
    elif shape == "sum_all":  # a product summed to a scalar S[] (no output rank left)
        b = {"m": rng.choice([2, 3]), "n": rng.choice([2, 3])}
        es = [
            product("E0", "X", "W", "A"),
            einsum("E1", access("A", ["m", "n"]), access("S", [], output=True)),
        ]
    elif shape == "scalar_chain":  # a dot product, a scalar-only Einsum (no rank variable), a scale
        b = {"k": rng.choice([2, 3])}
        es = [
            einsum("E0", access("X", ["k"]), access("W", ["k"]), access("S", [], output=True)),
            einsum("E1", access("S", []), access("T", [], output=True)),
            einsum("E2", access("T", []), access("Y", ["k"]), access("B", ["k"], output=True)),
        ]
    else:  # a matmul, then an elementwise product with a third tensor
        b = {"m": rng.choice([2, 3, 4]), "k": 2, "n": rng.choice([2, 3, 4])}
        es = [
            mm("E0", "X", "W", "A", "k", "n"),
            einsum(
                "E1",
                access("A", ["m", "n"]),
                access("S", ["m", "n"]),
                access("B", ["m", "n"], output=True),
            ),  # fmt: skip
        ]
    b = {v: min(n, largest) for v, n in b.items()}
    return workload(b, *es), b


# Keep rules that name memories (`keep: ~DRAM`: what DRAM does not hold, per mapping):
# the buffer's, and on three levels the RF's.
GB_RULES = ({"keep": "~DRAM"}, {"keep": "~DRAM.tensors", "may_keep": "All"})
RF_RULES = ({"keep": "~GB", "may_keep": "All"}, {"keep": "~(DRAM | GB)"})


def random_arch(
    rng: random.Random, levels: int, gb_bits: int, spatial: dict | None = None, rules: bool = False
) -> dict:
    """DRAM, a buffer, on three levels an RF, and a MAC; ``rules``: the buffer's and the
    RF's keep rules name the memories above."""
    tp = lambda: rng.choice(["inf", 2, 4])  # noqa: E731
    # With rules, DRAM may cost no more than the buffer: an intermediate may then best
    # pass through DRAM alone, which `keep: ~DRAM` must allow.
    dram = [1, 2, 50] if rules else [20, 50, 100]
    nodes = [
        memory(
            "DRAM",
            "inf",
            rng.choice(dram),
            rng.choice(dram),
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
            tensors=rng.choice(GB_RULES) if rules else {"may_keep": "All"},
            spatial=[spatial] if spatial else None,
        ),  # fmt: skip
    ]
    if levels == 3:
        rf = rng.choice(RF_RULES) if rules else {"may_keep": "All"}
        nodes.append(memory("RF", rng.choice([8, 16]), 0.5, 0.5, tensors=rf))
    nodes.append(compute_unit("MAC", rng.choice([1, 2]), throughput=rng.choice([1, 2])))
    return arch(*nodes)


def extent(expr: str, bounds: dict) -> int:
    """Extent of a rank indexed by a sum of rank variables."""
    return 1 + sum(bounds[v.strip()] - 1 for v in expr.split("+"))


def case_spec(seed: int, tmp_path, shape: str | None = None):
    rng = random.Random(seed)
    shape = shape or SHAPES[seed % len(SHAPES)]
    levels = 3 if seed % 5 == 4 and shape in ("chain2", "elementwise") else 2
    # Ranks of 2 where the trees multiply (a third memory level, three Einsums but in a
    # chain), else at most 3: the oracle stays within the CI budget.
    wl, bounds = random_workload(rng, shape, 2 if levels == 3 or shape in ("skip", "fanout") else 3)
    return write_case(rng, seed, tmp_path, wl, bounds, levels), shape


def write_case(rng, seed, tmp_path, wl, bounds, levels, spatial=None, rules=False):
    """The spec of workload ``wl`` on a random arch whose buffer may not hold it all."""
    sizes = {}
    for e in wl["workload"]["einsums"]:
        for a in e["tensor_accesses"]:
            proj = a["projection"]
            proj = proj.values() if isinstance(proj, dict) else proj
            sizes[a["name"]] = math.prod(extent(x, bounds) for x in proj)
    biggest = max(sizes.values()) * 8
    gb = rng.choice([biggest // 2, biggest, 2 * biggest])
    path = tmp_path / f"case{seed}.yaml"
    path.write_text(to_yaml({**random_arch(rng, levels, max(gb, 16), spatial, rules), **wl}))
    return load_spec(path)


def rule_spec(seed: int, tmp_path):
    """A random case whose buffer's (and RF's) keep rules name the memories above them
    (:data:`GB_RULES`, :data:`RF_RULES`): three levels on odd seeds."""
    rng = random.Random(9000 + seed)
    shape = SHAPES[seed % len(SHAPES)]
    levels = 3 if seed % 2 and shape in ("chain2", "elementwise") else 2
    wl, bounds = random_workload(rng, shape, 2 if levels == 3 or shape in ("skip", "fanout") else 3)
    return write_case(rng, seed, tmp_path, wl, bounds, levels, rules=True), shape


FANOUT_SHAPES = ("chain2", "elementwise", "fanout", "skip", "chain2", "chain3")


def fanout_spec(seed: int, tmp_path, shape: str | None = None):
    """A random case whose buffer is one of 2 instances (a spatial fanout): may_reuse
    All on even seeds, Nothing on odd ones; ``min_usage: 1`` on seeds 4k+2 and 4k+3 when
    every Einsum has a rank of even size (so the mapper's spatial loops, which divide
    their rank, reach it too: neither falls back). ``shape``: of :data:`SHAPES` or
    :func:`random_workload`'s others (default: by seed, of :data:`FANOUT_SHAPES`)."""
    rng = random.Random(7000 + seed)
    shape = shape or FANOUT_SHAPES[seed % len(FANOUT_SHAPES)]
    largest = 3 if shape in ("chain2", "elementwise") and seed % 3 else 2
    wl, bounds = random_workload(rng, shape, largest)
    spatial = {"name": "X", "fanout": 2, "may_reuse": "Nothing" if seed % 2 else "All"}
    even = all(
        any(bounds[v] % 2 == 0 for v in rank_variables(e)) for e in wl["workload"]["einsums"]
    )
    if seed % 4 in (2, 3) and even:
        spatial["min_usage"] = 1
    return write_case(rng, seed, tmp_path, wl, bounds, 2, spatial), shape


def rank_variables(einsum_yaml: dict) -> set:
    """The rank variables an Einsum's projections name."""
    out = set()
    for a in einsum_yaml["tensor_accesses"]:
        proj = a["projection"]
        for expr in proj.values() if isinstance(proj, dict) else proj:
            out |= {v.strip() for v in expr.split("+")}
    return out
