"""The activation dtype is scoped to the code that asked for it."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from pccx_flow.errors import InputError
from pccx_flow.precision import check_precision, computing_in, tensor_dtype


def test_float32_by_default_and_float64_only_inside_the_scope():
    assert tensor_dtype() is np.float32
    with computing_in("float64"):
        assert tensor_dtype() is np.float64
        with computing_in("float32"):
            assert tensor_dtype() is np.float32
        assert tensor_dtype() is np.float64
    assert tensor_dtype() is np.float32


def test_scope_is_restored_when_the_body_raises():
    with pytest.raises(ZeroDivisionError), computing_in("float64"):
        1 / 0  # noqa: B018
    assert tensor_dtype() is np.float32


def test_a_new_thread_starts_in_float32():
    """Threads do not inherit the scope: that is why each executed node sets the dtype from
    its step context instead of relying on the caller's."""
    seen = []
    with computing_in("float64"):
        t = threading.Thread(target=lambda: seen.append(tensor_dtype()))
        t.start()
        t.join()
    assert seen == [np.float32]


def test_unknown_names_are_refused_with_the_choices():
    assert check_precision("float64") == "float64"
    with pytest.raises(InputError, match="unknown precision 'half'; use one of float32, float64"):
        check_precision("half")
    with pytest.raises(InputError), computing_in("half"):
        pass


def test_kv_cache_dtype_is_the_semantics_storage_type_without_the_executor():
    """float16 under the specification, float32 under the published reference; sizing a
    step's DDR image (`schedule`, `emit`) finds it without importing the executor or Dask."""
    import subprocess
    import sys

    from pccx_flow.precision import kv_cache_dtype

    assert kv_cache_dtype("pccx") == np.float16 and kv_cache_dtype("gemma3n") == np.float32
    code = (
        "import sys\n"
        "from pccx_flow.board.program.ddr import step_kv_dtype\n"
        "assert step_kv_dtype('pccx') == 'float16', step_kv_dtype('pccx')\n"
        "loaded = [m for m in sys.modules if m == 'dask' or m.startswith('pccx_flow.execute')]\n"
        "print(sorted(loaded))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
