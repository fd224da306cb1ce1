"""The LoopTree oracle's grammar, from the root down: skeletons (splits of the Einsums into
groups), the segments above each split, and the blocks of storage nodes in them."""

from __future__ import annotations

import itertools

from tests.support.looptree_parts import (
    _C,
    _P,
    _S,
    _T,
    _down,
    _items,
    _marked,
    _Path,
    _tensors,
)


class SkeletonGrammar:
    """Skeletons, segments and blocks of storage nodes (a mixin of :class:`LoopTreeOracle`)."""

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
