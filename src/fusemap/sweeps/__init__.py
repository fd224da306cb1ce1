"""Design-space sweeps: a sweep file names the spec files and the Jinja variables to
sweep; every point is mapped (or evaluated) on Dask workers, its record written to a
Parquet dataset as it finishes (``fusemap sweep``; ``fusemap.sweep`` from Python).

Modules: plan (the sweep file), ranges (value ranges), points (each point's spec and
key), task (a point's work on a worker), record (its typed outcome), store (the Parquet
files), cluster (Dask), run (the whole sweep), progress, summary, plots, frame.
"""

from __future__ import annotations

from .plan import SweepPlan, load_sweep
from .record import PointRecord
from .run import SweepOutcome, default_folder, run_sweep

__all__ = ["PointRecord", "SweepOutcome", "SweepPlan", "default_folder", "load_sweep", "run_sweep"]
