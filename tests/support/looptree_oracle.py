"""An independent oracle for the whole mapspace: every LoopTree of a tiny workload.

It shares no code with the mapper: it builds LoopTrees node by node from the LoopTree
grammar and asks the model (:mod:`fusemap.model`) for their energy, latency and buffer
usage. A tree, for the Einsums E0..En-1 in the given order, is a *segment* (a sequence
of storage nodes and loops) followed either by one Einsum's compute leaf or by a split of
its Einsums into consecutive groups, each again such a tree. The trees enumerated:

* storage nodes: any tensor used below, in any memory that may hold it (``keep`` /
  ``may_keep``; ``keep`` is a must; a rule naming memories, ``keep: ~DRAM``, is read
  on each Einsum's path as what they hold there, so such a memory may hold anything
  and each chain is checked), going down the hierarchy along every path, at most
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
import math

from fusemap.model.evaluate import evaluate_mapping
from fusemap.model.reuse import projection_terms
from fusemap.spec import mapping as M
from fusemap.spec.arch_eval import ArchEvaluator
from fusemap.spec.resolve import resolve_workload
from tests.support.looptree_parts import Optimum, _assemble, _items, _Path, _total
from tests.support.looptree_runs import RunGrammar
from tests.support.looptree_scoring import TailScoring
from tests.support.looptree_skeletons import SkeletonGrammar


class LoopTreeOracle(SkeletonGrammar, RunGrammar, TailScoring):
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
