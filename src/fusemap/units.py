"""Numbers with units, as people read them: 1.5 mm², 256 KiB, 3.2 µJ.

Every layer may format a quantity (the model writes sizes into its error messages, the
report into tables and plots), so this module depends on nothing else in fusemap.

Rules:

* energy, time and power take SI prefixes on their unit (``4.13 µJ``, ``2.9 µs``);
* area takes squared prefixes: 1 mm² is 1e-6 m², 1 µm² is 1e-12 m²;
* capacities are in bytes with binary prefixes (1 KiB = 1024 B); sizes in the specs are in
  bits, so 2,097,152 bits is 256 KiB; a size below one byte stays in bits;
* a *unitless* quantity (the toy specs that count actions, see :func:`unitless_energy`)
  is a plain number: ``69,337,088``, never ``69.34 MJ``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

SI_PREFIXES: tuple[tuple[float, str], ...] = (
    (1e12, "T"),
    (1e9, "G"),
    (1e6, "M"),
    (1e3, "k"),
    (1.0, ""),
    (1e-3, "m"),
    (1e-6, "µ"),
    (1e-9, "n"),
    (1e-12, "p"),
    (1e-15, "f"),
)
AREA_PREFIXES: tuple[tuple[float, str], ...] = (
    (1e6, "km²"),
    (1.0, "m²"),
    (1e-6, "mm²"),
    (1e-12, "µm²"),
    (1e-18, "nm²"),
)
BINARY_PREFIXES: tuple[tuple[float, str], ...] = (
    (2.0**50, "PiB"),
    (2.0**40, "TiB"),
    (2.0**30, "GiB"),
    (2.0**20, "MiB"),
    (2.0**10, "KiB"),
    (1.0, "B"),
)

UNITLESS_ENERGY = 1e-3
"""An arch whose largest per-action energy is at least this many joules counts actions
(``energy: 1``), not joules: no circuit spends a millijoule on one action."""
UNITLESS_THROUGHPUT = 1e4
"""An arch whose largest finite throughput is below this many actions per second counts
cycles (``throughput: 1``), not seconds: no clock of a real accelerator is that slow."""

JSON_UNITS = {
    "energy": "J",
    "latency": "s",
    "area": "m^2",
    "leak_power": "W",
    "usage_bits": "bit",
    "size_bits": "bit",
    "count": "actions",
}
"""Units of the JSON result's numbers (:func:`json_units` marks the unitless ones)."""


def number(x: float) -> str:
    """A plain number with 4 significant digits; integers up to 1e15 written out in full."""
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "∞" if x > 0 else "-∞"
    if x == int(x) and abs(x) < 1e15:
        return f"{int(x):,}"
    if 1e-3 <= abs(x) < 1e6:
        return f"{x:.4g}"
    return f"{x:.4g}".replace("e+0", "e").replace("e+", "e").replace("e-0", "e-")


def _scaled(x: float, prefixes: Iterable[tuple[float, str]], unit: str = "") -> str:
    """``x`` divided by the largest prefix not above it, 4 significant digits."""
    if x == 0:
        return f"0 {_last(prefixes, unit)}".strip()
    if math.isinf(x) or math.isnan(x):
        return number(x)
    table = list(prefixes)
    for scale, p in table:
        if abs(x) >= scale * (1 - 5e-5):
            return f"{_digits(x / scale)} {p}{unit}".strip()
    scale, p = table[-1]
    return f"{_digits(x / scale)} {p}{unit}".strip()


def _last(prefixes: Iterable[tuple[float, str]], unit: str) -> str:
    names = [p for s, p in prefixes if s == 1.0]
    return (names[0] if names else "") + unit


def _digits(v: float) -> str:
    if abs(v) >= 1e4:  # beyond the largest prefix: 250,000 mm²
        return f"{v:,.0f}"
    text = f"{v:.4g}"
    if "e" in text:  # only for values far below the prefix table
        return f"{v:.3g}"
    return text


def si(x: float | None, unit: str) -> str:
    """Engineering notation with an SI prefix: 1.23e-06 J -> ``1.23 µJ``."""
    if x is None:
        return "-"
    return _scaled(x, SI_PREFIXES, unit)


def area(m2: float | None) -> str:
    """An area in m² with squared prefixes: 1.5e-6 -> ``1.5 mm²``."""
    if m2 is None:
        return "-"
    return _scaled(m2, AREA_PREFIXES)


def capacity(bits: float | None) -> str:
    """A size in bits as bytes with binary prefixes: 2,097,152 -> ``256 KiB``.

    Below one byte it stays in bits (``4 bit``); unbounded memories read ``∞``."""
    if bits is None:
        return "-"
    if math.isinf(bits):
        return "∞"
    if 0 < abs(bits) < 8:
        return f"{bits:g} bit"
    return _scaled(bits / 8, BINARY_PREFIXES)


def capacity_exact(bits: float) -> str:
    """A size as bytes with binary prefixes and the exact bit count: ``8 KiB (65,536 bits)``."""
    if math.isinf(bits):
        return "unbounded"
    return f"{capacity(bits)} ({number(bits)} bits)"


def quantity(x: float | None, unit: str, unitless: bool = False) -> str:
    """``si(x, unit)``, or the plain number when the spec's quantities are unitless."""
    if x is None:
        return "-"
    return number(x) if unitless else si(x, unit)


def unitless_energy(action_energies: Iterable[float]) -> bool:
    """Whether the arch counts actions instead of joules (largest energy >= 1 mJ)."""
    largest = max((abs(e) for e in action_energies if e and math.isfinite(e)), default=0.0)
    return largest >= UNITLESS_ENERGY


def unitless_latency(throughputs: Iterable[float]) -> bool:
    """Whether the arch counts cycles instead of seconds (every clock below 10 kHz)."""
    finite = [t for t in throughputs if t and math.isfinite(t) and t > 0]
    return bool(finite) and max(finite) < UNITLESS_THROUGHPUT


def json_units(energy_unitless: bool = False, latency_unitless: bool = False) -> dict[str, str]:
    """The ``units`` entry of a JSON result; ``1`` marks a unitless quantity."""
    out = dict(JSON_UNITS)
    if energy_unitless:
        out["energy"] = "1"
        out["leak_power"] = "1"
    if latency_unitless:
        out["latency"] = "1"
    return out


def percent(fraction: float) -> str:
    """A share as a percentage: ``6.2%``; tiny non-zero shares read ``<0.1%``."""
    if 0 < fraction < 0.0005:
        return "<0.1%"
    return f"{fraction:.1%}"


def axis_scale(largest: float, unit: str, unitless: bool = False) -> tuple[float, str]:
    """(divisor, axis unit) so that ``largest`` reads between 1 and 1000 on a plot axis:
    ``(1e-6, "µJ")``; unitless quantities get ``(1e6, "×1e6")``."""
    if not largest or not math.isfinite(largest):
        return 1.0, unit if not unitless else ""
    scale, p = next(((s, p) for s, p in SI_PREFIXES if abs(largest) >= s), SI_PREFIXES[-1])
    if unitless:
        return scale, "" if scale == 1 else f"×{scale:.0e}".replace("e+0", "e").replace("e+", "e")
    return scale, f"{p}{unit}"


def area_scale(largest: float) -> tuple[float, str]:
    """(divisor, unit) for an area axis: ``(1e-6, "mm²")``."""
    for scale, name in AREA_PREFIXES:
        if abs(largest) >= scale:
            return scale, name
    return AREA_PREFIXES[-1]
