"""pandas DataFrames (long format) of results, mapper statistics and Pareto fronts.

* ``Result.to_frame()``: one row per Einsum, component, tensor and action (count, energy);
* :func:`statistics_frame`: one row per figure the mapper reports (section, name,
  metric, value);
* :func:`pareto_frame`: one row per mapping of a front (energy, latency, EDP, fused).

``fusemap.to_frame(x)`` picks the right one. Parquet (``frame.to_parquet``) works through
pyarrow, a dependency.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

STATISTICS_COLUMNS = ("section", "name", "metric", "value")
PARETO_COLUMNS = ("point", "energy", "latency", "edp", "fused", "order")


def statistics_frame(stats: Any) -> Any:
    """Mapper statistics (``MapStatistics`` or ``PmappingStats``) in long format."""
    import pandas as pd

    data = stats.as_dict()
    rows: list[tuple[str, str, str, Any]] = []
    for key, value in data.items():
        if isinstance(value, dict):
            section = "time" if key == "seconds" else key
            for name, v in value.items():
                rows.append((section, str(name), key, v))
        elif isinstance(value, list):
            for i, v in enumerate(value):
                rows.append(("join", f"step {i + 1}", key, v))
        else:
            rows.append(("total", "", key, value))
    return pd.DataFrame(rows, columns=list(STATISTICS_COLUMNS))


def pareto_frame(points: Any) -> Any:
    """A front (a ``MapOutcome`` or its ``mappings``): one row per mapping, in order."""
    import pandas as pd

    mappings: Sequence = getattr(points, "mappings", points)
    rows = []
    for i, m in enumerate(mappings):
        fused = ", ".join(f"{f.tensor}@{f.memory}" for f in m.fused)
        rows.append(
            (
                i + 1,
                m.result.energy,
                m.result.latency,
                m.result.energy * m.result.latency,
                fused,
                " -> ".join(getattr(m, "order", [])),
            )
        )
    return pd.DataFrame(rows, columns=list(PARETO_COLUMNS))


def to_frame(obj: Any) -> Any:
    """The long-format DataFrame of a ``Result``, ``MapStatistics``/``PmappingStats``, a
    ``MapOutcome`` (its Pareto front; for one mapping, a front of one) or a ``Diff``."""
    if hasattr(obj, "to_frame"):
        return obj.to_frame()
    if hasattr(obj, "mappings"):
        return pareto_frame(obj)
    if hasattr(obj, "as_dict"):
        return statistics_frame(obj)
    raise TypeError(f"no DataFrame for a {type(obj).__name__}")
