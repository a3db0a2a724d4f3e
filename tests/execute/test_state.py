"""DecodeState: cache dtypes per semantics, commit of a step's rows, refusals."""

from __future__ import annotations

import numpy as np
import pytest

from pccx_flow.errors import ConfigError, InputError
from pccx_flow.execute.state import commit_step, new_decode_state


def _rows(cfg, value):
    return {
        j: (np.full(cfg.kv_dim, value + j, np.float32), np.full(cfg.kv_dim, -value - j, np.float32))
        for j in range(cfg.n_kv_cache_layers)
    }


@pytest.mark.parametrize(("semantics", "dtype"), [("pccx", np.float16), ("gemma3n", np.float32)])
def test_cache_shape_and_dtype(tiny_config, semantics, dtype):
    st = new_decode_state(tiny_config, semantics)
    cfg = tiny_config
    assert st.k_cache.shape == (cfg.n_kv_cache_layers, cfg.max_seq, cfg.kv_dim)
    assert st.k_cache.dtype == dtype and st.v_cache.dtype == dtype


def test_commit_writes_rows_at_position_and_advances(tiny_config):
    st = new_decode_state(tiny_config, "pccx", token_id=5)
    commit_step(st, _rows(tiny_config, 1.0), next_token=7)
    commit_step(st, _rows(tiny_config, 0.1))
    assert st.position == 2 and st.token_id == 7
    assert st.k_cache[3, 0, 0] == np.float16(4.0) and st.v_cache[3, 0, 0] == np.float16(-4.0)
    # float16 storage: 3.1 is rounded the way the cache stores it.
    assert st.k_cache[3, 1, 0] == np.float16(3.1) != np.float32(3.1)
    np.testing.assert_array_equal(st.past_rows(3, "k")[:, 0], np.float16([4.0, 3.1]))


def test_commit_refuses_missing_layers(tiny_config):
    st = new_decode_state(tiny_config, "pccx")
    rows = _rows(tiny_config, 1.0)
    del rows[2]
    with pytest.raises(InputError, match=r"layers \[2\]"):
        commit_step(st, rows)
    assert st.position == 0


def test_commit_refuses_a_row_missing_a_kv_head_and_writes_nothing(tiny_config):
    st = new_decode_state(tiny_config, "pccx")
    rows = _rows(tiny_config, 1.0)
    rows[3] = (rows[3][0][: tiny_config.head_dim], rows[3][1])  # one head's part only
    with pytest.raises(InputError, match=r"cache layer 3: the step wrote a K row of 8 values"):
        commit_step(st, rows)
    assert st.position == 0 and not st.k_cache.any()


def test_bad_inputs_are_typed(tiny_config):
    with pytest.raises(InputError, match="token id 512"):
        new_decode_state(tiny_config, "pccx", token_id=512)
    with pytest.raises(InputError, match="position 64"):
        new_decode_state(tiny_config, "pccx", position=64)
    with pytest.raises(ConfigError, match="semantics"):
        new_decode_state(tiny_config, "hf")
    st = new_decode_state(tiny_config, "pccx", position=63)
    commit_step(st, _rows(tiny_config, 0.0))
    with pytest.raises(InputError, match="position 64"):
        commit_step(st, _rows(tiny_config, 0.0))
