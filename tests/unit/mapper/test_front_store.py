"""Einsums equal up to tensor names but fused or hosted differently (a transformer's Q, K
and V projections) have separate pmapping tables, generated one after another in one
process: the later ones reuse the bottom-up fronts and the results of the templates that
fuse nothing of the first (mapper/suffix.py, ``FrontStore``). Their tables must be the
ones each would get alone, on random architectures.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from fusemap.mapper.ffm import map_workload
from fusemap.mapper.pmappings import tables
from fusemap.mapper.pmappings.generate import generate_pmappings
from fusemap.mapper.tiling import suffix
from fusemap.spec.spec import load_spec
from tests.support.marks import slow_except
from tests.support.model_helpers import access, einsum, to_yaml, workload
from tests.support.oracle_cases import mm, random_arch
from tests.unit.mapper.test_deferred_hosting import _config

SEEDS = range(6)
PROJECTIONS = ["P", "Q", "R"]


def _spec(seed: int, tmp_path):
    """X is read by three equal projections; S and T combine their outputs, so P is held
    across Q and R (P, Q and R fuse and host differently)."""
    rng = random.Random(700 + seed)
    b = {"m": rng.choice([2, 4]), "k": rng.choice([2, 3]), "n": rng.choice([2, 4])}
    es = [mm(e, "X", "W" + e, "T" + e, "k", "n") for e in PROJECTIONS]
    es.append(einsum("S", access("TP", ["m", "n"]), access("TQ", ["m", "n"]),
                     access("S", ["m", "n"], output=True)))  # fmt: skip
    es.append(einsum("T", access("S", ["m", "n"]), access("TR", ["m", "n"]),
                     access("T", ["m", "n"], output=True)))  # fmt: skip
    a = b["m"] * b["n"] * 8
    arch = random_arch(rng, 2 + seed % 2, rng.choice([a, 2 * a, 3 * a]))
    path = tmp_path / f"qkv{seed}.yaml"
    path.write_text(to_yaml({**arch, **workload(b, *es)}))
    return load_spec(path)


def _stores(monkeypatch) -> list[suffix.FrontStore]:
    """Every store made from now on."""
    made: list[suffix.FrontStore] = []
    init = suffix.FrontStore.__init__

    def recorded(self, *args):
        init(self, *args)
        made.append(self)

    monkeypatch.setattr(suffix.FrontStore, "__init__", recorded)
    return made


def _rows(table) -> np.ndarray:
    """A table's rows as sorted (energy, reservations...) tuples."""
    cols = [table.energy] + [table.reservations[m] for m in sorted(table.reservations)]
    return np.array(sorted(zip(*(c.tolist() for c in cols), strict=True)))


@pytest.mark.parametrize("seed", slow_except(SEEDS, fast=[2, 4]))
def test_tables_made_with_a_store_are_those_made_alone(seed, tmp_path, monkeypatch):
    spec = _spec(seed, tmp_path)
    wl, arch, config = _config(spec)
    stores = _stores(monkeypatch)
    together = tables._generate_kind(spec, PROJECTIONS, "energy", config, None, True, wl, arch)
    (store,) = stores
    for table in together:
        alone = generate_pmappings(
            spec, table.einsum, objective="energy", config=config, workload=wl, arch=arch,
            only=tables._unmarked, with_floors=True,
        )  # fmt: skip
        assert len(table) == len(alone), table.einsum
        np.testing.assert_allclose(_rows(table), _rows(alone), rtol=1e-12)
        assert table.floors == pytest.approx(alone.floors, rel=1e-12)
        own = set(wl.einsum(table.einsum).tensors)
        for result in table.results:  # reused results are renamed to this Einsum
            assert result.template.einsum == table.einsum
            assert {h.tensor for h in result.template.holders if not h.virtual} <= own
            assert set(result.relevance) <= own
    assert store.alone_hits > 0, "Q and R reuse P's templates that fuse nothing"


@pytest.mark.slow
def test_some_fronts_are_reused(tmp_path, monkeypatch):
    """The seeds above exercise the fronts too."""
    stores = _stores(monkeypatch)
    for seed in SEEDS:
        spec = _spec(seed, tmp_path)
        wl, arch, config = _config(spec)
        tables._generate_kind(spec, PROJECTIONS, "energy", config, None, True, wl, arch)
    assert sum(s.hits for s in stores) > 0


@pytest.mark.slow
def test_an_einsum_of_another_shape_reuses_nothing(tmp_path):
    spec = _spec(0, tmp_path)
    wl, arch, config = _config(spec)
    store = suffix.FrontStore()
    kw = dict(objective="energy", config=config, workload=wl, arch=arch, fronts=store)
    generate_pmappings(spec, "P", **kw)
    assert store.fronts or store.alone
    generate_pmappings(spec, "S", **kw)
    generate_pmappings(spec, "T", **kw)
    assert store.hits == store.alone_hits == 0


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS[:3])
def test_the_optimum_is_the_same_with_one_worker_or_two(seed, tmp_path):
    spec = _spec(seed, tmp_path)
    one = map_workload(spec, "energy", jobs=1)
    two = map_workload(spec, "energy", jobs=2)
    assert one.best.result.energy == two.best.result.energy
