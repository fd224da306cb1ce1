"""Functions the compute-in-memory arches call from ``arch.variables`` (CiMLoop style).

They describe how data is spread over a CiM array and what its bits look like once
encoded, so component models can be given average values (NeuroSim's
``average_input_value``, a DAC's bit distribution). fusemap defines them as follows
(docs/components.md); every function is pure and size-bounded.

*Value histograms* (``inputs_hist: [0, 0, 0, 3, 2, 1, 0]``) hold 2k+1 non-negative
weights for values evenly spaced over [-1, 1]: bin i stands for (i - k) / k, the middle
bin for zero. *Encodings* turn one into an :class:`Encoded` distribution: a probability
per bin and the unsigned magnitudes in [0, 1] of the parts the encoded word is made of
(one part, or a positive and a negative part).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import ExpressionError

MAX_BITS = 1024


@dataclass(frozen=True)
class Encoded:
    """An encoded value distribution: (probability, part magnitudes in [0, 1]) per bin."""

    bins: tuple[tuple[float, tuple[float, ...]], ...]

    def __repr__(self) -> str:
        return f"Encoded({len(self.bins)} bins, {len(self.bins[0][1])} part(s))"


def _hist(hist: Any, fn: str) -> list[float]:
    if not isinstance(hist, list | tuple) or not hist:
        raise ExpressionError(f"{fn}: expected a list of histogram weights, got {hist!r}")
    if any(isinstance(w, bool) or not isinstance(w, int | float) or w < 0 for w in hist):
        raise ExpressionError(f"{fn}: histogram weights must be non-negative numbers")
    if len(hist) % 2 == 0:
        raise ExpressionError(
            f"{fn}: a value histogram has an odd number of bins (values over [-1, 1] with "
            f"zero in the middle), got {len(hist)}"
        )
    if sum(hist) <= 0:
        raise ExpressionError(f"{fn}: the histogram is empty (all weights are zero)")
    return [float(w) for w in hist]


def _values(hist: list[float]) -> list[tuple[float, float]]:
    """(probability, value in [-1, 1]) per bin."""
    k, total = len(hist) // 2, sum(hist)
    return [(w / total, (i - k) / k if k else 0.0) for i, w in enumerate(hist)]


def is_hist_signed(hist: Any) -> bool:
    """Whether any value below zero has a non-zero weight."""
    h = _hist(hist, "is_hist_signed")
    return any(w > 0 for w in h[: len(h) // 2])


def hist_to_magnitude(hist: Any) -> list[float]:
    """The histogram of |value|: k+1 weights over [0, 1] (bin j: both +j/k and -j/k)."""
    h = _hist(hist, "hist_to_magnitude")
    k = len(h) // 2
    return [h[k]] + [h[k + j] + h[k - j] for j in range(1, k + 1)]


def _encode(hist: Any, fn: str, parts: Callable[[float], tuple[float, ...]]) -> Encoded:
    return Encoded(tuple((p, parts(v)) for p, v in _values(_hist(hist, fn))))


def offset_encode_hist(hist: Any) -> Encoded:
    """Offset binary: v -> (v + 1) / 2, one unsigned part."""
    return _encode(hist, "offset_encode_hist", lambda v: ((v + 1) / 2,))


def magnitude_encode_hist(hist: Any) -> Encoded:
    """Sign and magnitude, the sign handled outside the bits: v -> |v|."""
    return _encode(hist, "magnitude_encode_hist", lambda v: (abs(v),))


def two_part_magnitude_encode_hist(hist: Any) -> Encoded:
    """A positive and a negative part (e.g. differential cells): v -> (max(v, 0), max(-v, 0))."""
    return _encode(hist, "two_part_magnitude_encode_hist", lambda v: (max(v, 0.0), max(-v, 0.0)))


def offset_encode_if_signed_hist(hist: Any) -> Encoded:
    """Offset binary for signed data, plain magnitude for unsigned data."""
    signed = is_hist_signed(hist)
    return offset_encode_hist(hist) if signed else magnitude_encode_hist(hist)


def two_part_magnitude_encode_if_signed_hist(hist: Any) -> Encoded:
    """Two parts for signed data, plain magnitude for unsigned data."""
    signed = is_hist_signed(hist)
    return two_part_magnitude_encode_hist(hist) if signed else magnitude_encode_hist(hist)


def xnor_encode_hist(hist: Any) -> Encoded:
    """XNOR (+1/-1 bits): the bit pattern of offset binary, v -> (v + 1) / 2."""
    return _encode(hist, "xnor_encode_hist", lambda v: ((v + 1) / 2,))


def zero_gated_xnor_encode_hist(hist: Any) -> Encoded:
    """XNOR with zeros gated off: zero drives no bits, other values as XNOR."""
    return _encode(hist, "zero_gated_xnor_encode_hist", lambda v: ((v + 1) / 2 if v else 0.0,))


def _bits(value: Any, what: str, fn: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        raise ExpressionError(f"{fn}: {what} must be a whole number, got {value!r}")
    if not 1 <= value <= MAX_BITS:
        raise ExpressionError(f"{fn}: {what} must be between 1 and {MAX_BITS}, got {value}")
    return int(value)


def encoded_hist_to_avg_slice(
    encoded: Any, n_bits: Any, bits_per_slice: Any, return_per_slice: bool = False
) -> float | list[float]:
    """Average value of a slice of the encoded word, in [0, 1].

    The word has ``n_bits`` bits, split evenly among the parts (the first parts take the
    spare bits) with part 0 most significant; each part is its magnitude rounded to its
    width (to the nearest level, ties up). Slices of ``bits_per_slice`` bits are cut
    from the least significant end (the last one may be narrower); a slice's value is
    divided by its largest value. Returns the mean over slices, or the mean of each
    slice, most significant first (as the model library orders bit distributions).
    """
    fn = "encoded_hist_to_avg_slice"
    if not isinstance(encoded, Encoded):
        raise ExpressionError(f"{fn}: expected an encoded histogram (e.g. offset_encode_hist(h))")
    n = _bits(n_bits, "n_bits", fn)
    width = _bits(bits_per_slice, "bits_per_slice", fn)
    n_parts = len(encoded.bins[0][1])
    if n < n_parts:
        raise ExpressionError(f"{fn}: {n} bits cannot hold {n_parts} parts")
    widths = [n // n_parts + (1 if i < n % n_parts else 0) for i in range(n_parts)]
    slices = [(lo, min(width, n - lo)) for lo in range(0, n, width)]
    means = [0.0] * len(slices)
    for p, parts in encoded.bins:
        word = 0
        for w, x in zip(widths, parts, strict=True):
            word = (word << w) | math.floor(x * (2**w - 1) + 0.5 + 1e-9)  # nearest, ties up
        for s, (lo, w) in enumerate(slices):
            means[s] += p * ((word >> lo) & (2**w - 1)) / (2**w - 1)
    return means[::-1] if return_per_slice else sum(means) / len(means)


def bits2phase_1phase(bits: Any, max_bits_one_phase: Any = None) -> list[int]:
    """Bits per phase when every input bit is integrated in one phase: ``[bits]``."""
    return [_bits(bits, "bits", "bits2phase_1phase")]


def bits2phase_2phase(bits: Any, max_bits_one_phase: Any) -> list[int]:
    """One phase for up to ``max_bits_one_phase`` bits, else two halves (high half first)."""
    b = _bits(bits, "bits", "bits2phase_2phase")
    limit = _bits(max_bits_one_phase, "max_bits_one_phase", "bits2phase_2phase")
    return [b] if b <= limit else [math.ceil(b / 2), b // 2]


def bits2integration_steps(bits: Any) -> int:
    """Integration steps of a phase: 2**k for its k-th bit, so 2**bits - 1 in all."""
    if bits == 0:
        return 0
    return 2 ** _bits(bits, "bits", "bits2integration_steps") - 1


def sum_phase_out_bits(out_bits: Any, phases: Any) -> float:
    """ADC steps per input: one ``out_bits`` conversion for each phase that has bits."""
    return out_bits * sum(1 for p in _phases(phases, "sum_phase_out_bits") if p > 0)


def sum_map(function: Any, items: Any) -> Any:
    """``sum(function(x) for x in items)`` for a whitelisted ``function``."""
    from .safe_functions import is_whitelisted

    if not is_whitelisted(function):
        raise ExpressionError("sum_map: the first argument must be a whitelisted function")
    return sum(function(x) for x in _phases(items, "sum_map"))


def _phases(items: Any, fn: str) -> Sequence[Any]:
    if not isinstance(items, list | tuple):
        raise ExpressionError(f"{fn}: expected a list, got {items!r}")
    return items


class ArraySpec:
    """What ``spec`` means in ``arch.variables``: access to the evaluated array fanouts.

    ``fanout(kind)`` multiplies the fanouts of the spatial dimensions named ``*ARRAY_ROWS``
    or ``*ARRAY_COLUMNS`` (the CiM array): kind ``output`` those that may reuse the
    Einsum's outputs (rows: each takes its own input), ``input`` those that may reuse its
    input (columns: each makes its own output), ``total`` all of them."""

    def __init__(self, fanout: Callable[[str], int]):
        self.fanout = fanout


def _array(spec: Any, kind: str, fn: str) -> int:
    if not isinstance(spec, ArraySpec):
        raise ExpressionError(f"{fn}: pass it `spec` (the architecture), as in {fn}(spec)")
    return spec.fanout(kind)


def get_array_fanout_reuse_output(spec: Any) -> int:
    """Rows of the CiM array: fanout of the array dimensions that may reuse outputs."""
    return _array(spec, "output", "get_array_fanout_reuse_output")


def get_array_fanout_reuse_input(spec: Any) -> int:
    """Columns of the CiM array: fanout of the array dimensions that may reuse the input."""
    return _array(spec, "input", "get_array_fanout_reuse_input")


def get_array_fanout_total(spec: Any) -> int:
    """Cells of the CiM array: fanout of every array dimension."""
    return _array(spec, "total", "get_array_fanout_total")


CIM_FUNCTIONS: dict[str, Callable[..., Any]] = {
    f.__name__: f
    for f in (
        is_hist_signed,
        hist_to_magnitude,
        offset_encode_hist,
        magnitude_encode_hist,
        two_part_magnitude_encode_hist,
        offset_encode_if_signed_hist,
        two_part_magnitude_encode_if_signed_hist,
        xnor_encode_hist,
        zero_gated_xnor_encode_hist,
        encoded_hist_to_avg_slice,
        bits2phase_1phase,
        bits2phase_2phase,
        bits2integration_steps,
        sum_phase_out_bits,
        sum_map,
        get_array_fanout_reuse_output,
        get_array_fanout_reuse_input,
        get_array_fanout_total,
    )
}
"""The CiM functions, whitelisted for every expression."""
