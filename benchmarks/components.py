"""Time to price the corpus's plug-in arches with the component model library.

For each arch (Eyeriss, Simba with 3 matmuls; the compute-in-memory arches with their
own workload and the first 8 Einsums of a corpus CiM workload), prints the seconds to
evaluate the arch for every Einsum in a fresh process state (first: the library and
CACTI / NeuroSim runs, or their disk caches), again (every answer cached in memory), and
how many queries reached the library. Needs `pip install 'fusemap[components]'`.

usage: python benchmarks/components.py
"""

from __future__ import annotations

import time
from pathlib import Path

from fusemap.spec import component_models as cm
from fusemap.spec.arch_eval import ArchEvaluator
from fusemap.spec.resolve import resolve_workload
from fusemap.spec.spec import load_spec

CORPUS = Path(__file__).resolve().parents[2] / "shared/corpus/accelforge-examples"
CIM = {
    "albireo_isca_2021": "alexnet.yaml",
    "basic_analog": "resnet18.yaml",
    "colonnade_jssc_2021": "vgg16.yaml",
    "isaac_isca_2016": "resnet50.yaml",
    "jia_jssc_2020": "mobilenet_v3.yaml",
    "neurram_nature_2022": "gpt2_medium.yaml",
    "sinangil_jssc_2021": "mobilebert.yaml",
    "wang_vlsi_2022": "msft_phi_1_5.yaml",
}


def _price(files: list[Path], variables: dict, limit: int | None = None) -> tuple[float, int]:
    spec = load_spec(*files, variables=variables)
    wl = resolve_workload(spec)
    names = [e.name for e in wl.einsums][:limit]
    start = time.perf_counter()
    arch = ArchEvaluator(spec, wl)
    for name in names:
        arch.components(name)
    return time.perf_counter() - start, len(names)


def main() -> None:
    if not cm.available():
        raise SystemExit("needs the component model library: pip install 'fusemap[components]'")
    cases = [
        (f"{a} + matmuls", [CORPUS / f"arches/{a}.yaml", CORPUS / "workloads/basic/matmuls.yaml"],
         {"N_EINSUMS": 3}, None)
        for a in ("eyeriss", "simba")
    ]  # fmt: skip
    for arch, workload in CIM.items():
        path = CORPUS / f"arches/compute_in_memory/{arch}.yaml"
        cases.append((f"{arch} (own)", [path], {}, None))
        cim = CORPUS / f"workloads/compute_in_memory/{workload}"
        cases.append((f"{arch} + {workload}", [cim, path], {"BATCH_SIZE": 1}, 8))
    print(f"{'case':48} {'einsums':>7} {'first s':>8} {'again s':>8} {'queries':>8}")
    for label, files, variables, limit in cases:
        before = sum(cm.queries.values())
        first, n = _price(files, variables, limit)
        asked = sum(cm.queries.values()) - before
        again, _ = _price(files, variables, limit)
        print(f"{label:48} {n:7d} {first:8.2f} {again:8.2f} {asked:8d}")


if __name__ == "__main__":
    main()
