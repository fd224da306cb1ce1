"""The children of the prefix interner's trie (:mod:`.interner`): integer keys (a parent
id and a step id) to child ids.

A dict took about 100 bytes a child, most of the interner's memory when the check of
several fused loops per rank variable interns tens of millions of prefixes. Here keys
and ids sit in sorted numpy chunks (16 bytes a child), merged as they grow so there are
few to search (a chunk is merged into the one before it while that one is at most twice
its size: sizes fall geometrically, about log2 of the count of chunks), and a batch of
keys is looked up with one ``searchsorted`` per chunk. Keys added one at a time wait in
a small dict until the next batch. Up to :data:`DICT_UP_TO` children everything stays in
a dict (fastest one at a time: the tables' searches and their loop orders)."""

from __future__ import annotations

import numpy as np

PENDING = 4096
"""Keys added one at a time held in a dict before they become a chunk."""

DICT_UP_TO = 1 << 20
"""Children kept in a dict alone (about 100 MB), before chunks."""


class ChildIndex:
    """Distinct integer keys to ids."""

    def __init__(self) -> None:
        self._keys: list[np.ndarray] = []  # sorted, disjoint
        self._ids: list[np.ndarray] = []
        self._pending: dict[int, int] = {}

    @classmethod
    def of(cls, keys: np.ndarray, ids: np.ndarray) -> ChildIndex:
        """An index of distinct ``keys`` to ``ids``."""
        index = cls()
        if len(keys) <= DICT_UP_TO:
            index._pending = dict(zip(keys.tolist(), ids.tolist(), strict=True))
        else:
            order = np.argsort(keys, kind="stable")
            index._keys, index._ids = [keys[order]], [ids[order]]
        return index

    def __len__(self) -> int:
        return sum(map(len, self._keys)) + len(self._pending)

    def get(self, key: int) -> int | None:
        """The id of ``key``, if added."""
        got = self._pending.get(key)
        if got is not None:
            return got
        for keys, ids in zip(self._keys, self._ids, strict=True):
            at = int(np.searchsorted(keys, key))
            if at < len(keys) and keys[at] == key:
                return int(ids[at])
        return None

    def find(self, keys: np.ndarray) -> np.ndarray:
        """The id of each of ``keys`` (-1 where not added)."""
        if not self._keys:  # a dict alone
            get = self._pending.get
            return np.array([get(k, -1) for k in keys.tolist()], dtype=np.int64)
        self._flush()
        out = np.full(len(keys), -1, dtype=np.int64)
        for chunk, ids in zip(self._keys, self._ids, strict=True):
            at = np.minimum(np.searchsorted(chunk, keys), len(chunk) - 1)
            hit = chunk[at] == keys
            out[hit] = ids[at[hit]]
        return out

    def add(self, keys: np.ndarray, ids: np.ndarray) -> None:
        """Add distinct new ``keys`` (sorted) with their ``ids``."""
        if not len(keys):
            return
        if not self._keys and len(self._pending) + len(keys) <= DICT_UP_TO:
            self._pending.update(zip(keys.tolist(), ids.tolist(), strict=True))
            return
        self._flush()
        self._keys.append(np.asarray(keys, dtype=np.int64))
        self._ids.append(np.asarray(ids, dtype=np.int64))
        self._merge()

    def _merge(self) -> None:
        """Merge the last chunk into the one before while that is at most twice its size."""
        while len(self._keys) > 1 and len(self._keys[-2]) <= 2 * len(self._keys[-1]):
            keys_b, ids_b = self._keys.pop(), self._ids.pop()
            keys_a, ids_a = self._keys.pop(), self._ids.pop()
            merged = np.concatenate([keys_a, keys_b])
            order = np.argsort(merged, kind="stable")
            self._keys.append(merged[order])
            self._ids.append(np.concatenate([ids_a, ids_b])[order])

    def add_one(self, key: int, q: int) -> None:
        """Add a new ``key`` with id ``q``."""
        self._pending[key] = q
        if len(self._pending) >= (PENDING if self._keys else DICT_UP_TO):
            self._flush()

    def _flush(self) -> None:
        """The dict's keys into a chunk."""
        if self._pending:
            keys = np.fromiter(self._pending, dtype=np.int64, count=len(self._pending))
            ids = np.fromiter(self._pending.values(), dtype=np.int64, count=len(keys))
            self._pending = {}
            order = np.argsort(keys)
            self._keys.append(keys[order])
            self._ids.append(ids[order])
            self._merge()
