"""Shares of the test suite: CI runs one share of the slow set (``pytest --share K/N``),
so it stays within its time; the N shares together are the whole set.

A test whose duration is recorded (``slow_durations.json``: the whole slow set timed on
2 cores, 2026-11-29) is placed by it, the longest first, each in the share with the
least time so far: the shares then take about the same time (hashed, sixteenths took
5-17 minutes of test time). A test not recorded (a new one) is placed by a stable hash
of its id. Either way each test is in exactly one share, the same on every run."""

from __future__ import annotations

import json
import zlib
from functools import cache
from pathlib import Path

DURATIONS = Path(__file__).with_name("slow_durations.json")


def parse_share(text: str) -> tuple[int, int]:
    """``"K/N"`` as (K, N), with 0 <= K < N."""
    parts = text.split("/")
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
        raise ValueError("use K/N, two whole numbers")
    k, n = int(parts[0]), int(parts[1])
    if not 0 <= k < n:
        raise ValueError("use K/N with 0 <= K < N")
    return k, n


def in_share(test_id: str, k: int, n: int, durations: dict[str, float] | None = None) -> bool:
    """Whether the test ``test_id`` is in share ``k`` of ``n``: by its recorded duration
    (``durations``, default the recorded file), else by a stable hash of its id (crc32:
    the same on every machine, run and Python; ``hash`` is salted)."""
    placed = balanced(n, durations) if durations is not None else _recorded(n)
    got = placed.get(test_id)
    return (zlib.crc32(test_id.encode()) % n if got is None else got) == k


def balanced(n: int, durations: dict[str, float]) -> dict[str, int]:
    """Each recorded test's share: longest first (ties by id), into the share with the
    least time so far (ties: the lowest)."""
    load = [0.0] * n
    out = {}
    for test_id, seconds in sorted(durations.items(), key=lambda kv: (-kv[1], kv[0])):
        k = min(range(n), key=lambda i: (load[i], i))
        out[test_id] = k
        load[k] += seconds
    return out


@cache
def _recorded(n: int) -> dict[str, int]:
    """:func:`balanced` over the recorded durations (none if the file is absent)."""
    if not DURATIONS.exists():
        return {}
    return balanced(n, json.loads(DURATIONS.read_text()))
