"""The FFM join: the Einsums' pmapping tables joined along an order (:func:`join`,
bounded by a :class:`Bound`), and the rows joined assembled into one LoopTree
(:mod:`.assemble`).

Names are imported when first used."""

from __future__ import annotations

import importlib

_EXPORTS = {
    "join": ".ffm_join",
    "Joined": ".ffm_join",
    "Bound": ".bound",
}
"""Exported name -> module defining it."""

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value
