"""Tables of identical Einsums: one table, renamed per Einsum, must read as its own.

A renamed table keeps its base's fused prefix ids and sees the base's interner through
a renaming view (:class:`fusemap.mapper.pmappings.renamed.RenamedInterner`); its copy levels are
the base's, renamed (:func:`fusemap.mapper.join.copies.copy_levels`). Both must give what
the renamed table's own rows give.
"""

from __future__ import annotations

import copy as copy_module

import numpy as np
import pytest

from fusemap.mapper.join.copies import copy_levels, same_view
from fusemap.mapper.pmappings.renamed import RenamedInterner
from fusemap.mapper.space.interner import PrefixInterner
from fusemap.mapper.space.prefix import Compatibility


def test_renamed_prefixes_by_hand():
    base = PrefixInterner()
    a = base.intern((("loop", "m", 4), ("back", "A", "GLB"), ("loop", "k", 2)))
    view = RenamedInterner(base, {"A": "B"}, {"m": "n"})
    assert view.prefixes[a] == (("loop", "n", 4), ("back", "B", "GLB"), ("loop", "k", 2))
    assert view.prefixes[0] == ()
    assert len(view.prefixes) == len(base.prefixes) == 4  # the steps: m; A; k
    assert view.prefixes[0:4:3] == [(), view.prefixes[a]]
    assert view.compatibility(a, frozenset({"B"}), {"B": "DRAM"}) == (
        Compatibility("B", "GLB", (("n", 4),)),
    )
    # The base grows (a merged table interns more): the view sees it.
    b = base.intern((("back", "A", "DRAM"),))
    assert view.prefixes[b] == (("back", "B", "DRAM"),)
    with pytest.raises(AssertionError, match="read only"):
        view.intern((("loop", "n", 2),))


def _renamed_compat(c: Compatibility, tensors: dict, var: dict) -> Compatibility:
    return Compatibility(
        tensors[c.tensor], c.backing, tuple((var.get(v, v), n) for v, n in c.loops)
    )


def test_renamed_rows_read_as_the_base_rows_renamed(renamed_chain_join):
    order, tables, wl = renamed_chain_join
    renamed = [t for t in tables.values() if "renamed_from" in t.__dict__]
    assert renamed
    for table in renamed:
        base, tensors, var = table.__dict__["renamed_from"]
        assert table.fusion is not None and base.fusion is not None
        assert len(table) == len(base) > 0
        for i in range(len(table)):
            want = sorted(
                (_renamed_compat(c, tensors, var) for c in base.fusion.compatibility(i)),
                key=lambda c: c.tensor,
            )
            assert list(table.fusion.compatibility(i)) == want
            seq = int(table.fusion.seq[i])
            loops = [(var.get(a, a), b) for k, a, b in base.fusion.interner.prefixes[seq]
                     if k == "loop"]  # fmt: skip
            assert [(a, b) for k, a, b in table.fusion.interner.prefixes[seq] if k == "loop"] == (
                loops
            )
            holders = table.results[int(table.template[i])].template.holders
            assert {h.tensor for h in holders if not h.virtual} <= set(
                wl.einsum(table.einsum).tensors
            )


def test_renamed_copy_levels_equal_their_own(renamed_chain_join):
    order, tables, wl = renamed_chain_join
    accessors = {t: [i for i, e in enumerate(order) if t in wl.einsum(e).tensors]
                 for t in wl.tensors}  # fmt: skip
    shareable = same_view(wl, accessors, order)
    checked, levels = 0, 0
    for j, name in enumerate(order):
        table = tables[name]
        if "renamed_from" not in table.__dict__:
            continue
        info = wl.einsum(name)
        multi = sorted(t for t in info.tensors if len(accessors[t]) > 1)
        later = {t for t in multi if accessors[t][0] < j}
        linked = copy_levels(table, wl, multi, set(shareable), later)
        alone = copy_module.copy(table)
        alone.__dict__.pop("renamed_from")
        alone.__dict__.pop("_copy_levels_cache", None)
        own = copy_levels(alone, wl, multi, set(shareable), later)
        assert linked.shared_keys == own.shared_keys
        for field in ("private", "shared", "depth", "rank"):
            assert np.array_equal(getattr(linked, field), getattr(own, field)), field
        checked += 1
        levels += int((linked.private > 0).sum() + (linked.shared > 0).sum())
    assert checked >= 1 and levels > 0  # some row keeps a copy of a tensor used twice
