"""EDP through the energy optimum (``mapper/edp_by_energy.py``): the latency floors by
hand, the proof where it holds (the EDP search without it finds the same EDP), and the
EDP search where it does not."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fusemap.mapper.ffm as ffm
from fusemap.examples import example_path
from fusemap.mapper.edp_by_energy import compute_floor, compute_floors, least_latency, proves_edp
from fusemap.mapper.ffm import map_workload
from fusemap.mapper.pmappings.generate import generate_pmappings
from fusemap.mapper.space.config import config_from_spec
from fusemap.spec.arch_eval import ArchEvaluator
from fusemap.spec.resolve import resolve_workload
from fusemap.spec.spec import load_spec


def _chain(n: int, m: int, sizes: list[int], buffer_kib: int = 256, arch=None):
    variables = {"N": n, "M": m, "SIZES": sizes, "BUFFER_KIB": buffer_kib}
    arch = arch or example_path("arch.yaml")
    return load_spec(arch, example_path("matmul_chain.yaml"), variables=variables)


def _fast_buffer(tmp_path):
    """``arch.yaml`` with a buffer 2,000 times faster (its MACs can all be kept busy)."""
    text = Path(example_path("arch.yaml")).read_text()
    assert text.count("throughput: 16e9 / 32") == 2
    path = tmp_path / "fast_buffer.arch.yaml"
    path.write_text(text.replace("throughput: 16e9 / 32", "throughput: 1e12"))
    return path


def _floors(spec):
    wl = resolve_workload(spec)
    arch = ArchEvaluator(spec, wl)
    return wl, arch, compute_floors(wl, arch)


def test_a_compute_floor_by_hand():
    # MM0: 64 x 256 x 256 = 4,194,304 MACs over the 16 MACs at 1e9 per second.
    wl, _, floors = _floors(_chain(2, 64, [256, 256]))
    assert floors == pytest.approx({"MM0": 4_194_304 / 16 / 1e9, "MM1": 4_194_304 / 16 / 1e9})


def test_the_proof_needs_each_einsum_at_its_floor_or_its_least():
    floors = {"A": 1.0, "B": 2.0, "C": 1.0}
    asked: list[str] = []

    def least(name: str) -> float:
        asked.append(name)
        return {"A": 0.5, "B": 2.5, "C": 1.5}[name]

    assert proves_edp({"A": 1.0 * (1 + 1e-10), "B": 2.5, "C": 1.0}, floors, least, ["A", "B", "C"])
    assert asked == ["B"]  # A and C are at their compute floors: no table asked
    asked.clear()
    order = ["C", "B", "A"]
    assert not proves_edp({"A": 1.0, "B": 2.5, "C": 1.6}, floors, least, order)
    assert asked == ["C"]  # C is above its least: B is not asked
    assert not proves_edp({"A": 1.0, "B": 2.5 * (1 + 1e-6), "C": 1.0}, floors, least, order)


@pytest.mark.slow
@settings(max_examples=8, deadline=None)
@given(
    m=st.sampled_from([8, 12, 16, 48]),
    k=st.sampled_from([4, 6, 16, 20]),
    n=st.sampled_from([2, 16, 24]),
)
def test_no_pmapping_is_faster_than_its_floor(m, k, n):
    """Every tile shape of every template (unpruned) takes at least the floor."""
    spec = _chain(1, m, [k, n])
    wl = resolve_workload(spec)
    arch = ArchEvaluator(spec, wl)
    info = wl.einsum("MM0")
    floor = compute_floor(info, arch, wl.n_instances * info.n_instances)
    table = generate_pmappings(spec, "MM0", prune=False, workload=wl, arch=arch)
    assert len(table) and table.latency.min() >= floor * (1 - 1e-12)


@pytest.mark.slow
@pytest.mark.parametrize(
    "n, m, sizes, kib, fast_buffer, proved",
    [
        (2, 64, [256, 256], 256, True, True),  # compute-bound: every MAC busy
        (2, 64, [256, 256], 256, False, False),  # the buffer's ports are the bound
        (3, 64, [128, 128, 64, 64], 4, False, False),  # a 4 KiB buffer
    ],
)
def test_edp_by_energy_agrees_with_the_edp_search(
    tmp_path, monkeypatch, n, m, sizes, kib, fast_buffer, proved
):
    spec = _chain(n, m, sizes, kib, _fast_buffer(tmp_path) if fast_buffer else None)
    fast = map_workload(spec, "edp")
    assert fast.statistics.edp_by_energy is proved and fast.objective == "edp"
    monkeypatch.setattr(ffm, "EDP_BY_ENERGY", False)
    slow = map_workload(spec, "edp")
    assert not slow.statistics.edp_by_energy
    a, b = fast.best.result, slow.best.result
    assert a.energy * a.latency == pytest.approx(b.energy * b.latency, rel=1e-9)
    wl, arch, floors = _floors(spec)
    assert floors is not None
    config = replace(config_from_spec(spec), fusion=True)
    for name, e in b.einsums.items():  # the floors are below the optimum's latencies
        assert e.latency >= floors[name] * (1 - 1e-12)
        assert e.latency >= least_latency(spec, wl.einsum(name), wl, arch, config) * (1 - 1e-12)
