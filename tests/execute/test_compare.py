"""Float16 rounding flips vs real KV differences, and the --check verdict rule."""

from __future__ import annotations

import numpy as np

from pccx_flow.execute.compare import KVRounding, kv_rounding, step_verdict


def test_one_ulp_neighbours_are_flips_and_more_is_beyond():
    a = np.float16([1.0, -0.5, 0.0, 3.0, -2.0, 6.1e-5])
    up = np.nextafter(a, np.float16(np.inf))  # one float16 step away, across zero too
    b = a.copy()
    b[0], b[1], b[2] = up[0], up[1], up[2]
    b[3] = np.nextafter(up[3], np.float16(np.inf))  # two steps
    b[4] = np.float16(-2.5)
    got = kv_rounding(a, b)
    assert got == KVRounding(flips=3, beyond=2)
    assert kv_rounding(np.float16([-0.0]), np.float16([0.0])).beyond == 0


def test_float32_rows_have_no_flips_only_a_tolerance():
    a = np.float32([1.0, 2.0])
    assert kv_rounding(a, a + np.float32(1e-6)) == KVRounding(0, 0)
    assert kv_rounding(a, a + np.float32([0, 1e-3])) == KVRounding(0, 1)


def test_verdict():
    assert step_verdict(5e-5, True, KVRounding(0, 0))
    assert not step_verdict(2e-4, True, KVRounding(0, 0))
    assert step_verdict(2e-4, True, KVRounding(1, 0))
    assert not step_verdict(2e-3, True, KVRounding(1, 0))
    assert not step_verdict(0.0, False, KVRounding(0, 0))
    assert not step_verdict(0.0, True, KVRounding(0, 1))
