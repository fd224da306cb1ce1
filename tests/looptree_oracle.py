"""An independent oracle for the whole mapspace: every LoopTree of a tiny workload.

It shares no code with the mapper: it builds LoopTrees node by node from the LoopTree
grammar and asks the model (:mod:`fusemap.model`) for their energy, latency and buffer
usage. A tree, for the Einsums E0..En-1 in the given order, is a *segment* (a sequence
of storage nodes and loops) followed either by one Einsum's compute leaf or by a split of
its Einsums into consecutive groups, each again such a tree. Every tree is enumerated:

* storage nodes: any tensor used below, in any memory that may hold it (``keep`` /
  ``may_keep``; ``keep`` is a must), going down the hierarchy along every path, at most
  one per memory and path; the backing node of a tensor (its first node on each user's
  path) is common to all its users (it lies in the segment of a group holding every
  user); nodes of the unbounded top memory sit at the root (anywhere else they change no
  count and no usage);
* loops: any rank variable of every Einsum below, tiles shrinking to 1 at each leaf;
  the first loop of a variable on a path may take any size (the ranks are small), later
  ones divide the tile above; no spatial loops (the cases have no fanout);
* no loop over a rank variable that an Einsum reduces shared with a reader of that
  Einsum's output (the reader would see a partial value);
* a tree is valid when the model accepts it (capacity).

Two reductions keep the enumeration small; neither can lose an optimum:

* In a run of consecutive loops (no storage node between), at most one loop per rank
  variable: of two, the outer one cuts a tile no node sees, so no count changes, no
  reservation changes (a holder lowered through the run passes both or stops before
  both) and no lifetime changes (the inner loop lies between the same reservations and
  splits).
* Below the last split on an Einsum's path (its *tail*, which only it uses), the loops
  of a run come in one order: relevant to the Einsum's last storage node above first,
  then partially relevant, then the others. Loop order in a run changes no count
  (``tests/test_model_loop_order.py``); it only decides how far that node's reservation
  is lowered, and this order lowers it furthest, so every other order has the same costs
  and at least its usage. (Runs above a split are enumerated in every order: each chain
  through them may be lowering another node.)

* No loop right above a split (after the last storage node of its segment): moved into
  every group below, each chain keeps the same nodes in the same order, and every
  reservation above it lives no longer (a loop between a reservation and a split makes
  it live for every group), so the tree without it is at least as good.

The search: for every *skeleton* (the tree with each Einsum's tail left open), each
Einsum's tails are costed alone (energy and latency of an Einsum depend only on its own
path), then combinations are visited best-first and the model checks each assembled
tree; the first that fits is the optimum of that skeleton.
"""

from __future__ import annotations

import heapq
import itertools
import math
from dataclasses import dataclass

from fusemap.model.capacity import memory_usage
from fusemap.model.chains import branch_chains, build_chain
from fusemap.model.costs import einsum_costs
from fusemap.model.evaluate import evaluate_mapping
from fusemap.spec import mapping as M
from fusemap.spec.arch_eval import ArchEvaluator
from fusemap.spec.errors import InvalidMappingError
from fusemap.spec.resolve import resolve_workload

RANK = {"relevant": 0, "partial": 1, "irrelevant": 2}


@dataclass(frozen=True)
class Optimum:
    """The best value of one objective and a LoopTree reaching it."""

    value: float
    energy: float
    latency: float
    mapping: M.Mapping


@dataclass(frozen=True)
class _Path:
    """What a path from the root has done so far."""

    sizes: tuple[tuple[str, int], ...]  # current tile of every rank variable
    looped: frozenset[str]  # variables with a loop above (later loops divide)
    levels: tuple[tuple[str, int], ...]  # tensor -> deepest memory level on the path
    last_of: tuple[tuple[str, str], ...]  # Einsum -> tensor of its last node on the path

    def size(self, v: str) -> int:
        return dict(self.sizes)[v]


@dataclass(frozen=True, eq=False)
class _Hole:
    """An Einsum's open tail in a skeleton."""

    einsum: str
    path: _Path


class LoopTreeOracle:
    """Every LoopTree of ``spec``'s workload (given order) on its single compute unit."""

    def __init__(self, spec, max_work: int = 2_000_000):
        self.spec = spec
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
        self.users = {
            t: [e for e in self.einsums if t in self.info[e].tensors] for t in self.wl.tensors
        }
        self.max_work = max_work
        self.work = 0  # tails costed plus trees checked
        self._cost: dict[tuple, tuple[float, float] | None] = {}
        self._chains: dict[tuple, object] = {}
        self._tail_cache: dict[tuple, list] = {}
        self._tail_nodes: dict[_Path, list] = {}
        self._skeletons: dict[tuple, list] = {}

    # ------------------------------------------------------------------ the grammar
    def _may_hold(self, einsum: str, tensor: str, memory: str) -> bool:
        comp = self.ae.components(einsum)[memory]
        return tensor in comp.keep or tensor in comp.may_keep

    def skeletons(self, group: tuple[str, ...], path: _Path) -> list:
        """Every skeleton of ``group`` below ``path`` (nodes, with a :class:`_Hole` for
        each Einsum's tail and a list of node lists for each split). The same subtree may
        sit in many skeletons: it is made once (a tree holds it once)."""
        key = (group, path)
        if key in self._skeletons:
            return self._skeletons[key]
        out: list = []
        if len(group) == 1:
            out.append([_Hole(group[0], path)])
        for segment, after in self._segments(list(group), path) if len(group) > 1 else ():
            if segment and isinstance(segment[-1], M.Temporal):
                continue  # a loop right above a split: see the module docstring
            for cut in _splits(len(group)):
                parts = [group[a:b] for a, b in zip((0, *cut), (*cut, len(group)), strict=True)]
                if not self._split_ok(after, parts) or not self._tail_block_ok(segment, parts):
                    continue
                subs = [self.skeletons(p, after) for p in parts]
                for combo in itertools.product(*subs):
                    out.append(segment + [list(combo)])  # a split, built when assembled
        self._skeletons[key] = out
        return out

    def _segments(self, group, path: _Path):
        """Sequences of storage nodes and loops for ``group`` (a segment), with the path
        after it. Blocks of adjacent storage nodes and runs of loops alternate."""
        single = len(group) == 1
        common = sorted(set.intersection(*(set(self.info[e].rank_variables) for e in group)))
        tensors = sorted({t for e in group for t in self.info[e].tensors})

        def rec(nodes, p: _Path, after_run: bool):
            yield nodes, p
            if after_run or not nodes:
                for block, q in self._blocks(group, tensors, p, single, not nodes):
                    yield from rec(nodes + block, q, False)
            if not nodes or not after_run:
                for run, q in self._runs(group, common, p, single):
                    yield from rec(nodes + run, q, True)

        yield from rec([], path, False)

    def _blocks(self, group, tensors, p: _Path, single: bool, first: bool):
        """Non-empty blocks of adjacent storage nodes (each tensor's nodes going down).

        The unbounded top memory's nodes come first, in one order (backing nodes that
        never lower). In a tail, every node is the Einsum's own, so only the last one can
        be lowered by the run below: one order but for a last node that is not a backing
        node (or none). Above a split each chain sees its own nodes only, so every order.
        """
        top = self.memories[0]
        levels0 = dict(p.levels)
        at_root = first and not levels0 and len(group) == len(self.einsums)
        forced, choices = [], []
        for t in tensors:
            users = self.users[t]
            if single and t not in self.info[group[0]].tensors:
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
        for k in range(0 if forced else 1, len(choices) + 1):
            for subset in itertools.combinations(choices, k):
                tops = [x for x in subset if x[1] == 0]
                rest = [x for x in subset if x[1] > 0]
                for order in self._block_orders(rest, levels0, single):
                    seq = sorted(forced + tops, key=lambda x: x[0]) + order
                    levels, lasts = dict(levels0), dict(p.last_of)
                    if not _going_down(seq, levels):
                        continue
                    for t, _, _ in seq:
                        for e in group:
                            if t in self.info[e].tensors:
                                lasts[e] = t
                    nodes = [_storage(t, m) for t, _, m in seq]
                    q = _Path(p.sizes, p.looped, tuple(sorted(levels.items())), _items(lasts))
                    yield nodes, q

    @staticmethod
    def _block_orders(nodes, levels0, single: bool):
        """The orders a block's non-top nodes are tried in (see :meth:`_blocks`)."""
        if not nodes:
            yield []
            return
        if not single:
            yield from (list(o) for o in itertools.permutations(nodes))
            return
        canon = sorted(nodes, key=lambda x: (x[1], x[0]))
        yield canon
        first_of = {}
        for t, lv, _ in canon:
            first_of.setdefault(t, lv)
        for last in canon[:-1]:
            t, lv, _ = last
            if levels0.get(t) is None and first_of[t] == lv:
                continue  # a backing node never lowers: where it sits changes nothing
            yield [x for x in canon if x is not last] + [last]

    def _runs(self, group, common, p: _Path, single: bool):
        """Non-empty runs of loops, at most one per variable: in a tail in the order that
        lowers the Einsum's last node furthest, above a split in every order."""
        options = []
        bounds = self.info[group[0]].bounds
        for v in common:
            size = p.size(v)
            tiles = [None]
            if size > 1:
                if v in p.looped or size != bounds[v]:
                    tiles += [t for t in range(1, size) if size % t == 0]
                else:
                    tiles += list(range(1, size))
            options.append([(v, t) for t in tiles])
        for combo in itertools.product(*options):
            run = [x for x in combo if x[1] is not None]
            if not run:
                continue
            if single:
                info = self.info[group[0]]
                last = dict(p.last_of).get(group[0])
                if last is not None:
                    run.sort(key=lambda x: (RANK[info.relevance(last, x[0])], x[0]))
                orders = [run]
            else:
                orders = [list(o) for o in itertools.permutations(run)]
            sizes = dict(p.sizes)
            sizes.update(run)
            after = _Path(_items(sizes), p.looped | {v for v, _ in run}, p.levels, p.last_of)
            for order in orders:
                yield [_temporal(v, t) for v, t in order], after

    def _tail_block_ok(self, segment, parts) -> bool:
        """Storage nodes after the last loop of a segment, right above the split, are of
        tensors used in two parts or more (or top-memory backing nodes): a node only one
        part uses sits there exactly as at the top of that part (same chains, same
        lifetime, no loop in between), which is enumerated there."""
        top = self.memories[0].name
        end = len(segment)
        while end and isinstance(segment[end - 1], M.Storage):
            end -= 1
        for node in segment[end:]:
            t = node.tensors[0]
            parts_using = sum(any(t in self.info[e].tensors for e in part) for part in parts)
            if parts_using < 2 and not (node.component == top and end == 0):
                return False
        return True

    def _split_ok(self, path: _Path, parts) -> bool:
        """No loop above the split over a variable reduced by a producer whose output is
        read in a later group (that reader would see a partial value)."""
        for i, a in enumerate(parts):
            for b in parts[i + 1 :]:
                for e in a:
                    info = self.info[e]
                    for out in info.outputs:
                        if not any(out in self.info[r].tensors for r in b):
                            continue
                        if any(
                            v in info.rank_variables and info.relevance(out, v) == "irrelevant"
                            for v in path.looped
                        ):
                            return False
        return True

    # ------------------------------------------------------------------ scoring
    def _tails(self, name: str, path: _Path, above: list) -> list:
        """Every valid tail of Einsum ``name`` below ``above`` with its energy and
        latency, sorted. Tails depend on what the path did to the Einsum's own ranks and
        tensors only, their costs on its own nodes above (both cached)."""
        info = self.info[name]
        own = self._own_path(name, path)
        if own not in self._tail_nodes:
            leaves = []
            for nodes, after in self._segments([name], own):
                if all(after.size(v) == 1 for v in info.rank_variables):
                    leaves.append(
                        nodes + [M.Compute.model_construct(einsum=name, component=self.unit)]
                    )
            self._tail_nodes[own] = leaves
        key = (name, own, tuple(_describe(n, info) for n in above))
        if key not in self._tail_cache:
            out = []
            for leaf in self._tail_nodes[own]:
                cost = self._chain_cost(name, above + leaf)
                if cost is not None:
                    out.append((cost[0], cost[1], leaf))
            out.sort(key=lambda x: (x[0], x[1]))
            self._tail_cache[key] = out
        return self._tail_cache[key]

    def _own_path(self, name: str, path: _Path) -> _Path:
        """``path`` seen by one Einsum: its ranks, its tensors, its last node."""
        info = self.info[name]
        return _Path(
            tuple(x for x in path.sizes if x[0] in info.bounds),
            frozenset(v for v in path.looped if v in info.bounds),
            tuple(x for x in path.levels if x[0] in info.tensors),
            tuple(x for x in path.last_of if x[0] == name),
        )

    def _chain_cost(self, name: str, path: list):
        """(energy, latency) of one Einsum's path, or None when it is not valid for it
        (a tensor with no node, a ``keep`` not met, a tile the model refuses)."""
        self.work += 1
        if self.work > self.max_work:
            raise RuntimeError(f"more than {self.max_work} steps: case too big")
        info = self.info[name]
        nodes = list(path)
        key = (name, tuple(_describe(n, info) for n in nodes))
        if key in self._cost:
            return self._cost[key]
        held = {(n.tensors[0], n.component) for n in nodes if isinstance(n, M.Storage)}
        ok = all(any(t == h for h, _ in held) for t in info.tensors)
        for t in info.tensors:
            for mem in self.memories:
                if t in self.ae.components(name)[mem.name].keep and (t, mem.name) not in held:
                    ok = False
        cost = None
        if ok:
            try:
                chain = build_chain(nodes, info, self.wl, self.ae.flat(name, self.unit))
                r = einsum_costs(chain, self.wl.n_instances * info.n_instances)
                # Everything the path reserves is live while the Einsum runs: a path that
                # overflows alone overflows in every tree.
                usage, _ = memory_usage([chain], [nodes])
                fits = all(usage.get(m.name, 0.0) <= m.size * (1 + 1e-9) for m in self.memories)
                cost = (r.energy, r.latency) if fits else None
            except InvalidMappingError:
                cost = None
        self._cost[key] = cost
        return cost

    def _fits(self, mapping: M.Mapping) -> bool:
        self.work += 1
        by_einsum = branch_chains(mapping)
        chains = []
        for n in self.einsums:  # chains of the same node objects are built once
            key = tuple(id(x) for x in by_einsum[n])
            if key not in self._chains:
                flat = self.ae.flat(n, self.unit)
                self._chains[key] = build_chain(by_einsum[n], self.info[n], self.wl, flat)
            chains.append(self._chains[key])
        usage, _ = memory_usage(chains, [by_einsum[n] for n in self.einsums])
        return all(usage.get(m.name, 0.0) <= m.size * (1 + 1e-9) for m in self.memories)

    def solve(self) -> dict[str, Optimum]:
        """The optimum of energy, latency and EDP over every valid LoopTree."""
        start = _Path(
            _items({v: b for e in self.einsums for v, b in self.info[e].bounds.items()}),
            frozenset(),
            (),
            (),
        )
        skeletons = []
        for nodes in self.skeletons(tuple(self.einsums), start):
            holes = [(h, self._tails(h.einsum, h.path, above)) for h, above in _holes(nodes, [])]
            if all(tails for _, tails in holes):
                skeletons.append((nodes, holes))
        return {
            objective: self._best(skeletons, objective)
            for objective in ("energy", "latency", "edp")
        }

    def _best(self, skeletons, objective: str) -> Optimum:
        """Best-first over (skeleton, tail choices) by the summed objective (energy or
        latency; EDP: by energy, until energy times the least latency passes the best).
        ``skeletons``: (nodes, [(hole, tails)])."""
        key = 1 if objective == "latency" else 0
        order = lambda x: (x[key], x[1 - key])  # noqa: E731
        sorted_tails = [[sorted(tails, key=order) for _, tails in holes] for _, holes in skeletons]
        heap = []
        for s, lists in enumerate(sorted_tails):
            pick = (0,) * len(lists)
            heapq.heappush(heap, (_total(lists, pick, key), s, pick))
        seen = set()
        best = None
        least = min(sum(min(t[1] for t in ts) for ts in lists) for lists in sorted_tails)
        while heap:
            total, s, pick = heapq.heappop(heap)
            if best is not None and (objective != "edp" or total * least >= best.value):
                break
            lists = sorted_tails[s]
            chosen = [ts[i] for ts, i in zip(lists, pick, strict=True)]
            energy = sum(c[0] for c in chosen)
            latency = sum(c[1] for c in chosen)
            value = {"energy": energy, "latency": latency}.get(objective, energy * latency)
            if best is None or value < best.value:
                nodes, holes = skeletons[s]
                fill = {id(h): c[2] for (h, _), c in zip(holes, chosen, strict=True)}
                mapping = _assemble(nodes, fill)
                if self._fits(mapping):
                    best = Optimum(value, energy, latency, mapping)
            for k in range(len(pick)):  # the successors: one hole one step further
                nxt = pick[:k] + (pick[k] + 1,) + pick[k + 1 :]
                if nxt[k] < len(lists[k]) and (s, nxt) not in seen:
                    seen.add((s, nxt))
                    heapq.heappush(heap, (_total(lists, nxt, key), s, nxt))
        assert best is not None, "no valid LoopTree"
        result = evaluate_mapping(self.spec, best.mapping, workload=self.wl, arch=self.ae)
        assert math.isclose(result.energy, best.energy, rel_tol=1e-9)
        assert math.isclose(result.latency, best.latency, rel_tol=1e-9)
        return best


def _total(lists, pick, key) -> float:
    return sum(ts[i][key] for ts, i in zip(lists, pick, strict=True))


def _holes(nodes: list, above: list):
    """(hole, the nodes on its path above it) of a skeleton, left to right."""
    for k, n in enumerate(nodes):
        if isinstance(n, _Hole):
            yield n, above + nodes[:k]
        elif isinstance(n, list):  # a split
            for child in n:
                yield from _holes(child, above + nodes[:k])


def _assemble(nodes: list, fill: dict) -> M.Mapping:
    """The skeleton with each hole replaced by its tail (``fill``: id(hole) -> nodes)."""

    def build(seq):
        out = []
        for n in seq:
            if isinstance(n, _Hole):
                out += fill[id(n)]
            elif isinstance(n, list):  # a split: one node list per group
                kids = [M.Nested.model_construct(nodes=build(k)) for k in n]
                out.append(M.Sequential.model_construct(nodes=kids))
            else:
                out.append(n)
        return out

    return M.Mapping.model_construct(nodes=build(nodes))


def _storage(tensor: str, memory: str) -> M.Storage:
    """A new storage node (no validation: the oracle's nodes are well-formed)."""
    return M.Storage.model_construct(tensors=[tensor], component=memory)


def _temporal(var: str, tile: int) -> M.Temporal:
    return M.Temporal.model_construct(rank_variable=var, tile_shape=tile)


def _going_down(seq, levels: dict) -> bool:
    """Each tensor's nodes in ``seq`` go down the hierarchy (updates ``levels``)."""
    for t, lv, _ in seq:
        if lv <= levels.get(t, -1):
            return False
        levels[t] = lv
    return True


def _items(d: dict) -> tuple:
    return tuple(sorted(d.items()))


def _describe(node, info) -> tuple:
    if isinstance(node, M.Storage):
        t = node.tensors[0]
        return ("S", t, node.component) if t in info.tensors else ("x",)
    if isinstance(node, M.Temporal):
        return ("T", node.rank_variable, node.tile_shape)
    return ("C", node.einsum)


def _splits(n: int):
    """Cut points splitting ``n`` consecutive Einsums into two or more groups."""
    for k in range(1, n):
        yield from itertools.combinations(range(1, n), k)
