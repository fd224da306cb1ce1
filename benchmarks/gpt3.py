"""The optimal fused mapping of GPT-3 6.7B prefill on tpu_v4i (energy objective).

GPT-3 6.7B with BATCH_SIZE=1, DECODE=False, N_NEW_TOKENS=2048. Prints the time per phase,
the peak resident memory, the energy, the fused tensors and the mapper statistics.
Target (issue 15): under 35 s on 2 cores with the full fused mapspace (the established
mapper takes 370-530 s there).

--batch and --tokens probe other sizes (experiments/ffm/README.md, Headline: at 256
tokens batch 1 takes 17 s, batch 2 44 s, batch 4 14 minutes; batch 64 at 64 tokens makes
its tables and joins in 2.7 GB; its check of several fused loops grew past 17 GB before
its rows were bounded before interning and the interner became a trie: QK's check 3.5 GB;
the whole run then runs out in QK's second search, 15.8 million rows within its allowance).

usage: python benchmarks/gpt3.py [--jobs 2] [--objective energy] [--batch 1] [--tokens 2048]
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

from fusemap.mapper.ffm import map_workload
from fusemap.spec.spec import load_spec

HERE = Path(__file__).resolve().parent
CORPUS = HERE.parent.parent / "shared/corpus/accelforge-examples"
ARCH = CORPUS / "arches/tpu_v4i.yaml"
WORKLOAD = CORPUS / "workloads/transformers/gpt/gpt3_6.7B.yaml"
VARIABLES = {"BATCH_SIZE": 1, "DECODE": False, "N_NEW_TOKENS": 2048}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--objective", default="energy")
    ap.add_argument("--batch", type=int, default=VARIABLES["BATCH_SIZE"])
    ap.add_argument("--tokens", type=int, default=VARIABLES["N_NEW_TOKENS"])
    args = ap.parse_args()
    t = time.perf_counter()
    sizes = {"BATCH_SIZE": args.batch, "N_NEW_TOKENS": args.tokens}
    spec = load_spec(ARCH, WORKLOAD, variables={**VARIABLES, **sizes})
    out = map_workload(spec, args.objective, jobs=args.jobs)
    total = time.perf_counter() - t
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    res = out.best.result
    st = out.statistics
    print(f"GPT-3 6.7B (batch {args.batch}, {args.tokens} tokens) on tpu_v4i, "
          f"objective {args.objective}, {args.jobs} workers")  # fmt: skip
    print(f"total {total:.1f} s (target < 35 s); phases: "
          + ", ".join(f"{k} {v:.1f} s" for k, v in st.seconds.items()))  # fmt: skip
    print(f"peak RSS {max(own, kids) / 1024:.0f} MB here, {st.peak_mb:.0f} MB in a worker")
    print(f"energy {res.energy:.6g}, latency {res.latency:.6g}")
    print(
        "fused: "
        + (", ".join(f"{f.tensor}@{f.memory}{list(f.loops)}" for f in out.best.fused) or "-")
    )
    print(f"pmappings per Einsum {st.pmappings}; groups per join step {st.groups}")
    print(f"joins capped at {st.caps} (None: unbounded); rows joined per step {st.joined}")
    print(f"hosting templates tiled before each join {st.hosting_templates}")
    print(f"several fused loops per variable: {st.full_space}")
    print(
        "tables near each Einsum's least first: "
        + {True: "they held the answer", False: "complete tables were needed"}.get(
            st.self_bounded, "not tried"
        )
    )
    print("pmapping CPU seconds per table "
          + ", ".join(f"{k} {v:.1f}" for k, v in st.pmapping_seconds.items()))  # fmt: skip


if __name__ == "__main__":
    main()
