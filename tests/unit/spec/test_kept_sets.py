"""Keep rules that name memories (``keep: ~DRAM``): read per mapping, as what the named
memories hold there (the format: memory names in the mapper are "the tensors it keeps",
re-evaluated per template), not as the named memory's own ``keep`` set."""

from __future__ import annotations

from dataclasses import replace

import pytest

import fusemap.mapper.space.templates as templates_module
from fusemap.mapper.ffm import map_workload
from fusemap.mapper.pmappings.signature import einsum_signature
from fusemap.mapper.space.config import config_from_spec
from fusemap.mapper.space.templates import backing_levels, join_memories, templates
from fusemap.spec.arch_eval import ArchEvaluator
from fusemap.spec.resolve import resolve_workload
from fusemap.spec.spec import load_spec
from tests.support.model_helpers import arch, chain_matmul, compute_unit, memory, to_yaml, workload

DRAM = {"keep": "~Intermediates", "may_keep": "All"}
BYPASS = {"keep": "~DRAM"}  # what DRAM does not hold; nothing else
MAY = {"keep": "~DRAM.tensors", "may_keep": "All"}  # that, and anything it likes


def _spec(tmp_path, gb_rule: dict, dram_energy: float = 50, gb_energy: float = 2, local=()):
    """T1 = T0 W0 (E0), T2 = T1 W1 (E1), every rank 2, on DRAM, a buffer (``local``:
    memories under it), a MAC."""
    gb_size = 100 if local else 256  # bits: under local buffers, less than every tensor
    ar = arch(
        memory("DRAM", "inf", dram_energy, dram_energy, tensors=DRAM),
        memory("GB", gb_size, gb_energy, gb_energy, tensors=gb_rule),
        *local,
        compute_unit("MAC", 1),
    )
    wl = workload(
        {"m": 2, "n0": 2, "n1": 2, "n2": 2},
        chain_matmul("E0", "T0", "W0", "T1", "n0", "n1"),
        chain_matmul("E1", "T1", "W1", "T2", "n1", "n2"),
    )
    path = tmp_path / "rules.yaml"
    path.write_text(to_yaml({**ar, **wl}))
    return load_spec(path)


def _allows(spec, dram: set, gb: set) -> bool:
    wl = resolve_workload(spec)
    ae = ArchEvaluator(spec, wl)
    held = [("DRAM", t) for t in dram] + [("GB", t) for t in gb]
    return ae.allows_holding("E1", ae.flat("E1", "MAC").path, held)


@pytest.mark.parametrize(
    ("rule", "dram", "gb", "allowed"),
    [
        # DRAM holds T1: the buffer must not (BYPASS) or may (MAY).
        (BYPASS, {"T1", "W1", "T2"}, set(), True),
        (BYPASS, {"T1", "W1", "T2"}, {"T1"}, False),
        (MAY, {"T1", "W1", "T2"}, {"T1"}, True),
        (MAY, {"T1", "W1", "T2"}, {"T1", "W1"}, True),
        # DRAM does not hold T1: the buffer must.
        (BYPASS, {"W1", "T2"}, {"T1"}, True),
        (BYPASS, {"W1", "T2"}, set(), False),
        (MAY, {"W1", "T2"}, set(), False),
        # A tensor DRAM holds that the rule does not allow (BYPASS: W1).
        (BYPASS, {"W1", "T2"}, {"T1", "W1"}, False),
    ],
)
def test_rule_reads_what_the_named_memory_holds(tmp_path, rule, dram, gb, allowed):
    assert _allows(_spec(tmp_path, rule), dram, gb) is allowed


def test_templates_let_an_intermediate_in_dram_bypass_the_buffer(tmp_path):
    """E1's templates: T1 in DRAM alone is one (it was not, when ``~DRAM`` read DRAM's
    ``keep``: every intermediate); T1 in neither memory is none."""
    spec = _spec(tmp_path, MAY)
    wl = resolve_workload(spec)
    ae = ArchEvaluator(spec, wl)
    config = config_from_spec(spec)
    holds = {
        frozenset((h.component, h.tensor) for h in t.holders if not h.virtual)
        for t in templates(wl.einsum("E1"), ae, config)
    }
    dram = {("DRAM", "T1"), ("DRAM", "T2"), ("DRAM", "W1")}
    assert frozenset(dram) in holds and frozenset(dram | {("GB", "T1")}) in holds
    assert all({("DRAM", "T1"), ("GB", "T1")} & h for h in holds)


def test_chain_through_a_cheap_dram_bypasses_the_buffer(tmp_path):
    """DRAM costs 1 per access, the buffer 10: T1 best goes through DRAM alone. Each
    Einsum then works from DRAM: 8 MACs (8), each reading both inputs (16) and writing
    the output (8), whose partial sums are read back but for the first of each of the
    4 outputs (4): 36, and 72 for the chain. Reading ``~DRAM`` as DRAM's own ``keep``
    forced T1 through the buffer too (each of its accesses there costs 10)."""
    spec = _spec(tmp_path, MAY, dram_energy=1, gb_energy=10)
    assert map_workload(spec, "energy").best.result.energy == pytest.approx(72, rel=1e-12)


def test_identical_einsums_share_a_rule_that_names_no_tensor(tmp_path):
    """Y = A B and Z = C D: ``~DRAM`` is the same rule for both up to tensor names;
    ``~DRAM - C`` is not (their tables may not be shared)."""
    wl = workload(
        {"m": 2, "k": 2, "n": 2},
        chain_matmul("Y", "A", "B", "Y", "k", "n"),
        chain_matmul("Z", "C", "D", "Z", "k", "n"),
    )
    for rule, same in ((MAY, True), ({"keep": "~DRAM - C", "may_keep": "All"}, False)):
        ar = arch(
            memory("DRAM", "inf", 50, 50, tensors=DRAM),
            memory("GB", 256, 2, 2, tensors=rule),
            compute_unit("MAC", 1),
        )
        path = tmp_path / "two.yaml"
        path.write_text(to_yaml({**ar, **wl}))
        spec = load_spec(path)
        info = resolve_workload(spec)
        ae = ArchEvaluator(spec, info)
        sig = [einsum_signature(info.einsum(e), info, ae) for e in ("Y", "Z")]
        assert (sig[0] == sig[1]) is same


@pytest.mark.parametrize(
    ("rule", "levels", "joined"),
    [
        # DRAM does not hold T1 unless it backs it: the buffer then must, so T1 is
        # backed in DRAM or GB, never in LB, and only GB holds other Einsums' tiles.
        (MAY, [0, 1], {"GB"}),
        (BYPASS, [0, 1], {"GB"}),
        # No rule naming a memory: T1 may skip GB and be backed in LB.
        ({"may_keep": "All"}, [0, 1, 2], {"GB", "LB"}),
    ],
)
def test_backing_levels_follow_the_rules(tmp_path, rule, levels, joined):
    """The levels that may back an intermediate (what the join's memories and the
    held amounts are read from) are those some accepted holding has, not the bounds
    a rule naming memories gets (``keep`` nothing, ``may_keep`` everything)."""
    spec = _spec(tmp_path, rule, local=[memory("LB", 40, 1, 1, tensors={"may_keep": "All"})])
    wl = resolve_workload(spec)
    ae = ArchEvaluator(spec, wl)
    config = replace(config_from_spec(spec), fusion=True)
    for name in ("E0", "E1"):
        flat = ae.flat(name, "MAC")
        assert backing_levels(wl.einsum(name), flat, ae, "T1") == levels
        backed = {
            h.level
            for t in templates(wl.einsum(name), ae, config, shared=frozenset({"T1"}))
            for h in t.holders
            if h.tensor == "T1" and h.backing
        }
        assert backed == set(levels)  # the templates agree
    assert join_memories(wl, ae, config) == joined


def test_backing_levels_past_their_bound_keep_the_level(tmp_path, monkeypatch):
    """Past ``HOLDINGS_TRIED`` holdings a level is kept unproven (the join then adds up
    one memory more: slower, never wrong)."""
    monkeypatch.setattr(templates_module, "HOLDINGS_TRIED", 1)
    spec = _spec(tmp_path, MAY, local=[memory("LB", 40, 1, 1, tensors={"may_keep": "All"})])
    wl = resolve_workload(spec)
    ae = ArchEvaluator(spec, wl)
    assert backing_levels(wl.einsum("E0"), ae.flat("E0", "MAC"), ae, "T1") == [0, 1, 2]
