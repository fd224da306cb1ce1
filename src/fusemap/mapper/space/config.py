"""The mapper's knobs: what the single-Einsum search explores, and which tensors the
whole-workload mapper lets it fuse (:class:`MapperConfig`, read from the spec's
``mapper:`` key by :func:`config_from_spec`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...spec.errors import FusemapError

MAX_IMPERFECT_BOUND = 1024
"""Imperfect tiles are tried only for ranks this small: each size up to the bound is a
candidate, so the search grows with the bound (divisors alone above it)."""


@dataclass(frozen=True)
class MapperConfig:
    """Knobs of the single-Einsum search."""

    imperfect: bool = True
    """Explore tile shapes that do not divide the rank (outermost loop of a variable)."""
    imperfect_max_bound: int = 16
    """Only for rank variables of at most this bound (the state space grows with it)."""

    spread_max_bound: int = MAX_IMPERFECT_BOUND
    """Spatial loops over rank variables of at most this bound (and at most
    ``imperfect_max_bound``, which decides by default) may spread them unevenly (3 over
    2 instances as 2 + 1), and such a variable may have an imperfect loop above its
    spatial loop. A lower value only makes the search faster: it shrinks the space
    (``docs/mapspace.md``)."""

    @property
    def imperfect_bound(self) -> int:
        """Largest rank bound whose temporal tiles need not divide it."""
        return self.imperfect_max_bound if self.imperfect else 0

    @property
    def spread_bound(self) -> int:
        """Largest rank bound a spatial loop may spread unevenly."""
        return min(self.imperfect_bound, self.spread_max_bound)

    fusion: bool = False
    """Let shared tensors be backed below the top memory (fusion); off for ``--einsum``."""
    fused_loops_once: bool = True
    """Above fused nodes, the search puts at most one loop per rank variable: shared
    tensors are tiled once (any order, any tile shape); with the energy objective the
    mapper then checks its answer over several loops per variable and searches them
    where they may pay (:mod:`fusemap.mapper.full_space`). Off, the fused prefix may
    split a variable over several loops from the start, a much larger space (each split
    multiplies the compatibilities)."""
    relaxed_prefixes: bool = False
    """Internal (not a spec key): forget fused prefixes, so rows of every prefix and every
    loop depth are compared together and several fused loops per rank variable are
    allowed. Each template's least energy is then its least over the whole fused space
    (:mod:`fusemap.mapper.full_space`); the rows are no pmappings a join can use."""
    fusable: frozenset[str] | None = None
    """Shared tensors that may be fused (None: all)."""
    held_loops: dict[str, frozenset[str]] = field(default_factory=dict)
    """Fusable tensors whose users are never consecutive in an order the join tries (the
    Einsums between hold them too): the rank variables that may loop above their
    backing node (the hosts must share those loops; none: fused whole or not at all)."""
    hosts: frozenset[str] | None = None
    """Einsums that may run while another Einsum's tensor is held (between two users of a
    fused tensor in some order); None: every Einsum. An Einsum that hosts nothing and
    fuses nothing runs alone, so its reservations decide nothing."""
    hosted: dict[str, frozenset[str]] = field(default_factory=dict)
    """Per hosting Einsum, the tensors that may be held while it runs."""
    host_loops: dict[str, frozenset[str]] = field(default_factory=dict)
    """Per hosting Einsum, the rank variables it may share with the users of a tensor it
    holds tiled (its pmappings then expose those loops above a virtual node)."""

    def may_fuse(self, tensor: str, workload) -> bool:
        """Whether ``tensor`` is shared and may be backed below the top memory."""
        return tensor in workload.shared and (self.fusable is None or tensor in self.fusable)

    def sharing(self, info, workload) -> tuple[frozenset[str], frozenset[str]]:
        """The Einsum's shared tensors that may be fused, and those pinned to the top."""
        fused = frozenset(t for t in info.tensors if self.may_fuse(t, workload))
        pinned = frozenset(t for t in info.tensors if t in workload.shared and t not in fused)
        return fused, pinned


def config_from_spec(spec) -> MapperConfig:
    """The knobs given under the spec's ``mapper:`` key (others keep their defaults)."""
    extra = dict(getattr(spec.mapper, "model_extra", None) or {})
    default = MapperConfig()

    def flag(key: str, value: bool) -> bool:
        if key not in extra:
            return value
        got = extra[key]
        if not isinstance(got, bool):
            raise FusemapError(f"expected true or false, got {got!r}", spec.locate("mapper", key))
        return got

    def bound(key: str, value: int) -> int:
        if key not in extra:
            return value
        got = extra[key]
        if not isinstance(got, int) or isinstance(got, bool):
            raise FusemapError(f"expected an integer, got {got!r}", spec.locate("mapper", key))
        if not 0 <= got <= MAX_IMPERFECT_BOUND:
            raise FusemapError(
                f"expected an integer from 0 to {MAX_IMPERFECT_BOUND} (every tile size "
                f"up to the bound is a candidate), got {got!r}",
                spec.locate("mapper", key),
            )
        return got

    # in this order: the first bad key is the one reported
    return MapperConfig(
        imperfect=flag("imperfect", default.imperfect),
        imperfect_max_bound=bound("imperfect_max_bound", default.imperfect_max_bound),
        spread_max_bound=bound("spread_max_bound", default.spread_max_bound),
        fused_loops_once=flag("fused_loops_once", default.fused_loops_once),
    )
