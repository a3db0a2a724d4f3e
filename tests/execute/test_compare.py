"""Float16 rounding flips vs real KV differences, and the --check verdict rule."""

from __future__ import annotations

import numpy as np

from pccx_flow.execute.compare import KVRounding, kv_rounding, step_verdict


def test_float16_flips_and_real_differences():
    a = np.float16([1.0, -0.5, 0.0, 3.0, -2.0, 6.1e-5])
    b = a.copy()
    b[0] = np.nextafter(a[0], np.float16(np.inf))  # one float16 step: a flip
    b[1] = np.nextafter(a[1], np.float16(-np.inf))
    b[5] = np.float16(6.2e-5)  # near zero: many ulps, but far below the row's scale
    b[4] = np.float16(-2.5)  # a real difference
    assert kv_rounding(a, b) == KVRounding(flips=4, beyond=1)
    assert kv_rounding(np.float16([-0.0, 1.0]), np.float16([0.0, 1.0])) == KVRounding(0, 0)


def test_float32_rows_have_no_flips_only_a_tolerance():
    a = np.float32([1.0, 2.0])
    assert kv_rounding(a, a + np.float32(1e-6)) == KVRounding(0, 0)
    assert kv_rounding(a, a + np.float32([0, 1e-2])) == KVRounding(0, 1)


def test_verdict():
    assert step_verdict(5e-5, True, KVRounding(0, 0))
    assert not step_verdict(2e-4, True, KVRounding(0, 0))
    assert step_verdict(2e-4, True, KVRounding(1, 0))
    assert not step_verdict(2e-3, True, KVRounding(1, 0))
    assert not step_verdict(0.0, False, KVRounding(0, 0))
    assert not step_verdict(0.0, True, KVRounding(0, 1))
    assert step_verdict(5e-4, True, KVRounding(0, 0), tolerance=1e-3)
    assert step_verdict(5e-3, True, KVRounding(2, 0), tolerance=1e-3)
    assert not step_verdict(2e-2, True, KVRounding(2, 0), tolerance=1e-3)
