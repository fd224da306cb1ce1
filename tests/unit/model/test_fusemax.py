"""FuseMax on BERT-Base, batch 64 (attention-cascades.md §5), from fusemap's model on the
example files: cascade 5 on the FuseMax arch with the FuseMax mapping and binding."""

from __future__ import annotations

import pytest

from fusemap.model.evaluate import evaluate_mapping
from fusemap.spec.spec import load_spec
from tests.support.paths import ATTENTION

EXAMPLES = ATTENTION
FUSED = ["QK", "LM", "RM", "SLN", "SLD", "SLNV", "PRM", "SPD", "RD", "SPNV", "RNV", "AV"]
CLOCK = 940e6


def fusemax(model: str, seq: int):
    spec = load_spec(
        EXAMPLES / "cascade5.yaml",
        EXAMPLES / "fusemax.arch.yaml",
        EXAMPLES / "fusemax.mapping.yaml",
        variables={"MODEL": model, "SEQ": seq},
    )
    return evaluate_mapping(spec, einsums=FUSED)  # BK, BV: views of K, V


def dram_bytes(result) -> float:
    return sum(result.count("DRAM", a) for a in ("read", "write")) * 2


def buffer_bytes(result) -> float:
    return result.components["GlobalBuffer"].usage_bits / 8


def test_bert_1k_per_einsum_cycles_traffic_and_latency():
    r = fusemax("bert", 1024)
    cycles = {
        name: round(e.components[e.compute_unit].latency * CLOCK) for name, e in r.einsums.items()
    }
    assert cycles == {
        "QK": 786_432,
        "LM": 12_288,
        "SLN": 86_016,
        "SLD": 12_288,
        "SLNV": 786_432,
        "RM": 12_288,
        "RD": 12_288,
        "SPD": 12_288,
        "PRM": 86_016,
        "SPNV": 786_432,
        "RNV": 786_432,
        "AV": 196_608,
    }
    assert {r.einsums[e].compute_unit for e in ("QK", "LM", "SLN", "SLD", "SLNV")} == {"PE2D"}
    assert dram_bytes(r) == 402_653_184  # exactly the compulsory Q + K + V + AV
    assert r.latency * CLOCK == pytest.approx(1_892_352, rel=0.01)
    assert r.latency * CLOCK == pytest.approx(1_892_352, rel=1e-9)  # compute-bound


def test_bert_64k_reads_k_and_v_twice():
    r = fusemax("bert", 65536)
    assert dram_bytes(r) == 38_654_705_664
    assert buffer_bytes(r) == 8_585_216


@pytest.mark.parametrize("seq", [262_144, 1_048_576])
def test_on_chip_footprint_does_not_grow_with_the_sequence(seq):
    assert buffer_bytes(fusemax("bert", seq)) == 8_585_216


def test_xlm_long_sequence_footprint_and_bert_1m_latency():
    assert buffer_bytes(fusemax("xlm", 1_048_576)) == 8_585_216  # P1 = 64
    r = fusemax("bert", 1_048_576)
    assert r.latency * CLOCK == pytest.approx(1_778_317_787_136, rel=1e-9)
