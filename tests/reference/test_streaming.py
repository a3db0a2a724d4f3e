"""Slab-wise weight access: same products, and no INT4 matrix or table is ever read whole."""

from __future__ import annotations

import numpy as np
import pytest

from pccx_flow.reference import streaming
from pccx_flow.reference.decode import decode_step, new_kv_cache

KEY = "layers.2.mlp.gate_proj.weight"  # [256, 64] INT4 on tiny


@pytest.mark.parametrize("slab_elements", [1, 64 * 7, 10**9])
def test_matvec_matches_the_whole_dequantised_matrix(tiny_ckpt, slab_elements):
    x = np.random.default_rng(0).normal(size=64).astype(np.float32)
    want = tiny_ckpt.tensor(KEY).astype(np.float64) @ x
    got = streaming.matvec(tiny_ckpt, KEY, x, slab_elements)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_matvec_refuses_a_vector_of_the_wrong_length(tiny_ckpt):
    with pytest.raises(ValueError, match="expected a vector of 64"):
        streaming.matvec(tiny_ckpt, KEY, np.zeros(65, np.float32))


class _Spy:
    """A checkpoint wrapper that records how many elements each read returned."""

    def __init__(self, ckpt):
        self.ckpt = ckpt
        self.config = ckpt.config
        self.reads: list[tuple[str, str, int]] = []

    def spec(self, key):
        return self.ckpt.spec(key)

    def tensor(self, key):
        out = self.ckpt.tensor(key)
        self.reads.append(("tensor", key, out.size))
        return out

    def rows(self, key, start, stop, dtype=np.float32):
        out = self.ckpt.rows(key, start, stop, dtype)
        self.reads.append(("rows", key, out.size))
        return out


def test_decode_reads_int4_weights_one_slab_at_a_time(tiny_ckpt, tiny_config, monkeypatch):
    want = decode_step(tiny_ckpt, 7, 0, new_kv_cache(tiny_config))
    monkeypatch.setattr(streaming, "SLAB_ELEMENTS", 512)  # 8 rows of a 64-wide matrix
    spy = _Spy(tiny_ckpt)
    got = decode_step(spy, 7, 0, new_kv_cache(tiny_config))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)

    int4 = {k for _, k, _ in spy.reads if tiny_ckpt.spec(k).storage == "int4"}
    assert "embed_tokens.weight" in int4 and "embed_tokens_per_layer.weight" in int4
    for how, key, size in spy.reads:
        if tiny_ckpt.spec(key).storage != "int4":
            continue
        assert how == "rows", f"{key} was read whole"
        cols = tiny_ckpt.spec(key).shape[1]
        assert size <= max(512, cols), f"{key}: {size} elements in one read"
    # the LM head (tied W_embed, 512 x 64) took 64 slab reads plus the embedding row
    embed_reads = [s for how, k, s in spy.reads if k == "embed_tokens.weight"]
    assert len(embed_reads) == 1 + tiny_config.vocab * tiny_config.hidden // 512
