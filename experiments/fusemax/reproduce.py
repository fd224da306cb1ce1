"""Reproduce FuseMax's attention comparison (attention-cascades.md §3, "Headline results").

    python experiments/fusemax/reproduce.py --json OUT.json [--plot OUT.png]
        [--models bert,xlm] [--seqs 1024,65536]

For 4 models x 6 sequence lengths (batch 64) it evaluates FuseMax, FLAT and the unfused
baseline with fusemap's model on the files in examples/attention/ (see designs.py),
writes per model and length the DRAM bytes, on-chip footprint, cycles and energy of
each design with FuseMax's speedup and energy ratio against both baselines, plus the
arithmetic means over all points (the paper reports 6.7x and 0.79 of FLAT's energy),
and plots speedup and energy.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from designs import MODELS, SEQUENCES, DesignPoint, flat, fusemax  # noqa: E402

from fusemap.report.io import write_atomic  # noqa: E402

PAPER = {"speedup_vs_flat": 6.72, "energy_vs_flat": 0.787, "speedup_vs_unfused": 10.05,
         "energy_vs_unfused": 0.767}  # fmt: skip


@dataclass(frozen=True)
class Comparison:
    """The three designs on one model and sequence length."""

    model: str
    seq: int
    fusemax: DesignPoint
    flat: DesignPoint
    unfused: DesignPoint

    @property
    def speedup_vs_flat(self) -> float:
        return self.flat.cycles / self.fusemax.cycles

    @property
    def speedup_vs_unfused(self) -> float:
        return self.unfused.cycles / self.fusemax.cycles

    @property
    def energy_vs_flat(self) -> float:
        return self.fusemax.energy / self.flat.energy

    @property
    def energy_vs_unfused(self) -> float:
        return self.fusemax.energy / self.unfused.energy

    def to_json(self) -> dict:
        return {
            "model": self.model,
            "seq": self.seq,
            "fusemax": self.fusemax.to_json(),
            "flat": self.flat.to_json(),
            "unfused": self.unfused.to_json(),
            "speedup_vs_flat": self.speedup_vs_flat,
            "speedup_vs_unfused": self.speedup_vs_unfused,
            "energy_vs_flat": self.energy_vs_flat,
            "energy_vs_unfused": self.energy_vs_unfused,
        }


def compare(model: str, seq: int) -> Comparison:
    """FuseMax, FLAT and unfused on one point."""
    return Comparison(model, seq, fusemax(model, seq), flat(model, seq), flat(model, seq, True))


def averages(rows: list[Comparison]) -> dict[str, float]:
    """Arithmetic means over the points (as the paper averages)."""
    keys = ("speedup_vs_flat", "energy_vs_flat", "speedup_vs_unfused", "energy_vs_unfused")
    return {k: sum(getattr(r, k) for r in rows) / len(rows) for k in keys}


def plot(rows: list[Comparison], out: Path) -> Path:
    """Speedup and energy of FuseMax against FLAT and unfused, per model and length."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for model in dict.fromkeys(r.model for r in rows):
        mine = [r for r in rows if r.model == model]
        seqs = [f"{r.seq // 1024}K" for r in mine]
        for ax, key in ((axes[0], "speedup"), (axes[1], "energy")):
            for base, style in (("flat", "-o"), ("unfused", "--x")):
                values = [getattr(r, f"{key}_vs_{base}") for r in mine]
                ax.plot(seqs, values, style, label=f"{model} vs {base}")
    axes[0].set_ylabel("FuseMax speedup (x)")
    axes[1].set_ylabel("FuseMax energy / baseline")
    for ax in axes:
        ax.set_xlabel("sequence length")
        ax.grid(alpha=0.3)
    axes[1].legend(fontsize=7, ncol=2)
    fig.suptitle("FuseMax vs FLAT and unfused attention (batch 64, fusemap model)")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return write_atomic(out, buf.getvalue())


def main(argv: list[str] | None = None) -> dict:
    """Run the comparison; returns what ``--json`` writes."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, required=True, help="output JSON file")
    parser.add_argument("--plot", type=Path, help="output PNG (default: next to the JSON)")
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated")
    parser.add_argument("--seqs", default=",".join(map(str, SEQUENCES)), help="comma-separated")
    args = parser.parse_args(argv)
    rows = []
    for model in args.models.split(","):
        for seq in (int(s) for s in args.seqs.split(",")):
            rows.append(compare(model, seq))
            r = rows[-1]
            print(
                f"{model:5} {seq:>8}: {r.speedup_vs_flat:5.2f}x vs FLAT "
                f"(energy {r.energy_vs_flat:.3f}), {r.speedup_vs_unfused:5.2f}x vs unfused "
                f"(energy {r.energy_vs_unfused:.3f})",
                flush=True,
            )
    avg = averages(rows)
    data = {"points": [r.to_json() for r in rows], "averages": avg, "paper": PAPER}
    write_atomic(args.json, json.dumps(data, indent=1))
    plot(rows, args.plot or args.json.with_suffix(".png"))
    print("averages:", ", ".join(f"{k} {v:.3f} (paper {PAPER[k]})" for k, v in avg.items()))
    return data


if __name__ == "__main__":
    main()
