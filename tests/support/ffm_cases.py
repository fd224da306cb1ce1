"""The FFM brute force's random small cases (tests/oracles/test_ffm_bruteforce.py): a
chain of 2-4 matmuls or one tensor feeding two Einsums, on a random 2- or 3-level arch
whose buffer is too small to keep every intermediate whole. Other tests reuse them."""

from __future__ import annotations

import random

from fusemap.spec.spec import load_spec
from tests.support.model_helpers import (
    arch,
    chain_matmul,
    compute_unit,
    memory,
    to_yaml,
    workload,
)


def _workload(rng: random.Random, shape: str) -> dict:
    if shape == "fanout":  # T1 feeds two Einsums
        b = {v: rng.choice([2, 2, 3]) for v in ("m", "n0", "n1", "n2", "n3")}
        es = [
            chain_matmul("E0", "T0", "W0", "T1", "n0", "n1"),
            chain_matmul("E1", "T1", "W1", "T2", "n1", "n2"),
            chain_matmul("E2", "T1", "W2", "T3", "n1", "n3"),
        ]
        return workload(b, *es)
    n = int(shape)
    small = [2] if n == 4 else [2, 2, 3]  # four Einsums: keep the brute force tractable
    b = {"m": rng.choice([2, 4])} | {f"n{i}": rng.choice(small) for i in range(n + 1)}
    es = [
        chain_matmul(f"E{i}", f"T{i}", f"W{i}", f"T{i + 1}", f"n{i}", f"n{i + 1}") for i in range(n)
    ]
    return workload(b, *es)


def _arch(
    rng: random.Random, gb_bits: int, small: bool, fanout: dict | None = None, dram_keeps="All"
) -> dict:
    tp = lambda: rng.choice(["inf", 2, 4])  # noqa: E731
    dram = rng.choice([20, 50, 100])
    nodes = [
        memory(
            "DRAM", "inf", dram, dram, read_tp=tp(), write_tp=tp(),
            tensors={"keep": "~Intermediates", "may_keep": dram_keeps},
        ),
        memory(
            "GB", gb_bits, 2, 2, read_tp=tp(), tensors={"may_keep": "All"},
            spatial=[fanout] if fanout else None,
        ),
    ]  # fmt: skip
    if rng.random() < 0.4 and not small:
        nodes.append(memory("RF", rng.choice([16, 24, 32]), 1, 1, tensors={"keep": "Outputs"}))
    nodes.append(compute_unit("MAC", 1, throughput=rng.choice([1, 2])))
    return arch(*nodes)


SHAPES = ["2", "2", "3", "fanout", "3", "4"]


def ffm_case(seed: int, tmp_path, fanout: bool = False, on_chip: bool = False):
    """A random case; ``fanout``: the buffer is one of 2 instances (a spatial fanout, so
    a fused tensor kept there lies below a spatial loop its users share); ``on_chip``:
    DRAM may not keep intermediates (every one is fused)."""
    rng = random.Random(1000 + seed + (500 if fanout else 0) + (700 if on_chip else 0))
    wl = _workload(rng, SHAPES[seed % len(SHAPES)])
    bounds = {v: int(s.split("<")[-1]) for v, s in wl["workload"]["iteration_space_shape"].items()}
    inter = [k for k in bounds if k.startswith("n")][1:-1]
    whole = sum(bounds["m"] * bounds[v] * 8 for v in inter)  # every intermediate, whole
    gb = max(24, int(whole * rng.choice([0.3, 0.5, 0.8])))
    path = tmp_path / f"ffm{seed}.yaml"
    small = SHAPES[seed % len(SHAPES)] == "4"
    spread = None
    if fanout:
        spread = {"name": "X", "fanout": 2, "may_reuse": rng.choice(["All", "Nothing"])}
        spread |= {"min_usage": 1} if rng.random() < 0.5 else {}
        gb = max(gb // 2, 24)  # each instance holds its own tiles
    arch_nodes = _arch(rng, gb, small, spread, "~Intermediates" if on_chip else "All")
    path.write_text(to_yaml({**arch_nodes, **wl, "mapper": {"imperfect": False}}))
    return load_spec(path)
