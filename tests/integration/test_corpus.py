"""The example corpus loads: every arch, workload and mapping that needs no plug-in.

Each file goes through ``load_spec`` -> ``resolve_workload`` -> ``ArchEvaluator.components``
for every Einsum (and ``evaluate_mapping`` for mappings). Arches that name a plug-in
``component_class`` load; pricing them needs the component model library. The expected counts and
sizes below were worked out by hand from the YAML; each comment says how.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from fusemap.model.evaluate import evaluate_mapping
from fusemap.spec import component_models
from fusemap.spec.arch_eval import ArchEvaluator
from fusemap.spec.errors import SpecError
from fusemap.spec.resolve import resolve_workload
from fusemap.spec.spec import load_spec
from tests.support.paths import CORPUS, absent_reason

# Every corpus file (minutes on 2 cores): the slow set. The project's own examples are
# checked in the fast set (tests/golden).
pytestmark = pytest.mark.slow

if not CORPUS.is_dir():
    pytest.skip(absent_reason(CORPUS), allow_module_level=True)

ARCHES, WORKLOADS = CORPUS / "arches", CORPUS / "workloads"
SIMPLE = ARCHES / "simple.yaml"
PREFILL = {"BATCH_SIZE": 1, "DECODE": False, "N_NEW_TOKENS": 2048}
DECODE = {"BATCH_SIZE": 1, "DECODE": True, "N_NEW_TOKENS": 1, "N_CACHED_TOKENS": 1024}
CHUNKED = {"ATTENTION_TYPE": "chunked_local", "CHUNK_SIZE": 512}


def load(*files: Path, **variables):
    """Load, resolve and evaluate the arch for every Einsum: (spec, workload, components).

    The same variables go to every corpus file; those a file does not read are fine."""
    spec = load_spec(*files, variables=variables, allow_unused=True)
    wl = resolve_workload(spec)
    evaluator = ArchEvaluator(spec, wl)
    comps = {e.name: evaluator.components(e.name) for e in wl.einsums}
    return spec, wl, comps


def rel(path: Path) -> str:
    return str(path.relative_to(CORPUS))


def workload_cases() -> list[tuple[str, dict]]:
    """Every workload file that is not a fragment, with the Jinja variables it needs."""
    cases = []
    for f in sorted(WORKLOADS.glob("basic/*.yaml")):
        cases.append((rel(f), {"N_EINSUMS": 3} if f.stem == "matmuls" else {}))
    cases += [(rel(f), {}) for f in sorted(WORKLOADS.glob("cnns/mobilenet/*.yaml"))]
    for f in sorted(WORKLOADS.glob("compute_in_memory/*.yaml")):
        cases.append((rel(f), {"BATCH_SIZE": 1}))
    for f in sorted(WORKLOADS.glob("transformers/[!_]*/[!_]*.yaml")):
        for phase in (PREFILL, DECODE):
            if f.stem.startswith("llama4"):
                cases.append((rel(f), {**phase, "ATTENTION_TYPE": "grouped_query"}))
                cases.append((rel(f), {**phase, **CHUNKED}))
            else:
                cases.append((rel(f), dict(phase)))
    return cases


WORKLOAD_CASES = workload_cases()


def test_every_workload_file_is_covered():
    covered = {name for name, _ in WORKLOAD_CASES}
    fragments = ("_renames_default.yaml", "_attention_decode_types", "_feedforward_types")
    every = {
        rel(f)
        for f in WORKLOADS.rglob("*.yaml")
        if not f.name.startswith("_") and not any(x in str(f) for x in fragments)
    }
    assert every == covered
    assert len(covered) == 26  # 3 basic + 2 mobilenet + 11 compute-in-memory + 10 transformers


@pytest.mark.parametrize(
    ("name", "variables"),
    WORKLOAD_CASES,
    ids=[f"{n}-{sorted(v.items())}" for n, v in WORKLOAD_CASES],
)
def test_workload_loads(name, variables):
    spec, wl, comps = load(SIMPLE, CORPUS / name, **variables)
    assert wl.einsums and set(comps) == {e.name for e in wl.einsums}
    for e in wl.einsums:
        assert all(b >= 1 for b in e.bounds.values())
        assert comps[e.name]["MAC"].actions["compute"].energy == 1  # simple.yaml's MAC


PLAIN_ARCHES = ["simple", "tpu_v4i", "nvdla", "snowcat"] + [
    f"fanout_variations/{f.stem}" for f in sorted((ARCHES / "fanout_variations").glob("*.yaml"))
]


@pytest.mark.parametrize("arch", PLAIN_ARCHES)
@pytest.mark.parametrize("workload", ["basic/matmuls.yaml", "cnns/mobilenet/mobilenet_28.yaml"])
def test_arch_loads(arch, workload):
    spec, wl, comps = load(ARCHES / f"{arch}.yaml", WORKLOADS / workload, N_EINSUMS=3)
    for per_einsum in comps.values():
        for comp in per_einsum.values():
            for name, action in comp.actions.items():
                assert action.energy is not None, (comp.name, name)  # no plug-in needed


def test_matmuls_by_hand():
    # matmuls.yaml, N_EINSUMS=3, M=64, KN=32: Einsum i is T{i+1}[m, n{i+1}] = T{i}[m, n{i}]
    # * W{i}[n{i}, n{i+1}]; m < 64, every n < 32.
    _, wl, _ = load(SIMPLE, WORKLOADS / "basic/matmuls.yaml", N_EINSUMS=3, M=64, KN=32)
    assert [e.name for e in wl.einsums] == ["Matmul0", "Matmul1", "Matmul2"]
    assert sorted(wl.tensors) == ["T0", "T1", "T2", "T3", "W0", "W1", "W2"]  # 4 T + 3 W
    assert wl.tensors["T0"].ranks == ("M", "N0") and wl.tensors["T0"].shape == (64, 32)
    assert wl.tensors["W1"].ranks == ("N1", "N2") and wl.tensors["W1"].shape == (32, 32)
    assert all(t.bits_per_value == 8 for t in wl.tensors.values())  # {All: 8}
    assert wl.intermediates == {"T1", "T2"}  # T0 only read, T3 only written
    e = wl.einsum("Matmul1")
    assert dict(e.bounds) == {"m": 64, "n1": 32, "n2": 32}
    assert e.operations == 64 * 32 * 32
    assert e.inputs == ("T1", "W1") and e.outputs == ("T2",)
    assert e.sets["weight"].items == {"W1"}  # renames: {weight: W1, input: T1, output: T2}


def test_matvecs_by_hand():
    # Y[ny] = A[na]*B[na,ny]; Z[nz] = Y[ny]*C[ny,nz]; na < 4, ny < 3, nz < 4.
    _, wl, _ = load(SIMPLE, WORKLOADS / "basic/matvecs.yaml")
    assert [e.name for e in wl.einsums] == ["Y", "Z"]  # concise form: named after outputs
    shapes = {t: i.shape for t, i in wl.tensors.items()}
    assert shapes == {"Y": (3,), "A": (4,), "B": (4, 3), "Z": (4,), "C": (3, 4)}
    assert wl.einsum("Z").operations == 3 * 4


def test_mobilenet_28_by_hand():
    # 6 Einsums, tensors T0..T2, WA0/1, TA0/1, WAB0/1, TB0/1, WB0/1 = 13.
    _, wl, _ = load(SIMPLE, WORKLOADS / "cnns/mobilenet/mobilenet_28.yaml")
    assert len(wl.einsums) == 6 and len(wl.tensors) == 13
    d = wl.einsum("Depthwise0")
    # TB0[p1, q1, t0, b] bounds p1 < P1 = 28; r0, s0 < 3 by iteration_space_shape;
    # t0 < T0 = 192; b < B = 1. (p1 + r0 < P0 = 28 allows p1 up to 27 when r0 = 0.)
    assert dict(d.bounds) == {"p1": 28, "r0": 3, "q1": 28, "s0": 3, "t0": 192, "b": 1}
    assert d.operations == 28 * 28 * 3 * 3 * 192
    # TA0[P0, Q0, T0, B]: written as [p0, q0, t0, b] = 28 x 28 x 192 x 1; read at p1 + r0
    # (up to 29) but clipped to the rank size 28.
    assert wl.tensors["TA0"].ranks == ("P0", "Q0", "T0", "B")
    assert wl.tensors["TA0"].shape == (28, 28, 192, 1)
    assert wl.tensors["WAB0"].shape == (3, 3, 192)
    assert d.relevance("TA0", "p1") == "partial" and d.relevance("TA0", "t0") == "relevant"
    assert d.relevance("WAB0", "p1") == "irrelevant"
    # Default renames: input = Inputs & Intermediates = TA0, weight = the rest = WAB0.
    assert d.sets["input"].items == {"TA0"} and d.sets["weight"].items == {"WAB0"}
    assert "WAB0" in d.persistent  # persistent_tensors: weight - Intermediates


def test_mobilenet_various_separate_by_hand():
    # Older keys: `version: "0.5"` (ignored) and `shape:` (= iteration_space_shape).
    _, wl, _ = load(SIMPLE, WORKLOADS / "cnns/mobilenet/mobilenet_various_separate.yaml")
    assert [e.name for e in wl.einsums] == ["P0", "D0", "P1", "D1", "P2", "D2"]
    # ID0[PD0: pd0 + rd0, ...] with pd0 < 116 and rd0 < 3 and no rank sizes:
    # extent 115 + 2 + 1 = 118; CD0 = cd0 < 16; B = b < 1.
    assert wl.tensors["ID0"].shape == (118, 118, 16, 1)
    assert wl.einsum("D1").bounds["rd1"] == 5


def test_alexnet_strided_convolution_by_hand():
    # T0[p0, q0, n, m0] = I0[n, c0, H: p0*4 + r0, W: q0*4 + s0] * W0[r0, s0, c0, m0]
    # p0, q0 < 55; c0 < 3; m0 < 64; r0, s0 < 11; N = BATCH_SIZE = 2.
    _, wl, _ = load(SIMPLE, WORKLOADS / "compute_in_memory/alexnet.yaml", BATCH_SIZE=2)
    assert len(wl.einsums) == 8 and len(wl.tensors) == 24  # 8 layers x (I, W, T)
    # H extent: 54*4 + 10 + 1 = 227.
    assert wl.tensors["I0"].ranks == ("N", "C0", "H", "W")
    assert wl.tensors["I0"].shape == (2, 3, 227, 227)
    assert wl.tensors["T0"].shape == (55, 55, 2, 64)
    assert wl.einsum("T0").operations == 55 * 55 * 2 * 64 * 3 * 11 * 11


def test_gpt3_prefill_by_hand():
    # multi_head attention + dense_two_layer FFN: I (copy), V, K, Q, QK, QK_softmax, AV,
    # Z, FFA, FFB = 10 Einsums; tensors I_in, I, WV, V, WK, K, WQ, Q, QK, QK_softmax, AV,
    # WZ, Z, WFFA, FFA, WFFB, FFB = 17. Prefill: QK[b, m, p, h] reads K[b, M: p, h, e],
    # so p < M = N_NEW_TOKENS = 2048; H = 32 heads, E = 128, D = 4096, C = 16384.
    _, wl, _ = load(SIMPLE, WORKLOADS / "transformers/gpt/gpt3_6.7B.yaml", **PREFILL)
    names = ["I", "V", "K", "Q", "QK", "QK_softmax", "AV", "Z", "FFA", "FFB"]
    assert [e.name for e in wl.einsums] == names
    assert len(wl.tensors) == 17
    assert wl.tensors["QK"].ranks == ("B", "M", "P", "H")
    assert wl.tensors["QK"].shape == (1, 2048, 2048, 32)
    assert wl.tensors["WQ"].shape == (32, 128, 4096)
    assert wl.tensors["WFFA"].shape == (4096, 16384)
    assert wl.tensors["QK"].bits_per_value == 16  # _gpt3.yaml: {All: 16}
    assert wl.einsum("I").is_copy and wl.einsum("I").inputs == ("I_in",)
    assert wl.einsum("QK").operations == 1 * 2048 * 2048 * 32 * 128


def test_gpt3_decode_by_hand():
    # Decode reads K_cache[b, P: p, h, e] with P = N_CACHED_TOKENS = 1024 and M = 1 new
    # token: QK is 1 x 1 x 1024 x 32; the caches add 2 tensors (19).
    _, wl, _ = load(SIMPLE, WORKLOADS / "transformers/gpt/gpt3_6.7B.yaml", **DECODE)
    assert len(wl.einsums) == 10 and len(wl.tensors) == 19
    assert wl.tensors["QK"].shape == (1, 1, 1024, 32)
    assert wl.tensors["K_cache"].shape == (1, 1024, 32, 128)


def test_mixtral_rank_size_refers_to_a_sibling():
    # mixture_of_experts.yaml: X = min(N_EXPERTS = 8, 2048 * 2) = 8 and
    # XT: ceil(2048*2/X) = 512 refers to the sibling rank size X.
    _, wl, _ = load(SIMPLE, WORKLOADS / "transformers/mixtral/mixtral8x22B.yaml", **PREFILL)
    assert wl.tensors["Z_per_expert"].ranks == ("B", "X", "XT", "G")
    assert wl.tensors["Z_per_expert"].shape == (1, 8, 512, 6144)


def test_deepseek_tensor_keys_absent_from_an_einsum():
    # bits_per_value names tensors (QK: 16, ...) that most Einsums do not use: there the
    # name is an empty set, not an unknown name; bits {All: 8} otherwise (the fragment).
    _, wl, _ = load(SIMPLE, WORKLOADS / "transformers/deepseek/deepseek_v3_671B.yaml", **PREFILL)
    assert wl.tensors["QK"].bits_per_value == 16
    assert len(wl.einsums) == 21


def test_tpu_v4i_by_hand():
    spec, wl, comps = load(ARCHES / "tpu_v4i.yaml", WORKLOADS / "basic/matmuls.yaml", N_EINSUMS=3)
    c = comps["Matmul1"]  # tensors T1 (input), W1 (weight), T2 (output); T1, T2 intermediate
    assert c["Register"].size == 8  # weight.bits_per_value if weight else 0
    assert c["MAC"].enabled and not c["ScalarUnit"].enabled  # len(All) == 3 / == 2
    assert c["MainMemory"].keep == {"W1"}  # ~Intermediates
    # ~MainMemory.tensors: what MainMemory holds in each mapping (it may hold T1 and T2)
    assert c["GlobalBuffer"].keep_rule is not None and not c["GlobalBuffer"].keep
    path = [c[n] for n in ("MainMemory", "GlobalBuffer")]
    held = lambda mm, gb: [("MainMemory", t) for t in mm] + [("GlobalBuffer", t) for t in gb]  # noqa: E731
    assert comps_allow(spec, wl, path, held({"W1"}, {"T1", "T2"}))
    assert comps_allow(spec, wl, path, held({"W1", "T1"}, {"T2"}))  # T1 bypasses it
    assert comps_allow(spec, wl, path, held({"W1", "T1"}, {"T1", "T2"}))  # may_keep: All
    assert not comps_allow(spec, wl, path, held({"W1"}, {"T2"}))  # T1 nowhere on chip
    assert c["LocalBuffer"].keep == {"T1", "T2"}  # input | output
    assert c["GlobalBuffer"].size == 1024 * 1024 * 128 * 8
    assert c["MainMemory"].actions["read"].throughput == pytest.approx(8 * 614e9)
    assert c["MainMemory"].actions["read"].energy == pytest.approx(7.03e-12)
    pe = c["ProcessingElement"].spatial
    assert [(d.name, d.fanout) for d in pe] == [("reuse_input", 128), ("reuse_output", 128)]
    assert pe[0].may_reuse == {"T1"}  # may_reuse defaults to reuse = input
    assert comps["Matmul0"]["MainMemory"].keep == {"T0", "W0"}  # T1 is the only intermediate
    flat = ArchEvaluator(spec, wl).flat("Matmul1", "MAC")
    names = ["MainMemory", "GlobalBuffer", "LocalBuffer", "ProcessingElement", "Register", "MAC"]
    assert [x.name for x in flat] == names  # ScalarUnit is an alternative, not an ancestor


def test_fanout_node_by_hand():
    _, _, comps = load(
        ARCHES / "fanout_variations/at_mac_with_fanout_node.yaml",
        WORKLOADS / "basic/matmuls.yaml",
        N_EINSUMS=1,
    )
    c = comps["Matmul0"]
    assert c["MACArray"].kind == "container"
    assert [(d.name, d.fanout) for d in c["MACArray"].spatial] == [("X", 4)]
    assert c["MAC"].actions["compute"].throughput == 1  # 1 / (1)


def mapping_cases() -> list[tuple[str, str]]:
    out = []
    for f in sorted((CORPUS / "mappings").glob("*.yaml")):
        for kind in ("matmuls", "matvecs"):
            if kind in f.stem:
                out.append((f.name, kind))
    return out


@pytest.mark.parametrize(("mapping", "workload"), mapping_cases())
def test_mapping_evaluates(mapping, workload):
    spec = load_spec(
        SIMPLE,
        WORKLOADS / f"basic/{workload}.yaml",
        CORPUS / "mappings" / mapping,
        variables={"N_EINSUMS": 3} if workload == "matmuls" else {},
    )
    result = evaluate_mapping(spec)
    wl = resolve_workload(spec)
    for e in wl.einsums:
        # One MAC compute per point of the iteration space; simple.yaml: 1 J per compute.
        mac = result.einsums[e.name].components["MAC"]
        assert mac.actions["compute"].count == e.operations
        assert mac.energy == pytest.approx(e.operations)
    # matvecs: 4*3 + 3*4 = 24 computes; matmuls: 3 Einsums of 128^3.
    expected = 24 if workload == "matvecs" else 3 * 128**3
    assert sum(e.operations for e in wl.einsums) == expected
    assert result.energy > expected  # the memories cost something too


def test_every_mapping_is_covered():
    names = {m for m, _ in mapping_cases()} | {"simple_fused.yaml"}
    assert names == {f.name for f in (CORPUS / "mappings").glob("*.yaml")}


def test_simple_fused_mapping_with_matching_spec(tmp_path):
    """simple_fused.yaml names its own components and Einsums: give it a spec that has them."""
    (tmp_path / "spec.yaml").write_text(
        textwrap.dedent(
            """\
            arch:
              nodes:
              - !Memory {name: OffChipBuffer, size: inf, actions: [{name: read, energy: 10}, {name: write, energy: 10}]}
              - !Memory {name: OnChipBuffer, size: 1e6, actions: [{name: read, energy: 1}, {name: write, energy: 1}]}
              - !Compute {name: ComputeUnit, actions: [{name: compute, energy: 1}]}
            workload:
              iteration_space_shape: {nI: 0 <= nI < 4, nA: 0 <= nA < 3, nB: 0 <= nB < 2}
              bits_per_value: {All: 8}
              einsums:
              - {name: EinsumA, einsum: "A[nA] = I[nI] * WA[nI, nA]"}
              - {name: EinsumB, einsum: "B[nB] = A[nA] * WB[nA, nB]"}
            """
        )
    )
    spec = load_spec(tmp_path / "spec.yaml", CORPUS / "mappings/simple_fused.yaml")
    result = evaluate_mapping(spec)
    # EinsumA: nI x nA = 12 computes; EinsumB: nA x nB = 6.
    assert result.einsums["EinsumA"].components["ComputeUnit"].actions["compute"].count == 12
    assert result.einsums["EinsumB"].components["ComputeUnit"].actions["compute"].count == 6


# -- plug-in component classes ----------------------------------------------------------
# Priced with the component model library in test_components_corpus.py; here, without it.

NO_LIBRARY = pytest.mark.skipif(
    component_models.available(), reason="the component model library is installed here"
)


@NO_LIBRARY
@pytest.mark.parametrize(("arch", "line"), [("eyeriss", 9), ("simba", 6)])
def test_plugin_arch_without_the_library_names_what_it_needs(arch, line):
    # The line of MainMemory's `component_class: LPDDR4` (it gives no energies).
    with pytest.raises(SpecError) as info:
        load(ARCHES / f"{arch}.yaml", WORKLOADS / "basic/matmuls.yaml", N_EINSUMS=3)
    message = str(info.value)
    assert f"{arch}.yaml:{line}: MainMemory.component_class: MainMemory needs" in message
    assert "the energy and throughput of read and write, and its area and leak_power" in message
    assert "from component model 'LPDDR4'" in message
    assert "pip install 'fusemap[components]'" in message


CIM = sorted(f.stem for f in (ARCHES / "compute_in_memory").glob("[!_]*.yaml"))


@pytest.mark.parametrize("arch", CIM)
def test_compute_in_memory_arch_loads(arch):
    """The files paste anchor holders (``input_sliced: &input_sliced ...``) with include_text.

    Decision: an unknown top-level key whose value defines a YAML anchor is a template for
    aliases, not spec content, and is ignored; other unknown top-level keys stay errors.
    The arch variables call the CiM functions (get_array_fanout_reuse_output(spec), ...):
    they evaluate; without the library, the first plug-in component names what it needs.
    """
    spec = load_spec(ARCHES / "compute_in_memory" / f"{arch}.yaml")
    assert spec.arch is not None and spec.workload is not None  # its own default workload
    wl = resolve_workload(spec)
    evaluator = ArchEvaluator(spec, wl)
    if component_models.available():
        pytest.skip("priced in test_components_corpus.py where the library is installed")
    with pytest.raises(SpecError) as info:
        evaluator.components(wl.einsums[0].name)
    message = str(info.value)
    assert f"{arch}.yaml:" in message and ".component_class: " in message
    assert "pip install 'fusemap[components]'" in message


def test_anchor_holders_are_ignored_other_unknown_keys_are_errors(tmp_path):
    body = "arch:\n  nodes:\n  - !Compute\n    <<: *mac\n"
    (tmp_path / "ok.yaml").write_text("mac_template: &mac {name: MAC, area: 1}\n" + body)
    spec = load_spec(tmp_path / "ok.yaml")
    assert spec.arch is not None and spec.arch.component("MAC").area == 1
    (tmp_path / "bad.yaml").write_text(
        "mac_template: {name: MAC}\n" + body.replace("    <<: *mac\n", "    name: MAC\n")
    )
    with pytest.raises(SpecError, match=r"bad\.yaml:1: mac_template: unknown key 'mac_template'"):
        load_spec(tmp_path / "bad.yaml")
    # An alias at the top level is not an anchor holder either.
    (tmp_path / "alias.yaml").write_text("arch: &a {nodes: [!Compute {name: MAC}]}\nextra: *a\n")
    with pytest.raises(SpecError, match=r"alias\.yaml:2: extra: unknown key 'extra'"):
        load_spec(tmp_path / "alias.yaml")


def comps_allow(spec, wl, path, held) -> bool:
    """Whether Matmul1's memories on ``path`` accept holding ``held``."""
    from fusemap.spec.arch_eval import ArchEvaluator

    return ArchEvaluator(spec, wl).allows_holding("Matmul1", path, held)
