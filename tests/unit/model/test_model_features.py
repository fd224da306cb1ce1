"""Format features the compute-in-memory suite brought up: modelled (persistent tiles of
every instance), cleared as the format clears them (initial_tile_shape where it does not
apply) or refused with one line naming what is not modelled."""

from __future__ import annotations

import textwrap

import pytest

import fusemap
from fusemap.spec.errors import SpecError

ARCH = """\
arch:
  nodes:
  - !Memory
    name: MainMemory
    size: inf
    actions: [{name: read, energy: 1}, {name: write, energy: 1}]
  - !Memory
    name: Buf
    size: 100000
    actions: [{name: read, energy: 0.5}, {name: write, energy: 0.5}]
  - !Compute
    name: MAC
    actions: [{name: compute, energy: 1}]
"""


def _write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def _run(tmp_path, workload: str, mapping: str):
    files = [
        _write(tmp_path, "arch.yaml", ARCH),
        _write(tmp_path, "wl.yaml", workload),
        _write(tmp_path, "map.yaml", mapping),
    ]
    return fusemap.evaluate(fusemap.load(*files))


MATMUL = """\
workload:
  n_instances: WL_N
  rank_sizes: {M: 2, K: 3, N: 4}
  bits_per_value: {All: 8}
  einsums:
  - name: Z
    n_instances: EINSUM_N
    tensor_accesses:
    - {name: A, projection: [m, k]}
    - {name: B, projection: [k, n], persistent: PERSISTENT}
    - {name: Z, projection: [m, n], output: true}
"""
B_IN_BUF = """\
mapping:
  nodes:
  - !Storage {tensors: [A, Z], component: MainMemory}
  - !Storage {tensors: [B], component: Buf}
  - !Temporal {rank_variable: m, tile_shape: 1}
  - !Temporal {rank_variable: k, tile_shape: 1}
  - !Temporal {rank_variable: n, tile_shape: 1}
  - !Compute {einsum: Z, component: MAC}
"""


@pytest.mark.parametrize(
    ("wl_n", "einsum_n", "persistent", "instances"),
    [(1, 1, True, 1), (3, 2, True, 6), (3, 2, False, 1), (1, 4, True, 4)],
)
def test_a_persistent_tile_is_held_for_every_instance(
    tmp_path, wl_n, einsum_n, persistent, instances
):
    wl = MATMUL.replace("WL_N", str(wl_n)).replace("EINSUM_N", str(einsum_n))
    r = _run(tmp_path, wl.replace("PERSISTENT", str(persistent).lower()), B_IN_BUF)
    # Buf backs B (3 x 4 values of 8 bits = 96 bits), reserved under its node; persistent,
    # every instance's copy lives for the whole workload.
    assert r.components["Buf"].usage_bits == 96 * instances


CONV_THEN_SCALE = """\
workload:
  rank_sizes: {P: 6, R: 3, H: 8}
  bits_per_value: {All: 8}
  einsums:
  - "Y[p] = X[H: p + r] * W[r]"
  - "Z[p] = Y[p] * V[p]"
"""
FUSED = """\
mapping:
  nodes:
  - !Storage {tensors: [X, W, Y, V, Z], component: MainMemory}
  - !Temporal {rank_variable: p, tile_shape: 2INITIAL}
  - !Sequential
    nodes:
    - !Nested
      nodes:
      - !Storage {tensors: [X], component: Buf}
      - !Temporal {rank_variable: p, tile_shape: 1}
      - !Temporal {rank_variable: r, tile_shape: 1}
      - !Compute {einsum: Y, component: MAC}
    - !Nested
      nodes:
      - !Temporal {rank_variable: p, tile_shape: 1}
      - !Compute {einsum: Z, component: MAC}
"""


def test_initial_tile_shape_on_a_fused_halo_loop_is_refused(tmp_path):
    mapping = FUSED.replace("2INITIAL", "2, initial_tile_shape: 3")
    with pytest.raises(SpecError) as info:
        _run(tmp_path, CONV_THEN_SCALE, mapping)
    assert str(info.value).startswith(
        f"{tmp_path / 'map.yaml'}:4: mapping.nodes[1].initial_tile_shape:"
    )
    assert "fused loop over 'p', which has a stride or halo in Einsum Y, is not modelled" in str(
        info.value
    )


ALONE = """\
mapping:
  nodes:
  - !Storage {tensors: [X, W, Y], component: MainMemory}
  - !Temporal {rank_variable: p, tile_shape: 2INITIAL}
  - !Storage {tensors: [X], component: Buf}
  - !Temporal {rank_variable: p, tile_shape: 1}
  - !Temporal {rank_variable: r, tile_shape: 1}
  - !Compute {einsum: Y, component: MAC}
"""
CHAIN = """\
workload:
  rank_sizes: {M: 6}
  bits_per_value: {All: 8}
  einsums: ["Y[m] = A[m] * B[m]", "Z[m] = Y[m] * C[m]"]
"""


def test_initial_tile_shape_elsewhere_is_cleared_as_the_format_does(tmp_path):
    from fusemap.model.evaluate import evaluate_mapping

    def energy(workload: str, mapping: str, einsums=None) -> float:
        files = [
            _write(tmp_path, "arch.yaml", ARCH),
            _write(tmp_path, "wl.yaml", workload),
            _write(tmp_path, "map.yaml", mapping),
        ]
        return evaluate_mapping(fusemap.load(*files), einsums=einsums).energy

    # A loop over the halo variable p that only Y uses (not fused): cleared.
    with_it = energy(CONV_THEN_SCALE, ALONE.replace("2INITIAL", "2, initial_tile_shape: 3"), ["Y"])
    assert with_it == energy(CONV_THEN_SCALE, ALONE.replace("2INITIAL", "2"), ["Y"])
    # A fused loop over m, which has no stride or halo: cleared.
    fused = FUSED.replace("[X, W, Y, V, Z]", "[A, B, Y, C, Z]").replace("[X]", "[A]")
    fused = fused.replace("rank_variable: p", "rank_variable: m").replace(
        "      - !Temporal {rank_variable: r, tile_shape: 1}\n", ""
    )
    assert energy(CHAIN, fused.replace("2INITIAL", "2, initial_tile_shape: 3")) == energy(
        CHAIN, fused.replace("2INITIAL", "2")
    )


def test_binding_is_refused(tmp_path):
    mapping = B_IN_BUF.replace("component: Buf}", "component: Buf, binding: {x: 0}}")
    wl = MATMUL.replace("WL_N", "1").replace("EINSUM_N", "1").replace("PERSISTENT", "false")
    with pytest.raises(SpecError) as info:
        _run(tmp_path, wl, mapping)
    assert str(info.value) == (
        f"{tmp_path / 'map.yaml'}:4: mapping.nodes[1].binding: binding (distributed buffers) "
        "is not modelled by fusemap: remove it to count the buffer as one shared memory"
    )


@pytest.mark.parametrize(
    ("tag", "what"),
    [
        ("Network", "on-chip networks with hop actions"),
        ("Array", "physical arrays of distributed buffers"),
    ],
)
def test_network_and_array_nodes_are_refused(tmp_path, tag, what):
    arch = ARCH.replace("  - !Compute", f"  - !{tag}\n    name: X\n  - !Compute")
    wl = MATMUL.replace("WL_N", "1").replace("EINSUM_N", "1").replace("PERSISTENT", "false")
    with pytest.raises(SpecError) as info:
        fusemap.load(_write(tmp_path, "arch.yaml", arch), _write(tmp_path, "wl.yaml", wl))
    assert str(info.value) == (
        f"{tmp_path / 'arch.yaml'}:11: X: '!{tag}' nodes ({what}) are not modelled by fusemap"
    )
