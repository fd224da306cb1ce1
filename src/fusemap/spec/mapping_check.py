"""Names in a LoopTree mapping checked against the workload and the architecture.

The model checks the same things, but it works on node objects and cannot say where a
node was written. This pass runs first (the CLI calls it before the model) and reports,
e.g.: ``map.yaml:12: mapping.nodes[3].tensors: unknown tensor 'Zz' (did you mean 'Z'?)``.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator, Mapping

from . import arch as A
from . import mapping as M
from .errors import InvalidMappingError, Location, SpecError
from .resolve import EinsumInfo, WorkloadInfo
from .spec import Spec

_KIND = {A.Memory: "memory", A.Toll: "toll", A.Compute: "compute unit", A.Container: "container"}


def mapping_nodes(spec: Spec) -> Iterator[tuple[M.MappingNode, tuple[str | int, ...]]]:
    """Every node of the spec's mapping with its data path, parents first."""

    def walk(node: M.MappingNode, path: tuple[str | int, ...]):
        yield node, path
        for i, child in enumerate(getattr(node, "nodes", [])):
            yield from walk(child, (*path, "nodes", i))

    if spec.mapping is not None:
        for i, child in enumerate(spec.mapping.nodes):
            yield from walk(child, ("mapping", "nodes", i))


def node_locations(spec: Spec) -> dict[int, Location]:
    """``id(node)`` -> where the node was written."""
    return {id(node): spec.locate(*path) for node, path in mapping_nodes(spec)}


def check_mapping(spec: Spec, workload: WorkloadInfo, only: list[str] | None = None) -> None:
    """Raise a located error for the first bad name in the mapping."""
    spec.require("arch", "mapping")
    assert spec.arch is not None and spec.mapping is not None
    names = _Names(spec)
    einsums = {e.name: e for e in workload.einsums}
    computes = _check_node_names(names, workload, einsums)
    missing = [e for e in einsums if e not in computes and (only is None or e in only)]
    if missing:
        hint = "" if only else " (to score only some Einsums, name them with --einsum)"
        raise InvalidMappingError(
            f"the mapping has no !Compute node for Einsum(s) {', '.join(missing)}{hint}",
            spec.locate("mapping"),
        )
    for branch in spec.mapping.branches():
        _check_branch(names, spec.arch, branch, einsums)
    check_unmodelled(spec.mapping, workload, node_locations(spec))


class _Names:
    """What the checks look up by name, located: the arch's leaves and where nodes are."""

    def __init__(self, spec: Spec):
        assert spec.arch is not None
        self.spec = spec
        self.leaves = {n.name: n for n in spec.arch.leaves()}
        self.paths = {id(n): p for n, p in mapping_nodes(spec)}

    def where(self, node: M.MappingNode, key: str | None = None) -> Location:
        """Where ``node`` (or its field ``key``) was written."""
        path = self.paths[id(node)]
        return self.spec.locate(*path, *([key] if key else []))

    def component(self, node: M.MappingNode, name: str, want: type, label: str) -> A.Leaf:
        """The arch leaf ``name`` that ``node`` names, which must be a ``want``."""
        found = self.leaves.get(name)
        if found is None:
            raise SpecError(
                f"unknown component '{name}'{_suggest(name, self.leaves)}",
                self.where(node, "component"),
            )
        if not isinstance(found, want):
            raise SpecError(
                f"!{node.type} names {name}, which is a {_KIND[type(found)]}, not a {label}",
                self.where(node, "component"),
            )
        return found


def _check_node_names(
    names: _Names, workload: WorkloadInfo, einsums: Mapping[str, EinsumInfo]
) -> dict[str, M.Compute]:
    """Components, tensors, fanout dimensions and Einsums named by each node; returns the
    !Compute node of each Einsum (one at most)."""
    where = names.where
    computes: dict[str, M.Compute] = {}
    for node, _ in mapping_nodes(names.spec):
        if isinstance(node, M.Storage | M.Toll):
            want, label = (A.Toll, "toll") if isinstance(node, M.Toll) else (A.Memory, "memory")
            names.component(node, node.component, want, label)
            for t in node.tensors:
                if t not in workload.tensors:
                    raise SpecError(
                        f"unknown tensor '{t}'{_suggest(t, workload.tensors)}",
                        where(node, "tensors"),
                    )
        elif isinstance(node, M.Spatial):
            comp = names.component(node, node.component, object, "component")
            dims = [d.name for d in getattr(comp, "spatial", [])]
            if node.name not in dims:
                has = f"dimensions {', '.join(dims)}" if dims else "no spatial fanout"
                raise SpecError(
                    f"{node.component} has no fanout dimension '{node.name}' (it has {has})",
                    where(node, "name"),
                )
        elif isinstance(node, M.Compute):
            if node.einsum not in einsums:
                raise SpecError(
                    f"unknown Einsum '{node.einsum}'{_suggest(node.einsum, einsums)}",
                    where(node, "einsum"),
                )
            names.component(node, node.component, A.Compute, "compute unit")
            if node.einsum in computes:
                raise InvalidMappingError(
                    f"Einsum {node.einsum} has two !Compute nodes", where(node, "einsum")
                )
            computes[node.einsum] = node
    return computes


def _check_branch(
    names: _Names,
    arch: A.Arch,
    branch: list[M.MappingNode],
    einsums: Mapping[str, EinsumInfo],
) -> None:
    """A branch ends in its only !Compute; its loops iterate rank variables of that
    Einsum and its nodes name components on the arch path to that compute unit."""
    where = names.where
    leaf = branch[-1] if branch else None
    if not isinstance(leaf, M.Compute):
        raise InvalidMappingError(
            "a branch of the mapping does not end in a !Compute node",
            where(leaf) if leaf is not None else names.spec.locate("mapping"),
        )
    info = einsums[leaf.einsum]
    on_path = [n.name for n in arch.path_to(leaf.component)]
    for node in branch[:-1]:
        if isinstance(node, M.Compute):
            raise InvalidMappingError(
                f"!Compute for Einsum {node.einsum} must be the last node of its branch",
                where(node),
            )
        if isinstance(node, M.Temporal | M.Spatial) and node.rank_variable not in info.bounds:
            raise InvalidMappingError(
                f"Einsum {info.name} has no rank variable '{node.rank_variable}' (it has "
                f"{', '.join(info.rank_variables)}; loops above a split must use rank "
                "variables of every Einsum below it)",
                where(node, "rank_variable"),
            )
        name = getattr(node, "component", None)
        if name is not None and name not in on_path:
            raise InvalidMappingError(
                f"component '{name}' is not on the architecture path to {leaf.component} "
                f"(used by Einsum {info.name}); the path is {' -> '.join(on_path)}",
                where(node, "component"),
            )


def check_unmodelled(
    mapping: M.Mapping, workload: WorkloadInfo, where: dict[int, Location] | None = None
) -> None:
    """Refuse what the format defines and fusemap does not model (one located line).

    * ``binding`` on a !Storage node (distributed buffers) is not modelled.
    * ``initial_tile_shape`` is honoured by the format only on a fused loop (shared by
      several Einsums) over a rank variable with a stride or halo (``p + r``): fusemap
      does not model that first tile, so it refuses it there. Anywhere else the format
      clears it, and so does fusemap (the loop's tiles are counted as usual).
    """
    where = where or {}
    branches = mapping.branches()
    shared: dict[int, list[str | None]] = {}  # node -> the Einsum of each branch through it
    for branch in branches:
        einsum = getattr(branch[-1], "einsum", None) if branch else None
        for node in branch:
            shared.setdefault(id(node), []).append(einsum)
    for node in mapping.walk():
        at = where.get(id(node), Location())
        if isinstance(node, M.Storage) and node.binding is not None:
            raise SpecError(
                "binding (distributed buffers) is not modelled by fusemap: remove it to "
                "count the buffer as one shared memory",
                Location(at.file, at.line, _key(at, "binding")),
            )
        if not isinstance(node, M.Loop) or node.initial_tile_shape is None:
            continue
        known = {e.name for e in workload.einsums}
        users = [
            workload.einsum(e) for e in shared.get(id(node), []) if e is not None and e in known
        ]
        halo = [
            e.name
            for e in users
            if any(e.relevance(t, node.rank_variable) == "partial" for t in e.tensors)
        ]
        if len(users) > 1 and halo:
            raise SpecError(
                f"initial_tile_shape of a fused loop over '{node.rank_variable}', which has a "
                f"stride or halo in Einsum {halo[0]}, is not modelled by fusemap (the first "
                "tile would differ from the others); remove it",
                Location(at.file, at.line, _key(at, "initial_tile_shape")),
            )


def _key(at: Location, field: str) -> str:
    return f"{at.key}.{field}" if at.key else field


def _suggest(name: str, names: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, sorted(names), n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""
