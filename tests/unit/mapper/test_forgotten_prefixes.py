"""The tile-shape search forgets the prefixes of every finished fork (the templates
agreeing on one stage; ``tiling/search.py``, ``PrefixTrie.forget_from``): results are
moved into the table's own interner as they finish, so only the fork's stages referred
to them. Its rows are bounded a slice at a time (``tiling/stage.py``,
``bounded_in_slices``), and once a first search keeps no row its templates finish
without their rows' reservations (``TemplateTiler.finish``). Every table, and what each first search of the check records
(each order-free key's least costs per template), must be what they are otherwise."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fusemap.examples import example_path
from fusemap.mapper import deferred_hosting, full_space
from fusemap.mapper.ffm import map_workload
from fusemap.mapper.pmappings import generate, ordered, tables
from fusemap.mapper.space.trie import PrefixTrie
from fusemap.mapper.tiling import search, stage, tiler
from fusemap.spec.spec import load_spec

CHAIN = {"N": 3, "M": 256, "SIZES": [64, 16, 64, 16], "BUFFER_KIB": 1}
NEVER = 1 << 62


def _searched(
    patch,
    most: int,
    forget_from: int = NEVER,
    bound_slice: int = 1 << 21,
    light: bool = True,
    arch: Path | str | None = None,
):
    """Every table made (its rows: energy, latency if known, prefix), per first search per
    template each key's least (energy, latency), the ids forgotten (``light``: the
    results finished without their rows' reservations) and the optimum's energy (first
    searches give up past ``most`` rows; ``arch``: not the example's)."""
    with patch.context() as monkeypatch:
        if not light:
            monkeypatch.setattr(ordered.PrunedAsFinished, "keeps_no_row", False)
        return _searched_patched(monkeypatch, most, forget_from, bound_slice, arch)


def _searched_patched(monkeypatch, most, forget_from, bound_slice, arch: Path | str | None):
    monkeypatch.setattr(full_space, "SEMI_JOIN_ROWS", most)
    monkeypatch.setattr(search, "FORGET_FROM", forget_from)
    monkeypatch.setattr(search, "FORGET_SHARE", 0.0 if forget_from < NEVER else 1.0)
    monkeypatch.setattr(stage, "BOUND_SLICE", bound_slice)
    real, found = full_space._search_in_worker, {}

    def spy(*args):
        out = real(*args)
        if args[6] is None:
            keys = out[2].keys
            found[args[1]] = {
                t: sorted((keys[n], e, lat) for n, e, lat in zip(*map(list, c), strict=True))
                for t, c in out[2].per_template().items()
            }
        return out

    made_tables, made = [], generate.generate_pmappings

    def table_rows(*args, **kwargs):
        table = made(*args, **kwargs)
        prefixes = table.fusion.interner.prefixes if table.fusion is not None else None
        seqs = table.fusion.seq.tolist() if table.fusion is not None else [0] * len(table)
        made_tables.append(
            sorted(
                (e, None if lat != lat else lat, prefixes[q] if prefixes is not None else ())
                for e, lat, q in zip(
                    table.energy.tolist(), table.latency.tolist(), seqs, strict=True
                )
            )
        )
        return table

    forgotten, light = [0], [0]
    forget, finish = PrefixTrie.forget_from, tiler.TemplateTiler.finish

    def counting(trie, size):
        forgotten[0] += max(0, len(trie) - size)
        forget(trie, size)

    def finishing(t, stages, rows_wanted=True):
        light[0] += not rows_wanted
        return finish(t, stages, rows_wanted)

    monkeypatch.setattr(tiler.TemplateTiler, "finish", finishing)
    monkeypatch.setattr(full_space, "_search_in_worker", spy)
    monkeypatch.setattr(full_space, "generate_pmappings", table_rows)
    for module in (generate, tables, deferred_hosting):
        monkeypatch.setattr(module, "generate_pmappings", table_rows)
    monkeypatch.setattr(PrefixTrie, "forget_from", counting)
    arch = arch or example_path("arch.yaml")
    spec = load_spec(arch, example_path("matmul_chain.yaml"), variables=CHAIN)
    got = map_workload(spec, "energy", jobs=1)
    return made_tables, found, (forgotten[0], light[0]), got.best.result.energy


@pytest.mark.slow
@pytest.mark.parametrize("most", [0, 40])
def test_a_search_forgetting_its_prefixes_makes_the_same_tables_and_keys(monkeypatch, most):
    """Forgetting after every fork or never; the first searches giving up at once
    (``most`` 0) or after 40 rows."""
    tables, keys, (none, _), optimum = _searched(monkeypatch, most)
    forgetting, same_keys, (some, _), again = _searched(monkeypatch, most, forget_from=1)
    assert none == 0 and some > 0
    assert forgetting == tables and len(tables) > 3
    assert same_keys == keys and sum(map(len, keys.values())) > 0
    assert again == optimum


@pytest.mark.slow
def test_rows_bounded_a_few_at_a_time_make_the_same_tables_and_keys(monkeypatch):
    """The row bound given 3 rows at a time: the same tables, keys and optimum."""
    tables, keys, _, optimum = _searched(monkeypatch, 40)
    sliced, same_keys, _, again = _searched(monkeypatch, 40, bound_slice=3)
    assert sliced == tables and same_keys == keys and sum(map(len, keys.values())) > 0
    assert again == optimum


@pytest.mark.slow
@pytest.mark.parametrize("leak", [True, False])
def test_results_finished_without_their_rows_make_the_same_tables_and_keys(
    monkeypatch, tmp_path, leak
):
    """Once a first search keeps no row (at once: most 0), its templates finish without
    their rows' reservations: the same tables, keys and optimum as finished whole. With
    leakage every search works out latency; without it (``arch.yaml`` made leak-free)
    energy alone."""
    arch = None
    if not leak:
        text = Path(example_path("arch.yaml")).read_text()
        arch = tmp_path / "arch.yaml"
        arch.write_text(re.sub(r"leak_power: \S+", "leak_power: 0", text))
        assert arch.read_text() != text
    tables, keys, (_, light), optimum = _searched(monkeypatch, 0, arch=arch)
    whole, same_keys, (_, none), again = _searched(monkeypatch, 0, light=False, arch=arch)
    assert light > 0 and none == 0
    assert whole == tables and same_keys == keys and sum(map(len, keys.values())) > 0
    assert again == optimum
