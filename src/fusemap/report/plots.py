"""Energy-breakdown plot (matplotlib, no display needed)."""

from __future__ import annotations

import io
from pathlib import Path

from ..model.result import Result
from .io import check_plot, write_atomic


def energy_breakdown(result: Result, out: str | Path) -> Path:
    """Stacked bars: one bar per Einsum, one colour per component."""
    check_plot(out)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    einsums = list(result.einsums)
    comps = list(result.components)
    fig, ax = plt.subplots(figsize=(max(4.0, 0.8 * len(einsums) + 2), 4))
    bottom = [0.0] * len(einsums)
    for c in comps:
        values = [
            result.einsums[e].components[c].energy if c in result.einsums[e].components else 0.0
            for e in einsums
        ]
        ax.bar(einsums, values, bottom=bottom, label=c)
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    ax.set_ylabel("energy (J)")
    ax.set_title(f"Energy by Einsum and component (total {result.energy:.4g} J)")
    ax.legend(fontsize=8)
    plt.setp(ax.get_xticklabels(), rotation=30, ha="right")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format=Path(out).suffix.lstrip(".").lower(), dpi=120)
    plt.close(fig)
    return write_atomic(out, buf.getvalue())
