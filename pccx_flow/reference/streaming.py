"""Weight access for the reference decode that never holds more than one slab of a matrix.

An E4B checkpoint holds ~4 billion INT4 weights; dequantised to float32 the LM head alone is
2.1 GB. The reference decode therefore multiplies every INT4 matrix slab by slab: it asks
the checkpoint for a block of rows (dequantised on the fly), multiplies it, and drops it
before fetching the next. Embedding tables are read one row at a time. Peak memory is then
one slab plus the small float32 tensors, whatever the model size.

Rows are dequantised in float64, where ``q * scale`` is exact, and products are summed in
float64; each output is rounded once to float32 (`pccx_flow.reference.functions`,
"Precision").
"""

from __future__ import annotations

import numpy as np

from pccx_flow.precision import tensor_dtype

# Elements (not bytes) of one dequantised slab: 4 Mi float64 = 32 MiB. Large enough that
# the BLAS call dominates the Python overhead, small enough that the slab and the
# temporaries of its dequantisation stay far below the memory target.
SLAB_ELEMENTS = 1 << 22


def slab_rows(n_cols: int, slab_elements: int | None = None) -> int:
    """Rows per slab for a matrix with `n_cols` columns (at least one row).

    `slab_elements` defaults to the module's `SLAB_ELEMENTS`, read at call time.
    """
    limit = SLAB_ELEMENTS if slab_elements is None else slab_elements
    return max(1, limit // max(1, n_cols))


def matvec(ckpt, key: str, x: np.ndarray, slab_elements: int | None = None) -> np.ndarray:
    """``W @ x`` for the ``[out, in]`` matrix `key`, dequantising `slab_rows` rows at a time.

    The products are summed in float64 and each output is rounded once to float32.
    """
    n_out, n_in = ckpt.spec(key).shape
    x = np.asarray(x, dtype=np.float64)
    if x.shape != (n_in,):
        raise ValueError(f"{key}: expected a vector of {n_in}, got shape {x.shape}")
    step = slab_rows(n_in, slab_elements)
    out = np.empty(n_out, dtype=tensor_dtype())
    for start in range(0, n_out, step):
        stop = min(n_out, start + step)
        out[start:stop] = ckpt.rows(key, start, stop, np.float64) @ x
    return out


def row(ckpt, key: str, index: int) -> np.ndarray:
    """Row `index` of the table `key`, dequantised exactly, in float64 (an embedding lookup)."""
    return ckpt.rows(key, index, index + 1, np.float64).reshape(-1)


def vector(ckpt, key: str) -> np.ndarray:
    """A small float32 tensor (norm weights, router, AltUp coefficients) as float32."""
    return np.asarray(ckpt.tensor(key), dtype=tensor_dtype())
