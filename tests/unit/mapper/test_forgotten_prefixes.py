"""The check's first searches, made to hold less: one that gives up its table (past its
row bound) forgets the prefixes of every finished fork of the tile-shape search
(``tiling/search.py``, ``PrefixTrie.forget_from``: nothing refers to them once every
result is cut to no row), and every search bounds its rows a slice at a time
(``tiling/stage.py``, ``bounded_in_slices``). What a first search records, each
order-free key's least costs per template, must be what it records otherwise."""

from __future__ import annotations

import pytest

from fusemap.examples import example_path
from fusemap.mapper import full_space
from fusemap.mapper.ffm import map_workload
from fusemap.mapper.space.trie import PrefixTrie
from fusemap.mapper.tiling import search, stage
from fusemap.spec.spec import load_spec

CHAIN = {"N": 3, "M": 256, "SIZES": [64, 16, 64, 16], "BUFFER_KIB": 1}


def _keys_found(
    monkeypatch, most: int, forget_from: int = 1 << 62, bound_slice: int = 1 << 21
) -> tuple[dict, int, float]:
    """Per first search, per template, each key's least (energy, latency); the ids
    forgotten; the optimum's energy (first searches give up past ``most`` rows)."""
    monkeypatch.setattr(full_space, "SEMI_JOIN_ROWS", most)
    monkeypatch.setattr(search, "FORGET_FROM", forget_from)
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

    forgotten = [0]
    forget = PrefixTrie.forget_from

    def counting(trie, size):
        forgotten[0] += max(0, len(trie) - size)
        forget(trie, size)

    monkeypatch.setattr(full_space, "_search_in_worker", spy)
    monkeypatch.setattr(PrefixTrie, "forget_from", counting)
    spec = load_spec(example_path("arch.yaml"), example_path("matmul_chain.yaml"), variables=CHAIN)
    got = map_workload(spec, "energy", jobs=1)
    return found, forgotten[0], got.best.result.energy


@pytest.mark.slow
@pytest.mark.parametrize("most", [0, 40])
def test_a_given_up_first_search_records_the_same_keys_forgetting_its_prefixes(monkeypatch, most):
    """Given up at once (``most`` 0), or once it kept some rows, whose loop orders the
    prunes across templates had worked out: they are dropped with the table."""
    remembered, none, optimum = _keys_found(monkeypatch, most)
    forgetting, some, again = _keys_found(monkeypatch, most, forget_from=1)
    assert none == 0 and some > 0
    assert forgetting == remembered and sum(map(len, remembered.values())) > 0
    assert again == optimum


@pytest.mark.slow
def test_rows_bounded_a_few_at_a_time_keep_the_same_keys(monkeypatch):
    """The row bound given 3 rows at a time: the same keys, the same optimum."""
    whole, _, optimum = _keys_found(monkeypatch, 40)
    sliced, _, again = _keys_found(monkeypatch, 40, bound_slice=3)
    assert sliced == whole and sum(map(len, whole.values())) > 0
    assert again == optimum
