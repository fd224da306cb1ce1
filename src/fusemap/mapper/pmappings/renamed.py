"""Tables of Einsums equal up to names: their template results and fused prefixes
renamed for another Einsum, lazily (a chain of identical matmuls shares one table among
dozens of Einsums)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..space.interner import PrefixInterner
from ..space.prefix import Prefix
from ..tiling.result import TemplateResult


class RenamedResults(Sequence):
    """The template results of an identical Einsum's table, renamed when looked at: the
    join reads only the table's arrays, and renaming every result up front cost a few
    megabytes per Einsum (gigabytes for a chain of a thousand). Their fused prefix ids
    ``seq`` are the base's: the renamed table's interner (:class:`RenamedInterner`)
    has the same ids."""

    def __init__(self, base: Sequence[TemplateResult], rename: Any) -> None:
        self._base, self._rename = base, rename

    def __len__(self) -> int:
        return len(self._base)

    def __getitem__(self, k: Any) -> Any:
        if isinstance(k, slice):
            return [self._rename(r) for r in self._base[k]]
        return self._rename(self._base[k])


class RenamedPrefixes(Sequence):
    """Another interner's prefixes with tensor and rank variable names replaced, each
    renamed once, when looked at: the join looks at the few prefixes its cap allows."""

    def __init__(self, base: Sequence[Prefix], tensors: dict[str, str], var: dict[str, str]):
        self._base, self._tensors, self._var = base, tensors, var
        self._done: dict[int, Prefix] = {}

    def __len__(self) -> int:
        return len(self._base)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        got = self._done.get(i)
        if got is None:
            t, v = self._tensors, self._var
            got = self._done[i] = tuple(e.renamed(t, v) for e in self._base[i])
        return got


class RenamedInterner(PrefixInterner):
    """A table's interner seen by an identical Einsum's table: the same ids, the prefixes
    renamed (:class:`RenamedPrefixes`). Renaming every prefix up front (new ids, the
    rows' ids mapped) cost the 64-matmul chain tens of seconds, for prefixes no join
    looks at. Read only: nothing is interned in it."""

    def __init__(self, base: PrefixInterner, tensors: dict[str, str], var: dict[str, str]):
        # No ``super().__init__()``: the prefixes are the base's, renamed.
        self.base = base
        self.prefixes = RenamedPrefixes(base.prefixes, tensors, var)

    def __getstate__(self) -> dict:
        return {"base": self.base, "prefixes": self.prefixes}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)

    def _intern_canonical(self, prefix: tuple) -> int:
        raise AssertionError("a renamed interner is read only")
