"""Plug-in components priced by the component model library: what is asked, how the
answers are scaled, that each distinct query is asked once, and the errors.

A fake library stands in for ``hwcomponents`` (so these run on any Python); the last
tests use the real one where it is installed (the extra needs Python 3.12+).
"""

from __future__ import annotations

import json
import math
import sys
import textwrap
from pathlib import Path

import pytest

import fusemap
from fusemap.spec import component_models as cm
from fusemap.spec.arch_eval import ArchEvaluator
from fusemap.spec.errors import SpecError
from fusemap.spec.resolve import resolve_workload
from tests.support.paths import EXAMPLES, REFERENCE, shared_path

SPEC = textwrap.dedent(
    """\
    variables: {voltage: 0.8}
    arch:
      variables: {v: 2}
      extra_attributes_for_all_component_models: {tech_node: 7e-9, voltage: 0.5}
      nodes:
      - !Memory
        name: MainMemory
        size: inf
        area: 0
        leak_power: 0
        actions: [{name: read, energy: 1, throughput: 1}, {name: write, energy: 1, throughput: 1}]
      - !Memory
        name: Buffer
        component_class: FakeSRAM
        size: 1024
        energy_scale: 2
        area_scale: 3
        n_parallel_instances: 2
        throughput_scale: 5
        extra_attributes_for_component_model: {width: 8 * v, voltage: voltage}
        actions:
        - {name: read, bits_per_action: 16}
        - {name: write, energy: 3, bits_per_action: 16}
      - !Compute
        name: MAC
        component_class: FakeMAC
        leak_power: 0.25
      - !Compute
        name: Free
        component_class: Dummy
        enabled: false
    workload:
      rank_sizes: {M: 4}
      bits_per_value: {All: 8}
      einsums:
      - "Y[m] = A[m] * B[m]"
      - "Z[m] = Y[m] * C[m]"
    mapping:
      nodes:
      - !Storage {tensors: [A, B, C, Y, Z], component: MainMemory}
      - !Sequential
        nodes:
        - !Nested
          nodes:
          - !Temporal {rank_variable: m, tile_shape: 1}
          - !Storage {tensors: [A], component: Buffer}
          - !Compute {einsum: Y, component: MAC}
        - !Nested
          nodes:
          - !Temporal {rank_variable: m, tile_shape: 1}
          - !Compute {einsum: Z, component: MAC}
    """
)
COMPONENT_CLASS_LINE = {"Buffer": SPEC.splitlines().index("    component_class: FakeSRAM") + 1}


class FakeCost:
    def __init__(self, energy: float, throughput: float):
        self.energy, self.throughput = energy, throughput


class FakeSRAM:
    """area = width * 10, leak = tech_node in nm; read: 0.5 J per bit, 100 per second."""

    def __init__(self, attributes: dict):
        self.attributes = attributes
        self.area = attributes["width"] * 10
        self.leak_power = attributes["tech_node"] * 1e9

    def try_call_arbitrary_action(self, action: str, **arguments):
        FakeLibrary.calls.append(("action", action, arguments))
        if action == "read":
            return FakeCost(arguments["bits_per_action"] * 0.5, 100)
        return FakeCost(99, 200)  # write: the spec's energy wins, the throughput is used


class FakeMAC:
    def __init__(self, attributes: dict):
        self.attributes, self.area, self.leak_power = attributes, 4, 999

    def try_call_arbitrary_action(self, action: str, **arguments):
        FakeLibrary.calls.append(("action", action, arguments))
        return FakeCost(0.125, 1e9)


class FakeLibrary:
    """hwcomponents' get_model: the best model for a class and attributes."""

    calls: list = []
    fail: str | None = None

    @staticmethod
    def get_model(name: str, attributes: dict, required_actions: list):
        FakeLibrary.calls.append(("model", name, dict(attributes), list(required_actions)))
        if FakeLibrary.fail:
            raise RuntimeError(FakeLibrary.fail)
        return {"FakeSRAM": FakeSRAM, "FakeMAC": FakeMAC}[name](attributes)


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.setattr(cm, "_LIBRARY", [FakeLibrary])
    monkeypatch.setattr(cm, "_MODELS", {})
    monkeypatch.setattr(cm, "_ACTIONS", {})
    FakeLibrary.calls, FakeLibrary.fail = [], None
    return FakeLibrary


def _load(tmp_path: Path, text: str = SPEC):
    (tmp_path / "spec.yaml").write_text(text)
    spec = fusemap.load(tmp_path / "spec.yaml")
    wl = resolve_workload(spec)
    return spec, wl, ArchEvaluator(spec, wl)


def test_values_the_spec_leaves_out_come_from_the_model_scaled_as_given_ones(tmp_path, fake):
    _, _, arch = _load(tmp_path)
    buf = arch.components("Y")["Buffer"]
    # area: width 8 * v = 16 -> 160, times area_scale 3 and n_parallel_instances 2.
    assert buf.area == 160 * 3 * 2
    assert buf.leak_power == pytest.approx(7 * 2)  # tech_node 7e-9 -> 7; leak_power_scale 1
    read, write = buf.actions["read"], buf.actions["write"]
    assert read.energy == 16 * 0.5 * 2  # bits_per_action 16 * 0.5 J, energy_scale 2
    assert read.throughput == 100 * 5 * 2  # throughput_scale 5, n_parallel_instances 2
    assert write.energy == 3 * 2  # given in the spec: the model's 99 is not used
    assert write.throughput == 200 * 5 * 2
    assert (read.model, write.model) == ("FakeSRAM", "FakeSRAM")
    assert buf.models == {"area": "FakeSRAM", "leak_power": "FakeSRAM"}
    mac = arch.components("Y")["MAC"]
    assert (mac.area, mac.leak_power, mac.models) == (4, 0.25, {"area": "FakeMAC"})
    assert mac.actions["compute"].energy == 0.125 and mac.actions["compute"].model == "FakeMAC"
    free = arch.components("Y")["Free"]  # Dummy: the format's zero-cost component
    assert free.actions["compute"].energy == 0 and free.actions["compute"].throughput == math.inf
    assert free.actions["compute"].model == "Dummy" and free.area == 0
    main = arch.components("Y")["MainMemory"]  # no component_class: never asked
    assert main.actions["read"].model is None and main.models == {}


def test_attributes_and_arguments_asked(tmp_path, fake):
    _, _, arch = _load(tmp_path)
    arch.components("Y")
    models = {c[1]: c for c in fake.calls if c[0] == "model"}
    # size (a memory), the arch-wide attributes, then the component's own (which win;
    # `voltage: voltage` reads the variable 0.8, not itself).
    assert models["FakeSRAM"][2] == {"size": 1024, "tech_node": 7e-9, "voltage": 0.8, "width": 16}
    assert models["FakeSRAM"][3] == ["read", "write"]  # both lack a throughput
    assert models["FakeMAC"][2] == {"tech_node": 7e-9, "voltage": 0.5}
    actions = [c[1:] for c in fake.calls if c[0] == "action"]
    assert ("read", {"bits_per_action": 16}) in actions  # memories pass bits_per_action
    assert ("compute", {}) in actions  # compute units do not


def test_each_distinct_query_is_asked_once(tmp_path, fake, monkeypatch):
    monkeypatch.setattr(cm, "queries", {"models": 0, "actions": 0})
    spec, wl, arch = _load(tmp_path)
    for e in ("Y", "Z"):  # the same attributes for both Einsums
        arch.components(e)
    ArchEvaluator(spec, wl).components("Y")  # a new evaluator: answers are cached
    fusemap.evaluate(spec)
    # FakeSRAM and FakeMAC once each; read, write and compute once each.
    assert cm.queries == {"models": 2, "actions": 3}
    assert len(fake.calls) == 5


def test_the_result_names_the_model_of_each_action(tmp_path, fake):
    spec, _, _ = _load(tmp_path)
    result = fusemap.evaluate(spec)
    y = result.einsum("Y")
    assert y.components["Buffer"].actions["read"].model == "FakeSRAM"
    assert y.components["MAC"].actions["compute"].model == "FakeMAC"
    assert y.components["MainMemory"].actions["read"].model is None  # the spec's energy
    data = json.loads(result.dumps())
    assert data["einsums"]["Y"]["components"]["MAC"]["actions"]["compute"]["model"] == "FakeMAC"
    assert "model" not in data["einsums"]["Y"]["components"]["MainMemory"]["actions"]["read"]
    assert data["components"]["Buffer"]["models"] == {
        "area": "FakeSRAM",
        "leak_power": "FakeSRAM",
        "read": "FakeSRAM",
        "write": "FakeSRAM",
    }
    # Y: 4 computes at 0.125 J; A fills Buffer 4 values x 8 bits = 32 bits = 2 writes of
    # 16 bits (6 J each) and 2 reads (16 J each) to MAC.
    assert y.components["MAC"].actions["compute"].energy == 4 * 0.125
    assert y.components["Buffer"].actions["write"].energy == 2 * 6
    assert y.components["Buffer"].actions["read"].energy == 2 * 16


def test_without_the_library_the_error_names_component_values_and_install(tmp_path, monkeypatch):
    monkeypatch.setattr(cm, "_LIBRARY", [])
    monkeypatch.setitem(sys.modules, "hwcomponents", None)  # import fails
    with pytest.raises(SpecError) as info:
        _load(tmp_path)[2].components("Y")
    assert str(info.value) == (
        f"{tmp_path / 'spec.yaml'}:{COMPONENT_CLASS_LINE['Buffer']}: Buffer.component_class: "
        "Buffer needs the energy of read, the throughput of read and write, and its area "
        "and leak_power from component model 'FakeSRAM'; the component model library that "
        "gives them is not installed: pip install 'fusemap[components]' (Python 3.12+)"
    )


def test_a_spec_that_gives_every_value_needs_no_library(tmp_path, monkeypatch):
    monkeypatch.setattr(cm, "_LIBRARY", [])
    monkeypatch.setitem(sys.modules, "hwcomponents", None)
    text = SPEC.replace(
        "    - {name: read, bits_per_action: 16}\n",
        "    - {name: read, energy: 1, throughput: 1, bits_per_action: 16}\n",
    ).replace("write, energy: 3,", "write, energy: 3, throughput: 1,")
    text = text.replace(
        "throughput_scale: 5\n", "throughput_scale: 5\n    area: 1\n    leak_power: 1\n"
    )
    text = text.replace("name: MAC\n    component_class: FakeMAC\n", "name: MAC\n")
    comps = _load(tmp_path, text)[2].components("Y")
    assert comps["Buffer"].actions["read"].model is None and comps["Buffer"].area == 1 * 3 * 2


def test_a_model_failure_is_one_located_line(tmp_path, fake):
    fake.fail = (
        "Can not find an model model for fakesram(width=16)\n"
        "| FakeSRAM with priority 0.3 estimating value: \n"
        "|  | AssertionError: width must be >= 32\n"
        "|  | Traceback (most recent call last):\n"
        "|  | AssertionError: width must be >= 32\n"
    )
    with pytest.raises(SpecError) as info:
        _load(tmp_path)[2].components("Y")
    assert str(info.value) == (
        f"{tmp_path / 'spec.yaml'}:{COMPONENT_CLASS_LINE['Buffer']}: Buffer.component_class: "
        "Buffer: the component model library could not price FakeSRAM: "
        "AssertionError: width must be >= 32"
    )
    assert "\n" not in str(info.value)


def test_a_simulator_that_does_not_run_says_how_to_build_it(tmp_path, fake):
    fake.fail = "CACTI failed with exit code 1. Please check /x/y.log for CACTI output."
    with pytest.raises(SpecError, match=r"python -m fusemap\.component_binaries$"):
        _load(tmp_path)[2].components("Y")


def test_a_model_answer_that_is_not_a_number_is_an_error(tmp_path, fake, monkeypatch):
    monkeypatch.setattr(FakeSRAM, "__init__", lambda self, a: setattr(self, "area", math.nan))
    with pytest.raises(SpecError, match=r"Buffer: the model gave area nan, not a number"):
        _load(tmp_path)[2].components("Y")


# -- the real library, where the extra is installed --------------------------------------

REAL = pytest.mark.skipif(
    sys.version_info < (3, 12) or not cm.available(),
    reason="the component model library (pip install 'fusemap[components]', Python 3.12+)",
)
EYERISS = REFERENCE / "model-components"


@REAL
def test_eyeriss_prices_are_the_libraries(tmp_path):
    case = EYERISS / "components_eyeriss_mm2"
    shared_path(case)
    spec = fusemap.load(case / "arch.yaml", case / "workload.yaml", N_EINSUMS=2)
    arch = ArchEvaluator(spec, resolve_workload(spec))
    comps = arch.components("Matmul0")
    gb = comps["GlobalBuffer"]
    # SmartBufferSRAM (CACTI at 65 nm, 1 Mb, 32 banks): 64-bit reads and writes. The
    # established tool's numbers (expected.json) divided by the action counts.
    assert gb.actions["read"].energy == pytest.approx(1.2983298915969499e-06 / 14336, rel=1e-6)
    assert gb.actions["write"].energy == pytest.approx(9.341282947161744e-07 / 10240, rel=1e-6)
    assert gb.area == pytest.approx(6.8574526567307686e-06, rel=1e-9)
    assert gb.actions["read"].model == "SmartBufferSRAM"
    # LPDDR4: 8 pJ per bit (bits_per_action 1), zero area and leak.
    main = comps["MainMemory"]
    assert main.actions["read"].energy == pytest.approx(8e-12)
    assert (main.area, main.leak_power, main.actions["read"].model) == (0, 0, "LPDDR4")
    assert comps["MAC"].actions["compute"].model == "AladdinIntMAC"


def test_the_mapper_prices_through_the_same_path_once(tmp_path, fake, monkeypatch):
    monkeypatch.setattr(cm, "queries", {"models": 0, "actions": 0})
    spec, _, _ = _load(tmp_path)
    outcome = fusemap.map_workload(spec, objective="energy")
    assert cm.queries == {"models": 2, "actions": 3}  # not once per tile shape
    again = fusemap.evaluate(spec, outcome.best.mapping)
    assert again.energy == pytest.approx(outcome.best.result.energy, rel=1e-12)
    mac = again.einsum("Y").components["MAC"].actions["compute"]
    assert mac.model == "FakeMAC" and mac.energy == 4 * 0.125


@REAL
def test_the_readme_cim_example():
    cim = EXAMPLES / "cim"
    arch = cim / "analog_macro.yaml"
    spec = fusemap.load(arch, arch, cim / "analog_macro.mapping.yaml")
    r = fusemap.evaluate(spec)
    # M x N = 4 x 32 outputs leave through the ADCs, each converted per input bit (8)
    # and weight slice (8 / 2 = 4); 4 x 64 inputs are driven bit by bit; every one of
    # the 4 x 64 x 32 MACs reads its cell group once per input bit and weight slice.
    assert r.count("ADC", "read") == 4 * 32 * 8 * 4
    assert r.count("RowDrivers", "read") == 4 * 64 * 8
    assert r.count("Cells", "read") == 4 * 64 * 32 * 8 * 4
    models = {
        c: u.actions["read"].model
        for c, u in r.einsum("Matmul").components.items()
        if "read" in u.actions
    }
    assert models == {
        "ADC": "ADC",
        "RowDrivers": "RowDrivers",
        "InputLatch": "Dummy",
        "Cells": "MemoryCell",
    }
    assert r.energy > 0 and r.area > 0 and r.latency > 0


@pytest.mark.parametrize("path", ["/dev/zero", "/etc/hostname", "../outside.cfg", "."])
def test_a_model_may_only_read_files_beside_the_spec(tmp_path, fake, path):
    (tmp_path / "cells").mkdir()
    (tmp_path / "cells" / "cell.cfg").write_text("-CellArea (F^2): 30\n")
    ok = SPEC.replace("{width: 8 * v, voltage: voltage}", "{width: 8 * v, cell: CELL}")
    comps = _load(tmp_path, ok.replace("CELL", f'"{tmp_path}/cells/cell.cfg"'))[2].components("Y")
    assert comps["Buffer"].models["area"] == "FakeSRAM"  # a file under the spec's folder
    with pytest.raises(SpecError) as info:
        _load(tmp_path, ok.replace("CELL", f'"{path}"'))[2].components("Y")
    assert "Buffer.extra_attributes_for_component_model.cell:" in str(info.value)
    assert f"'{path}' is not a file beside the spec" in str(info.value)
