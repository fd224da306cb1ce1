"""The counting rules, each written once: the model's scalar counts
(:mod:`fusemap.model.reuse`, :mod:`fusemap.model.capacity`) and the mapper's vectorized
count terms (:mod:`fusemap.mapper.tiling.terms`, :mod:`fusemap.mapper.tiling.uneven`)
both call these.

The traffic rules are plain arithmetic on their arguments (typed ``Any``: a count is a
number, a numpy array or the mapper's per-basis coefficients), so they work on numbers
(the model), on numpy arrays (one value per tile shape) and on the mapper's
:class:`~fusemap.mapper.tiling.terms.Counts` (coefficients of the fill and first-visit
bases, which the mapper keeps apart). README, "Counting rules", lists each rule with the
model function, the mapper function and the test that checks it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

Projection = Sequence[Sequence[tuple[str, int]]]
"""Per rank of a tensor: (rank variable, |coefficient|) of its projection."""


def box_values(terms: Projection, sizes: Mapping[str, Any], one: Any = 1) -> Any:
    """Values of a tensor's dense box when each rank variable spans ``sizes[v]``: each
    rank spans ``1 + sum(|c| * (size - 1))`` (halos counted, no overlap reuse).

    ``one``: the unit the sums start from: ``1`` keeps Python integers exact (the model),
    ``1.0`` sums numpy integer arrays as floats (the mapper: no integer overflow). A rank
    of one variable with coefficient 1 spans the size itself either way."""
    total: Any = None
    for rank in terms:
        if len(rank) == 1 and rank[0][1] == 1:  # the common case: the rank is one variable
            extent: Any = sizes.get(rank[0][0], 1)
        else:
            extent = one
            for v, c in rank:
                extent = extent + c * (sizes.get(v, 1) - 1)
        total = extent if total is None else total * extent
    return one if total is None else total


def shares_parent_transfer(relevance: str, tensor: str, may_reuse: frozenset[str]) -> bool:
    """Whether the instances of a spatial loop share one transfer of ``tensor`` from (to)
    the parent of the first holder below the loop (multicast, or reduction of an output):
    the loop does not index the tensor, and its fanout may reuse it."""
    return relevance == "irrelevant" and tensor in may_reuse


def starts_partial_sums(relevance: str) -> bool:
    """Whether each instance of a spatial loop starts its own partial sums of an output
    (so its first fills are skipped too): the loop does not fully index the output."""
    return relevance != "relevant"


def skips_first_reads(is_output: bool, skip_flag: bool, copied_output: bool = False) -> bool:
    """Whether a holder (or the compute leaf) skips fetching the initial values of its
    output tiles: its component's ``skip_initial_output_write`` is on (the default), and
    it is not the compute leaf of a copy, which writes its output without reading it."""
    return is_output and skip_flag and not copied_output


def holder_writes(fills: Any, skipped: Any, ratio: Any, own_skipped: Any = None) -> Any:
    """Writes into a holder's component of its own copies: its fills less the initial
    values it skips, once per instance under a multicast (``ratio``: its instances' own
    copies per shared transfer). ``own_skipped``: what all its instances skip, where
    spreads of uneven tiles make that other than ``skipped * ratio``."""
    if own_skipped is None:
        return (fills - skipped) * ratio
    return fills * ratio - own_skipped


def holder_reads(backs: Any, ratio: Any) -> Any:
    """Reads at a holder's component of what it writes back (outputs), per instance."""
    return backs * ratio


def parent_writes(backs: Any) -> Any:
    """Writes into the parent's component: what the holder writes back (one copy under
    a reduction)."""
    return backs


def parent_reads(fills: Any, skipped: Any, parent_skips: bool) -> Any:
    """Reads at the parent's component: the holder's fills, less the initial values the
    holder skips unless the parent serves them anyway (its own flag is off)."""
    return fills - skipped if parent_skips else fills - 0.0 * skipped


def lowered_past(kinds: Sequence[str]) -> int:
    """How many loops below a non-backing holder, of these relevances in order, its
    reservation is lowered past: relevant ones, then one partially relevant one; an
    irrelevant one stops it (the tile it holds no longer changes with the loops)."""
    for n, kind in enumerate(kinds):
        if kind == "irrelevant":
            return n
        if kind == "partial":
            return n + 1
    return len(kinds)
