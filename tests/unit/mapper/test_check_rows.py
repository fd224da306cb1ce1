"""What the full-space check's first search records (``mapper/check_rows.py``): per
template, its rows' order-free keys with their least energy and latency, and which
templates a second search still needs once the semi-join has raised each key's cost."""

from __future__ import annotations

import pickle

import numpy as np

from fusemap.mapper.check_rows import KeysFound, RowCut

A = (("T1", "GB", (("m", 8, ""),)),)
B = (("T1", "GB", (("m", 2, ""), ("m", 8, ""))),)
C = (("T1", "DRAM", ()),)


def _found() -> KeysFound:
    """Template ``t1`` has rows of keys A (3 J, 30 s; then 2 J, 40 s) and B (5 J, 10 s),
    in two results; ``t2`` of C (1 J, 1 s) and A (4 J, 5 s)."""
    found = KeysFound()
    found.add(("t1",), [A, B], [3.0, 5.0], [30.0, 10.0])
    found.add(("t2",), [C, A], [1.0, 4.0], [1.0, 5.0])
    found.add(("t1",), [A], [2.0], [40.0])
    return found


def _as_dicts(per_template) -> dict:
    return {
        t: {int(n): (float(e), float(lat)) for n, e, lat in zip(*arrays, strict=True)}
        for t, arrays in per_template.items()
    }


def test_each_key_is_numbered_once_and_keeps_its_least_energy_and_latency_apart():
    found = _found()
    assert found.keys == [A, B, C]
    assert _as_dicts(found.per_template()) == {
        ("t1",): {0: (2.0, 30.0), 1: (5.0, 10.0)},
        ("t2",): {2: (1.0, 1.0), 0: (4.0, 5.0)},
    }
    assert found.least() == {A: (2.0, 5.0), B: (5.0, 10.0), C: (1.0, 1.0)}


def test_a_template_is_kept_if_one_of_its_keys_fits_once_raised():
    """Energy cut at 6 J. A raised by 3.5 J: t1's A (2 J) fits, t2's (4 J) does not; C
    and B not joinable: only t1. A raised by 4.5 J: none."""
    found, cut = _found(), RowCut("energy", 6.0)
    assert found.templates_kept({A: (3.5, 0.0)}, cut) == frozenset({("t1",)})
    assert found.templates_kept({A: (4.5, 0.0), B: (1.5, 0.0)}, cut) == frozenset()
    assert found.templates_kept({C: (5.0, 0.0)}, cut) == frozenset({("t2",)})


def test_latency_is_raised_too():
    """Latency cut at 20 s: t1's B (10 s) fits raised by 10 s, not by 11."""
    found, cut = _found(), RowCut("latency", 20.0)
    assert found.templates_kept({B: (0.0, 10.0)}, cut) == frozenset({("t1",)})
    assert found.templates_kept({B: (0.0, 11.0)}, cut) == frozenset()


def test_sent_from_a_worker_it_keeps_its_keys_and_costs():
    back = pickle.loads(pickle.dumps(_found()))
    assert back.keys == [A, B, C]
    assert back.least() == {A: (2.0, 5.0), B: (5.0, 10.0), C: (1.0, 1.0)}
    assert set(back.per_template()) == {("t1",), ("t2",)}
    assert all(isinstance(a, np.ndarray) for arrays in back.per_template().values() for a in arrays)


def test_keys_added_by_number_from_a_growing_list_are_looked_up_once():
    """A search adds keys by their number in its growing key list; the numbering is
    its own (first come), a key's costs are kept per template as by value, and a
    list that is not the last one is numbered afresh."""
    source = [B, A]
    found = KeysFound()
    found.add(("t1",), source, [3.0], [30.0], index=np.array([1]))
    source.append(C)
    found.add(("t1",), source, [5.0, 1.0], [10.0, 1.0], index=np.array([0, 2]))
    found.add(("t2",), source, [4.0], [5.0], index=np.array([1]))
    assert found.keys == [A, B, C]
    found.add(("t2",), [C, B], [0.5], [0.5], index=np.array([1]))  # another list
    assert found.keys == [A, B, C]
    assert _as_dicts(found.per_template()) == {
        ("t1",): {0: (3.0, 30.0), 1: (5.0, 10.0), 2: (1.0, 1.0)},
        ("t2",): {0: (4.0, 5.0), 1: (0.5, 0.5)},
    }
