"""Shares of the test suite: CI runs one share of the slow set (``pytest --share K/N``),
so it stays within its time; the N shares together are the whole set."""

from __future__ import annotations

import zlib


def parse_share(text: str) -> tuple[int, int]:
    """``"K/N"`` as (K, N), with 0 <= K < N."""
    parts = text.split("/")
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
        raise ValueError("use K/N, two whole numbers")
    k, n = int(parts[0]), int(parts[1])
    if not 0 <= k < n:
        raise ValueError("use K/N with 0 <= K < N")
    return k, n


def in_share(test_id: str, k: int, n: int) -> bool:
    """Whether the test ``test_id`` is in share ``k`` of ``n``: a stable hash of its id
    (crc32: the same on every machine, run and Python; ``hash`` is salted)."""
    return zlib.crc32(test_id.encode()) % n == k
