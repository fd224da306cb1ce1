"""What the FFM-paper experiments share: the problems (arch, workload, variables), the
FFM run they all compare with, and their outputs (a JSON, a PNG and a Markdown table,
each written atomically, beside each other)."""

from __future__ import annotations

import argparse
import io
import json
import os
import resource
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fusemap.examples import example_path
from fusemap.mapper.ffm import map_workload
from fusemap.report.io import write_atomic
from fusemap.spec.spec import Spec, load_spec

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SHARED = Path(os.environ.get("FUSEMAP_SHARED", ROOT.parent / "shared"))
CORPUS = SHARED / "corpus" / "accelforge-examples"
TPU = CORPUS / "arches" / "tpu_v4i.yaml"
GPT3 = CORPUS / "workloads" / "transformers" / "gpt" / "gpt3_6.7B.yaml"
EDGE = ROOT / "examples" / "edge" / "edge.arch.yaml"


@dataclass(frozen=True)
class Problem:
    """An arch and a workload with their variables, named for the tables."""

    name: str
    arch: Path
    workload: Path
    variables: dict[str, Any] = field(default_factory=dict)

    def spec(self) -> Spec:
        """The loaded spec (arch variables ride along with the workload's)."""
        return load_spec(self.arch, self.workload, variables=dict(self.variables))

    def available(self) -> bool:
        """Whether its files are here (the corpus lives in ``../shared``)."""
        return self.arch.exists() and self.workload.exists()

    def to_json(self) -> dict[str, Any]:
        """What the JSON records about it (paths relative to the repository's parent)."""
        return {
            "name": self.name,
            "arch": _shown(self.arch),
            "workload": _shown(self.workload),
            "variables": self.variables,
        }


def _shown(path: Path) -> str:
    try:
        return path.resolve().relative_to(ROOT.parent).as_posix()
    except ValueError:
        return str(path)


def gpt3(batch: int, tokens: int, arch: Path = TPU, **extra: Any) -> Problem:
    """GPT-3 6.7B prefill, one decoder layer, ``batch`` x ``tokens``, on ``arch``."""
    variables = {"BATCH_SIZE": batch, "DECODE": False, "N_NEW_TOKENS": tokens, **extra}
    variables.setdefault("MAX_N_TOKENS", max(2048, tokens))
    return Problem(f"GPT-3 6.7B, batch {batch}, {tokens} tokens", arch, GPT3, variables)


def chain(n: int, m: int = 8192, sizes: list[int] | None = None, arch: Path = TPU) -> Problem:
    """A chain of ``n`` matmuls (the paper's (N; K) cycle by default) on ``arch``."""
    variables: dict[str, Any] = {"N": n, "M": m}
    if sizes is not None:
        variables["SIZES"] = sizes
    return Problem(f"{n} matmuls", arch, Path(example_path("matmul_chain.yaml")), variables)


def small_chain(n: int) -> Problem:
    """A chain small enough for the quick modes, on the project's own ``arch.yaml`` (no
    ``../shared`` needed): M = 64, inner sizes 64 and 128, a 4 KiB buffer."""
    variables = {"N": n, "M": 64, "SIZES": [128, 128, 64, 64], "BUFFER_KIB": 4}
    return Problem(f"{n} small matmuls", Path(example_path("arch.yaml")),
                   Path(example_path("matmul_chain.yaml")), variables)  # fmt: skip


@dataclass
class FfmRun:
    """FFM's optimum of a problem and what it took."""

    energy: float
    latency: float
    seconds: float
    peak_mb: float
    fused: list[str]

    @property
    def edp(self) -> float:
        """Energy times latency (J s)."""
        return self.energy * self.latency

    def to_json(self) -> dict[str, Any]:
        """The JSON record."""
        return {"energy": self.energy, "latency": self.latency, "edp": self.edp,
                "seconds": self.seconds, "peak_mb": self.peak_mb, "fused": self.fused}  # fmt: skip


def run_ffm(spec: Spec, objective: str = "edp", jobs: int = 2) -> FfmRun:
    """FFM's optimal mapping of ``spec`` for ``objective``, timed (wall seconds)."""
    start = time.perf_counter()
    outcome = map_workload(spec, objective, jobs=jobs)
    seconds = time.perf_counter() - start
    res = outcome.best.result
    fused = [f"{f.tensor}@{f.memory}" for f in outcome.best.fused]
    return FfmRun(res.energy, res.latency, seconds, peak_mb(), fused)


def peak_mb() -> float:
    """Peak resident memory of this process and its finished children (MB)."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, kids) / 1024


def arguments(doc: str, default_out: str) -> argparse.ArgumentParser:
    """The options every experiment takes: ``--quick``, ``--out``, ``--jobs``."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a reduced size, in minutes")
    parser.add_argument("--out", type=Path, default=HERE / "results",
                        help="output folder (default experiments/ffm/results)")  # fmt: skip
    parser.add_argument("--jobs", type=int, default=2, help="worker processes for FFM")
    parser.set_defaults(name=default_out)
    return parser


def markdown_table(headers: list[str], rows: list[list[Any]]) -> str:
    """A Markdown table (floats to 4 significant digits)."""

    def cell(x: Any) -> str:
        return f"{x:.4g}" if isinstance(x, float) else str(x)

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(x) for x in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def write_outputs(out: Path, name: str, data: dict, figure: Any, table: str) -> list[Path]:
    """``<name>.json``, ``<name>.png`` (a matplotlib figure) and ``<name>.md`` in
    ``out``, each written atomically; the figure is closed."""
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    figure.savefig(buf, format="png", dpi=110)
    plt.close(figure)
    paths = [
        write_atomic(out / f"{name}.json", json.dumps(data, indent=1, default=_plain)),
        write_atomic(out / f"{name}.png", buf.getvalue()),
        write_atomic(out / f"{name}.md", table),
    ]
    for path in paths:
        print(f"wrote {path}")
    return paths


def _plain(value: Any) -> Any:
    """numpy scalars and paths as JSON values."""
    if hasattr(value, "item"):
        return value.item()
    return str(value)


def figure(ncols: int = 1, width: float = 6.0, height: float = 4.0) -> tuple[Any, Any]:
    """A headless matplotlib figure and its axes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(1, ncols, figsize=(width * ncols, height))
