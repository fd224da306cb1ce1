"""FFM against TransFusion on an edge accelerator (the FFM paper, section 8, Figs. 11-13).

GPT-3 6.7B prefill (one decoder layer, batch 1) on ``examples/edge/edge.arch.yaml`` (the
paper's Table 3) over sequence lengths. TransFusion is a constrained mapping: every
intermediate tensor but K and V must stay on chip (``TRANSFUSION=true`` in the arch:
main memory may not keep them, so they are fused), and the mapper finds the best
mapping under that constraint; FFM is free. Per length: EDP, energy and latency ratios
(TransFusion / FFM), the main-memory energy by tensor class (weights, K and V, other
intermediates, the layer's input and output), and which Einsums FFM fuses against their
compute intensity (operations per byte of their tensors).

Full: 256 tokens, then 1K, 2K, ..., 64K; --quick: 256 tokens. Past ``--checked-up-to``
tokens (default 256) both mappings skip the check of several fused loops per rank
variable (``map_workload(check_full_space=False)``): each is then the optimum over one
fused loop per rank variable, an upper bound of its optimum over the whole space; the
check of the whole space takes 3-26 minutes per length and side (README.md), so the
figure run leaves it to separate runs. Each point says which space it is over;
``--proved-apart`` names the lengths whose two optima separate whole-space runs proved
equal to these (README.md lists them), and their points say so.

usage: python experiments/ffm/transfusion.py [--quick] [--lengths 1024,4096]
       [--checked-up-to 256] [--proved-apart 1024,2048]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import EDGE, arguments, figure, gpt3, markdown_table, peak_mb, write_outputs  # noqa: E402

from fusemap.mapper.ffm import map_workload  # noqa: E402
from fusemap.spec.resolve import WorkloadInfo, resolve_workload  # noqa: E402

OFF_CHIP = "MainMemory"
CLASSES = ("weights", "K and V", "other intermediates", "layer input and output")
SPACE = {True: "whole", False: "one fused loop per rank variable"}  # by ``checked``


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the comparison; returns what the JSON holds."""
    parser = arguments(__doc__, "transfusion")
    parser.add_argument("--lengths", default=None, help="sequence lengths, comma-separated")
    parser.add_argument("--checked-up-to", type=int, default=256,
                        help="longest length mapped with the whole space checked")  # fmt: skip
    parser.add_argument("--proved-apart", default="",
                        help="lengths whose whole-space optima separate runs proved equal")  # fmt: skip
    args = parser.parse_args(argv)
    proved_apart = {int(x) for x in args.proved_apart.split(",") if x}
    quick = args.quick
    default = "256" if quick else ",".join(["256", *(str(1024 * 2**i) for i in range(7))])
    lengths = [int(x) for x in (args.lengths or default).split(",")]
    points = []
    for tokens in lengths:
        free = gpt3(1, tokens, EDGE)
        if not free.available():
            print(f"skipped: {free.workload} is absent")
            return {}
        checked = tokens <= args.checked_up_to
        point = {"tokens": tokens, "checked": checked,
                 "proved_apart": not checked and tokens in proved_apart, "ffm": _mapped(free, checked),
                 "transfusion": _mapped(gpt3(1, tokens, EDGE, TRANSFUSION=True), checked)}  # fmt: skip
        for key in ("edp", "energy", "latency"):
            point[f"{key}_ratio"] = point["transfusion"][key] / point["ffm"][key]
        points.append(point)
        print(f"{tokens} tokens (space: {_space(point)}): TransFusion / FFM: EDP "
              f"{point['edp_ratio']:.3f}, energy "
              f"{point['energy_ratio']:.3f}, latency {point['latency_ratio']:.3f}",
              flush=True)  # fmt: skip
    data = {"quick": quick, "arch": str(EDGE.relative_to(EDGE.parents[2])), "points": points,
            "paper": {"edp_ratio_up_to": 1.8}}  # fmt: skip
    write_outputs(args.out, args.name + ("_quick" if quick else ""), data, _plot(data),
                  _table(data))  # fmt: skip
    return data


def _mapped(problem: Any, checked: bool = True) -> dict[str, Any]:
    """The optimal EDP mapping of ``problem``: its numbers, off-chip energy by class,
    and which Einsums fuse (with their compute intensity). ``checked``: over the whole
    fused space (else over one fused loop per rank variable)."""
    spec = problem.spec()
    start = time.perf_counter()
    outcome = map_workload(spec, "edp", jobs=2, check_full_space=checked)
    seconds = time.perf_counter() - start
    wl = resolve_workload(spec)
    res = outcome.best.result
    fused = {f.tensor for f in outcome.best.fused}
    by_class = dict.fromkeys(CLASSES, 0.0)
    for e in res.einsums.values():
        use = e.components.get(OFF_CHIP)
        for tensor, actions in use.tensors.items() if use else ():
            by_class[_class(wl, tensor)] += sum(a.energy for a in actions.values())
    return {
        "energy": res.energy, "latency": res.latency, "edp": res.energy * res.latency,
        "seconds": seconds, "peak_mb": peak_mb(), "fused": sorted(fused),
        "space": SPACE[checked],
        "off_chip_energy": by_class,
        "einsums": {e.name: {"fused": _output_fused(wl, e.outputs, fused),
                             "intensity": _intensity(wl, e.name)} for e in wl.einsums},
    }  # fmt: skip


def _output_fused(wl: WorkloadInfo, outputs: tuple[str, ...], fused: set[str]) -> bool | None:
    """Whether the Einsum hands its output to the next on chip (None: the layer's
    output, which no Einsum reads)."""
    if not any(wl.tensors[t].is_intermediate for t in outputs):
        return None
    return any(t in fused for t in outputs)


def _class(wl: WorkloadInfo, tensor: str) -> str:
    """The tensor's class for the off-chip breakdown."""
    info = wl.tensors[tensor]
    if tensor in ("K", "V"):
        return "K and V"
    if info.is_intermediate:
        return "other intermediates"
    if tensor.startswith("W"):
        return "weights"
    return "layer input and output"


def _intensity(wl: WorkloadInfo, name: str) -> float:
    """Operations per byte of the Einsum's tensors (each counted once, whole)."""
    e = wl.einsum(name)
    size = sum(wl.tensors[t].size * wl.tensors[t].bits_per_value / 8 for t in e.tensors)
    return e.operations / size


def _plot(data: dict[str, Any]) -> Any:
    """Ratios per length; off-chip energy by class; fused Einsums by intensity."""
    fig, axes = figure(3, width=5.0)
    tokens = [p["tokens"] for p in data["points"]]
    for key in ("edp", "energy", "latency"):
        axes[0].plot(tokens, [p[f"{key}_ratio"] for p in data["points"]], "o-", label=key)
    axes[0].set_ylabel("TransFusion / FFM")
    axes[0].set_title("EDP, energy and latency ratios", fontsize=9)
    axes[0].axhline(1.0, color="k", lw=0.8)
    width = 0.4
    x = range(len(tokens))
    for side, who in ((-1, "ffm"), (1, "transfusion")):
        bottom = [0.0] * len(tokens)
        for k, cls in enumerate(CLASSES):
            values = [p[who]["off_chip_energy"][cls] for p in data["points"]]
            axes[1].bar([i + side * width / 2 for i in x], values, width, bottom=bottom,
                        color=f"C{k}", label=cls if who == "ffm" else None,
                        hatch="//" if who == "transfusion" else None)  # fmt: skip
            bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    axes[1].set_xticks(list(x), [f"{t // 1024}K" if t >= 1024 else str(t) for t in tokens])
    axes[1].set_ylabel("off-chip energy (J)")
    axes[1].set_title("left FFM, right TransFusion (hatched)", fontsize=9)
    for p in data["points"]:
        for e in p["ffm"]["einsums"].values():
            if e["fused"] is not None:
                axes[2].scatter(p["tokens"], e["intensity"], marker="o" if e["fused"] else "x",
                                color="C2" if e["fused"] else "C3")  # fmt: skip
    axes[2].set_yscale("log")
    axes[2].set_ylabel("compute intensity (operations / byte)")
    axes[2].set_title("o: FFM keeps the output on chip; x: not", fontsize=9)
    for ax in (axes[0], axes[2]):
        ax.set_xscale("log", base=2)
    for ax in axes:
        ax.set_xlabel("sequence length")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    axes[1].legend(fontsize=7)
    fig.suptitle("FFM vs TransFusion on the edge accelerator (GPT-3 6.7B, batch 1)", y=0.99)
    fig.tight_layout()
    return fig


def _space(point: dict[str, Any]) -> str:
    """The space a point's optima are over, and whether separate runs proved them
    equal to the whole space's."""
    if point.get("proved_apart"):
        return "whole (proved apart)"
    return SPACE[point["checked"]]


def _table(data: dict[str, Any]) -> str:
    """One row per length."""
    rows = []
    for p in data["points"]:
        not_fused = [n for n, e in p["ffm"]["einsums"].items() if e["fused"] is False]
        rows.append([p["tokens"], _space(p), p["edp_ratio"], p["energy_ratio"],
                     p["latency_ratio"],
                     p["ffm"]["seconds"], p["transfusion"]["seconds"],
                     ", ".join(not_fused) or "-"])  # fmt: skip
    return markdown_table(["tokens", "space", "EDP TF/FFM", "energy TF/FFM", "latency TF/FFM",
                           "FFM s", "TransFusion s", "Einsums whose output FFM sends off chip"], rows)  # fmt: skip


if __name__ == "__main__":
    main()
