"""The functions compute-in-memory arches call from arch.variables, by hand.

Value histograms have 2k+1 bins over [-1, 1] (bin i is (i - k) / k); encodings give the
magnitudes of the encoded word's parts; encoded_hist_to_avg_slice quantizes them and
averages slices of the word (docs/components.md).
"""

from __future__ import annotations

import textwrap

import pytest

import fusemap
from fusemap.spec import cim_functions as F
from fusemap.spec.arch_eval import ArchEvaluator
from fusemap.spec.errors import ExpressionError
from fusemap.spec.expressions import Scope, evaluate
from fusemap.spec.fields import LazyFields, evaluate_fields
from fusemap.spec.resolve import resolve_workload

RELU = [0, 0, 0, 3, 2, 1, 0]  # values 0, 1/3, 2/3 with probabilities 1/2, 1/3, 1/6


def test_signedness_and_magnitude():
    assert not F.is_hist_signed(RELU)
    assert F.is_hist_signed([0, 1, 3, 4, 3, 1, 0])
    assert not F.is_hist_signed([0] * 7 + [1] * 8)  # zero and positive values only
    # [1, 2, 3, 4, 3, 2, 1]: |v| = 0 (4), 1/3 (3 + 3), 2/3 (2 + 2), 1 (1 + 1).
    assert F.hist_to_magnitude([1, 2, 3, 4, 3, 2, 1]) == [4, 6, 4, 2]


def test_average_slices_of_a_magnitude_encoding():
    enc = F.magnitude_encode_hist(RELU)
    # 2 bits: 0, 1/3, 2/3 -> 0, 1, 2 = 0b00, 0b01, 0b10. Bit 0 is 1 with probability
    # 1/3, bit 1 with 1/6: mean slice 1/4; per slice, most significant first.
    assert F.encoded_hist_to_avg_slice(enc, 2, 1) == pytest.approx(1 / 4)
    per = F.encoded_hist_to_avg_slice(enc, 2, 1, return_per_slice=True)
    assert per == pytest.approx([1 / 6, 1 / 3])
    # One 2-bit slice: values 0, 1/3, 2/3 of the slice maximum: 1/3 * 1/3 + 1/6 * 2/3.
    assert F.encoded_hist_to_avg_slice(enc, 2, 2) == pytest.approx(2 / 9)
    # 3 bits in slices of 2: a 2-bit low slice and a 1-bit high one. 0, 1/3, 2/3 of 7
    # -> 0, 2 (2.33), 5 (4.67) = 0b000, 0b010, 0b101: low slice 0, 2/3, 1/3; high 0, 0, 1.
    low, high = 1 / 3 * 2 / 3 + 1 / 6 * 1 / 3, 1 / 6
    assert F.encoded_hist_to_avg_slice(enc, 3, 2) == pytest.approx((low + high) / 2)


def test_offset_encoding_rounds_to_the_nearest_level():
    # (v + 1) / 2: 1/2, 2/3, 5/6 of 255 -> 127.5 (ties up: 128), 170, 212.5 (213).
    enc = F.offset_encode_hist(RELU)
    mean = (128 / 2 + 170 / 3 + 213 / 6) / 255
    assert F.encoded_hist_to_avg_slice(enc, 8, 8) == pytest.approx(mean)
    # Unsigned data is not offset by the if-signed variant: magnitudes instead.
    assert F.offset_encode_if_signed_hist(RELU) == F.magnitude_encode_hist(RELU)
    assert F.offset_encode_if_signed_hist([1, 0, 1]) == F.offset_encode_hist([1, 0, 1])


def test_two_part_encoding_splits_the_word():
    # [1, 0, 1]: -1 and +1, half each. Parts (max(v, 0), max(-v, 0)), 1 bit each, the
    # positive part most significant: -1 -> 0b01, +1 -> 0b10.
    enc = F.two_part_magnitude_encode_hist([1, 0, 1])
    assert F.encoded_hist_to_avg_slice(enc, 2, 1, return_per_slice=True) == [0.5, 0.5]
    assert F.encoded_hist_to_avg_slice(enc, 2, 2) == pytest.approx((0.5 * 1 + 0.5 * 2) / 3)
    assert F.two_part_magnitude_encode_if_signed_hist(RELU) == F.magnitude_encode_hist(RELU)
    with pytest.raises(ExpressionError, match="1 bits cannot hold 2 parts"):
        F.encoded_hist_to_avg_slice(enc, 1, 1)


def test_xnor_encodings():
    # [0, 1, 1]: 0 and +1. XNOR: (v + 1) / 2 = 1/2 (rounds to 1 on 1 bit) and 1; zero
    # gating drives no bit for zero: 0 and 1.
    assert F.encoded_hist_to_avg_slice(F.xnor_encode_hist([0, 1, 1]), 1, 1) == 1.0
    gated = F.zero_gated_xnor_encode_hist([0, 1, 1])
    assert F.encoded_hist_to_avg_slice(gated, 1, 1) == 0.5


def test_phases():
    assert F.bits2phase_1phase(7, 3) == [7]
    assert F.bits2phase_2phase(7, 3) == [4, 3]  # more than 3 bits: two halves
    assert F.bits2phase_2phase(3, 3) == [3]
    assert F.bits2integration_steps(4) == 1 + 2 + 4 + 8
    assert F.bits2integration_steps(0) == 0
    assert F.sum_map(F.bits2integration_steps, [4, 3]) == 15 + 7
    assert F.sum_phase_out_bits(8, [4, 3]) == 16 and F.sum_phase_out_bits(8, [3, 0]) == 8


def test_in_expressions_and_bad_arguments():
    scope = Scope({"one": False, "h": RELU})
    text = (
        "sum_map(bits2integration_steps, (bits2phase_1phase if one else bits2phase_2phase)(7, 3))"
    )
    assert evaluate(text, scope) == 22
    assert evaluate("encoded_hist_to_avg_slice(magnitude_encode_hist(h), 2, 1)", scope) == 0.25
    bad = [
        ("is_hist_signed([1, 2])", "odd number of bins"),
        ("is_hist_signed([0, 0, 0])", "histogram is empty"),
        ("hist_to_magnitude([1, -1, 1])", "non-negative"),
        ("sum_map(h, [1])", "must be a whitelisted function"),
        ("encoded_hist_to_avg_slice(h, 2, 1)", "expected an encoded histogram"),
        ("encoded_hist_to_avg_slice(offset_encode_hist(h), 2.5, 1)", "n_bits must be a whole"),
        ("encoded_hist_to_avg_slice(offset_encode_hist(h), 5000, 1)", "between 1 and 1024"),
        ("get_array_fanout_total(3)", r"pass it `spec`"),
    ]
    for text, message in bad:
        with pytest.raises(ExpressionError, match=message):
            evaluate(text, scope)


ARCH = textwrap.dedent(
    """\
    arch:
      variables:
        rows: get_array_fanout_reuse_output(spec)
        cols: get_array_fanout_reuse_input(spec)
        cells: get_array_fanout_total(spec)
        groups: 4
      nodes:
      - !Memory
        name: Buf
        size: Macro.get_fanout() * rows * 8
        actions: [{name: read, energy: 1}, {name: write, energy: 1}]
      - !Toll
        name: WeightDrivers
        direction: down
        tensors: {keep: weight & Above}
        actions: [{name: read, energy: 1}]
      - !Container
        name: Macro
        spatial: [{name: macro, fanout: 3}, {name: pair, fanout: 2}]
      - !Container
        name: Column
        spatial:
        - {name: col_ARRAY_COLUMNS, fanout: 8, may_reuse: input}
        - {name: fold_ARRAY_COLUMNS, fanout: 2, reuse: output}
      - !Container
        name: Row
        spatial: [{name: row_ARRAY_ROWS, fanout: groups * 16, reuse: output}]
      - !Compute
        name: MAC
        actions: [{name: compute, energy: 1}]
    workload:
      rank_sizes: {M: 2, N: 4, K: 8}
      bits_per_value: {All: 8}
      einsums:
      - name: Matmul
        tensor_accesses:
        - {name: input, projection: [m, k]}
        - {name: weight, projection: [k, n]}
        - {name: output, projection: [m, n], output: true}
    """
)


def test_array_fanouts_and_get_fanout(tmp_path):
    (tmp_path / "arch.yaml").write_text(ARCH)
    spec = fusemap.load(tmp_path / "arch.yaml")
    arch = ArchEvaluator(spec, resolve_workload(spec))
    comps = arch.components("Matmul")
    # Only *ARRAY_ROWS / *ARRAY_COLUMNS dimensions count (not Macro's). Rows: those that
    # may reuse the output: fold (2) and row (groups * 16 = 64, `groups` defined after
    # its use); columns: those that may reuse the input: col (8); all: 8 * 2 * 64.
    assert comps["Buf"].size == (3 * 2) * (2 * 64) * 8  # Macro.get_fanout() = 3 * 2
    (tmp_path / "v.yaml").write_text(
        ARCH.replace("size: Macro.get_fanout() * rows * 8", "size: cells + cols")
    )
    spec = fusemap.load(tmp_path / "v.yaml")
    comps = ArchEvaluator(spec, resolve_workload(spec)).components("Matmul")
    assert comps["Buf"].size == 8 * 2 * 64 + 8
    assert comps["WeightDrivers"].keep == {"weight"}  # `Above` is every tensor for a toll


def test_variables_are_read_on_demand_and_cycles_are_named():
    lazy = LazyFields({"a": "b + 1", "b": "2", "c": "c_of(1)"}, Scope())
    assert lazy["a"] == 3 and "c" in lazy and "z" not in lazy
    cyclic = LazyFields({"x": "y", "y": "x"}, Scope())
    with pytest.raises(ExpressionError, match="cycle between fields: x -> y -> x"):
        cyclic.evaluate_all()


def test_a_model_attribute_may_pass_a_variable_of_its_own_name():
    outer = Scope({"voltage": 0.8})
    got = evaluate_fields({"voltage": "voltage", "v2": "voltage * 2"}, outer, self_is_outer=True)
    assert got == {"voltage": 0.8, "v2": 1.6}
    with pytest.raises(ExpressionError, match="cycle"):
        evaluate_fields({"voltage": "voltage"}, outer)  # elsewhere: still a cycle
