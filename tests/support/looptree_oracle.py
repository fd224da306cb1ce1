"""An independent oracle for the whole mapspace: every LoopTree of a tiny workload.

It shares no code with the mapper: it builds LoopTrees node by node from the LoopTree
grammar and asks the model (:mod:`fusemap.model`) for their energy, latency and buffer
usage. A tree, for the Einsums E0..En-1 in the given order, is a *segment* (a sequence
of storage nodes and loops) followed either by one Einsum's compute leaf or by a split of
its Einsums into consecutive groups, each again such a tree. The trees enumerated:

* storage nodes: any tensor used below, in any memory that may hold it (``keep`` /
  ``may_keep``; ``keep`` is a must), going down the hierarchy along every path, at most
  one per memory and path; the backing node of a tensor (its first node on each user's
  path) is common to all its users (it lies in the segment of a group holding every
  user); nodes of the unbounded top memory sit at the root, as in the mapper's trees
  (a top-memory node is a backing node and reserves nothing that counts, and where it
  sits changes no count; placed lower it could only stop the lowering of a holder of a
  chain that uses it, see below: such trees are not enumerated);
* loops, temporal and spatial: any rank variable of every Einsum below, tiles shrinking
  to 1 at each leaf (every loop cuts its variable's tile: none of one trip); the first
  loop of a variable on a path may take any size (the ranks are small), later ones
  divide the tile above (the mapper's tile shapes, spatial loops included);
* spatial loops: on any fanout dimension of the arch (none at the top memory), anywhere
  below the root a temporal loop may go (also below a storage node of the fanout's own
  memory, which the model accepts: the mapper puts them above the first storage node at
  or below the fanout), a variable's spatial loop counting ``ceil(tile above / tile)``
  instances, whose product over the path's loops of one dimension stays within its
  fanout (``reuse.fanout_usage``: the model refuses more); each Einsum's chain uses at
  least ``min_usage`` of each dimension (the model does not check it; the mapper's
  rule: not for a copy; its fallback when no mapping reaches it is not implemented, such
  a case is refused, ``NotImplementedError``), and so does no ``reuse``/``loop_bounds``;
* no loop over a rank variable that an Einsum reduces shared with a reader of that
  Einsum's output (the reader would see a partial value);
* a tree is valid when the model accepts it (capacity).

What the model sees of a tree (``fusemap.model.chains`` / ``reuse`` / ``capacity``),
used by the reductions below. Each Einsum's *chain* is its root-to-leaf path with the
storage nodes of other tensors dropped. Its counts (so its energy and latency) depend,
per tensor, on that tensor's holders and on the tiles the loops above each holder cut,
per rank variable in order (``linearize``, ``TileCounter``): not on the order of loops
over different variables between two holders, nor on where other tensors' nodes sit. A
holder reserves its tile at its reservation point: right under it for a backing holder
(the first of its tensor on the path), else *lowered* past the loops that follow in its
chain while they are relevant (past a partially relevant one, then stops; stops above
an irrelevant one, at the chain's next holder or leaf). The reservation's key is (node,
tensor, the mapping node right above the point: its *anchor*, the holder itself or a
loop); chains with one key share one reservation, the largest of theirs. It is live for
the branches through the anchor from the first to the last user, and for every branch
through the first loop below the anchor on a user's path. Usage is the largest sum of
live reservations over branches. So a reservation only one chain makes and whose anchor
is lower on that chain's path, with no more bits, is never live where the other is not
(*lowering a holder only one chain has is no worse than stopping it*, used below).

Spatial loops, in the model. A tensor's view moves a spatial loop down past its holders
in memories above the fanout's (``linearize``): only top-memory nodes, which sit at the
root, so every tensor sees every loop where it is written. A spatial loop cuts tiles as
a temporal loop does (totals, tiles, the tile a holder reserves: per instance); per
instance (latency of the components at or below its fanout's level) it keeps one tile
per parent tile; for the first holder (or leaf) below it of a tensor it does not index
and that its ``may_reuse`` has, the parent sends (takes back) one copy for all instances
(multicast, reduction); every instance of one that does not fully index an output
starts its own partial sums. A holder being lowered passes a spatial loop as a temporal
one if the loop is of the holder's memory, and stops above it otherwise. All of these
depend, per tensor, on its holders and the loops between them, per variable; the per-
instance and multicast rules on which holder is the first below a spatial loop.

Reductions; none can lose an optimum (each tree left out is no better than one that
is scored, or is not valid; each rule below maps a left-out tree to such a tree, and
repeating them ends: nodes only move down or go). With spatial loops (see the end of
this list for what changes) a *run* is a run of temporal loops: a spatial loop is not in
any run, it breaks them, and every place of it among the temporal loops between two
storage nodes is made (that sequence is runs and single spatial loops, no two runs
adjacent: ``_sections``).

* In a run of consecutive loops (no storage node between), at most one loop per rank
  variable: of two, the outer one cuts a tile no node sees (the inner one divides it),
  so no count changes; a holder lowered through the run passes both or stops before
  both, or stops after the outer one if it is partially relevant, where without it it
  stops after the inner one with a tile no larger, anchored one loop lower; lifetimes
  only shrink (the inner loop lies between the same reservations and splits).
* Below the last split on an Einsum's path (its *tail*, which only it uses), the loops
  of a run come in few orders. Loop order in a run changes no count
  (``tests/unit/model/test_model_loop_order.py``); it only decides how far the holder being
  lowered into the run passes: the relevant loops, then at most one partially relevant
  one. If that holder is in the tail, only this chain has it, and passing all relevant
  loops and one partially relevant loop (one order per such loop, the rest after)
  gives the smallest tile, lowest anchor (lowering a holder only one chain has). If it
  lies above the split (the tail's first run), stopping it right away may let its key
  be shared with other chains that stop it at the same node, so one more order puts
  the irrelevant loops first; every other order passes some loops and makes a
  reservation only this chain has, no smaller than with the orders above.
* In a tail, no storage node below every loop (right above the compute leaf) that is
  not a backing node and only adds accesses: its memory need not keep the tensor; for an
  output, the Einsum is no copy and every component skips an output's first values
  alike (``skip_initial_output_write``); and costs only grow with accesses (action
  energies, leak power and ``actions_scale`` not negative, no ``total_latency``
  expression). Its parent then sends and takes back exactly what it would exchange with
  the holder or leaf below it (the same tiles: no loop between; ``count_tensor``), so
  without it the counts are the same but for its own accesses (no more energy, no more
  calls at its component, so no more latency), there is one reservation less, and every
  other is the same: a holder it stopped stops at the next holder or the leaf instead,
  anchored at the same node (no loop between).
* No loop right above a split (after the last storage node of its segment): moved into
  every group below, each chain keeps the same nodes in the same order; a reservation
  anchored in the moved run splits into one per group, each live only in its group and
  no larger, and every reservation above lives no longer (a loop between a reservation
  and a split makes it live for every group).
* The storage nodes after the last loop of a segment, right above its split (its *end
  block*), stay there only if moving them to the top of their part would change the
  tree. A node of a tensor one part uses and that no later node of the end block
  follows in any of its users' chains sits there exactly as at the top of that part
  (same chains; same lifetimes: the same anchor and first loop below it), which is
  enumerated there. If that tensor is used by one Einsum of the group only, and that
  Einsum's last node of the end block is a backing node, the node moved to the top of
  its part gives the same chains but for its own place among nodes that are not
  lowered (so the same counts and the same other reservations; a holder lowered from
  above stops at the Einsum's first node of the block, anchored one node above it,
  either way), and it is then lowered or stopped: no worse (lowering a holder only one
  chain has). So an end block's last node is of a tensor used by two parts or more (or
  is a top-memory node at the root), and so is each of its nodes but those followed by
  a node of one of their users, and for a tensor one Einsum of the group uses, by that
  Einsum's last node of the block, which is not a backing node (that Einsum lowers it,
  which no tree with the node below the split does). Only segments that end so are made,
  and a segment is only extended while such a block can still follow (a tensor two
  Einsums of the group use with a memory below its deepest node so far).
* A group below a split does not split at once (an empty segment): that tree has the
  same branches as the tree with the group's parts in the parent's split
  (``Mapping.branches`` drops splits), so the model sees the same tree, and the parent's
  split allows it (its rules are those of the two splits together). The root's segment
  is empty only when no tensor must be kept in the top memory.
* Blocks of adjacent storage nodes: one order per *lowering signature*, which is, for
  each Einsum of the group with a node in the block, its last node there if that node
  is not a backing node, else "none". Another order with the same signature gives every
  chain the same holders with the same tiles above them (other tensors' nodes are not in
  a tensor's view), so the same counts; a holder that is not its chain's last in the
  block reserves right under itself (the next step of its chain is a holder), with the
  same tile (no loop in a block), anchored at itself (same branches through it, same
  first loop below it on every path), as does a backing last node; the last non-backing
  node is lowered through the same loops whatever the order; and the lowering of a
  holder above the block stops at the block's first node of its chain, past the same
  loops, anchored at the same node. So every reservation has the same bits and
  lifetime. Which signatures occur: an Einsum's last node in a block is the deepest
  node of its tensor there (each tensor's nodes go down); a choice of last nodes occurs
  when some order of the chosen nodes puts each Einsum's last one after its other
  chosen ones, and then that order after the other nodes (going down) realizes it.
  Signatures where an Einsum lowers nothing although it has a non-backing node in the
  block that no other Einsum of the group uses are left out: with that node moved to
  the end of the block (a signature that occurs: no other chain has it) the counts and
  every other reservation are the same (the Einsum's other nodes there are stopped, or
  backing, either way), and it is lowered, if only past no loop (lowering a holder only
  one chain has; the runs below are made for every signature, so for the same orders of
  the other chains).
* Runs of loops above a split: one order per *lowering signature*, which is, for each
  Einsum of the group whose last holder is still being lowered (not a backing node, not
  stopped by a loop or a holder since), the set of the run's loops it passes. Counts do
  not depend on the order (first point above); with the same passed set a lowered
  reservation has the same tile and its anchor is the same loop for every chain that
  lowers it (the last of the same prefix), so the same reservations are shared between
  chains; every reservation's lifetime depends on its anchor only through the branches
  through it and the first loop below it, which is another loop of the run (every
  branch of the group passes it) unless the anchor is the run's last loop, the same for
  every order when the whole run is passed; holders not being lowered here are
  unaffected. Whether lowering goes on below the run is part of the signature (the whole
  run passed, no partially relevant loop last).
* A segment after which an Einsum's own reservations already overflow a memory is not
  extended, nor a block or run that makes them overflow: every reservation of a chain is
  live while its Einsum runs (it is a user) with at least the bits that chain gives it (a
  key shared by several chains takes the largest), further nodes only add reservations,
  and the bits counted are exact or less: a backing holder's tile under it, a holder
  whose lowering stopped the tile where it stopped, a holder still being lowered one
  value (the tile with every rank variable at 1). Tiles are boxes as in
  ``capacity.reservations``: each rank spans ``1 + sum(|c| * (tile - 1))``, the tile
  being the largest the loops above cut, which is the last tile of the variable on the
  path (later loops divide it).
* A tail that another tail of the same hole beats or ties on energy, on latency and on
  its Einsum's chain's usage of every memory, both lowering the chain's holder being
  lowered from above into the tail or neither, is dropped. The tail's reservations, and
  that holder's if the tail lowers it, are live in the Einsum's branch only (their
  anchors are in the tail, below the last split on that path, so no other chain shares
  their keys); if neither tail lowers it, it stops at the same point above the split
  with the same tile and anchor, so it shares its key with the same chains either way
  (a tail that lowers it and one that does not are not compared: the chain then leaves
  or joins a key other chains may share, whose reservation may be live in its branch
  anyway); every other reservation (its bits, its key, its lifetime: the first loop
  below an anchor above the split on this Einsum's path is in the tail, and counts only
  for a reservation this Einsum uses, live in its branch anyway) and every other branch
  are the same with either tail; the chain's usage alone is that of the reservations
  above, which do not depend on the tail, plus these. So the other tail, in the same
  tree, fits whenever this one does and is no worse.
* Spatial loops, reduction by reduction. Runs hold temporal loops only, so the rules
  on runs (one loop per variable, tail orders, signatures above a split) permute or drop
  temporal loops only, between the same storage nodes and spatial loops: the tile
  distributions are per variable, so the order of a run over different variables changes
  no count in per-instance counting either (a spatial loop keeps one tile per parent,
  per variable); two loops of one variable in a run still cut what the inner one cuts;
  which holder is the first below a spatial loop does not change; and a holder still
  being lowered after a run goes on into the spatial loop below it as before (whether
  lowering goes on below a run is in its signature). No node right above the leaf that
  only adds accesses: kept; without it the leaf is the first holder below the same
  spatial loops (``count_tensor`` treats the leaf as a holder for multicast), with the
  same tiles and first visits (no loop between), so its parent's counts are the same.
  No loop right above a split: kept for spatial loops (moved into every group, every
  chain keeps its nodes and order, so the same instances used; lifetimes as for a
  temporal loop, ``capacity._lifetime`` treats both alike). End blocks, block orders,
  empty groups, top-memory nodes at the root: kept (a storage node moved among other
  tensors' nodes, or between the split and the top of a part, changes no tensor's view;
  a top-memory node placed below a spatial loop sees it moved below itself, so the same
  view as at the root). Overflow pruning: kept (a spatial loop cuts the tile a holder
  below it reserves, per instance, as a temporal loop; ``capacity.reservations``
  multiplies by instances only for a holder in a memory above the fanout: the top
  memory, unbounded). Tail dominance: kept (the instances used and ``min_usage`` are a
  chain's own, checked when it is costed; a spatial loop in the tail is the first loop
  below an anchor above the split as a temporal one is). No one-trip spatial loop, as for
  temporal loops (it cuts nothing).

Costs. An Einsum's energy and latency depend only on its chain, so a chain is costed
alone and once, keyed by its *canonical* form: each run of loops between two of its
holders in one order, given by the loops the holder above it (if it is being lowered)
passes, sorted by variable, then an irrelevant loop that stops it, then the rest by
variable (a stable sort keeps two loops over one variable in order); spatial loops stay
where they are, and the holder goes on past a run it passes whole and past a spatial loop
it passes (of its memory, relevant). The canonical form
has the same counts (loop order in a run) and lowers every holder past the same loops,
so it has the same energy, latency and usage. The tails below an Einsum's nodes above a
hole are costed once per canonical form of those nodes (a tail added below gives chains
with equal canonical forms). What may follow a prefix of a segment or a tail depends
only on the path after it (``_Path``), so it is made once per path.

The search: for every *skeleton* (the tree with each Einsum's tail left open: a
*hole*), each hole's tails are costed; then (skeleton, tail per hole) choices are
visited best-first by a lower bound of the objective (the summed energy or latency of
the chosen tails; for EDP the summed energy times the skeleton's least summed latency),
the model checks each assembled tree for capacity, and the first that fits and beats
every bound left is the optimum.
"""

from __future__ import annotations

import heapq
import itertools
import math
from dataclasses import dataclass
from typing import NamedTuple

from fusemap.model.capacity import memory_usage
from fusemap.model.chains import branch_chains, build_chain
from fusemap.model.costs import einsum_costs
from fusemap.model.evaluate import evaluate_mapping
from fusemap.model.reuse import projection_terms
from fusemap.spec import mapping as M
from fusemap.spec.arch_eval import ArchEvaluator
from fusemap.spec.errors import InvalidMappingError
from fusemap.spec.resolve import resolve_workload

# Nodes while enumerating are tuples: ("S", tensor, memory), ("T", rank variable, tile),
# ("P", rank variable, tile, component, dimension) for a spatial loop, ("C", einsum);
# mapping nodes are made only for a tree that is costed or checked.
_S, _T, _P, _C = "S", "T", "P", "C"


@dataclass(frozen=True)
class Optimum:
    """The best value of one objective and a LoopTree reaching it."""

    value: float
    energy: float
    latency: float
    mapping: M.Mapping


class _Path(NamedTuple):
    """What a path from the root has done so far (restricted to the Einsums below)."""

    sizes: tuple[tuple[str, int], ...]  # current tile of every rank variable
    looped: frozenset[str]  # variables with a loop above (later loops divide)
    levels: tuple[tuple[str, int], ...]  # tensor -> deepest memory level on the path
    last_of: tuple[tuple[str, str], ...]  # Einsum -> tensor of its last node on the path
    lowering: tuple[tuple[str, tuple[str, str]], ...]  # Einsum -> its holder being lowered
    used: tuple[tuple[tuple[str, str], float], ...]  # (Einsum, memory) -> bits reserved
    spread: tuple[tuple[tuple[str, str], int], ...] = ()  # (component, dim) -> instances used


class LoopTreeOracle:
    """Every LoopTree of ``spec``'s workload (given order) on its single compute unit."""

    def __init__(
        self,
        spec,
        max_work: int = 2_000_000,
        spatial_under_holders: bool = True,
        even_spatial: bool = False,
    ):
        """``spatial_under_holders``: spatial loops may also sit below a storage node in a
        memory at or below their fanout's level (the model accepts it); False: only above
        every such node on each path through them (where the mapper puts them).
        ``even_spatial``: every spatial tile divides the tile above (no uneven spread,
        which the mapper does not search yet)."""
        self.spec = spec
        self.spatial_under_holders = spatial_under_holders
        self.even_spatial = even_spatial
        self.wl = resolve_workload(spec)
        self.ae = ArchEvaluator(spec, self.wl)
        self.einsums = [e.name for e in self.wl.einsums]
        self.info = {e.name: e for e in self.wl.einsums}
        units = [n for n, c in self.ae.components(self.einsums[0]).items() if c.kind == "compute"]
        assert len(units) == 1, "the oracle's cases have one compute unit"
        self.unit = units[0]
        flat = self.ae.flat(self.einsums[0], self.unit)
        self.memories = [c for c in flat.path if c.kind == "memory"]
        assert math.isinf(self.memories[0].size), "the oracle's top memory is unbounded"
        self.level = {c.name: i for i, c in enumerate(self.memories)}
        self._uses = [(e, t) for e in self.einsums for t in self.info[e].tensors]
        self.users = {
            t: [e for e in self.einsums if t in self.info[e].tensors] for t in self.wl.tensors
        }
        self.tensors = {e: frozenset(self.info[e].tensors) for e in self.einsums}
        self.variables = {e: frozenset(self.info[e].bounds) for e in self.einsums}
        self.flat = {e: self.ae.flat(e, self.unit) for e in self.einsums}
        self.max_work = max_work
        self.work = 0  # chains costed plus trees checked
        self._relevance: dict[tuple[str, str, str], str] = {}
        self._may: dict[tuple[str, str, str], bool] = {}
        self._cost: dict[tuple, tuple[float, float] | None] = {}
        self._tail_cache: dict[tuple, list] = {}
        self._leaf_cache: dict[tuple, list] = {}
        self._suffix_cache: dict[tuple, list] = {}
        self._facts: dict[tuple, tuple] = {}
        self._skeletons: dict[tuple, list] = {}
        self._split_cache: dict[tuple, bool] = {}
        self._bit_cache: dict[tuple, float] = {}
        self._nodes: dict[tuple, M.MappingNode] = {}
        self._fit_cache: dict[tuple, bool] = {}
        self._seen_by: dict[tuple, tuple] = {}
        self._views: dict[tuple, tuple] = {}
        self._parts: dict[tuple, list] = {}
        self._adds: dict[tuple, bool] = {}
        # Costs that only grow with accesses: energies and leak power not negative, every
        # latency the sum of calls over throughputs (no ``total_latency`` expression).
        self._monotone = {
            e: all(
                c.node.total_latency is None
                and c.leak_power >= 0
                and c.actions_scale >= 0
                and all(a.energy is not None and a.energy >= 0 for a in c.actions.values())
                for c in self.flat[e].path
                if c.kind != "container"
            )
            for e in self.einsums
        }
        self.size = {m.name: m.size for m in self.memories if not math.isinf(m.size)}
        self.fanouts, self.need = self._fanout_dims()
        self._spatial_cache: dict[tuple, list] = {}
        self._section_cache: dict[tuple, list] = {}

    def _fanout_dims(self) -> tuple[list, dict]:
        """The fanout dimensions ((component, dimension, fanout) on every Einsum's path)
        and the instances each Einsum must use of each (``min_usage``, as the mapper
        applies it: not to copies; its fallback, when no mapping can reach it, is not
        implemented and refused)."""
        dims = []
        need: dict[tuple[str, str, str], int] = {}
        for e in self.einsums:
            mine = []
            for c in self.flat[e].path:
                for d in c.spatial:
                    if d.reuse or d.loop_bounds:
                        raise NotImplementedError("the oracle has no spatial reuse / loop_bounds")
                    if c.name == self.memories[0].name or c.name not in self.level:
                        raise NotImplementedError("the oracle's fanouts are at inner memories")
                    mine.append((c.name, d.name, d.fanout))
                    n = 1
                    if d.min_usage > 0 and not self.info[e].is_copy:
                        n = math.ceil(d.min_usage * d.fanout - 1e-9)
                    if n > 1 and not any(
                        n <= -(-b // t) <= d.fanout
                        for b in self.info[e].bounds.values()
                        for t in range(1, b + 1)
                    ):  # one spatial loop reaches it, so some mapping does: no fallback
                        raise NotImplementedError("min_usage fallback (no loop reaches it)")
                    need[e, c.name, d.name] = n
            if dims and mine != dims:
                raise NotImplementedError("the oracle's Einsums share one set of fanouts")
            dims = mine
        return dims, need

    # ------------------------------------------------------------------ helpers
    def _rel(self, einsum: str, tensor: str, var: str) -> str:
        key = (einsum, tensor, var)
        kind = self._relevance.get(key)
        if kind is None:
            kind = self._relevance[key] = self.info[einsum].relevance(tensor, var)
        return kind

    def _may_hold(self, einsum: str, tensor: str, memory: str) -> bool:
        key = (einsum, tensor, memory)
        if key not in self._may:
            comp = self.ae.components(einsum)[memory]
            self._may[key] = tensor in comp.keep or tensor in comp.may_keep
        return self._may[key]

    def _view(self, group, path: _Path) -> _Path:
        """``path`` as the Einsums of ``group`` see it (their ranks, tensors, names)."""
        key = (group, id(path))
        found = self._views.get(key)
        if found is not None and found[0] is path:  # paths are made once and kept
            return found[1]
        view = self._make_view(group, path)
        self._views[key] = (path, view)
        return view

    def _make_view(self, group, path: _Path) -> _Path:
        found = self._seen_by.get(group)
        if found is None:
            vs = frozenset().union(*(self.variables[e] for e in group))
            ts = frozenset().union(*(self.tensors[e] for e in group))
            found = self._seen_by[group] = (vs, ts)
        vs, ts = found
        return _Path(
            tuple(x for x in path.sizes if x[0] in vs),
            frozenset(v for v in path.looped if v in vs),
            tuple(x for x in path.levels if x[0] in ts),
            tuple(x for x in path.last_of if x[0] in group),
            tuple(x for x in path.lowering if x[0] in group),
            tuple(x for x in path.used if x[0][0] in group),
            path.spread,
        )

    def _bits(self, einsum: str, tensor: str, memory: str, sizes: tuple) -> float:
        """Bits the model reserves for a tile of ``tensor`` in ``memory`` when the rank
        variables span ``sizes`` (items; the tile's box, as ``capacity.reservations``)."""
        key = (einsum, tensor, memory, sizes)
        bits = self._bit_cache.get(key)
        if bits is None:
            comp = self.flat[einsum].component(memory)
            per_value = comp.value_bits(tensor, self.wl.tensors[tensor].bits_per_value)
            at = dict(sizes)
            values = 1
            for rank in projection_terms(self.info[einsum], tensor):
                values *= 1 + sum(c * (at.get(v, 1) - 1) for v, c in rank)
            bits = self._bit_cache[key] = values * per_value
        return bits

    def _overflows(self, used: dict, lowering: dict) -> bool:
        """Whether an Einsum's own reservations so far (a holder still being lowered
        counted as one value) overflow a memory: all are live while it runs."""
        total = dict(used)
        for e, (t, m) in lowering.items():
            if m in self.size:
                total[e, m] = total.get((e, m), 0.0) + self._bits(e, t, m, ())
        return any(bits > self.size[m] * (1 + 1e-9) for (_, m), bits in total.items())

    # ------------------------------------------------------------------ the grammar
    def skeletons(self, group: tuple[str, ...], path: _Path) -> list:
        """Every skeleton of ``group`` below ``path`` (seen by the group), as
        (structure, holes). Structure: ("H", einsum) for an open tail, else
        (segment, sub-structures of the split's groups). Holes, left to right:
        (einsum, its own nodes from here down to the hole, its own path at the hole)."""
        key = (group, path)
        found = self._skeletons.get(key)
        if found is not None:
            return found
        out: list = []
        if len(group) == 1:  # a tail (the path as far as its Einsum is concerned)
            out.append((("H", group[0]), ((group[0], (), path),)))
            self._skeletons[key] = out
            return out
        for segment, after in self._segments(group, path):
            if segment and segment[-1][0] in (_T, _P):
                continue  # a loop right above a split: see the module docstring
            if not segment and len(group) < len(self.einsums):
                continue  # a split right under a split: the same tree as one split
            own = {e: self._own(e, segment) for e in group}
            end = len(segment)
            while end and segment[end - 1][0] == _S:
                end -= 1
            trailing = _marked(segment[end:], set(dict(path.levels)) | _tensors(segment[:end]))
            for parts in self._partitions(group):
                if not self._split_ok(after.looped, parts):
                    continue
                if not self._end_block_ok(trailing, end == 0, parts):
                    continue
                subs = [
                    [(("H", p[0]), ((p[0], (), after),))]
                    if len(p) == 1
                    else self.skeletons(p, self._view(p, after))
                    for p in parts
                ]
                for combo in itertools.product(*subs):
                    struct = (segment, tuple(c[0] for c in combo))
                    holes = tuple((e, own[e] + suf, op) for c in combo for e, suf, op in c[1])
                    out.append((struct, holes))
        self._skeletons[key] = out
        return out

    def _partitions(self, group) -> list:
        """The splits of ``group`` into two or more consecutive groups."""
        found = self._parts.get(group)
        if found is None:
            n = len(group)
            found = self._parts[group] = [
                tuple(group[a:b] for a, b in zip((0, *cut), (*cut, n), strict=True))
                for k in range(1, n)
                for cut in itertools.combinations(range(1, n), k)
            ]
        return found

    def _own(self, einsum: str, nodes) -> tuple:
        """The nodes of ``einsum``'s chain among ``nodes`` (other tensors' nodes dropped)."""
        mine = self.tensors[einsum]
        return tuple(n for n in nodes if n[0] != _S or n[1] in mine)

    def _segments(self, group, path: _Path) -> list:
        """Sequences of storage nodes and loops for ``group`` (a segment) above a split,
        with the path after each. Blocks of adjacent storage nodes and runs of loops
        alternate. A segment ends in a block whose last node is of a tensor used by two
        Einsums of the group or more, and so is every node not followed by a node of one
        of its users (the module docstring): only those segments are made, and only
        prefixes after which such a block may still come are extended. What may follow a
        prefix depends only on the path after it, so it is made once per path."""
        top = self.memories[0].name
        out = []
        at_root = len(group) == len(self.einsums)
        if at_root and not any(t in self.ae.components(e)[top].keep for e, t in self._uses):
            out.append(((), path))  # nothing must sit at the root: it may split at once
        if self._can_end(group, path) or at_root:
            out += self._suffixes(group, path, True)
        return out

    def _group_facts(self, group) -> tuple:
        """The rank variables all of ``group`` has, its tensors, those two or more of it
        use (each with the levels below the top memory all their users here may hold
        it in), and the finest split of the group."""
        found = self._facts.get(group)
        if found is None:
            common = sorted(set.intersection(*(set(self.info[e].rank_variables) for e in group)))
            tensors = sorted({t for e in group for t in self.info[e].tensors})
            shared = {}
            for t in tensors:
                users = [e for e in group if t in self.tensors[e]]
                if len(users) > 1:
                    shared[t] = [
                        self.level[m.name]
                        for m in self.memories[1:]
                        if all(self._may_hold(e, t, m.name) for e in users)
                    ]
            found = self._facts[group] = (common, tensors, shared, tuple((e,) for e in group))
        return found

    def _can_end(self, group, p: _Path) -> bool:
        """Whether a block of a tensor two Einsums of ``group`` use may still come (a
        memory below its deepest node so far; a backing node only where every user is)."""
        _, _, shared, _ = self._group_facts(group)
        levels = dict(p.levels)
        return any(
            lv > levels.get(t, -1)
            for t, lvs in shared.items()
            if t in levels or set(self.users[t]) <= set(group)
            for lv in lvs
        )

    def _suffixes(self, group, p: _Path, first: bool) -> list:
        """The ends of segments of ``group`` after a prefix that is empty (``first``) or
        ends in a run, with the path ``p`` after it."""
        key = (group, p, first)
        found = self._suffix_cache.get(key)
        if found is not None:
            return found
        common, tensors, _, singles = self._group_facts(group)
        out = []
        runs_left = any(dict(p.sizes)[v] > 1 for v in common)
        for block, q in self._blocks(group, tensors, p, False, first):
            if self._end_block_ok(_marked(block, dict(p.levels)), first, singles):
                out.append((block, q))
            if runs_left and self._can_end(group, q):
                for run, r in self._sections(group, common, q, False):
                    out += [(block + run + rest, z) for rest, z in self._suffixes(group, r, False)]
        if first:
            for run, r in self._sections(group, common, p, False):
                out += [(run + rest, z) for rest, z in self._suffixes(group, r, False)]
        self._suffix_cache[key] = out
        return out

    def _leaves(self, name: str, p: _Path, after_run: bool, first: bool) -> list:
        """Every tail of Einsum ``name`` from the path ``p`` (its own view) down to its
        compute leaf; ``after_run``: the tail so far ends in a run; ``first``: it is
        empty."""
        key = (name, p, after_run, first)
        found = self._leaf_cache.get(key)
        if found is not None:
            return found
        group = (name,)
        common, tensors, _, _ = self._group_facts(group)
        out = []
        if all(size == 1 for _, size in p.sizes):
            out.append(((_C, name),))
        if after_run or first:
            for block, q in self._blocks(group, tensors, p, True, first):
                out += [block + rest for rest in self._leaves(name, q, False, False)]
        if first or not after_run:
            for run, q in self._sections(group, common, p, True, first):
                out += [run + rest for rest in self._leaves(name, q, True, False)]
        self._leaf_cache[key] = out
        return out

    def _blocks(self, group, tensors, p: _Path, single: bool, first: bool):
        """Non-empty blocks of adjacent storage nodes (each tensor's nodes going down),
        one order per lowering signature (see the module docstring)."""
        top = self.memories[0]
        levels0 = dict(p.levels)
        at_root = first and not levels0 and len(group) == len(self.einsums)
        forced, choices = [], []
        for t in tensors:
            users = self.users[t]
            if single and t not in self.tensors[group[0]]:
                continue  # a private node of a tensor the Einsum does not use
            for mem in self.memories:
                lv = self.level[mem.name]
                if lv <= levels0.get(t, -1):
                    continue
                if mem is top and not at_root:
                    continue
                if t not in levels0 and not set(users) <= set(group):
                    continue  # a backing node must be common to every user
                if not all(self._may_hold(e, t, mem.name) for e in users if e in group):
                    continue
                kept = any(t in self.ae.components(e)[mem.name].keep for e in users)
                (forced if mem is top and kept else choices).append((t, lv, mem.name))
        last = single and all(size == 1 for _, size in p.sizes)  # right above the leaf
        for subset in self._subsets(group, forced, choices, p):
            if last and any(
                self._only_adds(group[0], t, m)
                and (t in levels0 or any(y[0] == t for y in subset[:k]))
                for k, (t, _, m) in enumerate(subset)
            ):
                continue  # a node below every loop that only adds accesses (docstring)
            for seq in self._block_orders(group, forced + subset, levels0):
                levels = dict(levels0)
                lasts, lowering, used = dict(p.last_of), dict(p.lowering), dict(p.used)
                for t, lv, m in seq:
                    backing = t not in levels
                    levels[t] = lv
                    for e in group:
                        if t not in self.tensors[e]:
                            continue
                        lasts[e] = t
                        if e in lowering:  # its lowered holder stops here
                            self._reserve(used, e, *lowering.pop(e), p.sizes)
                        if backing:  # reserved right under itself
                            self._reserve(used, e, t, m, p.sizes)
                        else:  # lowered from here, or stopped by its next node
                            lowering[e] = (t, m)
                if self._overflows(used, lowering):
                    continue  # no tree below fits (see the module docstring)
                nodes = tuple((_S, t, m) for t, _, m in seq)
                q = _Path(
                    p.sizes,
                    p.looped,
                    _items(levels),
                    _items(lasts),
                    _items(lowering),
                    _items(used),
                    p.spread,
                )
                yield nodes, q

    def _subsets(self, group, forced, choices, p: _Path):
        """The sets of ``choices`` a block may hold (with ``forced``, non-empty), but for
        those that overflow a memory in every order: each node reserves at least its
        tile if it is a backing node, else one value, and a holder being lowered above
        stops at the block (its tile) when its Einsum has a node in it."""
        choices = sorted(choices)  # each tensor's nodes going down
        above = set(dict(p.levels)) | {t for t, _, _ in forced}  # tensors with a node above
        lowering0 = dict(p.lowering)
        base = dict(p.used)
        for e, (t, m) in lowering0.items():
            if m in self.size:
                base[e, m] = base.get((e, m), 0.0) + self._bits(e, t, m, ())
        limit = {m: size * (1 + 1e-9) for m, size in self.size.items()}

        def rec(i: int, chosen: list, lb: dict, touched: frozenset):
            if chosen or forced:
                yield chosen
            for j in range(i, len(choices)):
                t, _, m = x = choices[j]
                backing = t not in above and all(y[0] != t for y in chosen)
                new = dict(lb)
                users = [e for e in group if t in self.tensors[e]]
                for e in users:
                    if e not in touched and e in lowering0:
                        t0, m0 = lowering0[e]
                        if m0 in self.size:
                            extra = self._bits(e, t0, m0, p.sizes) - self._bits(e, t0, m0, ())
                            new[e, m0] = new.get((e, m0), 0.0) + extra
                    if m in self.size:
                        bits = self._bits(e, t, m, p.sizes if backing else ())
                        new[e, m] = new.get((e, m), 0.0) + bits
                if any(bits > limit[mm] for (_, mm), bits in new.items()):
                    continue
                yield from rec(j + 1, chosen + [x], new, touched | set(users))

        yield from rec(0, [], base, frozenset())

    def _reserve(self, used: dict, einsum: str, tensor: str, memory: str, sizes: tuple):
        if memory in self.size:
            key = (einsum, memory)
            used[key] = used.get(key, 0.0) + self._bits(einsum, tensor, memory, sizes)

    def _block_orders(self, group, rest, levels0):
        """Orders of a block's nodes, one per lowering signature: each Einsum's last
        node is the deepest of its tensor in the block; for every choice of them that
        some order realizes (each last node after the Einsum's other chosen ones), that
        order of the chosen nodes after the others (going down)."""
        shallow = set(levels0)
        deepest: dict[str, tuple] = {}
        count: dict[str, int] = {}
        for x in rest:
            count[x[0]] = count.get(x[0], 0) + 1
            if x[0] not in deepest or x[1] > deepest[x[0]][1]:
                deepest[x[0]] = x
        members = [[x for x in deepest.values() if x[0] in self.tensors[e]] for e in group]
        want = [(e, m) for e, m in zip(group, members, strict=True) if m]

        def backing(x) -> bool:
            return x[0] not in shallow and count[x[0]] == 1

        # An Einsum with a node it may lower that no other Einsum here uses lowers one
        # (lowering nothing is no better: the module docstring).
        own_lowerable = {
            e: any(not backing(x) and self._only_user(e, x[0], group) for x in m) for e, m in want
        }
        seen = set()
        for lasts in itertools.product(*(m for _, m in want)):
            sig = tuple(
                None if backing(x) else x for x in lasts
            )  # a backing node is reserved under itself wherever it sits: no lowering
            if sig in seen or any(
                own_lowerable[e] and x is None for (e, _), x in zip(want, sig, strict=True)
            ):
                continue
            chosen = list(dict.fromkeys(lasts))
            for order in itertools.permutations(chosen):
                pos = {x: k for k, x in enumerate(order)}
                if all(
                    pos[y] <= pos[x] for (e, _), x in zip(want, lasts, strict=True)
                    for y in chosen if y[0] in self.tensors[e]
                ):  # fmt: skip
                    break
            else:
                continue
            seen.add(sig)
            front = sorted((x for x in rest if x not in pos), key=_down)
            yield front + list(order)

    def _only_adds(self, einsum: str, tensor: str, memory: str) -> bool:
        """Whether a node of ``tensor`` in ``memory`` that is not a backing node and has
        no loop below it only adds accesses: the memory need not keep the tensor, and an
        output's first values are skipped (or not) alike everywhere, in a non-copy."""
        key = (einsum, tensor, memory)
        found = self._adds.get(key)
        if found is None:
            comps = self.flat[einsum].path
            info = self.info[einsum]
            found = (
                self._monotone[einsum]
                and tensor not in self.ae.components(einsum)[memory].keep
                and (
                    tensor not in info.outputs
                    or not info.is_copy
                    and len({c.skip_initial_output_write for c in comps}) == 1
                )
            )
            self._adds[key] = found
        return found

    def _only_user(self, einsum: str, tensor: str, group) -> bool:
        """Whether ``einsum`` is the only Einsum of ``group`` using ``tensor``."""
        return all(e == einsum or tensor not in self.tensors[e] for e in group)

    def _sections(self, group, common, p: _Path, single: bool, first: bool = False) -> list:
        """Non-empty sequences of loops between two storage nodes (or a storage node and
        the leaf): runs of temporal loops (``_runs``) and single spatial loops, no two
        runs adjacent (a spatial loop breaks a run: see the module docstring); with the
        path after each. ``first``: in a tail, nothing above it in the tail."""
        key = (group, p, single, first)
        found = self._section_cache.get(key)
        if found is not None:
            return found
        out: list = []

        def extend(nodes: tuple, q: _Path, at_start: bool, after_run: bool) -> None:
            if nodes:
                out.append((nodes, q))
            if not after_run:
                for run, r in self._runs(group, common, q, single, at_start):
                    extend(nodes + run, r, False, True)
            for loop, r in self._spatials(group, common, q):
                extend(nodes + loop, r, False, False)

        extend((), p, first, False)
        self._section_cache[key] = out
        return out

    def _spatials(self, group, common, p: _Path) -> list:
        """One spatial loop (as a 1-tuple of nodes) over a variable every Einsum of
        ``group`` has, on each fanout dimension, with its tile chosen as a temporal
        loop's (the first loop of a variable any size, later ones divide) and its
        instances (``ceil(tile above / tile)``, at least 2) times those already used on
        the path within the fanout; with the path after it. A holder being lowered
        passes it as a temporal loop when the loop is of its own memory and stops above
        it otherwise (``capacity._lowered``)."""
        key = (group, p)
        found = self._spatial_cache.get(key)
        if found is not None:
            return found
        out = []
        bounds = self.info[group[0]].bounds
        sizes0 = dict(p.sizes)
        spread0 = dict(p.spread)
        for comp, dim, fanout in self.fanouts:
            used = spread0.get((comp, dim), 1)
            if not self.spatial_under_holders and any(
                lv >= self.level[comp] for _, lv in p.levels
            ):  # a chain through it has a holder at or below the fanout above it
                continue
            for v in common:
                size = sizes0[v]
                if v in p.looped or size != bounds[v] or self.even_spatial:
                    tiles = [t for t in range(1, size) if size % t == 0]
                else:
                    tiles = list(range(1, size))
                for tile in tiles:
                    trips = -(-size // tile)
                    if used * trips > fanout:
                        continue
                    lowering, used_bits = dict(p.lowering), dict(p.used)
                    for e, (t, m) in p.lowering:
                        kind = self._rel(e, t, v)
                        if m == comp and kind == "relevant":
                            continue  # still being lowered
                        del lowering[e]
                        at = dict(sizes0)
                        if m == comp and kind == "partial":
                            at[v] = tile
                        self._reserve(used_bits, e, t, m, _items(at))
                    if self._overflows(used_bits, lowering):
                        continue  # no tree below fits
                    sizes = dict(sizes0)
                    sizes[v] = tile
                    spread = dict(spread0)
                    spread[comp, dim] = used * trips
                    after = p._replace(
                        sizes=_items(sizes),
                        looped=p.looped | {v},
                        lowering=_items(lowering),
                        used=_items(used_bits),
                        spread=_items(spread),
                    )
                    out.append((((_P, v, tile, comp, dim),), after))
        self._spatial_cache[key] = out
        return out

    def _runs(self, group, common, p: _Path, single: bool, first: bool = False):
        """Non-empty runs of loops, at most one per variable: in a tail the orders that
        lower the Einsum's last node furthest (one per partially relevant loop it may
        pass) and, in the tail's ``first`` run, one that does not lower it at all; above
        a split one order per lowering signature."""
        options = []
        bounds = self.info[group[0]].bounds
        sizes0 = dict(p.sizes)
        for v in common:
            size = sizes0[v]
            tiles = [None]
            if size > 1:
                if v in p.looped or size != bounds[v]:
                    tiles += [t for t in range(1, size) if size % t == 0]
                else:
                    tiles += list(range(1, size))
            options.append([(v, t) for t in tiles])
        lowering0 = dict(p.lowering)
        for combo in itertools.product(*options):
            run = [x for x in combo if x[1] is not None]
            if not run:
                continue
            sizes = dict(sizes0)
            sizes.update(run)
            looped = p.looped | {v for v, _ in run}
            if single:
                orders = self._tail_orders(group[0], run, p, first)
            else:
                orders = itertools.permutations(run)
            seen = set()
            for order in orders:
                sig, lowering, used = [], dict(lowering0), dict(p.used)
                for e, (t, m) in lowering0.items():
                    passed = []
                    at = dict(sizes0)
                    going = True
                    for v, tile in order:
                        kind = self._rel(e, t, v)
                        if kind == "irrelevant":
                            going = False
                            break
                        passed.append(v)
                        at[v] = tile
                        if kind == "partial":
                            going = False
                            break
                    sig.append((e, frozenset(passed), going))
                    if not going:  # reserved where its lowering stopped
                        del lowering[e]
                        self._reserve(used, e, t, m, _items(at))
                sig = tuple(sig)
                if sig in seen:
                    continue
                seen.add(sig)
                if self._overflows(used, lowering):
                    continue  # no tree below fits
                after = _Path(
                    _items(sizes),
                    looped,
                    p.levels,
                    p.last_of,
                    _items(lowering),
                    _items(used),
                    p.spread,
                )
                yield tuple((_T, v, t) for v, t in order), after

    def _tail_orders(self, e: str, run: list, p: _Path, first: bool) -> list:
        """The orders of a run in ``e``'s tail (see the module docstring)."""
        run = sorted(run, key=lambda x: x[0])
        lowering = dict(p.lowering).get(e)
        if lowering is None:  # no holder is lowered into the run: its order changes nothing
            return [run]
        kinds = {x: self._rel(e, lowering[0], x[0]) for x in run}
        rel = [x for x in run if kinds[x] == "relevant"]
        partial = [x for x in run if kinds[x] == "partial"]
        irr = [x for x in run if kinds[x] == "irrelevant"]
        if partial:  # it passes the relevant loops and one partially relevant loop
            orders = [rel + [x] + [y for y in run if y not in rel and y is not x] for x in partial]
        else:
            orders = [rel + irr]
        if first and irr and (rel or partial):  # not lowered: it stops above the tail
            orders.append(irr + rel + partial)
        return orders

    def _end_block_ok(self, trailing, no_loop: bool, parts) -> bool:
        """Whether the storage nodes after the last loop of a segment, right above the
        split into ``parts``, may stay there (the module docstring): each is a top-memory
        node at the root, or of a tensor used in two parts or more, or followed in the
        block by a node of one of its users, which for a tensor only one Einsum of the
        group uses must be that Einsum's last node of the block and not a backing node.
        ``trailing``: (tensor, memory, whether it is a backing node) per node."""
        key = ("end", trailing, no_loop, parts)
        ok = self._split_cache.get(key)
        if ok is None:
            top = self.memories[0].name
            group = [e for part in parts for e in part]
            ok = True
            for i, (t, mem, _) in enumerate(trailing):
                if mem == top and no_loop:
                    continue
                if sum(any(t in self.tensors[e] for e in part) for part in parts) >= 2:
                    continue
                users = [e for e in group if t in self.tensors[e]]
                later = [
                    x for x in trailing[i + 1 :] if any(x[0] in self.tensors[e] for e in users)
                ]
                if not later:
                    ok = False  # the same tree as with the node at the top of its part
                elif len(users) == 1:
                    last = [x for x in trailing if x[0] in self.tensors[users[0]]][-1]
                    ok = not last[2]  # else no worse at the top of its part
                if not ok:
                    break
            self._split_cache[key] = ok
        return ok

    def _split_ok(self, looped: frozenset, parts) -> bool:
        """No loop above the split over a variable reduced by a producer whose output is
        read in a later group (that reader would see a partial value)."""
        key = ("split", looped, parts)
        ok = self._split_cache.get(key)
        if ok is None:
            ok = True
            for i, a in enumerate(parts):
                for b in parts[i + 1 :]:
                    for e in a:
                        info = self.info[e]
                        for out in info.outputs:
                            if not any(out in self.tensors[r] for r in b):
                                continue
                            if any(
                                v in info.rank_variables and self._rel(e, out, v) == "irrelevant"
                                for v in looped
                            ):
                                ok = False
            self._split_cache[key] = ok
        return ok

    # ------------------------------------------------------------------ scoring
    def _tails(self, name: str, above: tuple, path: _Path) -> list:
        """Every valid tail of Einsum ``name`` below its own nodes ``above`` (``path``
        after them) with its energy, latency and usage. Tails depend on what the path did
        to the Einsum's own ranks and tensors only, their costs on its own nodes above."""
        found = self._tail_cache.get((name, above))
        if found is not None:
            return found
        key = (name, self._canon(name, above))
        found = self._tail_cache.get(key)
        if found is not None:
            self._tail_cache[name, above] = found
            return found
        own = self._view((name,), path)
        leaves = self._leaves(name, own, False, True)
        lowered = dict(own.lowering).get(name)  # the holder above being lowered, if any
        costed = []
        for leaf in leaves:
            cost = self._chain_cost(name, above + leaf)
            if cost is not None:
                # Whether the tail lowers that holder: its first loop (relevant ones come
                # first) is relevant or partially relevant to the holder's tensor.
                into = (
                    lowered is not None
                    and leaf[0][0] in (_T, _P)
                    and (leaf[0][0] == _T or leaf[0][3] == lowered[1])
                    and self._rel(name, lowered[0], leaf[0][1]) != "irrelevant"
                )
                costed.append((*cost, leaf, into))
        # Drop a tail that another beats or ties on energy, latency and the usage of the
        # Einsum's chain in every memory, both lowering the holder above into the tail or
        # neither (the module docstring).
        costed.sort(key=lambda x: (x[0], x[1], x[2]))
        out: list = []
        for c in costed:
            if not any(d[4] == c[4] and _covers(d, c) for d in out):
                out.append(c)
        self._tail_cache[key] = self._tail_cache[name, above] = out
        return out

    def _chain_cost(self, name: str, chain: tuple):
        """(energy, latency, usage of each bounded memory) of one Einsum's chain (its own
        nodes), or None when it is not valid for it (a tensor with no node, a ``keep``
        not met, a tile the model refuses, a buffer it overflows alone)."""
        key = (name, self._canon(name, chain))
        if key in self._cost:
            return self._cost[key]
        self.work += 1
        if self.work > self.max_work:
            raise RuntimeError(f"more than {self.max_work} steps: case too big")
        info = self.info[name]
        held = {(n[1], n[2]) for n in chain if n[0] == _S}
        ok = all(any(t == h for h, _ in held) for t in info.tensors)
        for t in info.tensors:
            for mem in self.memories:
                if t in self.ae.components(name)[mem.name].keep and (t, mem.name) not in held:
                    ok = False
        cost = None
        if ok:
            # A chain holds each node once: one mapping node per tuple serves every chain.
            nodes = [
                self._nodes.get(n) or self._nodes.setdefault(n, _node(n, self.unit)) for n in chain
            ]
            try:
                built = build_chain(nodes, info, self.wl, self.flat[name])
                # Everything the path reserves is live while the Einsum runs: a path that
                # overflows alone overflows in every tree.
                usage, _ = memory_usage([built], [nodes])
                if all(usage.get(m.name, 0.0) <= m.size * (1 + 1e-9) for m in self.memories):
                    r = einsum_costs(built, self.wl.n_instances * info.n_instances)
                    if self._reaches_min_usage(name, r.fanout_usage):
                        cost = (r.energy, r.latency, tuple(usage.get(m, 0.0) for m in self.size))
            except InvalidMappingError:
                cost = None
        self._cost[key] = cost
        return cost

    def _reaches_min_usage(self, einsum: str, used: dict[str, float]) -> bool:
        """Whether a chain uses as many instances of every fanout dimension as the
        Einsum must (``min_usage``: the model does not check it, the mapper does)."""
        return all(
            used.get(f"{comp}.{dim}", 1.0) >= self.need[einsum, comp, dim]
            for comp, dim, _ in self.fanouts
        )

    def _canon(self, einsum: str, chain: tuple) -> tuple:
        """A chain of ``einsum``'s own nodes with the same energy, latency and
        reservations (its cost key): every run of loops in one order, given by the loops
        its lowered holder passes (see the module docstring)."""
        out: list = []
        seen: set[str] = set()
        holder = None  # (tensor, memory) of the holder being lowered into the next run
        i = 0
        while i < len(chain):
            n = chain[i]
            if n[0] != _T:
                if n[0] == _S:
                    holder = (n[1], n[2]) if n[1] in seen else None
                    seen.add(n[1])
                elif n[0] == _P and holder is not None:  # does it pass the spatial loop?
                    if n[3] != holder[1] or self._rel(einsum, holder[0], n[1]) != "relevant":
                        holder = None
                else:
                    holder = None
                out.append(n)
                i += 1
                continue
            j = i
            while j < len(chain) and chain[j][0] == _T:
                j += 1
            run = list(chain[i:j])
            out += self._canon_run(einsum, holder and holder[0], run)
            if holder is not None and any(  # a run it does not pass whole stops it
                self._rel(einsum, holder[0], x[1]) != "relevant" for x in run
            ):
                holder = None
            i = j
        return tuple(out)

    def _canon_run(self, einsum: str, holder: str | None, run: list) -> list:
        """``run`` in its canonical order: the loops ``holder`` passes (relevant ones by
        variable, then a partially relevant one), an irrelevant loop that stops it, the
        others by variable (a stable sort keeps two loops over one variable in order)."""
        by_var = lambda x: x[1]  # noqa: E731
        if holder is None:
            return sorted(run, key=by_var)
        passed: list = []
        for x in run:
            kind = self._rel(einsum, holder, x[1])
            if kind == "irrelevant":
                break
            passed.append(x)
            if kind == "partial":
                rest = run[len(passed) :]
                return sorted(passed[:-1], key=by_var) + [x] + sorted(rest, key=by_var)
        rest = run[len(passed) :]
        head = sorted(passed, key=by_var)
        if not rest:
            return head
        firsts = [x for k, x in enumerate(rest) if all(y[1] != x[1] for y in rest[:k])]
        stop = min(
            (x for x in firsts if self._rel(einsum, holder, x[1]) == "irrelevant"), key=by_var
        )
        return head + [stop] + sorted((x for x in rest if x is not stop), key=by_var)

    def _fits(self, mapping: M.Mapping) -> bool:
        self.work += 1
        by_einsum = branch_chains(mapping)
        chains = [build_chain(by_einsum[n], self.info[n], self.wl, self.flat[n]) for n in by_einsum]
        usage, _ = memory_usage(chains, [by_einsum[n] for n in by_einsum])
        return all(usage.get(m.name, 0.0) <= m.size * (1 + 1e-9) for m in self.memories)

    def solve(self) -> dict[str, Optimum]:
        """The optimum of energy, latency and EDP over every valid LoopTree."""
        bounds = {v: b for e in self.einsums for v, b in self.info[e].bounds.items()}
        start = _Path(_items(bounds), frozenset(), (), (), (), (), ())
        skeletons = []
        for struct, holes in self.skeletons(tuple(self.einsums), start):
            tails = []
            for e, above, own in holes:
                ts = self._tails(e, above, own)
                if not ts:
                    break
                tails.append(ts)
            else:
                skeletons.append((struct, tails))
        return {
            objective: self._best(skeletons, objective)
            for objective in ("energy", "latency", "edp")
        }

    def _best(self, skeletons, objective: str) -> Optimum:
        """Best-first over (skeleton, tail choices) by a lower bound of the objective:
        the summed energy or latency; for EDP the summed energy times the skeleton's
        least latency. ``skeletons``: (structure, [tails of each hole])."""
        key = 1 if objective == "latency" else 0
        order = lambda x: (x[key], x[1 - key])  # noqa: E731
        by_order: dict[int, list] = {}

        def ordered(ts):
            found = by_order.get(id(ts))
            if found is None:
                found = by_order[id(ts)] = sorted(ts, key=order)
            return found

        fastest = []  # per skeleton, its least latency (EDP's bound)
        for _, lists in skeletons:
            fastest.append(sum(min(t[1] for t in ts) for ts in lists) if key == 0 else 1.0)
        scale = fastest if objective == "edp" else [1.0] * len(skeletons)
        heap = []
        for s, (_, lists) in enumerate(skeletons):
            pick = (0,) * len(lists)
            heap.append((_total([ordered(ts) for ts in lists], pick, key) * scale[s], s, pick))
        heapq.heapify(heap)
        seen = set()
        best = None
        while heap:
            bound, s, pick = heapq.heappop(heap)
            if best is not None and bound >= best.value:
                break
            lists = [ordered(ts) for ts in skeletons[s][1]]
            chosen = [ts[i] for ts, i in zip(lists, pick, strict=True)]
            energy = sum(c[0] for c in chosen)
            latency = sum(c[1] for c in chosen)
            value = {"energy": energy, "latency": latency}.get(objective, energy * latency)
            if best is None or value < best.value:
                tails = [c[3] for c in chosen]
                fit_key = (s, tuple(map(id, tails)))
                fits = self._fit_cache.get(fit_key)
                mapping = None
                if fits is None or fits:
                    mapping = _assemble(skeletons[s][0], tails, self.unit)
                if fits is None:
                    fits = self._fit_cache[fit_key] = self._fits(mapping)
                if fits:
                    best = Optimum(value, energy, latency, mapping)
            for k in range(len(pick)):  # the successors: one hole one step further
                nxt = pick[:k] + (pick[k] + 1,) + pick[k + 1 :]
                if nxt[k] < len(lists[k]) and (s, nxt) not in seen:
                    seen.add((s, nxt))
                    heapq.heappush(heap, (_total(lists, nxt, key) * scale[s], s, nxt))
        assert best is not None, "no valid LoopTree"
        result = evaluate_mapping(self.spec, best.mapping, workload=self.wl, arch=self.ae)
        assert math.isclose(result.energy, best.energy, rel_tol=1e-9)
        assert math.isclose(result.latency, best.latency, rel_tol=1e-9)
        return best


def _covers(a, b) -> bool:
    """Whether costed tail ``a`` is as good as ``b`` on energy, latency and usage."""
    return a[0] <= b[0] and a[1] <= b[1] and all(x <= y for x, y in zip(a[2], b[2], strict=True))


def _total(lists, pick, key) -> float:
    return sum(ts[i][key] for ts, i in zip(lists, pick, strict=True))


def _node(n: tuple, unit: str) -> M.MappingNode:
    """A new mapping node (no validation: the oracle's nodes are well-formed)."""
    if n[0] == _S:
        return M.Storage.model_construct(tensors=[n[1]], component=n[2])
    if n[0] == _T:
        return M.Temporal.model_construct(rank_variable=n[1], tile_shape=n[2])
    if n[0] == _P:
        return M.Spatial.model_construct(
            rank_variable=n[1], tile_shape=n[2], component=n[3], name=n[4]
        )
    return M.Compute.model_construct(einsum=n[1], component=unit)


def _assemble(struct, tails: list, unit: str) -> M.Mapping:
    """The skeleton with its holes, left to right, replaced by ``tails``."""
    fill = iter(tails)

    def build(s) -> list:
        if s[0] == "H":
            return [_node(n, unit) for n in next(fill)]
        segment, subs = s
        kids = [M.Nested.model_construct(nodes=build(sub)) for sub in subs]
        return [_node(n, unit) for n in segment] + [M.Sequential.model_construct(nodes=kids)]

    return M.Mapping.model_construct(nodes=build(struct))


def _down(x) -> tuple:
    return (x[1], x[0])


def _tensors(nodes) -> set:
    return {n[1] for n in nodes if n[0] == _S}


def _marked(block, above) -> tuple:
    """(tensor, memory, whether it is a backing node) per storage node of ``block``;
    ``above``: the tensors with a node above it."""
    seen = set(above)
    out = []
    for n in block:
        out.append((n[1], n[2], n[1] not in seen))
        seen.add(n[1])
    return tuple(out)


def _items(d: dict) -> tuple:
    return tuple(sorted(d.items()))
