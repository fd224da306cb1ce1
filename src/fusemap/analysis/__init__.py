"""Analyses of cascades of Einsums: pass counting and a reference interpreter."""

from .interpret import interpret
from .passes import LiveTensor, PassAnalysis, analyze_passes

__all__ = ["LiveTensor", "PassAnalysis", "analyze_passes", "interpret"]
