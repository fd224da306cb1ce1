"""The children of the prefix interner's trie (:mod:`.interner`): integer keys (a parent
id and a step id) to child ids.

A dict took about 100 bytes a child, most of the interner's memory when the check of
several fused loops per rank variable interns tens of millions of prefixes. Here the
children sit in one sorted pair of numpy arrays (12 bytes a child), and the ones added
since the last merge in a hash table of at most :data:`RECENT_UP_TO` (merged in when
full, each merge one pass over the arrays). A batch of keys is looked up with one
``searchsorted`` and one compiled pass over the table; the table is open addressing
with linear probing, compiled with numba (a dict's per-key inserts and lookups from
Python were 16% of GPT-3's QK check at batch 64)."""

from __future__ import annotations

import numba
import numpy as np

RECENT_UP_TO = 1 << 20
"""Children the hash table holds before they are merged into the arrays (its slots, at
most twice as many, take 16 bytes each), or an eighth of the arrays' if more: each merge
copies the arrays, so merges come less often as they grow (at most a quarter more
memory than the arrays alone)."""

EMPTY = -1  # a free slot (keys are at least 0)
ID = np.int32  # ids are 4-byte integers (the trie's, :data:`~.trie.MOST_IDS` at most)
SMALLEST = 6  # a table starts with 2**6 slots


@numba.njit(cache=True)
def _slot(key, bits):
    """The first slot of ``key`` in a table of ``2**bits`` slots (Fibonacci hashing)."""
    return np.int64((np.uint64(key) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(64 - bits))


@numba.njit(cache=True)
def _lookup(slot_keys, slot_ids, bits, keys, out) -> None:
    """``out[i]`` = the id of ``keys[i]`` where the table holds it (else left as is)."""
    mask = len(slot_keys) - 1
    for i in range(len(keys)):
        k = keys[i]
        s = _slot(k, bits)
        while slot_keys[s] != EMPTY:
            if slot_keys[s] == k:
                out[i] = slot_ids[s]
                break
            s = (s + 1) & mask


@numba.njit(cache=True)
def _lookup_one(slot_keys, slot_ids, bits, key) -> int:
    """The id of ``key`` where the table holds it, else -1."""
    mask = len(slot_keys) - 1
    s = _slot(key, bits)
    while slot_keys[s] != EMPTY:
        if slot_keys[s] == key:
            return slot_ids[s]
        s = (s + 1) & mask
    return -1


@numba.njit(cache=True)
def _insert(slot_keys, slot_ids, bits, keys, ids) -> None:
    """Put new distinct ``keys`` with their ``ids`` in the table (room is left)."""
    mask = len(slot_keys) - 1
    for i in range(len(keys)):
        s = _slot(keys[i], bits)
        while slot_keys[s] != EMPTY:
            s = (s + 1) & mask
        slot_keys[s] = keys[i]
        slot_ids[s] = ids[i]


@numba.njit(cache=True)
def _find_or_insert(slot_keys, slot_ids, bits, keys, out, next_id, new_keys) -> int:
    """Where ``out[i]`` is -1: the id of ``keys[i]`` in the table, inserted with the next
    id where absent (ids given in the keys' order, the new keys written to
    ``new_keys``); the number inserted (room is left)."""
    mask = len(slot_keys) - 1
    count = 0
    for i in range(len(keys)):
        if out[i] >= 0:
            continue
        k = keys[i]
        s = _slot(k, bits)
        while True:
            held = slot_keys[s]
            if held == EMPTY:
                slot_keys[s] = k
                slot_ids[s] = next_id + count
                out[i] = next_id + count
                new_keys[count] = k
                count += 1
                break
            if held == k:
                out[i] = slot_ids[s]
                break
            s = (s + 1) & mask
    return count


class ChildIndex:
    """Distinct integer keys to ids."""

    def __init__(self) -> None:
        self._keys = np.zeros(0, dtype=np.int64)  # sorted
        self._ids = np.zeros(0, dtype=ID)
        self._empty_table(SMALLEST)  # keys not in the arrays

    def _empty_table(self, bits: int) -> None:
        self._bits = bits
        self._slot_keys = np.full(1 << bits, EMPTY, dtype=np.int64)
        self._slot_ids = np.zeros(1 << bits, dtype=ID)
        self._recent = 0

    @classmethod
    def of(cls, keys: np.ndarray, ids: np.ndarray) -> ChildIndex:
        """An index of distinct ``keys`` to ``ids``."""
        index = cls()
        if len(keys) <= RECENT_UP_TO:
            index.add(keys, ids)
        else:
            order = np.argsort(keys, kind="stable")
            index._keys, index._ids = keys[order], ids[order].astype(ID)
        return index

    def __len__(self) -> int:
        return len(self._keys) + self._recent

    def get(self, key: int) -> int | None:
        """The id of ``key``, if added."""
        if self._recent:
            got = _lookup_one(self._slot_keys, self._slot_ids, self._bits, key)
            if got >= 0:
                return got
        if not len(self._keys):
            return None
        at = int(self._keys.searchsorted(key))
        if at < len(self._keys) and self._keys[at] == key:
            return int(self._ids[at])
        return None

    def find(self, keys: np.ndarray) -> np.ndarray:
        """The id of each of ``keys`` (-1 where not added)."""
        keys = np.ascontiguousarray(keys, dtype=np.int64)
        out = np.full(len(keys), -1, dtype=np.int64)
        if self._recent:
            _lookup(self._slot_keys, self._slot_ids, self._bits, keys, out)
        self._from_arrays(keys, out)
        return out

    def _from_arrays(self, keys: np.ndarray, out: np.ndarray) -> None:
        """``out[i]`` = the id of ``keys[i]`` where the sorted arrays hold it."""
        if len(self._keys):
            at = np.minimum(self._keys.searchsorted(keys), len(self._keys) - 1)
            hit = self._keys[at] == keys
            out[hit] = self._ids[at[hit]]

    def find_or_add(self, keys: np.ndarray, next_id: int) -> tuple[np.ndarray, np.ndarray]:
        """The id of each of ``keys``, those not added yet added with ids from
        ``next_id`` on in the order they first come (one compiled pass: no sort of the
        keys); and the keys added, in the order of their ids."""
        keys = np.ascontiguousarray(keys, dtype=np.int64)
        out = np.full(len(keys), -1, dtype=np.int64)
        self._from_arrays(keys, out)
        missing = len(out) - int(np.count_nonzero(out >= 0))
        if not missing:
            return out, keys[:0]
        if self._recent + missing > len(self._slot_keys) // 2:
            self._grow(self._recent + missing)
        new_keys = np.empty(missing, dtype=np.int64)
        count = _find_or_insert(
            self._slot_keys, self._slot_ids, self._bits, keys, out, next_id, new_keys
        )
        self._recent += count
        if self._recent > max(RECENT_UP_TO, len(self._keys) // 8):
            self._merge()
        return out, new_keys[:count]

    def add(self, keys: np.ndarray, ids: np.ndarray) -> None:
        """Add distinct new ``keys`` with their ``ids``."""
        keys = np.ascontiguousarray(keys, dtype=np.int64)
        ids = np.ascontiguousarray(ids, dtype=ID)
        need = self._recent + len(keys)
        if need > len(self._slot_keys) // 2:  # at most half full: short probes
            self._grow(need)
        _insert(self._slot_keys, self._slot_ids, self._bits, keys, ids)
        self._recent += len(keys)
        if self._recent > max(RECENT_UP_TO, len(self._keys) // 8):
            self._merge()

    def add_one(self, key: int, q: int) -> None:
        """Add a new ``key`` with id ``q``."""
        self.add(np.array([key], dtype=np.int64), np.array([q], dtype=ID))

    def forget_ids_from(self, first: int) -> None:
        """Drop the keys of ids ``first`` on (one pass over the arrays)."""
        keys, ids = self._held()
        kept = ids < first
        self._empty_table(SMALLEST)
        self.add(keys[kept], ids[kept])
        kept = self._ids < first
        self._keys, self._ids = self._keys[kept], self._ids[kept]

    def _grow(self, need: int) -> None:
        """A table of room for ``need`` keys at half full, holding the keys it held."""
        keys, ids = self._held()
        bits = max(SMALLEST, int(2 * need - 1).bit_length())
        self._empty_table(bits)
        _insert(self._slot_keys, self._slot_ids, bits, keys, ids)
        self._recent = len(keys)

    def _held(self) -> tuple[np.ndarray, np.ndarray]:
        full = self._slot_keys != EMPTY
        return self._slot_keys[full], self._slot_ids[full]

    def _merge(self) -> None:
        """The table's keys into the arrays (one pass over them)."""
        keys = np.sort(self._slot_keys[self._slot_keys != EMPTY])  # faster than argsort
        ids = np.empty(len(keys), dtype=ID)
        _lookup(self._slot_keys, self._slot_ids, self._bits, keys, ids)  # each key is held
        self._empty_table(SMALLEST)
        self._keys, self._ids = _merged(self._keys, self._ids, keys, ids)


@numba.njit(cache=True)
def _merged(old_keys, old_ids, new_keys, new_ids):
    """Two sorted runs of distinct keys (and their ids) merged into one."""
    n, m = len(old_keys), len(new_keys)
    keys = np.empty(n + m, dtype=np.int64)
    ids = np.empty(n + m, dtype=ID)
    i = j = 0
    for k in range(n + m):
        if j == m or (i < n and old_keys[i] < new_keys[j]):
            keys[k], ids[k] = old_keys[i], old_ids[i]
            i += 1
        else:
            keys[k], ids[k] = new_keys[j], new_ids[j]
            j += 1
    return keys, ids
