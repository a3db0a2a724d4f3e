"""A host step's kernel, run as the host runs it: the graph's own kernel on host memory.

pccx v002 has no instruction for some ops (``pccx-v002.md`` §4); the program runs them as host
steps, and both the emulator and the host side of a board run
(`pccx_flow.board.device.host_side`) call the graph's own kernel for them
(`pccx_flow.execute.kernels`), so a host step computes exactly what the Dask executor does.
"""

from __future__ import annotations


def call_host_kernel(step: dict, inputs: list, ctx, weights) -> tuple:
    """Run a host step's kernel (the graph's own, `pccx_flow.execute.kernels`) on `inputs`."""
    from pccx_flow.execute.kernels import kernel_table
    from pccx_flow.execute.plan import NodeCall

    c = step["call"]
    call = NodeCall(
        node=step["node"],
        kernel=step["kernel"],
        op="HOST",
        params=c["params"],
        flags=c["flags"],
        weight=c["weight"],
        input_names=tuple(t["name"] for t in c["inputs"]),
        output_names=tuple(t["name"] for t in c["outputs"]),
        output_shapes=tuple(tuple(t["shape"]) for t in c["outputs"]),
        producers=(),
        sources=(),
    )
    out = kernel_table()[step["kernel"]](call, inputs, ctx, weights, None)
    return out if isinstance(out, tuple) else (out,)
