"""Tables of Einsums equal up to names: their template results and fused prefixes
renamed for another Einsum, lazily and once each (a chain of identical matmuls shares
one table among dozens of Einsums)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .prefix import PrefixInterner
from .template_result import TemplateResult


class RenamedResults(Sequence):
    """The template results of an identical Einsum's table, renamed when looked at: the
    join reads only the table's arrays, and renaming every result up front cost a few
    megabytes per Einsum (gigabytes for a chain of a thousand)."""

    def __init__(self, base: Sequence[TemplateResult], rename: Any, tiles: Any) -> None:
        self._base, self._rename, self._tiles = base, rename, tiles

    def tiles(self, k: int) -> TemplateResult:
        """Result ``k`` renamed but for its fused prefixes (``seq``: the base's ids), for
        readers of its template and tile shapes only: renaming prefixes costs."""
        return self._tiles(self._base[k])

    def __len__(self) -> int:
        return len(self._base)

    def __getitem__(self, k: Any) -> Any:
        if isinstance(k, slice):
            return [self._rename(r) for r in self._base[k]]
        return self._rename(self._base[k])


def result_tiles(results: Sequence[TemplateResult], k: int) -> TemplateResult:
    """Result ``k`` of a table's results, for its template and tile shapes only (its
    ``seq`` may be another table's ids: see :meth:`RenamedResults.tiles`)."""
    return results.tiles(k) if isinstance(results, RenamedResults) else results[k]


class SeqRenamer:
    """Fused prefix ids with tensor and rank variable names replaced. Each prefix is
    renamed once: a renamed table's results are renamed whenever they are looked at
    (:class:`RenamedResults`), and the join looks at all of them."""

    def __init__(self, interner: PrefixInterner, tensors: dict[str, str], var: dict[str, str]):
        self.interner, self.tensors, self.var = interner, tensors, var
        # Kept on the interner, which only grows: a table merged with more rows (and its
        # interner) is renamed again, and its old prefixes are renamed already.
        key = (tuple(sorted(tensors.items())), tuple(sorted(var.items())))
        self._ids: dict[int, int] = interner.__dict__.setdefault("_renamings", {}).setdefault(
            key, {}
        )

    def _one(self, i: int) -> int:
        got = self._ids.get(i)
        if got is None:
            t, v = self.tensors, self.var
            toks = tuple(
                (k, t[a], b) if k == "back" else (k, v.get(a, a), b)
                for k, a, b in self.interner.prefixes[i]
            )
            got = self._ids[i] = self.interner.intern(toks)
        return got

    def __call__(self, seq: np.ndarray) -> np.ndarray:
        uniq, inverse = np.unique(seq, return_inverse=True)
        new = np.array([self._one(i) for i in uniq.tolist()], dtype=np.int64)
        return new[inverse.ravel()]
