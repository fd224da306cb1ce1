"""Builders for small model specs written as YAML text (used by tests/unit/model/test_model_*.py).

Specs are built as plain Python data and written out by a tiny block-YAML emitter:
strings are written *unquoted* (so expressions such as ``inf`` or ``~Intermediates`` are
evaluated, as a user would write them), :class:`Tag` values become tagged mappings
(``!Memory``), and :class:`Q` strings are written double-quoted (a literal).

Typical use::

    arch = two_level(gb_size=1024)
    wl = matmul(M=2, K=3, N=4)
    mp = mapping(storage("MainMemory", "A", "B", "Z"), storage("GlobalBuffer", "A", "B", "Z"),
                 *loops("m", "k", "n"), compute("Z"))
    result = run(tmp_path, arch, wl, mp)

Memories built here default to ``bits_per_action`` = 8 = the workload's bits per value,
so one action moves one value and counts read as values.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from fusemap.model.evaluate import evaluate_mapping
from fusemap.model.result import Result
from fusemap.spec.spec import Spec, load_spec

BITS = 8  # workload bits per value used by the builders


class Tag(dict):
    """A mapping written with a YAML tag, e.g. ``Tag("Memory", name="GB")``."""

    def __init__(self, tag: str, **fields: Any):
        super().__init__(**{k: v for k, v in fields.items() if v is not None})
        self.tag = tag


class Q(str):
    """A string written double-quoted."""


# -- YAML emitter ------------------------------------------------------------------------


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Q):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if value is None:
        return "null"
    return str(value)


def _emit(value: Any, indent: int) -> list[str]:
    """Lines of the block form of a dict or list at ``indent``."""
    pad = " " * indent
    lines: list[str] = []
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(v, Tag):
                lines.append(f"{pad}{k}: !{v.tag}")
                lines += _emit(dict(v), indent + 2) if v else []
            elif isinstance(v, (dict, list)) and v:
                lines.append(f"{pad}{k}:")
                lines += _emit(v, indent + 2)
            elif isinstance(v, (dict, list)):
                lines.append(f"{pad}{k}: {'{}' if isinstance(v, dict) else '[]'}")
            else:
                lines.append(f"{pad}{k}: {_scalar(v)}")
    else:
        for item in value:
            if isinstance(item, Tag):
                lines.append(f"{pad}- !{item.tag}" + ("" if item else " {}"))
                lines += _emit(dict(item), indent + 2)
            elif isinstance(item, (dict, list)) and item:
                lines.append(f"{pad}-")
                lines += _emit(item, indent + 2)
            else:
                lines.append(
                    f"{pad}- {_scalar(item) if not isinstance(item, (dict, list)) else '{}'}"
                )
    return lines


def to_yaml(data: dict[str, Any]) -> str:
    """Block YAML text of ``data``."""
    return "\n".join(_emit(data, 0)) + "\n"


# -- architecture ----------------------------------------------------------------------------


def action(name: str, energy: Any = 1, throughput: Any = "inf", **extra: Any) -> dict:
    """One action (extra keys: energy_scale, throughput_scale, bits_per_action, ...)."""
    return {"name": name, "energy": energy, "throughput": throughput, **extra}


def memory(
    name: str,
    size: Any = "inf",
    read: Any = 1,
    write: Any = 1,
    *,
    read_tp: Any = "inf",
    write_tp: Any = "inf",
    bits_per_action: Any = BITS,
    leak_power: Any = 0,
    area: Any = 0,
    spatial: list[dict] | None = None,
    actions: list[dict] | None = None,
    **fields: Any,
) -> Tag:
    """A !Memory with read/write actions (``bits_per_action=None`` leaves it unset)."""
    return Tag(
        "Memory",
        name=name,
        size=size,
        leak_power=leak_power,
        area=area,
        bits_per_action=bits_per_action,
        spatial=spatial,
        **fields,
        actions=actions
        if actions is not None
        else [action("read", read, read_tp), action("write", write, write_tp)],
    )


def toll(name: str, direction: Any, energy: Any = 1, **fields: Any) -> Tag:
    """A !Toll charging ``energy`` per value crossing it."""
    fields.setdefault("bits_per_action", BITS)
    return Tag(
        "Toll",
        name=name,
        direction=direction,
        leak_power=0,
        area=0,
        **fields,
        actions=[action("read", energy)],
    )


def compute_unit(
    name: str = "MAC",
    energy: Any = 1,
    throughput: Any = 1,
    *,
    leak_power: Any = 0,
    area: Any = 0,
    spatial: list[dict] | None = None,
    **fields: Any,
) -> Tag:
    """A !Compute with one ``compute`` action."""
    return Tag(
        "Compute",
        name=name,
        leak_power=leak_power,
        area=area,
        spatial=spatial,
        **fields,
        actions=[action("compute", energy, throughput)],
    )


def container(name: str, *dims: dict, **fields: Any) -> Tag:
    """A !Container carrying spatial fanout dimensions."""
    return Tag("Container", name=name, spatial=list(dims), **fields)


def dim(name: str, fanout: int, **fields: Any) -> dict:
    """One ``spatial`` entry (may_reuse, power_gateable, ...)."""
    return {"name": name, "fanout": fanout, **fields}


def arch(*nodes: Tag) -> dict:
    """The ``arch:`` section."""
    return {"arch": {"nodes": list(nodes)}}


def two_level(
    mm_energy: Any = 1,
    gb_energy: Any = 1,
    mac_energy: Any = 1,
    *,
    gb_size: Any = "inf",
    gb: dict | None = None,
    mac: dict | None = None,
    fanout: int | None = None,
    fanout_fields: dict | None = None,
) -> dict:
    """MainMemory -> GlobalBuffer [-> Container PE with dim X of ``fanout``] -> MAC.

    ``gb`` / ``mac`` hold extra fields for those nodes.
    """
    nodes = [
        memory("MainMemory", "inf", mm_energy, mm_energy),
        memory("GlobalBuffer", gb_size, gb_energy, gb_energy, **(gb or {})),
    ]
    if fanout is not None:
        nodes.append(container("PE", dim("X", fanout, **(fanout_fields or {}))))
    nodes.append(compute_unit("MAC", mac_energy, **(mac or {})))
    return arch(*nodes)


def three_level(
    energies: tuple[Any, Any, Any] = (100, 10, 1),
    sizes: tuple[Any, Any] = ("inf", "inf"),
    *,
    fanout: int | None = None,
    mac_energy: Any = 1,
) -> dict:
    """MainMemory -> GlobalBuffer -> Register [-> Container PE, dim X] -> MAC."""
    nodes = [
        memory("MainMemory", "inf", energies[0], energies[0]),
        memory("GlobalBuffer", sizes[0], energies[1], energies[1]),
        memory("Register", sizes[1], energies[2], energies[2]),
    ]
    if fanout is not None:
        nodes.append(container("PE", dim("X", fanout)))
    nodes.append(compute_unit("MAC", mac_energy))
    return arch(*nodes)


# -- workloads -------------------------------------------------------------------------------


def access(name: str, projection: Any, output: bool = False, **extra: Any) -> dict:
    """One tensor access; ``projection`` is a list of rank variables or a {Rank: expr} dict."""
    out = {"name": name, "projection": projection}
    if output:
        out["output"] = True
    out.update(extra)
    return out


def einsum(name: str, *accesses: dict, **extra: Any) -> dict:
    """One Einsum in the verbose form."""
    return {"name": name, "tensor_accesses": list(accesses), **extra}


def chain_matmul(name: str, a: str, w: str, out: str, k: str, n: str) -> dict:
    """``out[m, n] = a[m, k] * w[k, n]``: one link of a matmul chain."""
    return einsum(name, access(a, ["m", k]), access(w, [k, n]), access(out, ["m", n], output=True))


def workload(bounds: dict[str, int], *einsums: dict, bits: Any = BITS, **extra: Any) -> dict:
    """The ``workload:`` section; ``bounds`` gives ``0 <= v < n`` per rank variable."""
    return {
        "workload": {
            "iteration_space_shape": {v: f"0 <= {v} < {n}" for v, n in bounds.items()},
            "bits_per_value": {"All": bits},
            **extra,
            "einsums": list(einsums),
        }
    }


def matmul(M: int = 2, K: int = 3, N: int = 4, name: str = "Z", **extra: Any) -> dict:
    """``Z[m, n] = A[m, k] * B[k, n]``."""
    return workload(
        {"m": M, "k": K, "n": N},
        einsum(
            name,
            access("A", ["m", "k"]),
            access("B", ["k", "n"]),
            access("Z", ["m", "n"], output=True),
        ),
        **extra,
    )


def matvec(K: int = 3, N: int = 4) -> dict:
    """``Z[n] = A[k] * B[k, n]``."""
    return workload(
        {"k": K, "n": N},
        einsum("Z", access("A", ["k"]), access("B", ["k", "n"]), access("Z", ["n"], output=True)),
    )


def two_matvecs(NA: int = 4, NY: int = 3, NZ: int = 4) -> dict:
    """``Y[ny] = A[na] * B[na, ny]`` then ``Z[nz] = Y[ny] * C[ny, nz]``."""
    return workload(
        {"na": NA, "ny": NY, "nz": NZ},
        einsum("Y", access("A", ["na"]), access("B", ["na", "ny"]), access("Y", ["ny"], True)),
        einsum("Z", access("Y", ["ny"]), access("C", ["ny", "nz"]), access("Z", ["nz"], True)),
    )


def conv1d(P: int = 8, R: int = 3, stride: int = 1) -> dict:
    """``O[p] = I[X: stride*p + r] * W[r]``."""
    x = "p + r" if stride == 1 else f"{stride}*p + r"
    return workload(
        {"p": P, "r": R},
        einsum("O", access("I", {"X": x}), access("W", ["r"]), access("O", ["p"], output=True)),
    )


# -- mappings --------------------------------------------------------------------------------


def storage(component: str, *tensors: str, **extra: Any) -> Tag:
    """``!Storage`` of ``tensors`` in ``component``."""
    return Tag("Storage", tensors=list(tensors), component=component, **extra)


def toll_node(component: str, *tensors: str) -> Tag:
    """``!Toll`` mapping node."""
    return Tag("Toll", tensors=list(tensors), component=component)


def temporal(rank_variable: str, tile_shape: int = 1) -> Tag:
    """``!Temporal`` loop."""
    return Tag("Temporal", rank_variable=rank_variable, tile_shape=tile_shape)


def loops(*rank_variables: str) -> list[Tag]:
    """Temporal loops with tile shape 1, in order."""
    return [temporal(v, 1) for v in rank_variables]


def spatial(rank_variable: str, tile_shape: int = 1, name: str = "X", component: str = "PE") -> Tag:
    """``!Spatial`` loop over the ``name`` dimension of ``component``."""
    return Tag(
        "Spatial",
        rank_variable=rank_variable,
        tile_shape=tile_shape,
        name=name,
        component=component,
    )


def compute(einsum_name: str, component: str = "MAC") -> Tag:
    """``!Compute`` leaf."""
    return Tag("Compute", einsum=einsum_name, component=component)


def sequential(*branches: list) -> Tag:
    """``!Sequential`` split; each branch is a list of nodes (a !Nested chain)."""
    return Tag("Sequential", nodes=[Tag("Nested", nodes=_flat(b)) for b in branches])


def _flat(nodes: Any) -> list:
    out: list = []
    for n in nodes:
        out.extend(_flat(n) if isinstance(n, list) else [n])
    return out


def mapping(*nodes: Any) -> dict:
    """The ``mapping:`` section (nested lists of nodes are flattened)."""
    return {"mapping": {"nodes": _flat(nodes)}}


# -- loading and running ---------------------------------------------------------------------


def write_spec(
    tmp_path: Path, arch_data: dict, workload_data: dict, mapping_data: dict
) -> list[Path]:
    """Write the three sections to ``arch.yaml``, ``workload.yaml``, ``mapping.yaml``."""
    paths = []
    for name, data in (
        ("arch", arch_data),
        ("workload", workload_data),
        ("mapping", mapping_data),
    ):
        path = tmp_path / f"{name}.yaml"
        path.write_text(data if isinstance(data, str) else to_yaml(data))
        paths.append(path)
    return paths


def load(
    tmp_path: Path,
    arch_data: dict,
    workload_data: dict,
    mapping_data: dict,
    variables: dict | None = None,
) -> Spec:
    """Write and load a spec."""
    return load_spec(
        *write_spec(tmp_path, arch_data, workload_data, mapping_data), variables=variables or {}
    )


def run(
    tmp_path: Path,
    arch_data: dict,
    workload_data: dict,
    mapping_data: dict,
    variables: dict | None = None,
) -> Result:
    """Write, load and evaluate a spec."""
    return evaluate_mapping(load(tmp_path, arch_data, workload_data, mapping_data, variables))


def basic_matmul_mapping(einsum_name: str = "Z") -> dict:
    """MainMemory[A, B, Z] -> GlobalBuffer[A, B, Z] -> m, k, n (tile 1) -> MAC."""
    return mapping(
        storage("MainMemory", "A", "B", "Z"),
        storage("GlobalBuffer", "A", "B", "Z"),
        loops("m", "k", "n"),
        compute(einsum_name),
    )


def rw(result, component, tensor, einsum_name=None):
    """(reads, writes) of ``tensor`` at ``component``."""
    return (
        result.count(component, "read", einsum=einsum_name, tensor=tensor),
        result.count(component, "write", einsum=einsum_name, tensor=tensor),
    )


def usage_bits(result, component):
    """Peak bits reserved in ``component``."""
    return result.components[component].usage_bits
