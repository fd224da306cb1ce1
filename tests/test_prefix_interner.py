"""The prefix interner: ids built token by token (``extend``, as the tile-shape search
does) are the ids of the whole prefixes in canonical form, hosting marks included."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fusemap.mapper.prefix import HOSTING, PrefixInterner, canonical

TOKENS = [
    ("loop", "m", 4),
    ("loop", "n", 2),
    ("back", "T1", "GB"),
    ("back", "T2", "GB"),
    ("back", HOSTING, "GB"),
]


def test_a_mark_goes_first_in_its_run_of_nodes():
    run = (("loop", "m", 4), ("back", "T1", "GB"), ("back", HOSTING, "GB"))
    assert canonical(run) == (("loop", "m", 4), ("back", HOSTING, "GB"), ("back", "T1", "GB"))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(0, len(TOKENS) - 1), min_size=1, max_size=2), max_size=6))
def test_extending_token_by_token_gives_the_whole_prefixes_id(steps):
    grown, whole = PrefixInterner(), PrefixInterner()
    ids = np.zeros(1, dtype=np.int64)
    prefix: tuple = ()
    for step in steps:
        tokens = tuple(TOKENS[k] for k in step)
        ids = grown.extend(ids, [tokens], np.zeros(1, dtype=np.int64))
        prefix += tokens
        assert grown.prefixes[int(ids[0])] == canonical(prefix)
        assert grown.prefixes[whole.intern(prefix)] == whole.prefixes[whole.intern(prefix)]
        assert grown.intern(prefix) == int(ids[0])
