"""The reference decode: a NumPy oracle written straight from the specification.

It reads weights through the checkpoint API only and imports nothing from the graph,
schedule, hardware or execute packages, so the executor can be checked against it.
`pccx_flow.reference.decode` holds one decode step, `pccx_flow.reference.generate` the
generation loop (``from pccx_flow.reference.generate import generate``).
"""

from pccx_flow.reference.decode import KVCache, decode_step, new_kv_cache

__all__ = ["KVCache", "decode_step", "new_kv_cache"]
