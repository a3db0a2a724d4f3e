"""The DDR image's bytes read back equal the checkpoint (the device model computes from them)."""

from __future__ import annotations

import numpy as np

from pccx_flow.board.device.ddr_image import ImageKV, ImageWeights, kv_views, load_image
from pccx_flow.board.program.ddr import ddr_layout


def test_image_weights_equal_the_checkpoint_bit_for_bit(tiny_ckpt):
    config = tiny_ckpt.config
    layout = ddr_layout(config)
    mem = memoryview(bytearray(layout["total_bytes"]))
    rng = np.random.default_rng(0)
    shape = (config.n_kv_cache_layers, config.max_seq, config.kv_dim)
    k = rng.standard_normal(shape).astype(np.float16)
    v = rng.standard_normal(shape).astype(np.float16)
    load_image(layout, tiny_ckpt, mem, k, v)
    img = ImageWeights(layout, mem, config)
    for key, e in layout["tensors"].items():
        assert img.storage(key) == tiny_ckpt.storage(key)
        assert np.array_equal(img.tensor(key), tiny_ckpt.tensor(key)), key
        if len(e["shape"]) == 2:
            n = e["shape"][0]
            assert np.array_equal(img.rows(key, 1, n), tiny_ckpt.rows(key, 1, n)), key
    kk, vv = kv_views(layout, mem, config.n_kv_cache_layers, config.kv_dim)
    assert np.array_equal(ImageKV(kk)[1, 2:5], k[1, 2:5]) and ImageKV(vv).shape == shape
    assert np.array_equal(vv[-1].reshape(v.shape[1], -1), v[-1])
    # head-major: a head's rows are one contiguous range of the image
    r, d = layout["kv"]["1.k"], config.head_dim
    head1 = np.frombuffer(mem, "<f2", count=r["rows"] * d, offset=r["offset"] + r["head_bytes"])
    assert np.array_equal(head1.reshape(r["rows"], d), k[1, :, d : 2 * d])
    assert np.array_equal(ImageKV(kk)[1, 2:5, d : 2 * d], k[1, 2:5, d : 2 * d])
