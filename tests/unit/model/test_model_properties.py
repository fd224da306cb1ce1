"""Property tests: random small matmuls, random (valid) mappings on 2- and 3-level arches.

Sizes are 1..8 (primes included), tile shapes are any value up to the current extent
(non-divisors included), storage nodes hold random subsets of the tensors in random
order, and a spatial loop over a fanout (just above the MAC or above the Register) is
added when the arch has one.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.support.marks import examples
from tests.support.model_helpers import (
    arch,
    compute,
    compute_unit,
    container,
    dim,
    mapping,
    matmul,
    memory,
    run,
    spatial,
    storage,
    temporal,
)

MM = "MainMemory"
TENSORS = ("A", "B", "Z")
IRRELEVANT = {"A": "n", "B": "m", "Z": "k"}  # Z[m, n] = A[m, k] * B[k, n]
EXAMPLES = int(os.environ.get("FUSEMAP_PROPERTY_EXAMPLES", "50"))
"""Examples of each property in the slow set (5 in the fast set)."""
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _arch(levels: list[str], fanout: tuple[int, str] | None) -> dict:
    """MainMemory -> levels -> MAC; the PE fanout sits just above ``fanout[1]``."""
    nodes = [memory(MM, read=3, write=4, read_tp=5, write_tp=5)]
    for i, name in enumerate([*levels, "MAC"]):
        if fanout and fanout[1] == name:
            nodes.append(container("PE", dim("X", fanout[0])))
        if name == "MAC":
            break
        e = 2.0 / (i + 1)
        nodes.append(
            memory(
                name,
                read=e,
                write=e + 0.5,
                read_tp=4,
                write_tp=2,
                leak_power=0.01 * (i + 1),
                area=1,
            )
        )
    nodes.append(compute_unit("MAC", 0.5, 1, leak_power=0.001, area=0.1))
    return arch(*nodes)


@st.composite
def scenarios(draw):
    """(sizes, levels, fanout, mapping nodes) of a valid single-matmul mapping.

    ``fanout`` is None or (instances, the node the PE container sits above).
    """
    sizes = {v: draw(st.integers(1, 8), label=v) for v in ("m", "k", "n")}
    levels = ["GlobalBuffer"] + (["Register"] if draw(st.booleans()) else [])
    fanout = None
    if draw(st.booleans()):
        fanout = (draw(st.sampled_from([2, 3, 4, 8])), draw(st.sampled_from(levels[1:] + ["MAC"])))
    shape = dict(sizes)
    nodes: list = [storage(MM, *draw(st.permutations(TENSORS)))]

    def loop(v: str, low: int, high: int) -> None:
        t = draw(st.integers(low, high), label=f"tile {v}")
        nodes.append(temporal(v, t))
        shape[v] = t

    def spread(below: str) -> None:
        """Finish one rank variable with a spatial loop (no loop on it may follow)."""
        if not fanout or fanout[1] != below:
            return
        v = draw(st.sampled_from(sorted(shape)), label="spatial variable")
        target = draw(st.integers(1, min(fanout[0], shape[v])))
        while shape[v] > target:
            loop(v, target, shape[v] - 1)
        nodes.append(spatial(v, 1))
        shape[v] = 1

    for level in levels:
        for _ in range(draw(st.integers(0, 2))):
            v = draw(st.sampled_from(sorted(shape)))
            loop(v, 1, shape[v])  # may be a one-iteration loop
        spread(level)
        held = draw(st.lists(st.sampled_from(TENSORS), unique=True, max_size=3))
        if held:
            nodes.append(storage(level, *held))
    spread("MAC")
    # Final loops: bring every rank variable down to 1.
    while any(shape[v] > 1 for v in shape):
        v = draw(st.sampled_from(sorted(x for x in shape if shape[x] > 1)))
        loop(v, 1, shape[v] - 1)
    nodes.append(compute("Z"))
    return sizes, levels, fanout, nodes


def _run(tmp_path: Path, scenario, nodes=None):
    sizes, levels, fanout, base = scenario
    return run(
        tmp_path,
        _arch(levels, fanout),
        matmul(sizes["m"], sizes["k"], sizes["n"]),
        mapping(nodes if nodes is not None else base),
    )


def _all_counts(result):
    for e in result.einsums.values():
        for c in e.components.values():
            for a, r in c.actions.items():
                yield (e.name, c.name, a), r.count, r.energy
            for t, acts in c.tensors.items():
                for a, r in acts.items():
                    yield (e.name, c.name, t, a), r.count, r.energy


@pytest.mark.parametrize("examples", examples(EXAMPLES, few=5))
def test_non_negative_and_compute_count(tmp_path, examples):
    @settings(SETTINGS, max_examples=examples)
    @given(scenario=scenarios())
    def check(scenario):
        r = _run(tmp_path, scenario)
        sizes = scenario[0]
        assert r.energy >= 0
        assert r.latency >= 0
        for key, count, energy in _all_counts(r):
            assert count >= -1e-9, key
            assert energy >= -1e-9, key
        ops = math.prod(sizes.values())
        assert r.count("MAC", "compute") == ops
        assert r.einsums["Z"].operations == ops
        # The MAC is never faster than ops / instances at throughput 1.
        fanout = scenario[2][0] if scenario[2] else 1
        assert r.einsums["Z"].components["MAC"].latency >= ops / fanout - 1e-9
        assert r.latency >= ops / fanout - 1e-9

    check()


@pytest.mark.parametrize("examples", examples(EXAMPLES, few=5))
def test_energy_sums(tmp_path, examples):
    @settings(SETTINGS, max_examples=examples)
    @given(scenario=scenarios())
    def check(scenario):
        r = _run(tmp_path, scenario)
        by_einsum = sum(e.energy for e in r.einsums.values())
        by_component = sum(c.energy for c in r.components.values())
        assert r.energy == pytest.approx(by_einsum, rel=1e-12, abs=1e-12)
        assert r.energy == pytest.approx(by_component, rel=1e-12, abs=1e-12)
        for e in r.einsums.values():
            assert e.energy == pytest.approx(sum(c.energy for c in e.components.values()))
            assert e.latency == pytest.approx(max(c.latency for c in e.components.values()))
            for c in e.components.values():
                dynamic = sum(a.energy for a in c.actions.values())
                assert c.energy == pytest.approx(dynamic + c.leak_energy)
                assert c.leak_energy == pytest.approx(r.components[c.name].leak_power * e.latency)

    check()


def _holders(nodes):
    """(index, tensor, component) of every storage entry below MainMemory."""
    out = []
    for i, n in enumerate(nodes):
        if n.tag == "Storage" and n["component"] != MM:
            out += [(i, t, n["component"]) for t in n["tensors"]]
    return out


def _parent(nodes, index, tensor):
    """Component of the closest holder of ``tensor`` above ``nodes[index]``."""
    for n in reversed(nodes[:index]):
        if n.tag == "Storage" and tensor in n["tensors"]:
            return n["component"]
    raise AssertionError("MainMemory holds every tensor")


def _extent_at(nodes, index, sizes, v):
    """Extent of rank variable ``v`` at ``nodes[index]`` and the tile of the next loop on v."""
    extent = sizes[v]
    for n in nodes[:index]:
        if n.tag in ("Temporal", "Spatial") and n["rank_variable"] == v:
            extent = n["tile_shape"]
    below = [
        n["tile_shape"]
        for n in nodes[index:]
        if n.tag in ("Temporal", "Spatial") and n["rank_variable"] == v
    ]
    return extent, (below[0] if below else 1)


@pytest.mark.parametrize("examples", examples(EXAMPLES, few=5))
def test_irrelevant_loop_never_lowers_parent_reads(tmp_path, examples):
    @settings(SETTINGS, max_examples=examples)
    @given(scenario=scenarios(), data=st.data())
    def check(scenario, data):
        sizes, _, _, nodes = scenario
        candidates = []
        for i, t, _ in _holders(nodes):
            v = IRRELEVANT[t]
            extent, next_tile = _extent_at(nodes, i, sizes, v)
            if extent > next_tile:  # room for a loop that keeps the mapping valid
                candidates.append((i, t, v, extent, next_tile))
        if not candidates:
            event("no irrelevant loop fits")
            return
        i, t, v, extent, next_tile = data.draw(st.sampled_from(candidates))
        tile = data.draw(st.integers(next_tile, extent - 1), label="inserted tile")
        parent = _parent(nodes, i, t)
        before = _run(tmp_path, scenario).count(parent, "read", tensor=t)
        changed = nodes[:i] + [temporal(v, tile)] + nodes[i:]
        after = _run(tmp_path, scenario, changed).count(parent, "read", tensor=t)
        assert after >= before - 1e-9, (t, v, tile, before, after)
        if t != "Z":  # an input's largest tiles are now fetched at least twice each
            assert after > before, (t, v, tile, before, after)

    check()


@pytest.mark.parametrize("examples", examples(EXAMPLES, few=5))
def test_moving_storage_up_never_shrinks_tiles(tmp_path, examples):
    @settings(SETTINGS, max_examples=examples)
    @given(scenario=scenarios(), data=st.data())
    def check(scenario, data):
        _, _, _, nodes = scenario
        movable = [
            i
            for i, n in enumerate(nodes)
            if n.tag == "Storage" and n["component"] != MM and nodes[i - 1].tag == "Temporal"
        ]
        if not movable:
            event("no storage node below a loop")
            return
        i = data.draw(st.sampled_from(movable))
        component = nodes[i]["component"]
        before = _run(tmp_path, scenario)
        changed = nodes[: i - 1] + [nodes[i], nodes[i - 1]] + nodes[i + 1 :]
        after = _run(tmp_path, scenario, changed)
        assert after.components[component].usage_bits >= before.components[component].usage_bits
        # A bigger tile held across the loop is never fetched more often from its parent.
        for t in nodes[i]["tensors"]:
            parent = _parent(nodes, i, t)
            assert (
                after.count(parent, "read", tensor=t)
                <= before.count(parent, "read", tensor=t) + 1e-9
            ), t

    check()
