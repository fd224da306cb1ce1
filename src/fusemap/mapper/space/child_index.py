"""The children of the prefix interner's trie (:mod:`.interner`): integer keys (a parent
id and a step id) to child ids.

A dict took about 100 bytes a child, most of the interner's memory when the check of
several fused loops per rank variable interns tens of millions of prefixes. Here the
children sit in one sorted pair of numpy arrays (16 bytes a child), and the ones added
since the last merge in a dict of at most :data:`DICT_UP_TO` (merged in when full, each
merge one pass over the arrays). A batch of keys is looked up with one ``searchsorted``;
one key with a dict lookup, then one ``searchsorted``. Up to :data:`DICT_UP_TO` children
the dict alone holds them (as fast as before for the tables' searches)."""

from __future__ import annotations

import numpy as np

DICT_UP_TO = 1 << 20
"""Children the dict holds before they are merged into the arrays (about 100 MB)."""


class ChildIndex:
    """Distinct integer keys to ids."""

    def __init__(self) -> None:
        self._keys = np.zeros(0, dtype=np.int64)  # sorted
        self._ids = np.zeros(0, dtype=np.int64)
        self._recent: dict[int, int] = {}  # keys not in the arrays

    @classmethod
    def of(cls, keys: np.ndarray, ids: np.ndarray) -> ChildIndex:
        """An index of distinct ``keys`` to ``ids``."""
        index = cls()
        if len(keys) <= DICT_UP_TO:
            index._recent = dict(zip(keys.tolist(), ids.tolist(), strict=True))
        else:
            order = np.argsort(keys, kind="stable")
            index._keys, index._ids = keys[order], ids[order]
        return index

    def __len__(self) -> int:
        return len(self._keys) + len(self._recent)

    def get(self, key: int) -> int | None:
        """The id of ``key``, if added."""
        got = self._recent.get(key)
        if got is not None or not len(self._keys):
            return got
        at = int(self._keys.searchsorted(key))
        if at < len(self._keys) and self._keys[at] == key:
            return int(self._ids[at])
        return None

    def find(self, keys: np.ndarray) -> np.ndarray:
        """The id of each of ``keys`` (-1 where not added)."""
        get = self._recent.get
        out = np.array([get(k, -1) for k in keys.tolist()], dtype=np.int64)
        if len(self._keys):
            at = np.minimum(self._keys.searchsorted(keys), len(self._keys) - 1)
            hit = self._keys[at] == keys
            out[hit] = self._ids[at[hit]]
        return out

    def add(self, keys: np.ndarray, ids: np.ndarray) -> None:
        """Add distinct new ``keys`` with their ``ids``."""
        self._recent.update(zip(keys.tolist(), ids.tolist(), strict=True))
        if len(self._recent) > DICT_UP_TO:
            self._merge()

    def add_one(self, key: int, q: int) -> None:
        """Add a new ``key`` with id ``q``."""
        self._recent[key] = q
        if len(self._recent) > DICT_UP_TO:
            self._merge()

    def _merge(self) -> None:
        """The dict's keys into the arrays (one pass over them)."""
        keys = np.fromiter(self._recent, dtype=np.int64, count=len(self._recent))
        ids = np.fromiter(self._recent.values(), dtype=np.int64, count=len(keys))
        self._recent = {}
        order = np.argsort(keys)
        keys, ids = keys[order], ids[order]
        at = self._keys.searchsorted(keys) + np.arange(len(keys))  # places in the merge
        old = np.ones(len(self._keys) + len(keys), dtype=bool)
        old[at] = False
        self._keys = _merged(self._keys, keys, at, old)
        self._ids = _merged(self._ids, ids, at, old)


def _merged(old: np.ndarray, new: np.ndarray, at: np.ndarray, where_old: np.ndarray):
    """``old`` with ``new`` at places ``at`` of the result (``where_old``: the others)."""
    out = np.empty(len(where_old), dtype=np.int64)
    out[where_old] = old
    out[at] = new
    return out
