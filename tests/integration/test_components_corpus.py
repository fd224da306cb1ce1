"""Every corpus arch that needs component plug-ins evaluates, priced by the library.

The nine compute-in-memory arches run their own workload and one compute-in-memory
workload of the corpus (its first Einsums) on a plain mapping (tests/simple_mappings.py:
the mapper does not place !Toll nodes yet); Eyeriss and Simba are mapped by `fusemap map`.
Energy, latency and area must be positive and finite, and every action of a plug-in
component must name the model that priced it. Skipped where the library is missing.
"""

from __future__ import annotations

import math
import shutil
import sys
from pathlib import Path

import pytest

import fusemap
from fusemap.model.evaluate import evaluate_mapping
from fusemap.spec import component_models
from fusemap.spec.arch_eval import ArchEvaluator
from fusemap.spec.errors import SpecError
from fusemap.spec.resolve import resolve_workload
from fusemap.spec.spec import load_spec
from tests.support.paths import CORPUS, absent_reason
from tests.support.simple_mappings import simple_mapping

ARCHES, WORKLOADS = CORPUS / "arches", CORPUS / "workloads"
if not CORPUS.is_dir():
    pytest.skip(absent_reason(CORPUS), allow_module_level=True)

# Each compute-in-memory arch with a compute-in-memory workload of the corpus.
CIM = {
    "albireo_isca_2021": "alexnet.yaml",
    "basic_analog": "resnet18.yaml",
    "colonnade_jssc_2021": "vgg16.yaml",
    "isaac_isca_2016": "resnet50.yaml",
    "jia_jssc_2020": "mobilenet_v3.yaml",
    "neurram_nature_2022": "gpt2_medium.yaml",
    "raella_isca_2023": "vision_transformer.yaml",
    "sinangil_jssc_2021": "mobilebert.yaml",
    "wang_vlsi_2022": "msft_phi_1_5.yaml",
}
MAPPED = ["eyeriss", "simba"]
FIRST_EINSUMS = 3
LIBRARY = pytest.mark.skipif(
    sys.version_info < (3, 12) or not component_models.available(),
    reason="needs the component model library: pip install 'fusemap[components]' (Python 3.12+)",
)


def _needs_plugins(path: Path) -> bool:
    spec = load_spec(path, variables={"BATCH_SIZE": 1, "N_EINSUMS": 1}, allow_unused=True)
    for node in spec.arch.leaves() if spec.arch else []:
        cls = getattr(node, "component_class", None)
        if cls in (None, "Dummy"):
            continue
        priced = [a.energy is not None and (a.throughput or a.latency) for a in node.actions]
        if not all(priced) or node.area is None or node.leak_power is None:
            return True
    return False


@pytest.mark.slow
def test_the_list_holds_every_arch_that_needs_plugins():
    files = [f for f in ARCHES.rglob("*.yaml") if "memory_cells" not in f.parts]
    found = {f.stem for f in files if not f.name.startswith("_") and _needs_plugins(f)}
    assert found == set(CIM) | set(MAPPED)


def _check(result, spec) -> None:
    for value in (result.energy, result.latency, result.area):
        assert value > 0 and math.isfinite(value)
    plugins = [n for n in spec.arch.leaves() if getattr(n, "component_class", None)]
    names = {n.name for n in plugins}
    for e in result.einsums.values():
        for use in e.components.values():
            for action, r in use.actions.items() if use.name in names else ():
                assert r.model, (e.name, use.name, action)
    for node in plugins:  # area and leak power the spec leaves out: from the model
        models = result.components[node.name].models
        for key in ("area", "leak_power"):
            if getattr(node, key) is None:
                assert models[key], (node.name, key)


def _evaluate_plain(files: list[Path]):
    spec = load_spec(*files, variables={"BATCH_SIZE": 1}, allow_unused=True)
    wl = resolve_workload(spec)
    arch = ArchEvaluator(spec, wl)
    names = [e.name for e in wl.einsums][:FIRST_EINSUMS]
    result = evaluate_mapping(
        spec, simple_mapping(arch, names), workload=wl, arch=arch, einsums=names
    )
    return spec, result


@LIBRARY
@pytest.mark.parametrize("arch", sorted(set(CIM) - {"raella_isca_2023"}))
@pytest.mark.parametrize("own", [True, False], ids=["own-workload", "corpus-workload"])
def test_compute_in_memory_arch_evaluates(arch, own):
    path = ARCHES / "compute_in_memory" / f"{arch}.yaml"
    # The first file's top-level keys win: the workload file first to use its workload.
    files = [path] if own else [WORKLOADS / "compute_in_memory" / CIM[arch], path]
    spec, result = _evaluate_plain(files)
    _check(result, spec)


@LIBRARY
def test_raella_adc_names_the_attribute_its_model_lacks(tmp_path):
    """raella's ADC passes adc_resolution; hwcomponents-adc's ADC model needs n_bits. The
    error says so; with the attribute renamed in a copy, the arch evaluates."""
    path = ARCHES / "compute_in_memory" / "raella_isca_2023.yaml"
    with pytest.raises(SpecError) as info:
        _evaluate_plain([path])
    message = str(info.value)
    assert "raella_isca_2023.yaml:" in message and "ADC.component_class: ADC:" in message
    assert "is missing: n_bits" in message
    copy = tmp_path / "compute_in_memory"
    shutil.copytree(path.parent, copy)
    text = (copy / path.name).read_text()
    fixed = text.replace("adc_resolution:   adc_resolution", "n_bits: adc_resolution")
    assert fixed != text
    (copy / path.name).write_text(fixed)
    for files in (
        [copy / path.name],
        [WORKLOADS / "compute_in_memory" / CIM["raella_isca_2023"], copy / path.name],
    ):
        spec, result = _evaluate_plain(files)
        _check(result, spec)


@LIBRARY
@pytest.mark.parametrize("arch", MAPPED)
def test_mapped_arch_evaluates(arch, tmp_path):
    spec = fusemap.load(
        ARCHES / f"{arch}.yaml", WORKLOADS / "basic/matmuls.yaml", N_EINSUMS=2, M=64, KN=64
    )
    outcome = fusemap.map_workload(spec, objective="energy")
    mapped = outcome.best.result
    again = evaluate_mapping(spec, outcome.best.mapping)
    assert again.energy == pytest.approx(mapped.energy, rel=1e-9)
    _check(again, spec)
