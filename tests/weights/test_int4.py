"""INT4 packing against hand-written bytes and the spec §0 rule, and the quantisation bound."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from pccx_flow.errors import TensorFormatError
from pccx_flow.weights.int4 import dequantize_rows, pack_int4, quantize_rows, unpack_int4


def test_round_trip_all_16_values_in_both_nibbles():
    values = np.arange(-8, 8, dtype=np.int8)
    # every (even, odd) pair of values: 256 pairs, one per byte value
    pairs = np.array([[a, b] for a in values for b in values], dtype=np.int8).reshape(1, -1)
    packed = pack_int4(pairs)
    assert packed.dtype == np.uint8 and packed.shape == (1, 256)
    assert sorted(packed[0].tolist()) == list(range(256))
    np.testing.assert_array_equal(unpack_int4(packed), pairs)


@pytest.mark.parametrize(
    ("byte", "w0", "w1"),
    [(0x8F, -1, -8), (0x70, 0, 7), (0x00, 0, 0), (0xFF, -1, -1), (0x87, 7, -8), (0x19, -7, 1)],
)
def test_unpack_follows_spec_sign_rule(byte, w0, w1):
    got = unpack_int4(np.array([byte], dtype=np.uint8))
    assert got.tolist() == [w0, w1]


def test_pack_puts_even_column_in_low_nibble():
    assert pack_int4(np.array([[3, -2]], dtype=np.int8)).tolist() == [[0xE3]]


def test_unpack_keeps_leading_axes():
    packed = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    out = unpack_int4(packed)
    assert out.shape == (2, 3, 8)
    np.testing.assert_array_equal(out[1, 2], unpack_int4(packed[1, 2]))


def test_pack_rejects_out_of_range_and_odd_width():
    with pytest.raises(TensorFormatError, match="-8..7"):
        pack_int4(np.array([[8, 0]], dtype=np.int16))
    with pytest.raises(TensorFormatError, match="odd"):
        pack_int4(np.zeros((2, 3), dtype=np.int8))
    with pytest.raises(TensorFormatError, match="uint8"):
        unpack_int4(np.zeros(4, dtype=np.int8))


def test_quantise_error_within_half_a_step():
    rng = np.random.default_rng(7)
    w = (rng.standard_normal((33, 96)) * rng.uniform(0.01, 3.0, size=(33, 1))).astype(np.float32)
    w[5] = 0.0
    packed, scale = quantize_rows(w)
    assert packed.shape == (33, 48) and scale.dtype == np.float32
    np.testing.assert_allclose(scale[[0, 1]], np.abs(w[[0, 1]]).max(axis=1) / 7, rtol=1e-6)
    assert scale[5] == 1.0
    back = dequantize_rows(packed, scale)
    assert back.dtype == np.float32 and back.shape == w.shape
    err = np.abs(back - w)
    assert np.all(err <= scale[:, None] / 2 * (1 + 1e-5))
    np.testing.assert_array_equal(back[5], 0.0)
    # the row's largest magnitude is represented exactly (up to float rounding)
    i = np.argmax(np.abs(w[0]))
    assert back[0, i] == pytest.approx(w[0, i], rel=1e-6)


def test_dequantise_is_unpack_times_row_scale():
    packed = np.array([[0x8F, 0x70]], dtype=np.uint8)
    out = dequantize_rows(packed, np.array([0.5], dtype=np.float32))
    np.testing.assert_array_equal(out, [[-0.5, -4.0, 0.0, 3.5]])


def test_float64_dequantise_is_exact_and_float32_rounds_it_once():
    rng = np.random.default_rng(3)
    packed = rng.integers(0, 256, size=(16, 32), dtype=np.uint8)
    scale = rng.uniform(1e-3, 1.0, size=16).astype(np.float32)
    exact = unpack_int4(packed).astype(np.float64) * scale.astype(np.float64)[:, None]
    w64 = dequantize_rows(packed, scale, np.float64)
    assert w64.dtype == np.float64
    np.testing.assert_array_equal(w64, exact)
    np.testing.assert_array_equal(dequantize_rows(packed, scale), exact.astype(np.float32))
    assert (exact.astype(np.float32) != exact).any()  # float32 does round some products


BIG = float(np.float32(1e38))  # 7 * (max/7) must stay below float32's max


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    arrays(
        np.float32,
        st.tuples(st.integers(1, 6), st.integers(1, 12).map(lambda n: 2 * n)),
        elements=st.floats(-BIG, BIG, allow_nan=False, width=32),
    )
)
def test_quantise_bound_holds_for_any_finite_matrix(w):
    packed, scale = quantize_rows(w)
    assert np.isfinite(scale).all() and (scale > 0).all()
    back = dequantize_rows(packed, scale)
    err = np.abs(back.astype(np.float64) - w.astype(np.float64))
    assert (err <= scale[:, None].astype(np.float64) / 2 * (1 + 1e-5) + 1e-44).all()


def test_quantise_refuses_non_finite():
    with pytest.raises(TensorFormatError, match="NaN"):
        quantize_rows(np.array([[1.0, np.nan]], dtype=np.float32))
