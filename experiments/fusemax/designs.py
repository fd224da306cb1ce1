"""FuseMax, FLAT and the unfused baseline on one attention layer, from fusemap's model.

Every number comes from ``evaluate_mapping`` on the files in ``examples/attention/``:

* FuseMax: ``cascade5.yaml`` + ``fusemax.arch.yaml`` + ``fusemax.mapping.yaml`` (the 12
  Einsums QK ... AV; BK and BV are views of K and V).
* FLAT: ``cascade4.yaml`` + ``flat.arch.yaml`` + ``flat.mapping.yaml``.
* Unfused: the same with ``UNFUSED=1``.

FLAT's spill (and the unfused softmax's): the mapping keeps the row block of QK and SN
(2 * 256 * M words) in the 32 MiB buffer. When it does not fit, the fraction
``f = 1 - size / need`` of it spills. The model evaluates a mapping where the row block
is held (``SPILL=0``, capacity not enforced) and one where it lives in DRAM
(``SPILL=1``); the point is their mix: per-Einsum, per-component latencies, energies and
DRAM traffic are ``(1 - f) * held + f * spilled`` (all are linear in the traffic), and
the mapping's latency rule (overlap regions) is applied to the mixed latencies.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path

from fusemap.model.evaluate import evaluate_mapping
from fusemap.model.result import EinsumResult, Result
from fusemap.model.schedule import mapping_latency
from fusemap.spec.spec import Spec, load_spec

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "attention"
CLOCK = 940e6
FUSEMAX_EINSUMS = ["QK", "LM", "RM", "SLN", "SLD", "SLNV", "PRM", "SPD", "RD", "SPNV", "RNV", "AV"]
MODELS = ("bert", "trxl", "t5", "xlm")
SEQUENCES = (1024, 4096, 16384, 65536, 262144, 1048576)


@dataclass(frozen=True)
class DesignPoint:
    """One design on one workload."""

    dram_bytes: float
    footprint_bytes: float  # global buffer in use (the whole buffer when spilling)
    cycles: float
    energy: float  # joules
    spilled: float = 0.0  # fraction of FLAT's row block that does not fit on chip

    def to_json(self) -> dict[str, float]:
        return {
            "dram_bytes": self.dram_bytes,
            "footprint_bytes": self.footprint_bytes,
            "cycles": self.cycles,
            "energy_j": self.energy,
            "spilled_fraction": self.spilled,
        }


def _dram_bytes(result: Result) -> float:
    return sum(result.count("DRAM", a) for a in ("read", "write")) * 2  # fp16 words


def _buffer_bits(result: Result) -> float:
    return result.components["GlobalBuffer"].usage_bits or 0.0


def fusemax(model: str, seq: int) -> DesignPoint:
    """FuseMax: cascade 5 with the FuseMax mapping and binding."""
    spec = load_spec(
        EXAMPLES / "cascade5.yaml",
        EXAMPLES / "fusemax.arch.yaml",
        EXAMPLES / "fusemax.mapping.yaml",
        variables={"MODEL": model, "SEQ": seq},
    )
    r = evaluate_mapping(spec, einsums=FUSEMAX_EINSUMS)
    return DesignPoint(_dram_bytes(r), _buffer_bits(r) / 8, r.latency * CLOCK, r.energy)


def _flat_spec(model: str, seq: int, unfused: bool, spill: bool) -> Spec:
    return load_spec(
        EXAMPLES / "cascade4.yaml",
        EXAMPLES / "flat.arch.yaml",
        EXAMPLES / "flat.mapping.yaml",
        variables={"MODEL": model, "SEQ": seq, "UNFUSED": int(unfused), "SPILL": int(spill)},
    )


def flat(model: str, seq: int, unfused: bool = False) -> DesignPoint:
    """FLAT (or, with ``unfused``, the unfused baseline) with the spill rule above."""
    spec = _flat_spec(model, seq, unfused, False)
    held = evaluate_mapping(spec, check=False)
    size = next(c.size for c in held.components.values() if c.name == "GlobalBuffer" and c.size)
    need = _buffer_bits(held)
    f = max(0.0, 1.0 - size / need) if need else 0.0
    if f == 0.0:
        return DesignPoint(_dram_bytes(held), need / 8, held.latency * CLOCK, held.energy)
    spilled = evaluate_mapping(_flat_spec(model, seq, unfused, True))
    mixed = {n: _mix(e, spilled.einsums[n], f) for n, e in held.einsums.items()}
    assert spec.mapping is not None
    latency = mapping_latency(spec.mapping, mixed)
    return DesignPoint(
        (1 - f) * _dram_bytes(held) + f * _dram_bytes(spilled),
        size / 8,
        latency * CLOCK,
        (1 - f) * held.energy + f * spilled.energy,
        f,
    )


def _mix(held: EinsumResult, spilled: EinsumResult, f: float) -> EinsumResult:
    out = copy.deepcopy(held)
    for name, use in out.components.items():
        other = spilled.components.get(name)
        use.latency = (1 - f) * use.latency + f * (other.latency if other else 0.0)
    out.latency = max((u.latency for u in out.components.values()), default=0.0)
    return out
