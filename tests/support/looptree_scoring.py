"""The LoopTree oracle's scoring: each Einsum's tails below its holes, their chains costed
by the model once per canonical form, and whether an assembled tree fits."""

from __future__ import annotations

from fusemap.model.capacity import memory_usage
from fusemap.model.chains import branch_chains, build_chain
from fusemap.model.costs import einsum_costs
from fusemap.spec import mapping as M
from fusemap.spec.errors import InvalidMappingError
from tests.support.looptree_parts import (
    _P,
    _S,
    _T,
    _covers,
    _node,
    _Path,
)


class TailScoring:
    """Tails and their costs (a mixin of :class:`LoopTreeOracle`)."""

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
        # A memory whose keep rule names memories (`keep: ~DRAM`) reads what they hold.
        nodes = ((m, t) for t, m in held)
        ok = ok and self.ae.allows_holding(name, self.flat[name].path, nodes)
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
