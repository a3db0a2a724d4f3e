"""The fused INT4 GEMV against the checkpoint package's own dequantiser (an independent oracle)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pccx_flow.execute.int4 import gemv_int4, gemv_int4_numpy, gemv_int4_tile, unpack_int4
from pccx_flow.weights.int4 import dequantize_rows, pack_int4
from pccx_flow.weights.int4 import unpack_int4 as oracle_unpack


def _oracle(packed, scale, x):
    return dequantize_rows(packed, scale).astype(np.float64) @ np.asarray(x, np.float64)


@settings(max_examples=30, deadline=None)
@given(
    rows=st.integers(1, 40),
    half=st.integers(1, 40),
    seed=st.integers(0, 2**31 - 1),
)
def test_gemv_int4_matches_dequantised_product(rows, half, seed):
    rng = np.random.default_rng(seed)
    q = rng.integers(-8, 8, size=(rows, 2 * half), dtype=np.int8)
    packed = pack_int4(q)
    scale = rng.uniform(0.01, 2.0, rows).astype(np.float32)
    x = rng.standard_normal(2 * half).astype(np.float32)
    want = _oracle(packed, scale, x)
    tol = 1e-6 * (np.abs(q).astype(np.float64) @ np.abs(x) * scale).max() + 1e-7
    np.testing.assert_allclose(gemv_int4(packed, scale, x), want, rtol=0, atol=tol)
    np.testing.assert_allclose(gemv_int4_numpy(packed, scale, x), want, rtol=0, atol=tol)


@pytest.mark.parametrize("row_bytes", [255, 256, 257, 511, 512, 700, 1300])
@pytest.mark.parametrize("byte_offset", [0, 3])
def test_long_rows_cross_the_float32_block_boundaries(row_bytes, byte_offset):
    """Rows longer than one float32 block (256 bytes) are summed block by block: every byte
    is counted once, wherever the tile's columns start."""
    rng = np.random.default_rng(row_bytes + byte_offset)
    rows, total = 5, row_bytes + byte_offset + 2
    q = rng.integers(-8, 8, size=(rows + 2, 2 * total), dtype=np.int8)
    packed, scale = pack_int4(q), rng.uniform(0.01, 2.0, rows + 2).astype(np.float32)
    c0, c1 = 2 * byte_offset, 2 * (byte_offset + row_bytes)
    x = rng.standard_normal(c1 - c0).astype(np.float32)
    got = gemv_int4_tile(packed, scale, x, (1, 1 + rows), (c0, c1))
    want = _oracle(packed[1 : 1 + rows, c0 // 2 : c1 // 2], scale[1 : 1 + rows], x)
    magnitude = np.abs(q[1 : 1 + rows, c0:c1]).astype(np.float64) @ np.abs(x) * scale[1 : 1 + rows]
    assert np.all(np.abs(got - want) <= 1e-6 * magnitude + 1e-7)


def test_unpack_covers_every_byte_like_the_spec_rule():
    every_byte = np.arange(256, dtype=np.uint8).reshape(1, 256)
    np.testing.assert_array_equal(unpack_int4(every_byte), oracle_unpack(every_byte))


def test_gemv_reads_a_memmap_row_slice(tmp_path):
    rng = np.random.default_rng(3)
    packed = rng.integers(0, 256, size=(64, 16), dtype=np.uint8)
    np.save(tmp_path / "w.npy", packed)
    mm = np.load(tmp_path / "w.npy", mmap_mode="r", allow_pickle=False)
    scale = rng.uniform(0.5, 1.5, 64).astype(np.float32)
    x = rng.standard_normal(32).astype(np.float32)
    got = gemv_int4(mm[8:24], scale[8:24], x)
    np.testing.assert_allclose(got, _oracle(packed[8:24], scale[8:24], x), rtol=1e-5, atol=1e-6)


def test_gemv_rejects_mismatched_input():
    with pytest.raises(ValueError, match="elements"):
        gemv_int4(np.zeros((2, 4), np.uint8), np.ones(2, np.float32), np.ones(6, np.float32))
