"""The LoopTree oracle's grammar, within a segment: runs of loops, spatial loops, their
orders, and which splits and block ends are allowed."""

from __future__ import annotations

import itertools

from tests.support.looptree_parts import (
    _P,
    _T,
    _items,
    _Path,
)


class RunGrammar:
    """Runs of loops and spatial loops in a segment (a mixin of :class:`LoopTreeOracle`)."""

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
                and self.ae.components(einsum)[memory].keep_rule is None
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
