"""Execute decode graphs: the nodes that were scheduled are the ones that compute.

- `state`: `DecodeState` (position, token, float16/float32 KV caches) and `commit_step`.
- `plan`: how each node finds its inputs (`NodeCall` records shared by every runner).
- `kernels` (+ `kernels_gemv`, `kernels_cvo`, `kernels_host`, `kernels_mem`, `int4`,
  `operands`, `weight_views`): one NumPy / numba function per kernel of
  `pccx_flow.graph.kernel_specs`.
- `runtime`: `run_node`, the one function every runner calls per node.
- `dask_graph`, `fuse`: the Dask task graph (one task per node, or fused on request).
- `executor`: `execute` on the threaded scheduler or a `distributed` cluster, and
  `run_sequential`, the same kernels in a plain loop.
- `generate`: the reference generation loop over `execute`.
- `compare`: judging a step against another implementation (float16 rounding flips).

>>> from pccx_flow.execute import execute, new_decode_state   # doctest: +SKIP
>>> state = new_decode_state(ckpt.config, "pccx", token_id=2)  # doctest: +SKIP
>>> logits = execute(build_decode_graph(ckpt.config, position=0), ckpt, state)  # doctest: +SKIP
"""

from pccx_flow.execute.executor import StepOutputs, execute, execute_step, run_sequential
from pccx_flow.execute.generate import ExecutedGeneration, generate
from pccx_flow.execute.state import DecodeState, commit_step, new_decode_state

__all__ = [
    "DecodeState",
    "ExecutedGeneration",
    "StepOutputs",
    "commit_step",
    "execute",
    "execute_step",
    "generate",
    "new_decode_state",
    "run_sequential",
]
